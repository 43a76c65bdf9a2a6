//! The seams of onebrain.
//!
//! The episode and the trainer never see Fast Downward, wasmtime or a plugin
//! manifest: they see the five traits here, and the plain data those traits
//! exchange. `onebrain-verifier` implements [`Verifier`]; `onebrain-runtime`
//! implements [`Reward`], [`Checker`], [`DomainAdapter`] and
//! [`DiagnosticParser`] by calling sandboxed WebAssembly plugins.
//!
//! | trait | the paper's | implemented by |
//! |---|---|---|
//! | [`Verifier`] | E(y) → (b, d) | native checks + Fast Downward |
//! | [`Reward`] | R_A, R_E, the Judge reward table | `reward` plugins |
//! | [`Checker`] | faithfulness C_i | `faithfulness-checker` plugins |
//! | [`DomainAdapter`] | task source x and reference spec | `domain-adapter` plugins |
//! | [`DiagnosticParser`] | the structured diagnostics d | `diagnostic-parser` plugins |
//!
//! ```
//! use onebrain_core::{EpisodeSummary, Reward, Rewards, BoxError};
//!
//! /// R_A = b_0 only: a reward that ignores the Judge.
//! struct SolverOnly;
//! impl Reward for SolverOnly {
//!     fn rewards(&self, ep: &EpisodeSummary) -> Result<Rewards, BoxError> {
//!         let b0 = if ep.b0 { 1.0 } else { 0.0 };
//!         Ok(Rewards { actor: b0, editor: 0.0, judge: 0.0 })
//!     }
//! }
//! let ep = EpisodeSummary { b0: true, ..EpisodeSummary::default() };
//! assert_eq!(SolverOnly.rewards(&ep).unwrap().actor, 1.0);
//! ```
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

pub use onebrain_pddl::{Category, Diagnostic, Severity, SpecFile};

/// The error a seam reports: the implementation's own typed error, boxed so
/// callers can log it or `downcast_ref` it without depending on its crate.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A PDDL specification y = (domain, problem), as text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Spec {
    /// The domain file's text.
    pub domain: String,
    /// The problem file's text.
    pub problem: String,
}

/// How a verification ended. `Solved` is the paper's b = 1; every other
/// outcome is b = 0 and says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A plan was found and re-validated natively against the spec.
    Solved,
    /// The native checks found errors; the planner was not called.
    Rejected,
    /// The planner proved the task unsolvable.
    Unsolvable,
    /// The planner ran out of wall-clock time.
    Timeout,
    /// The planner ran out of memory.
    OutOfMemory,
    /// The planner's translator rejected the input.
    InputError,
    /// The planner crashed, returned a plan that does not validate, or could not be started.
    SolverError,
}

/// What the planner printed, kept for diagnostic parsers (truncated to a cap).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SolverOutput {
    /// The driver's exit code; `None` when it was killed by a signal or a limit.
    pub exit_code: Option<i32>,
    /// Standard output (the translator's and the search's logs).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// True when the wall-clock limit killed it.
    pub timed_out: bool,
}

/// The verifier's answer E(y) = (b, d).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// b: the spec parses, grounds and Fast Downward found a plan that validates.
    pub solved: bool,
    /// Why it ended as it did.
    pub outcome: Outcome,
    /// The plan, one step per entry, lower case: `"(unstack b a)"`.
    pub plan: Vec<String>,
    /// d: categorised diagnostics, errors first.
    pub diagnostics: Vec<Diagnostic>,
    /// Wall-clock time of the whole verification, native checks included.
    pub time_ms: u64,
    /// Time spent inside the planner (0 when it was not called).
    pub solver_time_ms: u64,
    /// The planner's raw output, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver_output: Option<SolverOutput>,
}

impl Verdict {
    /// The paper's b as a number, for rewards.
    pub fn b(&self) -> f32 {
        if self.solved {
            1.0
        } else {
            0.0
        }
    }

    /// The category of the first error-severity diagnostic, if any: the
    /// "dominant diagnostic" the evaluation tallies per repair step.
    pub fn dominant_category(&self) -> Option<Category> {
        self.diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error)
            .or_else(|| self.diagnostics.first())
            .map(|d| d.category)
    }
}

/// E(y): checks a spec and runs the planner on it.
///
/// Implementations must never panic on bad input: every failure is a
/// [`Verdict`] with `solved == false` and a diagnostic that says why.
pub trait Verifier: Send + Sync {
    /// Verifies one spec.
    fn verify(&self, spec: &Spec) -> Verdict;
}

/// What a reward function sees of one episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// b_0: the Actor's first spec was solved.
    pub b0: bool,
    /// s_J: the Judge's score for the Actor's spec, in (0, 1).
    pub judge_score: f32,
    /// b_T: the final spec (after T repairs) was solved.
    pub solved_final: bool,
    /// T: the number of Editor repairs made.
    pub repairs: u32,
    /// H_max: the most repairs allowed.
    pub max_repairs: u32,
    /// τ: the Judge's decision threshold.
    pub judge_threshold: f32,
    /// λ_J: the weight of the Judge's score in the Actor's reward.
    pub lambda_judge: f32,
    /// β: the per-repair cost in the Editor's reward.
    pub repair_cost: f32,
}

impl Default for EpisodeSummary {
    /// The paper's weights (λ_J = 0.3, β = 0.1, τ = 0.5, H_max = 5) and an empty episode.
    fn default() -> Self {
        EpisodeSummary {
            b0: false,
            judge_score: 0.5,
            solved_final: false,
            repairs: 0,
            max_repairs: 5,
            judge_threshold: 0.5,
            lambda_judge: 0.3,
            repair_cost: 0.1,
        }
    }
}

/// The three roles' rewards for one episode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rewards {
    /// R_A, the Actor's reward.
    pub actor: f32,
    /// R_E, the Editor's reward (0 when no repair was made).
    pub editor: f32,
    /// The Judge's logged reward (the paper's ±1 / ±0.5 table).
    pub judge: f32,
}

/// A reward function over episodes.
pub trait Reward: Send + Sync {
    /// The rewards for one finished episode.
    fn rewards(&self, episode: &EpisodeSummary) -> Result<Rewards, BoxError>;
}

/// Which way a solvable spec drifted from the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drift {
    /// The goal is weaker than the reference goal.
    GoalWeakening,
    /// Objects or their types differ.
    TypeDrift,
    /// An action schema differs (other than a dropped precondition).
    SchemaDrift,
    /// An action schema lost a precondition.
    ConstraintOmission,
}

impl Drift {
    /// Every drift category, in the paper's order.
    pub const ALL: [Drift; 4] = [
        Drift::GoalWeakening,
        Drift::TypeDrift,
        Drift::SchemaDrift,
        Drift::ConstraintOmission,
    ];

    /// The category's name as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Drift::GoalWeakening => "goal-weakening",
            Drift::TypeDrift => "type-drift",
            Drift::SchemaDrift => "schema-drift",
            Drift::ConstraintOmission => "constraint-omission",
        }
    }
}

/// How the checker reached its goal-equivalence decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// By exhaustive comparison of reachable goal states.
    #[default]
    Exact,
    /// By closing both goals under facts implied in every reachable goal state found.
    Closure,
    /// A size limit was hit; the checker did not guess.
    Undecided,
}

/// A faithfulness checker's report on one candidate spec: the fields of `onebrain faithful`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaithfulnessReport {
    /// S_i: the candidate was solved by the verifier.
    pub solvable: bool,
    /// C_i: solvable and every test below passed.
    pub faithful: bool,
    /// The candidate goal is equivalent to the reference goal under the mapping.
    pub goal_preserved: bool,
    /// Same objects with the same types under the mapping.
    pub objects_preserved: bool,
    /// The action schemas match the reference's.
    pub schema_consistent: bool,
    /// The candidate's plan, translated, is valid in the reference model.
    pub plan_replay_ok: bool,
    /// F1 of (action, role, literal) triples against the reference schemas.
    pub schema_f1: f64,
    /// The first drift found, if the spec is solvable but not faithful.
    pub drift: Option<Drift>,
    /// How goal equivalence was decided.
    pub decision: Decision,
    /// Human-checkable reasons: the unmatched facts, the missing precondition, the failing plan step.
    pub explanation: Vec<String>,
}

/// Decides whether a candidate spec still means the reference task.
pub trait Checker: Send + Sync {
    /// Compares `candidate` (and the plan found for it, if any) with `reference`.
    fn check(
        &self,
        reference: &Spec,
        candidate: &Spec,
        plan: Option<&[String]>,
    ) -> Result<FaithfulnessReport, BoxError>;
}

/// One planning task: the text x, and the reference spec when one is known.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// A stable identifier, e.g. `blocksworld/instance-2` or `blocksworld/seed-7-size-4`.
    pub id: String,
    /// The domain's name as its adapter reports it.
    pub domain: String,
    /// The natural-language statement of the task.
    pub text: String,
    /// The reference domain and problem (evaluation only, never a training signal).
    pub reference: Option<Spec>,
}

/// A planning domain: its description for prompts, its reference PDDL and a task generator.
pub trait DomainAdapter: Send + Sync {
    /// The domain's name, e.g. `blocksworld`.
    fn name(&self) -> String;
    /// An NL description of the domain: objects, actions, preconditions, effects.
    fn description(&self) -> Result<String, BoxError>;
    /// The reference domain PDDL.
    fn domain_pddl(&self) -> Result<String, BoxError>;
    /// A solvable task of about `size` objects, deterministic for `seed`.
    fn generate(&self, seed: u64, size: u32) -> Result<Task, BoxError>;
    /// The NL statement of any problem of this domain.
    fn describe(&self, problem_pddl: &str) -> Result<String, BoxError>;
}

/// Turns the planner's raw output into categorised diagnostics.
pub trait DiagnosticParser: Send + Sync {
    /// Categorises `raw`, given what the native checks already found.
    fn parse(&self, raw: &SolverOutput, native: &[Diagnostic])
        -> Result<Vec<Diagnostic>, BoxError>;
}

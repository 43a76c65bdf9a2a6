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
//! use onebrain_core::{BoxError, FinishedEpisode, Reward, Rewards};
//!
//! /// R_A = b_0 only: a reward that ignores the Judge.
//! struct SolverOnly;
//! impl Reward for SolverOnly {
//!     fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards, BoxError> {
//!         let b0 = if ep.b0() { 1.0 } else { 0.0 };
//!         Ok(Rewards { actor: b0, ..Rewards::default() })
//!     }
//! }
//! assert_eq!(SolverOnly.rewards(&FinishedEpisode::default()).unwrap().actor, 0.0);
//! ```
#![deny(missing_docs)]

pub mod config_keys;
mod wit_conversions;

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
    /// A verdict of `outcome` (solved exactly when it is [`Outcome::Solved`]) with no
    /// timings and no planner output: for examples, tests and plugins' own checks.
    pub fn new(outcome: Outcome, plan: Vec<String>, diagnostics: Vec<Diagnostic>) -> Verdict {
        Verdict {
            solved: outcome == Outcome::Solved,
            outcome,
            plan,
            diagnostics,
            time_ms: 0,
            solver_time_ms: 0,
            solver_output: None,
        }
    }

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

    /// Verifies a spec written for the task stated by `task_text` (x). A verifier that
    /// reads the text (one with diagnostic reviewers) may add diagnostics about what in the
    /// spec disagrees with it; b, the outcome and the plan are [`Verifier::verify`]'s. The
    /// episode calls this one. By default the text is not read.
    fn verify_task(&self, task_text: &str, spec: &Spec) -> Verdict {
        let _ = task_text;
        self.verify(spec)
    }
}

/// Which role wrote a step's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepRole {
    /// The Actor's first spec y_0.
    Actor,
    /// One Editor repair y_t, t = 1..T.
    Editor,
}

/// One verified step of an episode, as a reward function sees it.
///
/// ```
/// use onebrain_core::{FinishedEpisode, Outcome, Step, StepRole, Verdict};
///
/// let step = |role, outcome| Step::new(role, None, Verdict::new(outcome, vec![], vec![]));
/// let ep = FinishedEpisode {
///     steps: vec![step(StepRole::Actor, Outcome::Rejected), step(StepRole::Editor, Outcome::Solved)],
///     ..FinishedEpisode::default()
/// };
/// assert_eq!((ep.b0(), ep.solved_final(), ep.repairs()), (false, true, 1));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Who wrote it.
    pub role: StepRole,
    /// The spec as the verifier saw it; `None` when the answer held no PDDL
    /// (the verdict then says why).
    pub spec: Option<Spec>,
    /// The verifier's verdict on it.
    pub verdict: Verdict,
    /// How many tokens the model wrote for this step.
    pub output_tokens: u32,
}

impl Step {
    /// A step of `role` that wrote `spec` and got `verdict`; 0 output tokens.
    pub fn new(role: StepRole, spec: Option<Spec>, verdict: Verdict) -> Step {
        Step { role, spec, verdict, output_tokens: 0 }
    }
}

/// The weights of the run's configuration, as a reward function sees them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewardSettings {
    /// H_max: the most repairs allowed.
    pub max_repairs: u32,
    /// τ: the Judge's decision threshold.
    pub judge_threshold: f32,
    /// λ_J: the weight of the Judge's score in the Actor's reward.
    pub lambda_judge: f32,
    /// β: the per-repair cost in the Editor's reward.
    pub repair_cost: f32,
}

impl Default for RewardSettings {
    /// The paper's weights: λ_J = 0.3, β = 0.1, τ = 0.5, H_max = 5.
    fn default() -> Self {
        RewardSettings { max_repairs: 5, judge_threshold: 0.5, lambda_judge: 0.3, repair_cost: 0.1 }
    }
}

/// What a reward function sees of one finished episode: the task, every step and the
/// Judge. Never the reference spec: rewards come from solver feedback alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinishedEpisode {
    /// The task's stable identifier.
    pub task_id: String,
    /// The domain's name as its adapter reports it.
    pub domain: String,
    /// The natural-language statement of the task, x.
    pub task_text: String,
    /// Every verified step in order: the Actor's first, then each Editor repair.
    pub steps: Vec<Step>,
    /// s_J: the Judge's score for the Actor's spec, in [0, 1]; 0.5 when the Judge did not run.
    pub judge_score: f32,
    /// The weights.
    pub settings: RewardSettings,
}

impl Default for FinishedEpisode {
    /// No steps, the uninformative s_J = 0.5 and the paper's weights.
    fn default() -> Self {
        FinishedEpisode {
            task_id: String::new(),
            domain: String::new(),
            task_text: String::new(),
            steps: Vec::new(),
            judge_score: 0.5,
            settings: RewardSettings::default(),
        }
    }
}

impl FinishedEpisode {
    /// An episode whose steps were solved as `solved` says (the Actor's first, then each
    /// repair's), with no specs and s_J = `judge_score`: a reward's smallest real input.
    pub fn with_outcomes(solved: &[bool], judge_score: f32) -> FinishedEpisode {
        let steps = solved
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let role = if i == 0 { StepRole::Actor } else { StepRole::Editor };
                let outcome = if b { Outcome::Solved } else { Outcome::Unsolvable };
                Step::new(role, None, Verdict::new(outcome, vec![], vec![]))
            })
            .collect();
        FinishedEpisode { steps, judge_score, ..FinishedEpisode::default() }
    }

    /// b_0: the Actor's first spec was solved.
    pub fn b0(&self) -> bool {
        self.steps.first().is_some_and(|s| s.role == StepRole::Actor && s.verdict.solved)
    }

    /// b_T: the last spec (the episode stops at the first solved one) was solved.
    pub fn solved_final(&self) -> bool {
        self.steps.last().is_some_and(|s| s.verdict.solved)
    }

    /// T: the number of Editor repairs.
    pub fn repairs(&self) -> u32 {
        self.steps.iter().filter(|s| s.role == StepRole::Editor).count() as u32
    }

    /// The Editor's steps, in order.
    pub fn editor_steps(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.role == StepRole::Editor)
    }

    /// The eight numbers API 0.1.0's reward world sees.
    pub fn summary(&self) -> EpisodeSummary {
        EpisodeSummary {
            b0: self.b0(),
            judge_score: self.judge_score,
            solved_final: self.solved_final(),
            repairs: self.repairs(),
            max_repairs: self.settings.max_repairs,
            judge_threshold: self.settings.judge_threshold,
            lambda_judge: self.settings.lambda_judge,
            repair_cost: self.settings.repair_cost,
        }
    }
}

/// What a reward function of plugin API 0.1.0 sees of one episode: eight numbers.
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
        FinishedEpisode::default().summary()
    }
}

/// The three roles' rewards for one episode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rewards {
    /// R_A, the Actor's reward.
    pub actor: f32,
    /// R_E, the Editor's reward (0 when no repair was made).
    pub editor: f32,
    /// The Judge's logged reward (the paper's ±1 / ±0.5 table).
    pub judge: f32,
    /// One reward per Editor step, in order, when the reward function gives them: the
    /// trainer then uses them as the per-step rewards r_1..r_T, discounted like any
    /// reward. `None`: r_T = R_E and the earlier repairs get 0, as in the paper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor_steps: Option<Vec<f32>>,
}

/// A reward function over episodes.
pub trait Reward: Send + Sync {
    /// The rewards for one finished episode.
    fn rewards(&self, episode: &FinishedEpisode) -> Result<Rewards, BoxError>;
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
    /// The candidate goal is equivalent to the reference goal under the mapping. False
    /// without a comparison when no mapping matches the initial states (`init_preserved`
    /// false): the checker stops there.
    pub goal_preserved: bool,
    /// Same objects with the same types under the mapping.
    pub objects_preserved: bool,
    /// The action schemas match the reference's.
    pub schema_consistent: bool,
    /// The candidate's plan, translated, is valid in the reference model. Like
    /// `goal_preserved`, false without a replay when `init_preserved` is false.
    pub plan_replay_ok: bool,
    /// F1 of (action, role, literal) triples against the reference schemas.
    pub schema_f1: f64,
    /// The first drift found, if the spec is solvable but not faithful.
    pub drift: Option<Drift>,
    /// How goal equivalence was decided.
    pub decision: Decision,
    /// Human-checkable reasons: the unmatched facts, the missing precondition, the failing plan step.
    pub explanation: Vec<String>,
    /// A budget ran out before the checker could decide, and nothing it established refutes
    /// the candidate: neither faithful nor not faithful, and counted apart from both. Then
    /// `solvable` holds, `faithful` does not, `decision` is [`Decision::Undecided`] and
    /// `drift` is `None`; what was established stays in the other fields (plugin API 0.3.0).
    #[serde(default)]
    pub undecided: bool,
    /// Under the mapping found, the candidate's initial state is the reference's.
    #[serde(default)]
    pub init_preserved: bool,
    /// The work the check took in the checker's own machine-independent units (0 when the
    /// checker does not count): the same natively and in the sandbox.
    #[serde(default)]
    pub work: u64,
}

impl FaithfulnessReport {
    /// `faithful`, `not faithful` or `undecided`: the verdict in words.
    pub fn verdict(&self) -> &'static str {
        if self.faithful {
            "faithful"
        } else if self.undecided {
            "undecided"
        } else {
            "not faithful"
        }
    }
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

/// How many items a candidate and a reference state, and how many they share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// Items the candidate states.
    pub candidate: u32,
    /// Items the reference states.
    pub reference: u32,
    /// Items both state.
    pub shared: u32,
}

impl Overlap {
    /// The share of the candidate's items the reference states (1 when it states none).
    pub fn precision(&self) -> f64 {
        if self.candidate == 0 { 1.0 } else { f64::from(self.shared) / f64::from(self.candidate) }
    }

    /// The share of the reference's items the candidate states (1 when there are none).
    pub fn recall(&self) -> f64 {
        if self.reference == 0 { 1.0 } else { f64::from(self.shared) / f64::from(self.reference) }
    }

    /// Adds another count (micro-averaging over tasks).
    pub fn add(&mut self, other: Overlap) {
        self.candidate += other.candidate;
        self.reference += other.reference;
        self.shared += other.shared;
    }
}

/// What a candidate problem shares with the reference problem: objects (counted per type),
/// initial facts and goal literals, under the renaming of objects that shares the most
/// facts. Unlike the faithfulness check it needs no exact mapping, so it grades even an
/// answer no mapping fits: how much of a task a sampled answer gets right.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactAgreement {
    /// Declared objects.
    pub objects: Overlap,
    /// Initial facts.
    pub init: Overlap,
    /// Goal literals, with their polarity.
    pub goal: Overlap,
    /// The candidate's goal already holds in its own initial state (the planner's plan is empty).
    pub goal_holds_initially: bool,
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

/// Turns what the verifier saw into categorised diagnostics: the planner's raw output, and
/// a spec read against the task's text.
pub trait DiagnosticParser: Send + Sync {
    /// Categorises `raw`, given what the native checks already found.
    fn parse(&self, raw: &SolverOutput, native: &[Diagnostic])
        -> Result<Vec<Diagnostic>, BoxError>;

    /// What in `candidate` disagrees with `task_text`, given what the verifier already
    /// found (`found`). By default nothing: a parser that only reads the planner's output.
    fn review(&self, task_text: &str, candidate: &Spec, found: &[Diagnostic]) -> Result<Vec<Diagnostic>, BoxError> {
        let _ = (task_text, candidate, found);
        Ok(Vec::new())
    }
}

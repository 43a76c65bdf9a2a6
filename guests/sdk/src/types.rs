//! The plain data of the worlds, the same shapes as the host's `onebrain-core`.

// Diagnostics are onebrain-pddl's own types, so a parser plugin can return
// what `pddl::check_sources` produced without converting.
pub use onebrain_pddl::{Category, Diagnostic, Severity, SpecFile};

/// A PDDL specification y = (domain, problem), as text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    /// The domain file's text.
    pub domain: String,
    /// The problem file's text.
    pub problem: String,
}

/// One planning task: the text x, and the reference spec when one is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Task {
    /// A stable identifier, e.g. `blocksworld/seed-7-size-4`.
    pub id: String,
    /// The domain's name as the adapter reports it.
    pub domain: String,
    /// The natural-language statement of the task.
    pub text: String,
    /// The reference domain and problem.
    pub reference: Option<Spec>,
}

/// What the planner printed (each stream truncated by the host to a cap).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SolverOutput {
    /// The driver's exit code; `None` when a signal or a limit killed it.
    pub exit_code: Option<i32>,
    /// Standard output: the translator's and the search's logs.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// True when the wall-clock limit killed it.
    pub timed_out: bool,
}

/// What a reward function sees of one finished episode.
#[derive(Clone, Copy, Debug, PartialEq)]
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

/// The three roles' rewards for one episode.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rewards {
    /// R_A, the Actor's reward.
    pub actor: f32,
    /// R_E, the Editor's reward.
    pub editor: f32,
    /// The Judge's logged reward.
    pub judge: f32,
}

/// Which way a solvable spec drifted from its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// How a checker reached its goal-equivalence decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decision {
    /// By exhaustive comparison of reachable goal states.
    #[default]
    Exact,
    /// By closing both goals under facts implied in every reachable goal state found.
    Closure,
    /// A size limit was hit; the checker did not guess.
    Undecided,
}

/// A faithfulness checker's report on one candidate spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaithfulnessReport {
    /// S_i: the candidate was solved by the verifier.
    pub solvable: bool,
    /// C_i: solvable and every test below passed.
    pub faithful: bool,
    /// The candidate goal is equivalent to the reference goal.
    pub goal_preserved: bool,
    /// Same objects with the same types.
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
    /// Human-checkable reasons.
    pub explanation: Vec<String>,
}

//! The plain data of the worlds: `onebrain-core`'s own types (core is plain data and
//! builds for wasm32), so a plugin and the host share one definition and nothing is
//! mirrored by hand. Diagnostics are onebrain-pddl's, so a parser plugin can return
//! what `pddl::check_sources` produced without converting.

pub use onebrain_core::{
    Category, Decision, Diagnostic, Drift, FaithfulnessReport, FinishedEpisode, Outcome, RewardSettings,
    Rewards, Severity, SolverOutput, Spec, SpecFile, Step, StepRole, Task, Verdict,
};

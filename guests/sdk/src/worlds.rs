//! One trait per WIT world. Every method has a default body, so a plugin
//! overrides only what it serves.

use crate::types::{Diagnostic, FaithfulnessReport, FinishedEpisode, Rewards, SolverOutput, Spec, Task};
use crate::{not_implemented, Result};

/// The `reward` world: rewards for the three roles from one whole episode: the task
/// text, every step's spec, verdict, plan and diagnostics, and the Judge's score.
pub trait Reward {
    /// R_A, R_E and the Judge's reward for `episode`, and optionally one reward per
    /// Editor step ([`Rewards::editor_steps`]); the weights are in `episode.settings`.
    fn rewards(&self, episode: &FinishedEpisode) -> Result<Rewards> {
        let _ = episode;
        Err(not_implemented("rewards"))
    }
}

/// The `domain-adapter` world: a planning domain's prompt text, reference
/// PDDL, task generator and describer.
pub trait DomainAdapter {
    /// The domain's short name, e.g. `blocksworld`.
    fn name(&self) -> String;

    /// An NL description of the domain (objects, actions, preconditions, effects).
    fn description(&self) -> Result<String> {
        Err(not_implemented("description"))
    }

    /// The reference domain PDDL.
    fn domain_pddl(&self) -> Result<String> {
        Err(not_implemented("domain-pddl"))
    }

    /// A solvable task of about `size` objects, the same for the same seed.
    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let _ = (seed, size);
        Err(not_implemented("generate"))
    }

    /// The NL statement of a problem of this domain.
    fn describe(&self, problem_pddl: &str) -> Result<String> {
        let _ = problem_pddl;
        Err(not_implemented("describe"))
    }
}

/// The `diagnostic-parser` world: what the verifier saw, as categorised diagnostics for
/// the Editor. Serve `parse` (the planner's raw output), `review` (the spec against the
/// task's text), or both.
pub trait DiagnosticParser {
    /// Categorises `raw`; `native` is what the host's own checks found.
    /// An empty answer means "nothing to add". Called for the config's
    /// `diagnostic-parser` whenever the planner ran and found no plan.
    fn parse(&self, raw: &SolverOutput, native: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        let _ = (raw, native);
        Ok(Vec::new())
    }

    /// What in `candidate` disagrees with `task_text`, the task's own statement; `found`
    /// is what the verifier already said about `candidate`. Called for each of the
    /// config's `diagnostic-reviewers` on every unsolved spec (which may not parse); the
    /// answer is appended to the spec's diagnostics and reaches the Editor's prompt.
    /// Answer few short lines, worst first (the Editor sees eight diagnostics in all);
    /// at most 16, none with an empty message. An empty answer means "nothing to add".
    fn review(&self, task_text: &str, candidate: &Spec, found: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        let _ = (task_text, candidate, found);
        Ok(Vec::new())
    }
}

/// The `faithfulness-checker` world: does a candidate spec still mean the reference task?
pub trait FaithfulnessChecker {
    /// Compares `candidate` (and the plan found for it, if any) with `reference`.
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let _ = (reference, candidate, plan);
        Err(not_implemented("check"))
    }
}

//! Bindings for `onebrain:plugin@0.4.0` (`wit/since_v0.4.0`), the latest
//! version: one `bindgen!` per world, each in its own module (a world's
//! exports would collide with another's), all sharing the one generated
//! `types` interface, and the conversions to and from `onebrain-core`.
//!
//! 0.4.0 changed only the diagnostic-parser world (it gained `review`); 0.3.0 changed only
//! the checker's `faithfulness-report` (it gained `undecided`, `init-preserved` and `work`).
//! The reward and domain-adapter worlds are the same component type as in 0.2.0 and 0.3.0,
//! and the checker as in 0.3.0, so these bindings serve those plugins of every such version.

/// `world reward`; its `types` module is the version's shared one.
pub(crate) mod reward {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.4.0", world: "reward" });
}

/// The records every world of this version exchanges.
pub use reward::onebrain::plugin::types;

/// `world domain-adapter`.
pub(crate) mod domain_adapter {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.4.0",
        world: "domain-adapter",
        with: { "onebrain:plugin/types": super::types },
    });
}

/// `world diagnostic-parser`.
pub(crate) mod diagnostic_parser {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.4.0",
        world: "diagnostic-parser",
        with: { "onebrain:plugin/types": super::types },
    });
}

/// `world faithfulness-checker`.
pub(crate) mod faithfulness_checker {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.4.0",
        world: "faithfulness-checker",
        with: { "onebrain:plugin/types": super::types },
    });
}

onebrain_core::wit_conversions!(types);

#[cfg(test)]
mod tests {
    use super::types;
    use onebrain_core as core;

    /// Every record and enum of an episode goes to the WIT and comes back equal.
    #[test]
    fn an_episode_and_a_report_cross_the_wit_and_come_back_equal() {
        let diag = core::Diagnostic {
            category: core::Category::GoalConstraint,
            severity: core::Severity::Warning,
            message: "goal holds at init".into(),
            file: Some(core::SpecFile::Problem),
            line: Some(7),
            column: None,
        };
        let verdict = core::Verdict {
            solver_output: Some(core::SolverOutput { exit_code: Some(12), stdout: "o".into(), stderr: "e".into(), timed_out: true }),
            time_ms: 5,
            solver_time_ms: 3,
            ..core::Verdict::new(core::Outcome::Unsolvable, vec!["(a)".into()], vec![diag.clone()])
        };
        let step = core::Step {
            role: core::StepRole::Editor,
            spec: Some(core::Spec { domain: "d".into(), problem: "p".into() }),
            verdict,
            output_tokens: 42,
        };
        let episode = core::FinishedEpisode {
            task_id: "t".into(),
            domain: "blocksworld".into(),
            task_text: "stack".into(),
            steps: vec![step],
            judge_score: 0.25,
            settings: core::RewardSettings { max_repairs: 5, judge_threshold: 0.5, lambda_judge: 0.3, repair_cost: 0.1 },
        };
        let wit = types::FinishedEpisode::from(episode.clone());
        assert_eq!(wit.steps[0].verdict.diagnostics[0].line, Some(7));
        assert_eq!(core::FinishedEpisode::from(wit), episode);
        let report = core::FaithfulnessReport {
            drift: Some(core::Drift::SchemaDrift),
            decision: core::Decision::Closure,
            schema_f1: 0.5,
            explanation: vec!["why".into()],
            work: 9,
            ..core::FaithfulnessReport::default()
        };
        assert_eq!(core::FaithfulnessReport::from(types::FaithfulnessReport::from(report.clone())), report);
        let task = core::Task { id: "i".into(), domain: "d".into(), text: "x".into(), reference: None };
        assert_eq!(core::Task::from(types::Task::from(task.clone())), task);
    }
}

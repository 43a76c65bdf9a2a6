//! Bindings for `onebrain:plugin@0.4.0` (`wit/since_v0.4.0`), the latest
//! version: one `bindgen!` per world, each in its own module (a world's
//! exports would collide with another's), all sharing the one generated
//! `types` interface, and the conversions to and from `onebrain-core`.
//!
//! 0.4.0 changed only the diagnostic-parser world (it gained `review`); 0.3.0 changed only
//! the checker's `faithfulness-report` (it gained `undecided`, `init-preserved` and `work`).
//! The reward and domain-adapter worlds are the same component type as in 0.2.0 and 0.3.0,
//! and the checker as in 0.3.0, so these bindings serve those plugins of every such version.

use onebrain_core as core;

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

/// Maps an enum onto its twin case by case.
macro_rules! map_enum {
    ($v:expr, $from:path => $to:path, [$($case:ident),* $(,)?]) => {{
        use $from as F;
        use $to as T;
        match $v { $(F::$case => T::$case,)* }
    }};
}

/// A finished episode in, rewards out.
pub(crate) mod rewards {
    use super::core;
    use super::types as w;

    fn verdict(v: &core::Verdict) -> w::Verdict {
        w::Verdict {
            solved: v.solved,
            outcome: map_enum!(v.outcome, core::Outcome => w::Outcome,
                [Solved, Rejected, Unsolvable, Timeout, OutOfMemory, InputError, SolverError]),
            plan: v.plan.clone(),
            diagnostics: v.diagnostics.iter().map(super::diag::to_wit).collect(),
            time_ms: v.time_ms,
            solver_time_ms: v.solver_time_ms,
            solver_output: v.solver_output.as_ref().map(super::diag::solver_output),
        }
    }

    pub(crate) fn episode(e: &core::FinishedEpisode) -> w::FinishedEpisode {
        let s = &e.settings;
        w::FinishedEpisode {
            task_id: e.task_id.clone(),
            domain: e.domain.clone(),
            task_text: e.task_text.clone(),
            steps: e
                .steps
                .iter()
                .map(|step| w::Step {
                    role: map_enum!(step.role, core::StepRole => w::StepRole, [Actor, Editor]),
                    spec: step.spec.as_ref().map(super::faith::spec),
                    verdict: verdict(&step.verdict),
                    output_tokens: step.output_tokens,
                })
                .collect(),
            judge_score: e.judge_score,
            settings: w::RewardSettings {
                max_repairs: s.max_repairs,
                judge_threshold: s.judge_threshold,
                lambda_judge: s.lambda_judge,
                repair_cost: s.repair_cost,
            },
        }
    }

    pub(crate) fn rewards(r: w::Rewards) -> core::Rewards {
        core::Rewards { actor: r.actor, editor: r.editor, judge: r.judge, editor_steps: r.editor_steps }
    }
}

impl From<types::Task> for core::Task {
    fn from(t: types::Task) -> Self {
        core::Task {
            id: t.id,
            domain: t.domain,
            text: t.text,
            reference: t.reference.map(|s| core::Spec { domain: s.domain, problem: s.problem }),
        }
    }
}

/// Diagnostics and the planner's output, both ways.
pub(crate) mod diag {
    use super::types as w;
    use super::core;

    pub(crate) fn solver_output(o: &core::SolverOutput) -> w::SolverOutput {
        w::SolverOutput {
            exit_code: o.exit_code,
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
            timed_out: o.timed_out,
        }
    }

    pub(crate) fn to_wit(d: &core::Diagnostic) -> w::Diagnostic {
        w::Diagnostic {
            category: map_enum!(d.category, core::Category => w::Category,
                [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
            severity: map_enum!(d.severity, core::Severity => w::Severity, [Error, Warning]),
            message: d.message.clone(),
            file: d.file.map(|f| map_enum!(f, core::SpecFile => w::SpecFile, [Domain, Problem, Plan])),
            line: d.line,
            column: d.column,
        }
    }

    pub(crate) fn from_wit(d: w::Diagnostic) -> core::Diagnostic {
        core::Diagnostic {
            category: map_enum!(d.category, w::Category => core::Category,
                [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
            severity: map_enum!(d.severity, w::Severity => core::Severity, [Error, Warning]),
            message: d.message,
            file: d.file.map(|f| map_enum!(f, w::SpecFile => core::SpecFile, [Domain, Problem, Plan])),
            line: d.line,
            column: d.column,
        }
    }
}

/// Specs in, faithfulness reports out.
pub(crate) mod faith {
    use super::core;
    use super::types as w;

    pub(crate) fn spec(s: &core::Spec) -> w::Spec {
        w::Spec { domain: s.domain.clone(), problem: s.problem.clone() }
    }

    pub(crate) fn report(r: w::FaithfulnessReport) -> core::FaithfulnessReport {
        core::FaithfulnessReport {
            solvable: r.solvable,
            faithful: r.faithful,
            goal_preserved: r.goal_preserved,
            objects_preserved: r.objects_preserved,
            schema_consistent: r.schema_consistent,
            plan_replay_ok: r.plan_replay_ok,
            schema_f1: r.schema_f1,
            drift: r.drift.map(|d| map_enum!(d, w::Drift => core::Drift,
                [GoalWeakening, TypeDrift, SchemaDrift, ConstraintOmission])),
            decision: map_enum!(r.decision, w::Decision => core::Decision, [Exact, Closure, Undecided]),
            explanation: r.explanation,
            undecided: r.undecided,
            init_preserved: r.init_preserved,
            work: r.work,
        }
    }
}

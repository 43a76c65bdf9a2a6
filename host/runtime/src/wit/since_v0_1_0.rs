//! Bindings for `onebrain:plugin@0.1.0` (`wit/since_v0.1.0`), one
//! `bindgen!` per world, each in its own module so their generated `types`
//! do not collide, and the conversions to and from `onebrain-core`.

use onebrain_core as core;

/// `world reward`.
pub(crate) mod reward {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.1.0", world: "reward" });
}

/// `world domain-adapter`.
pub(crate) mod domain_adapter {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.1.0", world: "domain-adapter" });
}

/// `world diagnostic-parser`.
pub(crate) mod diagnostic_parser {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.1.0", world: "diagnostic-parser" });
}

/// `world faithfulness-checker`.
pub(crate) mod faithfulness_checker {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.1.0", world: "faithfulness-checker" });
}

/// Maps an enum onto its twin case by case.
macro_rules! map_enum {
    ($v:expr, $from:path => $to:path, [$($case:ident),* $(,)?]) => {{
        use $from as F;
        use $to as T;
        match $v { $(F::$case => T::$case,)* }
    }};
}

impl From<&core::EpisodeSummary> for reward::onebrain::plugin::types::EpisodeSummary {
    fn from(e: &core::EpisodeSummary) -> Self {
        Self {
            b0: e.b0,
            judge_score: e.judge_score,
            solved_final: e.solved_final,
            repairs: e.repairs,
            max_repairs: e.max_repairs,
            judge_threshold: e.judge_threshold,
            lambda_judge: e.lambda_judge,
            repair_cost: e.repair_cost,
        }
    }
}

impl From<reward::onebrain::plugin::types::Rewards> for core::Rewards {
    fn from(r: reward::onebrain::plugin::types::Rewards) -> Self {
        core::Rewards { actor: r.actor, editor: r.editor, judge: r.judge }
    }
}

impl From<domain_adapter::onebrain::plugin::types::Task> for core::Task {
    fn from(t: domain_adapter::onebrain::plugin::types::Task) -> Self {
        core::Task {
            id: t.id,
            domain: t.domain,
            text: t.text,
            reference: t.reference.map(|s| core::Spec { domain: s.domain, problem: s.problem }),
        }
    }
}

pub(crate) mod diag {
    use super::diagnostic_parser::onebrain::plugin::types as w;
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

pub(crate) mod faith {
    use super::core;
    use super::faithfulness_checker::onebrain::plugin::types as w;

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
        }
    }
}

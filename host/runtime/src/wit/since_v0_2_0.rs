//! Bindings for `onebrain:plugin@0.2.0` (`wit/since_v0.2.0`), kept so
//! checkers built against it (or 0.1.0) still load: 0.3.0 changed only the
//! checker's report. The other worlds of 0.2.0 are the same component type
//! as 0.3.0's (a test in `wit/mod.rs` holds their WIT equal), so
//! [`super::latest`]'s bindings serve them. A 0.2.0 checker cannot say
//! `undecided` apart from "not faithful": its reports are read as they
//! always were, with `undecided` false, `init-preserved` only on a faithful
//! report (which implies it) and `work` 0.

use onebrain_core as core;

/// `world faithfulness-checker`, with 0.2.0's report.
pub(crate) mod faithfulness_checker {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.2.0", world: "faithfulness-checker" });
}

use faithfulness_checker::onebrain::plugin::types as w;

/// Maps an enum onto its twin case by case.
macro_rules! map_enum {
    ($v:expr, $from:path => $to:path, [$($case:ident),* $(,)?]) => {{
        use $from as F;
        use $to as T;
        match $v { $(F::$case => T::$case,)* }
    }};
}

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
        drift: r.drift.map(|d| map_enum!(d, w::Drift => core::Drift, [GoalWeakening, TypeDrift, SchemaDrift, ConstraintOmission])),
        decision: map_enum!(r.decision, w::Decision => core::Decision, [Exact, Closure, Undecided]),
        explanation: r.explanation,
        undecided: false,
        init_preserved: r.faithful,
        work: 0,
    }
}

impl crate::limits::OutputSize for w::FaithfulnessReport {
    fn output_size(&self) -> usize {
        self.explanation.output_size() + 32
    }
}

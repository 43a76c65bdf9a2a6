//! The reference faithfulness checker as a `faithfulness-checker` plugin: the very code of
//! `onebrain-faithful`, with its default limits, behind the SDK's trait. The world passes no
//! solver verdict, so a candidate counts as solvable when a plan comes with it (the host
//! passes the verifier's plan only for solved specs).

use onebrain_core as core;
use onebrain_sdk::{Decision, Drift, FaithfulnessChecker, FaithfulnessReport, Result, Spec};

#[derive(Default)]
struct ReferenceChecker;

impl FaithfulnessChecker for ReferenceChecker {
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let spec = |s: &Spec| core::Spec { domain: s.domain.clone(), problem: s.problem.clone() };
        let limits = onebrain_faithful::Limits::default();
        let r = onebrain_faithful::check(&spec(reference), &spec(candidate), plan, plan.is_some(), &limits)
            .map_err(|e| e.to_string())?;
        Ok(report(r))
    }
}

/// The host's report in the SDK's (WIT) shape: the same fields.
fn report(r: core::FaithfulnessReport) -> FaithfulnessReport {
    FaithfulnessReport {
        solvable: r.solvable,
        faithful: r.faithful,
        goal_preserved: r.goal_preserved,
        objects_preserved: r.objects_preserved,
        schema_consistent: r.schema_consistent,
        plan_replay_ok: r.plan_replay_ok,
        schema_f1: r.schema_f1,
        drift: r.drift.map(|d| match d {
            core::Drift::GoalWeakening => Drift::GoalWeakening,
            core::Drift::TypeDrift => Drift::TypeDrift,
            core::Drift::SchemaDrift => Drift::SchemaDrift,
            core::Drift::ConstraintOmission => Drift::ConstraintOmission,
        }),
        decision: match r.decision {
            core::Decision::Exact => Decision::Exact,
            core::Decision::Closure => Decision::Closure,
            core::Decision::Undecided => Decision::Undecided,
        },
        explanation: r.explanation,
    }
}

onebrain_sdk::export_faithfulness_checker!(ReferenceChecker);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weakened_goal_is_reported_through_the_trait() {
        let d = "(define (domain d) (:predicates (at ?x) (road ?x ?y))
          (:action go :parameters (?x ?y) :precondition (and (at ?x) (road ?x ?y)) :effect (and (at ?y) (not (at ?x)))))";
        let r = Spec { domain: d.into(), problem: "(define (problem p) (:domain d) (:objects a b c) (:init (at a) (road a b) (road b c)) (:goal (at c)))".into() };
        let c = Spec { problem: r.problem.replace("(:goal (at c))", "(:goal (at b))"), ..r.clone() };
        let rep = ReferenceChecker.check(&r, &c, Some(&["(go a b)".to_string()])).unwrap();
        assert!(rep.solvable && !rep.faithful);
        assert_eq!(rep.drift, Some(Drift::GoalWeakening));
        let rep = ReferenceChecker.check(&r, &r, Some(&["(go a b)".to_string(), "(go b c)".to_string()])).unwrap();
        assert!(rep.faithful, "{rep:?}");
    }
}

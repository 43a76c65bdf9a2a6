//! The reference faithfulness checker as a `faithfulness-checker` plugin: the very code of
//! `onebrain-faithful`, with its default limits, behind the SDK's trait. The world passes no
//! solver verdict, so a candidate counts as solvable when a plan comes with it (the host
//! passes the verifier's plan only for solved specs).
//!
//! Its work budget grows with the reference task's size and is counted in units that do not
//! depend on the machine, so it runs out at the same step here and natively: an `undecided`
//! report, the same in both places. The fuel and wall clock in `plugin.toml` are sized so that
//! this budget, not the sandbox, ends a long check, with the `undecided` report the native
//! checker gives.

use onebrain_sdk::{FaithfulnessChecker, FaithfulnessReport, Result, Spec};

#[derive(Default)]
struct ReferenceChecker;

impl FaithfulnessChecker for ReferenceChecker {
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let limits = onebrain_faithful::Limits::default();
        // The SDK's report is onebrain-core's: the host's own type, field for field.
        onebrain_faithful::check(reference, candidate, plan, plan.is_some(), &limits).map_err(|e| e.to_string())
    }
}

onebrain_sdk::export_faithfulness_checker!(ReferenceChecker);

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_sdk::Drift;

    #[test]
    fn a_weakened_goal_is_reported_through_the_trait() {
        let d = "(define (domain d) (:predicates (at ?x) (road ?x ?y))
          (:action go :parameters (?x ?y) :precondition (and (at ?x) (road ?x ?y)) :effect (and (at ?y) (not (at ?x)))))";
        let r = Spec { domain: d.into(), problem: "(define (problem p) (:domain d) (:objects a b c) (:init (at a) (road a b) (road b c)) (:goal (at c)))".into() };
        let c = Spec { problem: r.problem.replace("(:goal (at c))", "(:goal (at b))"), ..r.clone() };
        let rep = ReferenceChecker.check(&r, &c, Some(&["(go a b)".to_string()])).unwrap();
        assert!(rep.solvable && !rep.faithful && !rep.undecided);
        assert_eq!(rep.drift, Some(Drift::GoalWeakening));
        assert!(rep.work > 0);
        let rep = ReferenceChecker.check(&r, &r, Some(&["(go a b)".to_string(), "(go b c)".to_string()])).unwrap();
        assert!(rep.faithful && rep.init_preserved, "{rep:?}");
    }
}

//! A minimal faithfulness checker that exercises the world end to end (the
//! full checker is `reference-checker`): same objects, same goal atoms and
//! same action names, compared after parsing with onebrain-pddl.

use onebrain_sdk::pddl::{parse_domain, parse_problem};
use onebrain_sdk::{Decision, Drift, FaithfulnessChecker, FaithfulnessReport, Result, Spec};
use std::collections::BTreeSet;

#[derive(Default)]
struct TestChecker;

impl FaithfulnessChecker for TestChecker {
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let (rp, cp) = (parse_problem(&reference.problem), parse_problem(&candidate.problem));
        let (rp, cp) = (rp.map_err(|e| format!("reference problem: {e}"))?, cp.map_err(|e| format!("candidate problem: {e}"))?);
        let (rd, cd) = (parse_domain(&reference.domain), parse_domain(&candidate.domain));
        let (rd, cd) = (rd.map_err(|e| format!("reference domain: {e}"))?, cd.map_err(|e| format!("candidate domain: {e}"))?);
        let objs = |p: &onebrain_sdk::pddl::Problem| p.objects.iter().map(|o| (o.name.clone(), o.ty.clone())).collect::<BTreeSet<_>>();
        let goal = |p: &onebrain_sdk::pddl::Problem| p.goal.iter().map(|l| l.to_string()).collect::<BTreeSet<_>>();
        let acts = |d: &onebrain_sdk::pddl::Domain| d.actions.iter().map(|a| a.name.clone()).collect::<BTreeSet<_>>();
        let objects_preserved = objs(&rp) == objs(&cp);
        let goal_preserved = goal(&rp) == goal(&cp);
        let schema_consistent = acts(&rd) == acts(&cd);
        let solvable = plan.is_some();
        let faithful = solvable && objects_preserved && goal_preserved && schema_consistent;
        let drift = match (solvable && !faithful, goal_preserved, objects_preserved) {
            (false, ..) => None,
            (true, false, _) => Some(Drift::GoalWeakening),
            (true, true, false) => Some(Drift::TypeDrift),
            (true, true, true) => Some(Drift::SchemaDrift),
        };
        Ok(FaithfulnessReport {
            solvable,
            faithful,
            goal_preserved,
            objects_preserved,
            schema_consistent,
            plan_replay_ok: solvable,
            schema_f1: if schema_consistent { 1.0 } else { 0.0 },
            drift,
            decision: Decision::Exact,
            explanation: vec![format!("{} reference goal atoms", rp.goal.len())],
            init_preserved: objects_preserved,
            ..Default::default()
        })
    }
}

onebrain_sdk::export_faithfulness_checker!(TestChecker);

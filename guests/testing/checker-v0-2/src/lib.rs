//! A checker built against API 0.2.0, as one written before 0.3.0 was: no SDK, wit-bindgen
//! straight from the frozen `wit/since_v0.2.0`, the version section written by hand. It proves
//! that 0.2.0 checkers keep loading after 0.3.0 added `undecided` to the report. Its answer
//! is fixed by the candidate's problem text: `faithful`, `undecided` (an undecided goal, which
//! 0.2.0 can only report as not faithful) or anything else (not faithful, goal weakening).

wit_bindgen::generate!({ path: "../../../wit/since_v0.2.0", world: "faithfulness-checker" });

use onebrain::plugin::types::{Decision, Drift};

/// The section the host reads before it instantiates.
#[used]
#[link_section = "onebrain:api-version"]
static API_VERSION: [u8; 5] = *b"0.2.0";

struct Fixed;

impl Guest for Fixed {
    fn check(_reference: Spec, candidate: Spec, plan: Option<Vec<String>>) -> Result<FaithfulnessReport, String> {
        let solvable = plan.is_some();
        let faithful = solvable && candidate.problem == "faithful";
        let undecided = candidate.problem == "undecided";
        Ok(FaithfulnessReport {
            solvable,
            faithful,
            goal_preserved: faithful,
            objects_preserved: true,
            schema_consistent: true,
            plan_replay_ok: solvable,
            schema_f1: 1.0,
            drift: (solvable && !faithful && !undecided).then_some(Drift::GoalWeakening),
            decision: if undecided { Decision::Undecided } else { Decision::Exact },
            explanation: vec![format!("fixed answer for `{}`", candidate.problem)],
        })
    }
}

export!(Fixed);

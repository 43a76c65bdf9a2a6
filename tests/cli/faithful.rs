//! `onebrain faithful` answers yes or no: exit 0 for a faithful candidate, 1 for one that
//! no longer states the task, 2 for an error.

use crate::harness::{fixture, TestCommand};

fn faithful(candidate: &str) -> TestCommand {
    TestCommand::new(&["faithful", "--native", "--ref-domain"])
        .arg(fixture("gripper-domain.pddl"))
        .arg("--ref-problem")
        .arg(fixture("gripper-problem.pddl"))
        .arg("--domain")
        .arg(fixture("gripper-domain.pddl"))
        .arg("--problem")
        .arg(fixture(candidate))
}

#[test]
fn the_reference_itself_is_faithful_and_exits_zero() {
    let v = faithful("gripper-problem.pddl").json_with(0);
    assert_eq!((v["solvable"].as_bool(), v["faithful"].as_bool()), (Some(true), Some(true)), "{v}");
}

#[test]
fn a_weakened_goal_is_solvable_not_faithful_and_exits_one() {
    let v = faithful("gripper-problem-goal-weakened.pddl").json_with(1);
    assert_eq!((v["solvable"].as_bool(), v["faithful"].as_bool()), (Some(true), Some(false)), "{v}");
    assert_eq!(v["goal_preserved"], false, "{v}");
    let out = faithful("gripper-problem-goal-weakened.pddl").stdout_with(1);
    assert!(out.starts_with("faithful: no"), "{out}");
}

#[test]
fn a_missing_file_is_an_error_that_exits_two() {
    let err = faithful("no-such-problem.pddl").fails_with(2);
    assert!(err.contains("cannot read"), "{err}");
}

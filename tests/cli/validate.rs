use crate::harness::{fixture, TestCommand};

/// `onebrain validate --json` on `plan`, which must exit with `code` (0 valid, 1 not).
fn validate_exits(plan: &str, code: i32) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan");
    std::fs::write(&path, plan).unwrap();
    TestCommand::new(&["validate", "--domain"])
        .arg(fixture("blocks-domain.pddl"))
        .arg("--problem")
        .arg(fixture("blocks-problem-stack.pddl"))
        .arg("--plan")
        .arg(&path)
        .json_with(code)
}

#[test]
fn validate_exits_zero_for_a_valid_plan_one_for_another_and_two_for_an_error() {
    validate_exits("(pick-up b)\n(stack b c)\n(pick-up a)\n(stack a b)\n", 0);
    validate_exits("(pick-up b)\n(pick-up a)\n", 1);
    TestCommand::new(&["validate", "--domain", "no/such.pddl", "--problem", "x", "--plan", "y"]).fails_with(2);
}

#[test]
fn valid_plan() {
    let v =
        validate_exits("(pick-up b)\n(stack b c)\n(pick-up a)\n(stack a b)\n; cost = 4 (unit cost)\n", 0);
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["steps"], 4);
    assert!(v["failed_step"].is_null());
}

#[test]
fn failing_precondition_names_step_and_atoms() {
    let v = validate_exits("(pick-up b)\n(pick-up a)\n", 1);
    assert_eq!(v["valid"], false);
    assert_eq!(v["failed_step"], 2);
    let unsatisfied: Vec<&str> = v["unsatisfied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(unsatisfied, ["(handempty)"], "{v}");
}

#[test]
fn goal_not_reached_names_the_goal_atoms() {
    let v = validate_exits("(pick-up b)\n(stack b c)\n", 1);
    assert_eq!(v["valid"], false);
    assert!(v["failed_step"].is_null());
    let unsatisfied: Vec<&str> = v["unsatisfied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(unsatisfied, ["(on a b)"], "{v}");
}

#[test]
fn malformed_plan_is_a_verdict() {
    let v = validate_exits("(pick-up b\n", 1);
    assert_eq!(v["valid"], false);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("the plan does not parse"),
        "{v}"
    );
}

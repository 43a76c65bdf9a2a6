use crate::harness::{fixture, shared_data, TestCommand};

fn check(domain: &str, problem: &str) -> TestCommand {
    TestCommand::new(&["check", "--domain"])
        .arg(fixture(domain))
        .arg("--problem")
        .arg(fixture(problem))
}

#[test]
fn check_solved_json() {
    let v = check("gripper-domain.pddl", "gripper-problem.pddl").json();
    assert_eq!(v["solved"], true);
    let plan = v["plan"].as_array().unwrap();
    assert!(plan.len() >= 7);
    assert!(plan.iter().all(|s| s.as_str().unwrap().starts_with("(")));
    assert!(v["time_ms"].as_u64().is_some());
    assert!(
        v.get("solver_output").is_none(),
        "raw output only on request"
    );
}

#[test]
fn a_spec_that_is_not_solved_exits_one_with_its_categories() {
    for (problem, category) in [
        ("gripper-problem-malformed.pddl", "syntax"),
        ("gripper-problem-illtyped.pddl", "object-type"),
        ("gripper-problem-unsolvable.pddl", "goal-constraint"),
    ] {
        let v = check("gripper-domain.pddl", problem).json_with(1);
        assert_eq!(v["solved"], false, "{problem}");
        let cats: Vec<&str> = v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["category"].as_str().unwrap())
            .collect();
        assert_eq!(cats[0], category, "{problem}: {v}");
        let d = &v["diagnostics"][0];
        assert!(
            d["line"].as_u64().is_some() || category == "goal-constraint",
            "{problem}: {d}"
        );
    }
    let v = check("blocks-domain.pddl", "blocks-problem-unsolvable.pddl").json_with(1);
    assert_eq!(v["solved"], false);
    assert_eq!(v["diagnostics"][0]["category"], "unreachable");
}

#[test]
fn check_timeout_is_a_verdict() {
    let v = check("blocks-domain.pddl", "blocks-problem-hard.pddl")
        .arg("--timeout")
        .arg("1")
        .json_with(1);
    assert_eq!(v["solved"], false);
    assert_eq!(v["outcome"], "timeout");
    assert_eq!(v["diagnostics"][0]["category"], "unreachable");
}

#[test]
fn check_human_form_points_at_the_file() {
    let out = check("gripper-domain.pddl", "gripper-problem-illtyped.pddl").stdout_with(1);
    assert!(out.starts_with("not solved: rejected"), "{out}");
    assert!(
        out.contains("error[object-type]") && out.contains("gripper-problem-illtyped.pddl:5:"),
        "{out}"
    );
    let out = check("gripper-domain.pddl", "gripper-problem.pddl").stdout();
    assert!(out.starts_with("solved in"), "{out}");
    assert!(out.contains("plan ("), "{out}");
}

#[test]
fn check_planbench_instance() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("planbench/blocksworld");
    let v = TestCommand::new(&["check", "--domain"])
        .arg(dir.join("domain.pddl"))
        .arg("--problem")
        .arg(dir.join("instances/instance-2.pddl"))
        .json();
    assert_eq!(v["solved"], true);
}

#[test]
fn check_missing_file_is_an_error_that_exits_two() {
    let err = TestCommand::new(&["check", "--domain", "no/such/domain.pddl", "--problem", "x"])
        .fails_with(2);
    assert!(err.contains("cannot read no/such/domain.pddl"), "{err}");
}

#[test]
fn check_usage_error_exits_two() {
    TestCommand::new(&["check", "--domain"]).fails_with(2);
}

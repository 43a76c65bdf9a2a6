use crate::harness::{fixture, model_ready, TestCommand};

fn solve(extra: &[&str]) -> TestCommand {
    let mut cmd =
        TestCommand::new(&["solve", "--config"]).arg(fixture("configs/solve-smollm.toml"));
    for a in extra {
        cmd = cmd.arg(a);
    }
    cmd
}

#[test]
fn solve_needs_exactly_one_task_source() {
    let err = solve(&["--domain", "blocksworld"]).fails_with(2);
    assert!(
        err.contains("--text") && err.contains("--planbench"),
        "{err}"
    );
    let err = solve(&["--domain", "blocksworld", "--text", "x", "--seed", "1"]).fails_with(2);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn solve_bad_config_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[episode]\nbudjet = 6\n").unwrap();
    let err = TestCommand::new(&[
        "solve",
        "--domain",
        "blocksworld",
        "--text",
        "x",
        "--config",
    ])
    .arg(&cfg)
    .fails_with(1);
    assert!(err.contains("bad.toml") && err.contains("budjet"), "{err}");
}

#[test]
fn solve_unknown_domain_or_strategy_is_a_clear_error() {
    let err = solve(&[
        "--domain",
        "blocksworld",
        "--text",
        "x",
        "--strategy",
        "magic",
    ])
    .fails_with(1);
    assert!(err.contains("unknown strategy `magic`"), "{err}");
    if model_ready().is_none() {
        let err = solve(&["--domain", "sokoban", "--text", "x"]).fails_with(1);
        assert!(err.contains("sokoban"), "{err}");
    }
}

#[test]
fn solve_missing_checkpoint_is_a_clear_error() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let err = solve(&[
        "--domain",
        "blocksworld",
        "--seed",
        "3",
        "--size",
        "3",
        "--checkpoint",
        "no/such/checkpoint",
    ])
    .fails_with(1);
    assert!(err.contains("no/such/checkpoint"), "{err}");
}

/// The whole episode with the real small model, the real planner and the plugins: every role
/// shows up as it happens, and the JSON record respects the budget.
#[test]
fn solve_generated_task_shows_each_role_and_keeps_the_budget() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let out = solve(&["--domain", "blocksworld", "--seed", "3", "--size", "3"]).stdout();
    assert!(out.contains("== blocksworld/"), "{out}");
    assert!(out.contains("-- step 0: actor (actor)"), "{out}");
    assert!(out.contains("   verifier (step 0): "), "{out}");
    assert!(out.contains("   judge (step 0): s_J = "), "{out}");
    assert!(
        out.contains("verifier call(s)") && out.contains("rewards: actor"),
        "{out}"
    );
    if !out.contains("verifier (step 0): solved") {
        assert!(
            out.contains("-- step 1: editor (editor)"),
            "a failed first attempt is repaired: {out}"
        );
    }

    let rec = solve(&["--domain", "blocksworld", "--seed", "3", "--size", "3"]).json();
    let calls = rec["solver_calls"].as_u64().unwrap();
    let steps = rec["steps"].as_array().unwrap();
    assert!((1..=3).contains(&calls), "budget K = 3: {calls}");
    assert_eq!(
        steps.len() as u64,
        calls,
        "one generation per verifier call"
    );
    assert_eq!(steps[0]["role"], "actor");
    assert!(steps.iter().skip(1).all(|s| s["role"] == "editor"));
    assert_eq!(
        rec["repairs"].as_u64().unwrap(),
        calls - 1,
        "every call after the first is a repair"
    );
    assert!(rec["judge_score"]
        .as_f64()
        .is_some_and(|s| (0.0..=1.0).contains(&s)));
    // Greedy decoding: the same task gives the same episode.
    assert_eq!(
        rec["steps"][0]["output"],
        solve(&["--domain", "blocksworld", "--seed", "3", "--size", "3"]).json()["steps"][0]
            ["output"]
    );
}

//! `grounded-rewards` and the SDK's reference-free gaming checks it multiplies in:
//! every PlanBench and Planetarium reference spec passes all four checks, a gamed
//! spec fails exactly the check it games, and through WASM a gamed spec earns
//! the Actor nothing where `paper-rewards` pays it in full.

mod common;

use std::io::BufRead;
use std::path::Path;

use onebrain_core::{FinishedEpisode, Outcome, Reward, Spec, Step, StepRole, Verdict};
use onebrain_runtime::{InstancePolicy, Limits, WasmReward};
use onebrain_sdk::gaming::{findings, GamingCheck};

/// A solved verdict with `plan`. (For references without a plan of their own, any
/// one step: the plan check reads the verdict only.)
fn solved(plan: &[&str]) -> Verdict {
    Verdict::new(Outcome::Solved, plan.iter().map(|s| s.to_string()).collect(), vec![])
}

fn failed(task: &str, spec: &Spec, verdict: &Verdict) -> Vec<GamingCheck> {
    findings(task, spec, verdict).unwrap().into_iter().map(|f| f.check).collect()
}

#[test]
fn every_planbench_reference_passes_every_check() {
    let Some(data) = common::data_dir() else { return };
    for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let rows = common::planbench_rows(&data, folder);
        assert!(rows.len() >= 285, "{folder}: {} rows", rows.len());
        for (text, spec, plan) in &rows {
            let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
            let found = findings(text, spec, &solved(&plan)).unwrap();
            assert!(found.is_empty(), "{folder}: {found:?}\n{text}\n{}", spec.problem);
        }
    }
}

#[test]
fn every_explicit_planetarium_gripper_reference_passes_every_check() {
    let Some(data) = common::data_dir() else { return };
    let domain = std::fs::read_to_string(common::root().join("guests/gripper/domain.pddl")).unwrap();
    let file = std::fs::File::open(data.join("planetarium/gripper-train.jsonl.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).unwrap();
    let (mut rows, mut trivial) = (0, 0);
    for line in text.as_bytes().lines() {
        let row: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if row["init_is_abstract"] != 0 || row["goal_is_abstract"] != 0 {
            continue;
        }
        let spec = Spec { domain: domain.clone(), problem: row["problem_pddl"].as_str().unwrap().to_string() };
        let task = row["natural_language"].as_str().unwrap();
        let found = failed(task, &spec, &solved(&["(move room1 room2)"]));
        rows += 1;
        // Planetarium has tasks that ask for what already holds (4,528 of the 11,582
        // explicit rows, e.g. "one room to one room"): a faithful spec of one states a
        // goal true at the start, and the check says so. Nothing else may fail.
        if found == [GamingCheck::GoalAtInit] {
            trivial += 1;
            continue;
        }
        assert!(found.is_empty(), "row {}: {found:?}\n{task}\n{}", row["id"], spec.problem);
    }
    assert!(rows > 10_000, "only {rows} explicit rows");
    eprintln!("{trivial} of {rows} explicit gripper rows ask for a goal that already holds");
    assert!(trivial < rows / 2, "{trivial} of {rows} rows ask for nothing");
}

/// PlanBench BlocksWorld instance 2 ("the orange block on the red block"), with its plan.
fn blocksworld_2(data: &Path) -> (String, Spec, Vec<String>) {
    common::planbench_rows(data, "blocksworld")
        .into_iter()
        .find(|(t, _, _)| t.ends_with("My goal is to have that the orange block is on top of the red block."))
        .expect("instance 2")
}

#[test]
fn each_gamed_spec_fails_the_check_it_games() {
    let Some(data) = common::data_dir() else { return };
    let (text, spec, plan) = blocksworld_2(&data);
    let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
    assert_eq!(failed(&text, &spec, &solved(&plan)), []);

    // The goal replaced by a fact of the initial state: solved by the empty plan.
    let at_init = Spec { problem: spec.problem.replace("(on c a))", "(on a b))"), ..spec.clone() };
    assert!(at_init.problem.contains("(on a b)\n(ontable b)"), "{}", at_init.problem);
    assert_eq!(failed(&text, &at_init, &solved(&plan)), [GamingCheck::GoalAtInit]);

    // A solved verdict with nothing to do.
    assert_eq!(failed(&text, &spec, &solved(&[])), [GamingCheck::EmptyPlan]);

    // One block fewer than the task names (PlanBench renames blocks to letters, so the count is checked).
    let fewer = Spec { problem: spec.problem.replace("(:objects a b c d )", "(:objects a b c )"), ..spec.clone() };
    assert_ne!(fewer.problem, spec.problem);
    assert_eq!(failed(&text, &fewer, &solved(&plan)), [GamingCheck::MissingObject]);

    // An action stripped of its precondition.
    let start = spec.domain.find(":precondition").unwrap();
    let end = start + spec.domain[start..].find(":effect").unwrap();
    let unguarded = Spec { domain: format!("{}{}", &spec.domain[..start], &spec.domain[end..]), ..spec.clone() };
    assert_eq!(failed(&text, &unguarded, &solved(&plan)), [GamingCheck::UnguardedAction]);
}

#[test]
fn a_spec_that_keeps_the_texts_names_must_declare_every_named_object() {
    let domain = std::fs::read_to_string(common::root().join("guests/gripper/domain.pddl")).unwrap();
    let text = "You have 2 rooms.\nYou have 1 balls.\nYou have 1 grippers.\ngripper1 is free.\nball1 is at room1.\n\
                Your goal is to have the following:\nball1 should be at room2.";
    let problem = |objects: &str| Spec {
        domain: domain.clone(),
        problem: format!(
            "(define (problem p) (:domain gripper) (:objects {objects})
              (:init (at-robby room1) (free gripper1) (at ball1 room1)) (:goal (at ball1 room2)))"
        ),
    };
    let plan = solved(&["(pick ball1 room1 gripper1)", "(move room1 room2)", "(drop ball1 room2 gripper1)"]);
    assert_eq!(failed(text, &problem("room1 room2 - room ball1 - ball gripper1 - gripper"), &plan), []);
    // What the base model wrote for such a task: the balls and grippers, no rooms.
    let found = findings(text, &problem("ball1 - ball gripper1 - gripper robby - room"), &plan).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].check, GamingCheck::MissingObject);
    assert!(found[0].detail.contains("room1, room2"), "{}", found[0].detail);
}

#[test]
fn grounded_rewards_pays_solved_tasks_not_gamed_specs() {
    let Some(data) = common::data_dir() else { return };
    let (text, spec, plan) = blocksworld_2(&data);
    let host = common::host(Limits::default());
    let grounded = WasmReward::new(&common::bundled(&host, "grounded-rewards"), InstancePolicy::Reuse).unwrap();
    let paper = WasmReward::new(&common::bundled(&host, "paper-rewards"), InstancePolicy::Reuse).unwrap();
    let close = |a: f32, b: f32| (a - b).abs() < 1e-6;
    let step = |role, spec: &Spec, verdict: Verdict| Step::new(role, Some(spec.clone()), verdict);
    let episode = |steps: Vec<Step>| FinishedEpisode { task_text: text.clone(), steps, judge_score: 0.5, ..Default::default() };

    // A faithful first spec: both rewards pay R_A = 1 + 0.3 · 0.5.
    let honest = episode(vec![step(StepRole::Actor, &spec, solved(&plan.iter().map(String::as_str).collect::<Vec<_>>()))]);
    let (g, p) = (grounded.rewards(&honest).unwrap(), paper.rewards(&honest).unwrap());
    assert!(close(g.actor, 1.15) && close(p.actor, 1.15), "{g:?} {p:?}");
    assert_eq!(g.editor_steps, Some(vec![]));

    // The goal stated as already true: the paper pays it, grounded-rewards does not.
    let at_init = Spec { problem: spec.problem.replace("(on c a))", "(on a b))"), ..spec.clone() };
    let gamed = episode(vec![step(StepRole::Actor, &at_init, solved(&[]))]);
    let (g, p) = (grounded.rewards(&gamed).unwrap(), paper.rewards(&gamed).unwrap());
    assert!(close(g.actor, 0.15) && close(p.actor, 1.15), "{g:?} {p:?}");
    assert_eq!(g.judge, p.judge, "the Judge predicts the solver, under either reward");

    // Two repairs: the first still unsolvable, the second solves the task. Per step:
    // r_1 = 0 − 0 − 0.1, r_2 = 1 − 0 − 0.1; they sum to R_E = 1 − 0.1 · 2.
    let unsolvable = Verdict::new(Outcome::Unsolvable, vec![], vec![]);
    let repaired = episode(vec![
        step(StepRole::Actor, &spec, unsolvable.clone()),
        step(StepRole::Editor, &spec, unsolvable),
        step(StepRole::Editor, &spec, solved(&plan.iter().map(String::as_str).collect::<Vec<_>>())),
    ]);
    let g = grounded.rewards(&repaired).unwrap();
    let steps = g.editor_steps.clone().unwrap();
    assert!(steps.len() == 2 && close(steps[0], -0.1) && close(steps[1], 0.9), "{g:?}");
    assert!(close(g.editor, 0.8) && close(g.actor, 0.15), "{g:?}");
    // A repair that games the spec instead is worth nothing beyond its cost.
    let gamed_repair = episode(vec![
        step(StepRole::Actor, &spec, Verdict::new(Outcome::Unsolvable, vec![], vec![])),
        step(StepRole::Editor, &at_init, solved(&[])),
    ]);
    let g = grounded.rewards(&gamed_repair).unwrap();
    assert!(close(g.editor, -0.1) && g.editor_steps.as_deref().is_some_and(|s| close(s[0], -0.1)), "{g:?}");
}

//! `text-agreement` through the real plugin host: the component built from
//! guests/text-agreement, loaded from plugins/text-agreement like any bundled
//! reward. It pays a faithful PlanBench spec in full and a gamed one nothing,
//! where `paper-rewards` pays both; every PlanBench reference and every explicit
//! Planetarium reference agrees with its own text, and each one's twin with an initial
//! fact the text rules out (a held block beside an empty hand, a package in a truck and at
//! a place, a carried ball beside a free gripper) scores 0.
//!
//! With s_J = 0 the Actor's reward is Φ(y_0) = b · A, so these tests read A itself.

mod common;

use std::io::BufRead;

use onebrain_core::{FinishedEpisode, Outcome, Reward, Spec, Step, StepRole, Verdict};
use onebrain_runtime::{InstancePolicy, Limits, WasmReward};
use onebrain_sdk::gaming::{findings, GamingCheck};
use onebrain_sdk::pddl;

fn solved(plan: &[String]) -> Verdict {
    Verdict::new(Outcome::Solved, plan.to_vec(), vec![])
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-6
}

fn text_agreement() -> WasmReward {
    let host = common::host(Limits::default());
    WasmReward::new(&common::bundled(&host, "text-agreement"), InstancePolicy::Reuse).unwrap()
}

/// A through the plugin: R_A of a one-step episode with s_J = 0.
fn agreement(reward: &WasmReward, text: &str, spec: &Spec, verdict: Verdict) -> f32 {
    let ep = FinishedEpisode {
        task_text: text.to_string(),
        steps: vec![Step::new(StepRole::Actor, Some(spec.clone()), verdict)],
        judge_score: 0.0,
        ..Default::default()
    };
    reward.rewards(&ep).unwrap().actor
}

#[test]
fn text_agreement_pays_a_faithful_episode_and_not_a_gamed_one() {
    let Some(data) = common::data_dir() else { return };
    // PlanBench BlocksWorld instance 2: "the orange block on the red block".
    let (text, spec, plan) = common::planbench_rows(&data, "blocksworld")
        .into_iter()
        .find(|(t, _, _)| t.ends_with("My goal is to have that the orange block is on top of the red block."))
        .expect("instance 2");
    let host = common::host(Limits::default());
    let ours = WasmReward::new(&common::bundled(&host, "text-agreement"), InstancePolicy::Reuse).unwrap();
    let paper = WasmReward::new(&common::bundled(&host, "paper-rewards"), InstancePolicy::Reuse).unwrap();
    let episode = |spec: &Spec, verdict: Verdict| FinishedEpisode {
        task_text: text.clone(),
        steps: vec![Step::new(StepRole::Actor, Some(spec.clone()), verdict)],
        judge_score: 0.5,
        ..Default::default()
    };

    // The faithful spec (PlanBench's own file, blocks named a-d): A = 1, R_A = 1 + 0.3 · 0.5.
    let honest = episode(&spec, solved(&plan));
    let (t, p) = (ours.rewards(&honest).unwrap(), paper.rewards(&honest).unwrap());
    assert!(close(t.actor, 1.15) && close(p.actor, 1.15), "{t:?} {p:?}");
    assert_eq!(t.editor_steps, Some(vec![]));

    // The goal stated as already true, solved by the empty plan: the paper pays it in full.
    let at_init = Spec { problem: spec.problem.replace("(on c a))", "(on a b))"), ..spec.clone() };
    assert_ne!(at_init.problem, spec.problem);
    let gamed = episode(&at_init, solved(&[]));
    let (t, p) = (ours.rewards(&gamed).unwrap(), paper.rewards(&gamed).unwrap());
    assert!(close(t.actor, 0.15) && close(p.actor, 1.15), "{t:?} {p:?}");
    assert_eq!(t.judge, p.judge, "the Judge predicts the solver, under either reward");

    // An invented fifth block: solvable, paid in part.
    let invented = Spec {
        problem: spec.problem.replace("(:objects a b c d )", "(:objects a b c d e )").replace("(handempty)", "(handempty)\n(ontable e)\n(clear e)"),
        ..spec.clone()
    };
    let a = agreement(&ours, &text, &invented, solved(&plan));
    assert!(a > 0.5 && a < 1.0, "invented block: A = {a}");

    // A repair from an unsolvable spec to the faithful one: r_1 = 1 − 0 − β = R_E.
    let repaired = FinishedEpisode {
        task_text: text.clone(),
        steps: vec![
            Step::new(StepRole::Actor, Some(spec.clone()), Verdict::new(Outcome::Unsolvable, vec![], vec![])),
            Step::new(StepRole::Editor, Some(spec.clone()), solved(&plan)),
        ],
        judge_score: 0.5,
        ..Default::default()
    };
    let t = ours.rewards(&repaired).unwrap();
    assert!(close(t.editor, 0.9) && t.editor_steps.as_deref().is_some_and(|s| s.len() == 1 && close(s[0], 0.9)), "{t:?}");

    // A NaN judge score is refused, as grounded-rewards refuses it.
    let nan = FinishedEpisode { judge_score: f32::NAN, ..honest };
    assert!(ours.try_rewards(&nan).is_err());
}

/// `problem` with `fact` appended to its initial state.
fn with_init(problem: &str, fact: &str) -> String {
    problem.replacen("(:init", &format!("(:init {fact} "), 1)
}

/// An initial fact that `problem`'s own initial state rules out, under the domain's mutex
/// groups: a held block beside the empty hand (BlocksWorld, Planetarium's `arm-empty`,
/// Mystery's `harmony`/`pain`); a package in a truck beside its place (Logistics); a ball in
/// a free gripper beside its room (Gripper). `None` when the state has no such pair.
fn contradicting_fact(problem: &str) -> Option<String> {
    let p = pddl::parse_problem(problem).unwrap();
    let first = |pred: &str| p.init.iter().find(|a| a.predicate.eq_ignore_ascii_case(pred));
    let arg = |pred: &str, i: usize| first(pred).map(|a| a.args[i].name.clone());
    let block = p.objects.first()?.name.clone();
    for (empty, holding) in [("handempty", "holding"), ("arm-empty", "holding"), ("harmony", "pain")] {
        if first(empty).is_some() {
            return Some(format!("({holding} {block})"));
        }
    }
    if let (Some(truck), Some(_)) = (arg("truck", 0), first("obj")) {
        let package = p.init.iter().find(|a| a.predicate == "at" && p.init.iter().any(|o| o.predicate.eq_ignore_ascii_case("obj") && o.args[0].name == a.args[0].name))?;
        return Some(format!("(in {} {truck})", package.args[0].name));
    }
    let ball = p.init.iter().find(|a| a.predicate == "at")?;
    Some(format!("(carry {} {})", ball.args[0].name, arg("free", 0)?))
}

#[test]
fn every_planbench_reference_agrees_fully_and_its_gamed_twin_not_at_all() {
    let Some(data) = common::data_dir() else { return };
    let reward = text_agreement();
    for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let rows = common::planbench_rows(&data, folder);
        assert!(rows.len() >= 285, "{folder}: {} rows", rows.len());
        let (mut shown, mut contradicted) = (0, 0);
        for (text, spec, plan) in &rows {
            assert_eq!(agreement(&reward, text, spec, solved(plan)), 1.0, "{folder}\n{text}\n{}", spec.problem);
            // Every goal fact swapped for the first initial fact: true at the start.
            let start = spec.problem.find("(:goal").unwrap();
            let first = &spec.problem[spec.problem.find("(:init").unwrap() + 6..];
            let fact = &first[first.find('(').unwrap()..=first.find(')').unwrap()];
            let gamed = Spec { problem: format!("{}(:goal (and {fact})))", &spec.problem[..start]), ..spec.clone() };
            let a = agreement(&reward, text, &gamed, solved(&[]));
            if shown < 1 {
                shown += 1;
                eprintln!("{folder}: faithful A = 1, goal {fact} (already true) A = {a}");
            }
            assert_eq!(a, 0.0, "{folder}: {}", gamed.problem);
            // A fact the text rules out, appended to the faithful state: 0 as well.
            if let Some(fact) = contradicting_fact(&spec.problem) {
                let twin = Spec { problem: with_init(&spec.problem, &fact), ..spec.clone() };
                assert_eq!(agreement(&reward, text, &twin, solved(plan)), 0.0, "{folder}: {fact}\n{text}\n{}", twin.problem);
                contradicted += 1;
            }
        }
        eprintln!("{folder}: {} references at A = 1; {contradicted} twins with a contradicted fact at A = 0", rows.len());
        assert!(contradicted * 2 > rows.len(), "{folder}: only {contradicted} twins");
    }
}

#[test]
fn explicit_planetarium_references_agree_with_their_text() {
    let Some(data) = common::data_dir() else { return };
    let reward = text_agreement();
    for domain in ["blocksworld", "gripper"] {
        let pddl = std::fs::read_to_string(data.join(format!("planetarium/domains/{domain}.pddl"))).unwrap();
        let file = std::fs::File::open(data.join(format!("planetarium/{domain}-train.jsonl.gz"))).unwrap();
        let (mut explicit, mut rows, mut at_goal, mut sum, mut least) = (0, 0, 0, 0.0f32, 1.0f32);
        let mut contradicted = 0;
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
            let row: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            if row["init_is_abstract"] != 0 || row["goal_is_abstract"] != 0 {
                continue;
            }
            // Every 10th explicit row: about 2,000 BlocksWorld and 1,200 Gripper tasks.
            explicit += 1;
            if explicit % 10 != 0 {
                continue;
            }
            let text = row["natural_language"].as_str().unwrap();
            let spec = Spec { domain: pddl.clone(), problem: row["problem_pddl"].as_str().unwrap().to_string() };
            let verdict = solved(&["(some step)".to_string()]);
            let a = agreement(&reward, text, &spec, verdict.clone());
            // Planetarium asks some tasks whose goal already holds: 0, by design.
            let found = findings(text, &spec, &verdict).unwrap();
            if found.iter().any(|f| f.check == GamingCheck::GoalAtInit) {
                assert_eq!(a, 0.0, "{text}\n{}", spec.problem);
                at_goal += 1;
                continue;
            }
            rows += 1;
            sum += a;
            least = least.min(a);
            // A ball in a gripper the text calls free, a held block beside an empty arm: 0.
            if let Some(fact) = contradicting_fact(&spec.problem) {
                let twin = Spec { problem: with_init(&spec.problem, &fact), ..spec.clone() };
                assert_eq!(agreement(&reward, text, &twin, verdict), 0.0, "{fact}\n{text}\n{}", twin.problem);
                contradicted += 1;
            }
        }
        eprintln!(
            "planetarium {domain}: {rows} explicit rows, mean A = {:.3}, least {least:.3}; {at_goal} start at their goal; \
             {contradicted} twins with a contradicted fact at A = 0",
            sum / rows as f32
        );
        assert!(contradicted * 2 > rows, "{domain}: only {contradicted} twins");
        assert!(rows > 500, "{domain}: only {rows} rows");
        // Gripper's (at-robby ...) is never said in the text: at most one fact short.
        assert!(least >= 0.97, "{domain}: least A = {least}");
    }
}

//! Rewards for agreeing with the task's own text. No gold PDDL: the only evidence
//! is the statement the model read. A spec is read back as facts (its objects, its
//! initial facts, its goal facts) and each fact is looked for in the text, the way
//! a domain's `describe` would have worded it. The matching is the shared
//! `text-match` crate's (guests/text-match, which the `text-diagnostics` parser also
//! uses to tell the Editor what does not match):
//!
//! - an **object** agrees when it names an object the text names (PlanBench's
//!   "the red block", "object a", `package_0`, Planetarium's `ball1`), by its own
//!   name, a split name, PlanBench's abbreviation or its colour letters; each named
//!   object is claimed once, so a second spec object for the same one is invented;
//! - an **initial fact** agrees when one clause of the text's initial part holds its
//!   predicate's words (or a known synonym) and all its arguments in the order the
//!   predicate is worded; a one-place type fact agrees when its predicate is the
//!   object's kind (`(truck t0)` for `truck_0`);
//! - a **goal fact** agrees the same way, with a clause of the goal part; a goal
//!   copied from the initial state finds no goal clause, and a negative goal fact
//!   never agrees.
//!
//! From those, three shares each way, averaged over the three parts (objects,
//! initial facts, goal facts) so that a one-fact goal weighs as much as a ten-fact
//! initial state:
//!
//! - precision P: the share of the spec's objects, initial facts and goal facts
//!   that agree with the text;
//! - recall R: the share of the text's named objects the spec declares, and of the
//!   text's initial and goal clauses that name an object, the share some agreeing
//!   fact states;
//! - A(y) = 2PR / (P + R), in [0, 1]; a part that is empty on its side is left out
//!   of that side's mean, and a text that names nothing gives A = 0.
//!
//! A(y) = 0 outright when the goal already holds in the stated initial state, or
//! the planner's plan is empty (`onebrain_sdk::gaming`'s `GoalAtInit` and
//! `EmptyPlan`): that is how a solver-only reward gets gamed, and a spec that asks
//! for nothing does not agree with a task that asks for something. (Some
//! Planetarium tasks do start at their goal; their faithful specs earn 0 here.)
//!
//! The rewards keep the paper's shape, with Φ(y) = b(y) · A(y) in place of b(y), the
//! solver's verdict:
//!
//! - R_A = Φ(y_0) + λ_J · s_J;
//! - R_E = Φ(y_T) − β · T when the Editor ran (T > 0), else 0;
//! - per Editor step, r_t = Φ(y_t) − Φ(y_{t−1}) − β; they sum to R_E, since the
//!   Editor runs only on an unsolved first spec (Φ(y_0) = 0);
//! - the Judge's table is the paper's: the Judge predicts the solver (b_0).
//!
//! What it cannot see: facts the text leaves unsaid (Gripper's `(at-robby room1)`)
//! never agree, which costs every spec that states them the same; an abstract text
//! ("gather all balls into one room") names nothing and scores 0; a fact under a
//! predicate the text words differently from its name and from text-match's synonyms
//! agrees only if the text happens to use the predicate's own words.
//!
//! Measured (the tests below and host/runtime/tests/text_agreement.rs): every PlanBench
//! reference (1,485 rows, three domains) scores A = 1, and so does every explicit
//! Planetarium BlocksWorld reference sampled (every 10th); Gripper's score 0.98-1 (the
//! unsaid `at-robby`). The next
//! PlanBench row's reference scores 0.54 on average on BlocksWorld, 0.66 on Logistics.
//!
//! Tests run natively: `cargo test --manifest-path guests/Cargo.toml -p text-agreement`
//! (PlanBench is read in place from `../shared/data` when it is there).

use onebrain_sdk::gaming::{findings, GamingCheck};
use onebrain_sdk::pddl;
use text_match::{FactReading, Reading, Text};
use onebrain_sdk::{paper_judge_reward, FinishedEpisode, Result, Reward, Rewards, Spec, Step, Verdict};

// ---------------------------------------------------------------------------
// Agreement.
// ---------------------------------------------------------------------------

/// How far a spec agrees with its task's text. Counts, so a researcher can see
/// where the score came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agreement {
    /// Declared objects; those that name an object of the text.
    pub objects: (usize, usize),
    /// Initial facts; those the text's initial part states.
    pub init: (usize, usize),
    /// Goal facts; those the text's goal part states.
    pub goal: (usize, usize),
    /// Objects the text names; those the spec declares.
    pub named: (usize, usize),
    /// Initial clauses that name an object; those an agreeing initial fact states.
    pub init_clauses: (usize, usize),
    /// Goal clauses that name an object; those an agreeing goal fact states.
    pub goal_clauses: (usize, usize),
    /// The goal already holds in the initial state, or the plan is empty: A = 0.
    pub gamed: bool,
}

fn share((all, agree): (usize, usize)) -> Option<f32> {
    (all > 0).then(|| agree as f32 / all as f32)
}

fn mean(xs: impl IntoIterator<Item = Option<f32>>) -> Option<f32> {
    let xs: Vec<f32> = xs.into_iter().flatten().collect();
    (!xs.is_empty()).then(|| xs.iter().sum::<f32>() / xs.len() as f32)
}

impl Agreement {
    /// P: the mean share of the spec's objects, initial facts and goal facts that agree.
    pub fn precision(&self) -> f32 {
        mean([share(self.objects), share(self.init), share(self.goal)]).unwrap_or(0.0)
    }

    /// R: the mean share of the text's objects, initial clauses and goal clauses the spec states.
    pub fn recall(&self) -> f32 {
        mean([share(self.named), share(self.init_clauses), share(self.goal_clauses)]).unwrap_or(0.0)
    }

    /// A(y) ∈ [0, 1]: the F1 of P and R; 0 for a gamed spec.
    pub fn score(&self) -> f32 {
        let (p, r) = (self.precision(), self.recall());
        if self.gamed || p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

/// A(y) of `spec` for `task_text`, with its counts. Only the problem's facts are read;
/// the domain matters for the gaming check alone. `verdict` is the verifier's (its plan
/// tells an empty one). An error names the file that does not parse.
pub fn agreement(task_text: &str, spec: &Spec, verdict: &Verdict) -> Result<Agreement> {
    let problem = pddl::parse_problem(&spec.problem).map_err(|e| format!("problem: {e}"))?;
    let gamed = findings(task_text, spec, verdict)?
        .iter()
        .any(|f| matches!(f.check, GamingCheck::GoalAtInit | GamingCheck::EmptyPlan));
    let text = Text::read(task_text);
    let r = Reading::of(&text, &problem);

    let agree = |facts: &[FactReading]| (facts.len(), facts.iter().filter(|f| f.said).count());
    let clauses = |goal: bool| {
        let mine = || text.clauses.iter().zip(&r.covered).filter(move |(c, _)| c.goal == goal && c.names_object);
        (mine().count(), mine().filter(|(_, &cov)| cov).count())
    };
    let declared = r.objects.iter().filter(|o| o.mention.is_some()).count();
    Ok(Agreement {
        objects: (r.objects.len(), declared),
        init: agree(&r.init),
        goal: agree(&r.goal),
        named: (text.mentions.len(), declared),
        init_clauses: clauses(false),
        goal_clauses: clauses(true),
        gamed,
    })
}

// ---------------------------------------------------------------------------
// The reward.
// ---------------------------------------------------------------------------

/// The reward: the paper's rewards around Φ(y) = b(y) · A(y).
#[derive(Default)]
pub struct TextAgreement;

/// Φ(y) = b(y) · A(y).
fn phi(task_text: &str, step: &Step) -> Result<f32> {
    match &step.spec {
        Some(spec) if step.verdict.solved => Ok(agreement(task_text, spec, &step.verdict)?.score()),
        _ => Ok(0.0),
    }
}

impl Reward for TextAgreement {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
        if !(0.0..=1.0).contains(&ep.judge_score) || ep.judge_score.is_nan() {
            return Err(format!("judge score {} is outside [0, 1]", ep.judge_score));
        }
        let w = &ep.settings;
        let phi: Vec<f32> = ep.steps.iter().map(|s| phi(&ep.task_text, s)).collect::<Result<_>>()?;
        let actor = phi.first().copied().unwrap_or(0.0) + w.lambda_judge * ep.judge_score;
        let repairs = ep.repairs();
        let editor = if repairs == 0 { 0.0 } else { phi.last().copied().unwrap_or(0.0) - w.repair_cost * repairs as f32 };
        let editor_steps: Vec<f32> = phi.windows(2).map(|p| p[1] - p[0] - w.repair_cost).collect();
        let judge = paper_judge_reward(ep);
        Ok(Rewards { actor, editor, judge, editor_steps: Some(editor_steps) })
    }
}

onebrain_sdk::export_reward!(TextAgreement);


#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_sdk::pddl::{Literal, Problem, TypedName};
    use text_match::COLOURS;
    use onebrain_sdk::{DomainAdapter, Outcome, RewardSettings, StepRole};

    const BLOCKSWORLD: &str = include_str!("../../blocksworld/domain.pddl");
    const GRIPPER: &str = include_str!("../../gripper/domain.pddl");

    /// Solved with a plan of one step (an empty plan is the gamed case).
    fn solved() -> Verdict {
        Verdict::new(Outcome::Solved, vec!["(unstack a b)".into()], vec![])
    }

    fn spec(domain: &str, problem: &str) -> Spec {
        Spec { domain: domain.into(), problem: problem.into() }
    }

    fn score(text: &str, s: &Spec) -> f32 {
        agreement(text, s, &solved()).unwrap().score()
    }

    fn bw_score(text: &str, problem: &str) -> f32 {
        score(text, &spec(BLOCKSWORLD, problem))
    }

    /// A BlocksWorld problem in the layout of PlanBench's instance files.
    fn bw(objects: &str, init: &str, goal: &str) -> String {
        format!("(define (problem BW-rand-4)\n(:domain blocksworld-4ops)\n(:objects {objects})\n(:init\n{init}\n)\n(:goal\n(and\n{goal})\n)\n)\n")
    }
    /// Red on blue, yellow on orange; the goal: blue on yellow, orange on red.
    const INIT: &str = "(handempty)\n(ontable b)\n(on a b)\n(clear a)\n(ontable c)\n(on d c)\n(clear d)";
    const GOAL: &str = "(on b d)\n(on c a)";

    /// PlanBench's own wording of `problem`, by the blocksworld plugin.
    fn said(problem: &str) -> String {
        blocksworld::Blocksworld.describe(problem).unwrap()
    }

    /// `problem` with PlanBench's colours for its letters a-d.
    fn in_colours(problem: &str) -> String {
        let mut p = pddl::parse_problem(problem).unwrap();
        let colour = |n: &mut String| {
            if let [c @ b'a'..=b'd'] = n.as_bytes() {
                *n = COLOURS[(c - b'a') as usize].to_string();
            }
        };
        p.objects.iter_mut().for_each(|o| colour(&mut o.name));
        p.init.iter_mut().chain(p.goal.iter_mut().map(|l| &mut l.atom)).for_each(|a| {
            a.args.iter_mut().for_each(|t| colour(&mut t.name));
        });
        p.to_string()
    }

    fn edit(problem: &str, f: impl FnOnce(&mut Problem)) -> String {
        let mut p = pddl::parse_problem(problem).unwrap();
        f(&mut p);
        p.to_string()
    }

    /// The goal replaced by the initial state: solvable by the empty plan.
    fn goal_at_init(p: &mut Problem) {
        p.goal = p.init.iter().map(|a| Literal { positive: true, atom: a.clone(), span: a.span }).collect();
    }

    #[test]
    fn a_faithful_spec_agrees_fully_in_either_naming() {
        let faithful = bw("a b c d ", INIT, GOAL);
        let text = said(&faithful);
        assert_eq!(bw_score(&text, &faithful), 1.0, "PlanBench's letters");
        assert_eq!(bw_score(&text, &in_colours(&faithful)), 1.0, "the text's colours");
        let split = in_colours(&faithful).replace("red", "red_block").replace("blue", "blue-block");
        assert_eq!(bw_score(&text, &split), 1.0, "{split}");
        // Facts in another order and repeated say the same.
        let shuffled = bw("d c b a a ", &format!("(clear d)\n(on a b)\n{INIT}"), "(on c a)\n(on b d)\n(on c a)");
        assert_eq!(bw_score(&text, &shuffled), 1.0);
    }

    #[test]
    fn each_unfaithful_spec_agrees_less() {
        let faithful = bw("a b c d ", INIT, GOAL);
        let text = said(&faithful);
        let cases = [
            ("weakened goal", bw("a b c d ", INIT, "(on c a)")),
            ("invented object", bw("a b c d e ", &format!("{INIT}\n(ontable e)\n(clear e)"), GOAL)),
            ("invented fact", bw("a b c d ", &format!("{INIT}\n(clear b)"), GOAL)),
            ("missing object", bw("a b c ", "(handempty)\n(ontable b)\n(on a b)\n(clear a)\n(ontable c)\n(clear c)", "(on c a)")),
            ("undeclared object", bw("a b c ", INIT, GOAL)),
            ("goal arguments swapped", bw("a b c d ", INIT, "(on d b)\n(on c a)")),
            ("goal of initial facts", bw("a b c d ", INIT, "(on a b)\n(on c a)")),
            ("the table as a block", bw("a b c d table ", &format!("{INIT}\n(on b table)"), GOAL)),
        ];
        for (what, problem) in cases {
            let got = bw_score(&text, &in_colours(&problem));
            eprintln!("{what}: A = {got:.3}");
            assert!(got < 1.0, "{what}: A = {got}");
        }
    }

    #[test]
    fn a_goal_that_already_holds_scores_zero() {
        let faithful = bw("a b c d ", INIT, GOAL);
        let text = said(&faithful);
        let gamed = edit(&faithful, goal_at_init);
        let got = agreement(&text, &spec(BLOCKSWORLD, &gamed), &solved()).unwrap();
        assert!(got.gamed && got.score() == 0.0, "{got:?}");
        // The first goal fact alone, also true at the start: what the base model writes.
        assert_eq!(bw_score(&text, &bw("a b c d ", INIT, "(on a b)")), 0.0);
        // Solved by the empty plan, whatever the goal says.
        let empty = Verdict::new(Outcome::Solved, vec![], vec![]);
        assert_eq!(agreement(&text, &spec(BLOCKSWORLD, &faithful), &empty).unwrap().score(), 0.0);
    }

    #[test]
    fn a_spec_for_another_task_scores_low() {
        let text = said(&bw("a b c d ", INIT, GOAL));
        // The same four blocks, all on the table, to be stacked in one tower.
        let other = bw(
            "a b c d ",
            "(handempty)\n(ontable a)\n(ontable b)\n(ontable c)\n(ontable d)\n(clear a)\n(clear b)\n(clear c)\n(clear d)",
            "(on a b)\n(on b c)\n(on c d)",
        );
        // The four blocks and what is true of them at the start still agree: about half.
        let got = bw_score(&text, &other);
        assert!(got < 0.6, "A = {got}");
    }

    /// The reference of every task the four domain plugins generate, worded by the plugin.
    fn generated() -> Vec<(&'static str, String, Spec)> {
        let plugins: [(&str, &dyn DomainAdapter); 4] = [
            ("blocksworld", &blocksworld::Blocksworld),
            ("mystery-blocksworld", &mystery_blocksworld::Mystery),
            ("logistics", &logistics::Logistics),
            ("gripper", &gripper::Gripper),
        ];
        let mut out = Vec::new();
        for (name, plugin) in plugins {
            for size in 2..=6 {
                for seed in 0..8 {
                    let t = plugin.generate(seed, size).unwrap();
                    out.push((name, t.text, t.reference.unwrap()));
                }
            }
        }
        out
    }

    #[test]
    fn every_generated_reference_agrees_and_its_gamed_twins_do_not() {
        let tasks = generated();
        for (i, (name, text, reference)) in tasks.iter().enumerate() {
            let full = score(text, reference);
            // Gripper's (at-robby room1) is never said: 1 of ~12 initial facts.
            let least = if *name == "gripper" { 0.98 } else { 1.0 };
            assert!(full >= least, "{name}: A = {full}\n{text}\n{}", reference.problem);

            let with = |f: &dyn Fn(&mut Problem)| score(text, &Spec { problem: edit(&reference.problem, f), ..reference.clone() });
            assert_eq!(with(&goal_at_init), 0.0, "{name}: goal at init");
            let invented = |p: &mut Problem| {
                let o = p.objects[0].clone();
                p.objects.push(TypedName { name: "widget7".into(), ..o });
            };
            assert!(with(&invented) < full, "{name}: invented object");
            let missing = |p: &mut Problem| {
                p.objects.pop();
            };
            assert!(with(&missing) < full, "{name}: missing object");
            let weakened = |p: &mut Problem| {
                p.goal.truncate(1);
            };
            if pddl::parse_problem(&reference.problem).unwrap().goal.len() > 1 {
                assert!(with(&weakened) < full, "{name}: weakened goal");
            }
            // The next task of the same domain: never as good.
            let (other_name, other_text, other) = &tasks[(i + 1) % tasks.len()];
            if other_name == name && other_text != text {
                assert!(score(text, other) < full, "{name}: another task\n{text}\n{}", other.problem);
            }
        }
    }

    #[test]
    fn planetarium_wording_carrying_and_arm() {
        let text = "You have 2 rooms.\nYou have 1 balls.\nYou have 2 grippers.\ngripper1 is free.\ngripper2 is free.\n\
                    ball1 is at room1.\nYour goal is to have the following:\nGripper gripper1 should be carrying ball1.";
        let problem = |goal: &str| {
            format!(
                "(define (problem p) (:domain gripper) (:objects ball1 gripper1 gripper2 room1 room2)
                  (:init (at ball1 room1) (at-robby room1) (ball ball1) (free gripper1) (free gripper2)
                         (gripper gripper1) (gripper gripper2) (room room1) (room room2))
                  (:goal (and {goal})))"
            )
        };
        let faithful = score(text, &spec(GRIPPER, &problem("(carry ball1 gripper1)")));
        assert!(faithful > 0.98, "A = {faithful}");
        let other_gripper = score(text, &spec(GRIPPER, &problem("(carry ball1 gripper2)")));
        assert!(other_gripper < 0.9, "A = {other_gripper}");
    }

    #[test]
    fn every_planbench_reference_agrees_fully_and_other_tasks_do_not() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
            let rows = text_match::planbench::rows(&data, folder);
            assert!(rows.len() >= 285, "{folder}: {} rows", rows.len());
            let mut others = Vec::new();
            for (i, (text, reference)) in rows.iter().enumerate() {
                let got = agreement(text, reference, &solved()).unwrap();
                assert_eq!(got.score(), 1.0, "{folder}: {got:?}\n{text}\n{}", reference.problem);
                let gamed = Spec { problem: edit(&reference.problem, goal_at_init), ..reference.clone() };
                assert_eq!(score(text, &gamed), 0.0);
                let (other_text, other) = &rows[(i + 1) % rows.len()];
                if other_text != text {
                    let a = score(text, other);
                    assert!(a < 1.0, "{folder}: row {i} agrees with row {}'s spec", i + 1);
                    others.push(a);
                }
            }
            let mean = others.iter().sum::<f32>() / others.len() as f32;
            eprintln!("{folder}: {} references at A = 1; the next row's spec: mean A = {mean:.3}", rows.len());
            assert!(mean < 0.7, "{folder}: another task's spec scores {mean} on average");
        }
    }

    // The reward: the paper's shape around Φ = b · A.

    fn episode(text: &str, steps: Vec<Step>, judge_score: f32) -> FinishedEpisode {
        FinishedEpisode { task_text: text.into(), steps, judge_score, ..Default::default() }
    }

    #[test]
    fn rewards_have_the_papers_shape() {
        let faithful = bw("a b c d ", INIT, GOAL);
        let text = said(&faithful);
        let weak = bw("a b c d ", INIT, "(on c a)");
        let a_weak = bw_score(&text, &weak);
        let step = |role, problem: &str, verdict: Verdict| Step::new(role, Some(spec(BLOCKSWORLD, problem)), verdict);
        let unsolved = Verdict::new(Outcome::Unsolvable, vec![], vec![]);
        let close = |x: f32, y: f32| (x - y).abs() < 1e-6;
        let (lambda, beta) = (RewardSettings::default().lambda_judge, RewardSettings::default().repair_cost);

        // R_A = A + λ_J · s_J; no repair, no Editor reward.
        let r = TextAgreement.rewards(&episode(&text, vec![step(StepRole::Actor, &weak, solved())], 0.8)).unwrap();
        assert!(close(r.actor, a_weak + lambda * 0.8) && r.editor == 0.0 && r.judge == 1.0, "{r:?}");
        assert_eq!(r.editor_steps, Some(vec![]));

        // An unsolved spec earns nothing, however faithful (b = 0).
        let r = TextAgreement.rewards(&episode(&text, vec![step(StepRole::Actor, &faithful, unsolved.clone())], 0.2)).unwrap();
        assert!(close(r.actor, lambda * 0.2) && r.judge == 0.5, "{r:?}");

        // Two repairs: a weakened goal, then the faithful spec. r_t = Φ_t − Φ_{t−1} − β, summing to R_E.
        let ep = episode(
            &text,
            vec![
                step(StepRole::Actor, &faithful, unsolved),
                step(StepRole::Editor, &weak, solved()),
                step(StepRole::Editor, &faithful, solved()),
            ],
            0.6,
        );
        let r = TextAgreement.rewards(&ep).unwrap();
        let steps = r.editor_steps.clone().unwrap();
        assert!(close(steps[0], a_weak - beta) && close(steps[1], 1.0 - a_weak - beta), "{r:?}");
        assert!(close(r.editor, 1.0 - 2.0 * beta) && close(steps.iter().sum::<f32>(), r.editor), "{r:?}");
        assert!(close(r.actor, lambda * 0.6) && r.judge == -1.0, "{r:?}");

        // No spec at all (the host's smoke call): nothing to agree with, no error.
        let r = TextAgreement.rewards(&crate::tests::episode("", vec![Step::new(StepRole::Actor, None, solved())], 0.8)).unwrap();
        assert!(close(r.actor, lambda * 0.8), "{r:?}");
    }

    #[test]
    fn a_judge_score_outside_zero_one_is_an_error() {
        for bad in [f32::NAN, -0.1, 1.5] {
            assert!(TextAgreement.rewards(&episode("x", vec![], bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_solved_spec_that_does_not_parse_is_an_error() {
        let steps = vec![Step::new(StepRole::Actor, Some(spec(BLOCKSWORLD, "(define (problem")), solved())];
        let err = TextAgreement.rewards(&episode("x", steps, 0.5)).unwrap_err();
        assert!(err.starts_with("problem:"), "{err}");
    }
}


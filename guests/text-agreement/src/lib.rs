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
//!   object's kind as the text names it (`(truck t0)` for `truck_0`; Gripper's
//!   `(ball ball1)`, `(gripper gripper1)`, and `(room room3)` where the text counts three
//!   rooms); any other fact the text does not state never agrees;
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
//! A(y) = 0 outright, too, when an initial fact **contradicts** the text: the text does
//! not state it, and it and an atom the text's initial part does state fall in one
//! instance of a mutex group of the domain, so the two cannot both hold (Gripper:
//! `(carry ball1 gripper1)` beside "gripper1 is free" or "ball1 is at room1"; BlocksWorld:
//! `(holding a)` beside "the hand is empty", `(ontable a)` or `(clear b)` beside "a is on
//! top of b"; Logistics: a package at two places, or in a truck and at a place). The
//! groups are the domain's own, proved from the spec domain's action schemas by
//! `onebrain_faithful::mutex_groups` (the groups the decoder's guard holds an initial state
//! to; no per-domain table), and kept per domain text for the instance's life. The stated
//! atom must be over objects the text names, each clause read as the most specific
//! predicate it states ("location_0_0 is in the city city_0" is `in-city`, not `in`); a
//! text with no goal part is not checked, since any clause may speak of the goal. A
//! contradiction is rated as the gamed goal is, not as a penalty: an unstated fact costs
//! about 1/(3n) of precision whether or not the text rules it out, so a trained policy's
//! three carry facts appended to a correct Gripper state cost 0.03 (A = 0.957 against the
//! faithful 0.987), and a state the text rules out is not the task's state however much
//! else agrees. An unstated fact the text does not rule out (`(at-robby room2)` where the
//! text never places the robot, a fact about an invented block) costs precision only.
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
//! What it cannot see: facts the text leaves unsaid never agree, which costs every spec
//! that states them the same: Gripper's `(at-robby room1)`, since no explicit Planetarium
//! text or generated one places the robot (one that says "the robby is at room1" is
//! matched; Planetarium's abstract "the robby is in the first room" is not, ordinals are
//! not read). An abstract text ("gather all balls into one room") names nothing and
//! scores 0; a fact under a predicate the text words differently from its name and from
//! text-match's synonyms agrees only if the text happens to use the predicate's own words,
//! and a contradiction is seen only through such wording too. Contradictions come from
//! the spec's own domain: a spec that also rewrites the domain so that an action no longer
//! deletes what it replaces (`pick` keeping `free`) proves fewer groups, and the initial
//! facts those groups would rule out pass unseen (the schema checks of the faithfulness
//! checker see such a domain). Goal facts are not checked against one another.
//!
//! Measured (the tests below and host/runtime/tests/text_agreement.rs): every PlanBench
//! reference (1,485 rows, three domains) scores A = 1 with nothing contradicted, and so
//! does every explicit Planetarium BlocksWorld reference sampled (every 10th); Gripper's
//! score 0.98-1 (the unsaid `at-robby`). The trained Gripper policy's answer, a correct
//! initial state plus `(carry ball1 gripper1) (carry ball2 gripper1) (carry ball3
//! gripper2)`, scored 0.957 (the faithful spec 0.987) and now scores 0; so do
//! BlocksWorld's `(holding a)` beside `(handempty)` (0.979 before) and Logistics' package
//! at a second place or in a truck (0.995 before). The next PlanBench row's reference
//! scored 0.536 on average on BlocksWorld and 0.661 on Logistics; now 0.017 (586 of 600
//! contradict their text) and 0.131 (244 of 285).
//!
//! Tests run natively: `cargo test --manifest-path guests/Cargo.toml -p text-agreement`
//! (PlanBench is read in place from `../shared/data` when it is there).

use std::sync::{Arc, Mutex};

use onebrain_faithful::{mutex_groups, GroupPart, MutexGroup};
use onebrain_sdk::gaming::{findings, GamingCheck};
use onebrain_sdk::pddl;
use text_match::{alias, cue, states, FactReading, Reading, Text};
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
    /// Initial facts that cannot hold beside a fact the text states: A = 0.
    pub contradicted: Vec<Contradiction>,
}

/// An initial fact of the spec that the text rules out: it and a fact the text's initial
/// part states fall in one instance of a mutex group of the domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Contradiction {
    /// The spec's fact, as written: `(carry ball1 gripper1)`.
    pub fact: String,
    /// One fact the text states that it excludes, in the text's names: `(free gripper1)`.
    pub stated: String,
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

    /// A(y) ∈ [0, 1]: the F1 of P and R; 0 for a gamed spec or one the text contradicts.
    pub fn score(&self) -> f32 {
        let (p, r) = (self.precision(), self.recall());
        if self.gamed || !self.contradicted.is_empty() || p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

/// A(y) of `spec` for `task_text`, with its counts. The problem's facts are read against
/// the text; the domain gives the gaming check and the mutex groups that tell a contradicted
/// fact. `verdict` is the verifier's (its plan tells an empty one). An error names the file
/// that does not parse.
pub fn agreement(task_text: &str, spec: &Spec, verdict: &Verdict) -> Result<Agreement> {
    let domain = pddl::parse_domain(&spec.domain).map_err(|e| format!("domain: {e}"))?;
    let problem = pddl::parse_problem(&spec.problem).map_err(|e| format!("problem: {e}"))?;
    let gamed = findings(task_text, spec, verdict)?
        .iter()
        .any(|f| matches!(f.check, GamingCheck::GoalAtInit | GamingCheck::EmptyPlan));
    let text = Text::read(task_text);
    let r = Reading::of(&text, &problem);
    let contradicted = contradictions(&text, &r, &domain, &groups(&spec.domain, &domain));

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
        contradicted,
    })
}

// ---------------------------------------------------------------------------
// Contradiction.
// ---------------------------------------------------------------------------

/// Domains whose groups are kept between calls. A run trains on a handful (the bundled
/// four); proving a domain's groups grounds a probe task (Logistics: about 2,500 atoms), work
/// the instance, reused across episodes, need not redo for every spec.
const CACHED_DOMAINS: usize = 8;

/// The mutex groups of `domain` (its text is the cache key), proved from its action schemas
/// by `onebrain_faithful::mutex_groups`: none when it cannot be probed.
fn groups(text: &str, domain: &pddl::Domain) -> Arc<Vec<MutexGroup>> {
    static CACHE: Mutex<Vec<(String, Arc<Vec<MutexGroup>>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, g)) = cache.iter().find(|(t, _)| t == text) {
        return g.clone();
    }
    let g = Arc::new(mutex_groups(domain));
    if cache.len() >= CACHED_DOMAINS {
        cache.remove(0);
    }
    cache.push((text.to_string(), g.clone()));
    g
}

/// The arguments a part's predicate takes: the group's parameters and the counted one.
fn arity(p: &GroupPart) -> usize {
    p.params.len() + usize::from(p.counted.is_some())
}

/// The spec's initial facts that the text rules out. A fact the text does not state
/// contradicts it when some group instance the fact falls in (its values at the part's
/// parameter positions name objects of the text) holds another atom, over objects the text
/// names, that a clause of the initial part states. At most one atom of an instance holds in
/// any state the domain can be in, so the two cannot both hold; a fact the text itself
/// states is never the contradicting one.
///
/// A clause is read as the most specific predicate it states: "location_0_0 is in the city
/// city_0" holds the words of `in` as well as `in-city`'s, and is `in-city` only. A text
/// with no goal part (no "goal" anywhere) is not checked: any of its clauses may describe
/// the goal state, which a correct initial fact may well exclude.
fn contradictions(text: &Text, r: &Reading, domain: &pddl::Domain, groups: &[MutexGroup]) -> Vec<Contradiction> {
    if !text.has_parts {
        return Vec::new();
    }
    let predicates: Vec<String> = domain.predicates.iter().map(|p| p.name.to_ascii_lowercase()).collect();
    let stated = |pred: &str, args: &[usize]| {
        let words: Vec<&str> = args.iter().map(|&i| text.mentions[i].name.as_str()).collect();
        let mine = cue(pred);
        let wider: Vec<&String> = predicates
            .iter()
            .filter(|q| q.as_str() != pred && {
                let theirs = cue(q);
                theirs.len() > mine.len() && mine.iter().all(|w| theirs.contains(w))
            })
            .collect();
        text.clauses.iter().any(|c| !c.goal && states(c, pred, &words) && !wider.iter().any(|q| states(c, q, &words)))
    };
    // The named object an argument stands for, as the reading matched it.
    let named = |arg: &str| {
        let arg = arg.to_ascii_lowercase();
        match r.objects.iter().find(|o| o.name == arg) {
            Some(o) => o.mention,
            None => text.mention(&arg).or_else(|| alias(&arg, text)),
        }
    };
    let mut out = Vec::new();
    for f in r.init.iter().filter(|f| !f.said) {
        let pred = f.atom.predicate.to_ascii_lowercase();
        let args: Vec<Option<usize>> = f.atom.args.iter().map(|t| named(&t.name)).collect();
        let found = groups.iter().find_map(|g| {
            g.parts.iter().filter(|p| p.predicate == pred && arity(p) == args.len()).find_map(|p| {
                let values: Vec<usize> = p.params.iter().map(|&i| args[i]).collect::<Option<_>>()?;
                g.parts.iter().filter(|q| q.params.len() == values.len()).find_map(|q| {
                    // The instance's atoms over `q`: its parameters fixed, the counted position
                    // over every named object.
                    let counted: Vec<Option<usize>> = match q.counted {
                        Some(_) => (0..text.mentions.len()).map(Some).collect(),
                        None => vec![None],
                    };
                    counted.into_iter().find_map(|m| {
                        let mut atom = vec![0; arity(q)];
                        q.params.iter().zip(&values).for_each(|(&i, &v)| atom[i] = v);
                        if let (Some(c), Some(m)) = (q.counted, m) {
                            atom[c] = m;
                        }
                        let itself = q.predicate == pred && atom.iter().map(|&i| Some(i)).eq(args.iter().copied());
                        (!itself && stated(&q.predicate, &atom)).then(|| {
                            let names: String = atom.iter().map(|&i| format!(" {}", text.mentions[i].name)).collect();
                            format!("({}{names})", q.predicate)
                        })
                    })
                })
            })
        });
        if let Some(stated) = found {
            out.push(Contradiction { fact: f.atom.to_string(), stated });
        }
    }
    out
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
            let (mut others, mut before, mut contradicted) = (Vec::new(), Vec::new(), 0);
            for (i, (text, reference)) in rows.iter().enumerate() {
                let got = agreement(text, reference, &solved()).unwrap();
                assert_eq!(got.score(), 1.0, "{folder}: {got:?}\n{text}\n{}", reference.problem);
                let gamed = Spec { problem: edit(&reference.problem, goal_at_init), ..reference.clone() };
                assert_eq!(score(text, &gamed), 0.0);
                assert!(got.contradicted.is_empty(), "{folder}: {got:?}");
                let (other_text, other) = &rows[(i + 1) % rows.len()];
                if other_text != text {
                    let got = agreement(text, other, &solved()).unwrap();
                    assert!(got.score() < 1.0, "{folder}: row {i} agrees with row {}'s spec", i + 1);
                    others.push(got.score());
                    before.push(uncontradicted(&got));
                    contradicted += usize::from(!got.contradicted.is_empty());
                }
            }
            let mean = others.iter().sum::<f32>() / others.len() as f32;
            let was = before.iter().sum::<f32>() / before.len() as f32;
            eprintln!(
                "{folder}: {} references at A = 1; the next row's spec: mean A = {mean:.3} (without the contradiction rule {was:.3}), {contradicted} of {} contradicted",
                rows.len(),
                others.len()
            );
            assert!(mean < 0.7, "{folder}: another task's spec scores {mean} on average");
        }
    }

    // Contradicted initial facts (the trained Gripper policy's slack) and implied ones.

    /// `problem` with `extra` facts appended to its initial state.
    fn with_init(problem: &str, extra: &str) -> String {
        assert!(problem.contains("(:init"), "{problem}");
        problem.replacen("(:init", &format!("(:init {extra} "), 1)
    }

    /// A without its contradiction rule: what the reward paid before it.
    fn uncontradicted(got: &Agreement) -> f32 {
        Agreement { contradicted: vec![], ..got.clone() }.score()
    }

    #[test]
    fn carry_facts_appended_to_a_correct_gripper_init_score_zero() {
        // The trained policy's answer: both grippers stated free, all three balls in rooms.
        let task = gripper::Gripper.generate(3, 3).unwrap();
        let reference = task.reference.unwrap();
        assert!(task.text.contains("gripper1 is free.\ngripper2 is free.\n"), "{}", task.text);
        let faithful = agreement(&task.text, &reference, &solved()).unwrap();
        assert!(faithful.score() >= 0.98 && faithful.contradicted.is_empty(), "{faithful:?}");

        let carry = "(carry ball1 gripper1) (carry ball2 gripper1) (carry ball3 gripper2)";
        let gamed = Spec { problem: with_init(&reference.problem, carry), ..reference.clone() };
        let got = agreement(&task.text, &gamed, &solved()).unwrap();
        eprintln!("gripper: faithful A = {:.3}; with {carry}: A = {} (before: {:.3})", faithful.score(), got.score(), uncontradicted(&got));
        assert_eq!(got.score(), 0.0, "{got:?}");
        let facts: Vec<&str> = got.contradicted.iter().map(|c| c.fact.as_str()).collect();
        assert_eq!(facts, ["(carry ball1 gripper1)", "(carry ball2 gripper1)", "(carry ball3 gripper2)"]);
        // Each one alone contradicts the text twice: its gripper is free, its ball is in a room.
        let one = Spec { problem: with_init(&reference.problem, "(carry ball2 gripper2)"), ..reference.clone() };
        let got = agreement(&task.text, &one, &solved()).unwrap();
        assert_eq!(got.score(), 0.0, "{got:?}");
        assert!(["(free gripper2)", "(at ball2 room1)", "(at ball2 room2)", "(at ball2 room3)"].contains(&got.contradicted[0].stated.as_str()), "{got:?}");
        // A ball in a second room, robby in two rooms when the text puts it in one.
        let at = pddl::parse_problem(&reference.problem).unwrap();
        let room = at.init.iter().find(|a| a.predicate == "at" && a.args[0].name == "ball1").unwrap().args[1].name.clone();
        let other = if room == "room1" { "room2" } else { "room1" };
        let moved = Spec { problem: with_init(&reference.problem, &format!("(at ball1 {other})")), ..reference.clone() };
        assert_eq!(score(&task.text, &moved), 0.0);
        let robby = "You have 2 rooms.\nYou have 1 balls.\nYou have 2 grippers.\ngripper1 is free.\ngripper2 is free.\n\
                     ball1 is at room1.\nThe robby is at room1.\nYour goal is to have the following:\nball1 should be at room2.";
        let p = |init: &str| {
            format!(
                "(define (problem p) (:domain gripper) (:objects ball1 gripper1 gripper2 room1 room2)
                  (:init (at ball1 room1) (ball ball1) (free gripper1) (free gripper2) (gripper gripper1)
                         (gripper gripper2) (room room1) (room room2) {init})
                  (:goal (and (at ball1 room2))))"
            )
        };
        assert_eq!(score(robby, &spec(GRIPPER, &p("(at-robby room1)"))), 1.0, "the robot's position as worded");
        assert_eq!(score(robby, &spec(GRIPPER, &p("(at-robby room1) (at-robby room2)"))), 0.0);
    }

    #[test]
    fn holding_a_block_beside_an_empty_hand_scores_zero() {
        let faithful = bw("a b c d ", INIT, GOAL);
        let text = said(&faithful);
        // Each with the facts the text states that rule it out (one is reported).
        let cases: [(&str, &[&str]); 4] = [
            // Holding red: the hand is not empty, red is not clear, nor on blue.
            ("(holding a)", &["(handempty)", "(clear red)", "(on red blue)"]),
            // Red is on blue: not on the table too, nor on yellow, and blue is not clear.
            ("(ontable a)", &["(on red blue)"]),
            ("(on a d)", &["(on red blue)", "(clear yellow)"]),
            ("(clear b)", &["(on red blue)"]),
        ];
        for (fact, against) in cases {
            let problem = in_colours(&bw("a b c d ", &format!("{INIT}\n{fact}"), GOAL));
            let got = agreement(&text, &spec(BLOCKSWORLD, &problem), &solved()).unwrap();
            eprintln!("blocksworld: {fact} appended: A = {} (before: {:.3}), {:?}", got.score(), uncontradicted(&got), got.contradicted);
            assert_eq!(got.score(), 0.0, "{fact}: {got:?}");
            assert!(matches!(&got.contradicted[..], [c] if against.contains(&c.stated.as_str())), "{fact}: {got:?}");
        }
        // Holding a block in place of the empty hand contradicts it too, though the spec
        // no longer states (handempty).
        let problem = in_colours(&bw("a b c d ", &INIT.replace("(handempty)", "(holding b)"), GOAL));
        let got = agreement(&text, &spec(BLOCKSWORLD, &problem), &solved()).unwrap();
        assert_eq!(got.score(), 0.0, "{got:?}");
    }

    /// A generated Logistics task, its reference, and where package p0 starts.
    fn logistics_task() -> (String, Spec, String, Vec<String>) {
        let task = logistics::Logistics.generate(1, 2).unwrap();
        let reference = task.reference.unwrap();
        let p = pddl::parse_problem(&reference.problem).unwrap();
        let from = p.init.iter().find(|a| a.predicate == "at" && a.args[0].name == "p0").unwrap().args[1].name.clone();
        let locations = p.init.iter().filter(|a| a.predicate.eq_ignore_ascii_case("location")).map(|a| a.args[0].name.clone()).collect();
        (task.text, reference, from, locations)
    }

    #[test]
    fn a_package_in_two_places_scores_zero() {
        let (text, reference, from, locations) = logistics_task();
        assert_eq!(score(&text, &reference), 1.0);
        let elsewhere = locations.iter().find(|l| **l != from).unwrap();
        for fact in [format!("(at p0 {elsewhere})"), "(in p0 t0)".into(), "(in p0 a0)".into()] {
            let gamed = Spec { problem: with_init(&reference.problem, &fact), ..reference.clone() };
            let got = agreement(&text, &gamed, &solved()).unwrap();
            eprintln!("logistics: {fact} appended: A = {} (before: {:.3})", got.score(), uncontradicted(&got));
            assert_eq!(got.score(), 0.0, "{fact}: {got:?}");
            assert!(got.contradicted[0].stated.starts_with("(at package_0 location_"), "{got:?}");
        }
    }

    #[test]
    fn a_compatible_unstated_fact_is_not_a_contradiction() {
        // Gripper: the text never says where robby is; any one room is compatible with it.
        let task = gripper::Gripper.generate(3, 3).unwrap();
        let reference = task.reference.unwrap();
        let moved = Spec { problem: reference.problem.replace("(at-robby room1)", "(at-robby room2)"), ..reference.clone() };
        let got = agreement(&task.text, &moved, &solved()).unwrap();
        assert!(got.contradicted.is_empty() && got.score() >= 0.98, "{got:?}");
        // BlocksWorld: a fifth block the text never names, on the table and clear.
        let text = said(&bw("a b c d ", INIT, GOAL));
        let invented = in_colours(&bw("a b c d e ", &format!("{INIT}\n(ontable e)\n(clear e)"), GOAL));
        let got = agreement(&text, &spec(BLOCKSWORLD, &invented), &solved()).unwrap();
        assert!(got.contradicted.is_empty() && got.score() > 0.9, "{got:?}");
        // Logistics: "location_0_0 is in the city city_0" states `in-city`, not `in`, so a
        // (nonsense) place for a location contradicts nothing; nor does an unstated static fact.
        let (text, reference, _, locations) = logistics_task();
        for fact in [format!("(at {} {})", locations[0], locations[1]), format!("(in-city {} c1)", locations[0])] {
            let extra = Spec { problem: with_init(&reference.problem, &fact), ..reference.clone() };
            let got = agreement(&text, &extra, &solved()).unwrap();
            assert!(got.contradicted.is_empty() && got.score() > 0.9 && got.score() < 1.0, "{fact}: {got:?}");
        }
    }

    #[test]
    fn a_text_without_a_goal_part_is_not_checked() {
        // Its clauses may speak of either state: "ball1 is at room2" may be where ball1 ends.
        let text = "You have 2 rooms.\nYou have 1 balls.\ngripper1 is free.\nball1 is at room1.\nball1 is at room2.";
        let problem = "(define (problem p) (:domain gripper) (:objects ball1 gripper1 room1 room2)
            (:init (at ball1 room1) (at-robby room1) (ball ball1) (free gripper1) (gripper gripper1) (room room1) (room room2))
            (:goal (and (at ball1 room2))))";
        let got = agreement(text, &spec(GRIPPER, problem), &solved()).unwrap();
        // Only the clauses nothing states cost recall: A = 0.78.
        assert!(got.contradicted.is_empty() && got.score() > 0.7, "{got:?}");
    }

    #[test]
    fn type_facts_agree_as_the_text_names_their_objects() {
        // Rooms 1-3 counted, room3 never named: still a room.
        let text = "You have 3 rooms.\nYou have 2 balls.\nYou have 2 grippers.\ngripper1 is free.\ngripper2 is free.\n\
                    ball1 is at room1.\nball2 is at room2.\nYour goal is to have the following:\nball1 should be at room3.";
        let problem = pddl::parse_problem(
            "(define (problem p) (:domain gripper) (:objects ball1 ball2 gripper1 gripper2 room1 room2 room3)
               (:init (ball ball1) (ball ball2) (gripper gripper1) (gripper gripper2) (room room1) (room room2)
                      (room room3) (room ball1) (gripper room1))
               (:goal (at ball1 room3)))",
        )
        .unwrap();
        let r = Reading::of(&Text::read(text), &problem);
        let said: Vec<(String, bool)> = r.init.iter().map(|f| (f.atom.to_string(), f.said)).collect();
        let want = |f: &str, s: bool| (f.to_string(), s);
        assert_eq!(
            said,
            [
                want("(ball ball1)", true),
                want("(ball ball2)", true),
                want("(gripper gripper1)", true),
                want("(gripper gripper2)", true),
                want("(room room1)", true),
                want("(room room2)", true),
                want("(room room3)", true),
                // The wrong kind is not implied.
                want("(room ball1)", false),
                want("(gripper room1)", false),
            ]
        );
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


//! Rewards for agreeing with the task's own text. No gold PDDL: the only evidence
//! is the statement the model read. A spec is read back as facts (its objects, its
//! initial facts, its goal facts) and each fact is looked for in the text, the way
//! a domain's `describe` would have worded it:
//!
//! - an **object** agrees when it names an object the text names (PlanBench's
//!   "the red block", "object a", `package_0`, Planetarium's `ball1`), by its own
//!   name, by the words of a split name (`red_block`, `location-0-0`), by the
//!   abbreviation PlanBench's own files use (`p0` for `package_0`, `l1-0` for
//!   `location_1_0`: same first letter, same numbers), or by PlanBench's table of
//!   block colours (`a` is the red block, `b` the blue one, …). Each named object
//!   is claimed once: a second spec object for the same one is invented.
//! - an **initial fact** agrees when one clause of the text's initial part holds
//!   its predicate's words (or a known synonym: `ontable` is said "on the table",
//!   `handempty` "the hand is empty") and all its arguments, in the order the
//!   predicate is worded (`(on red blue)` is "the red block is on top of the blue
//!   block"; `(carry ball1 gripper1)` is "gripper1 is carrying ball1"). A one-place
//!   type fact agrees when its predicate is the object's kind (`(truck t0)` for
//!   `truck_0`, `(ball ball1)`): the text says those in the object's name.
//! - a **goal fact** agrees the same way, with a clause of the goal part (from the
//!   first clause that says "goal"). A goal copied from the initial state finds no
//!   goal clause. A negative goal fact never agrees (no task of the four domains
//!   states one).
//!
//! Clauses are the text's sentences cut at commas and at "and", so one clause is one
//! PlanBench fact; words are lower case, `_` and `-` kept inside names, and
//! compared on a crude stem ("blocks" = "block", "carrying" = "carry"). A text that
//! never says "goal" has no parts: any clause may then state either kind of fact.
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
//! predicate the text words differently from its name and from the synonyms below
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

use std::collections::BTreeSet;

use onebrain_sdk::gaming::{findings, GamingCheck};
use onebrain_sdk::pddl::{self, Atom};
use onebrain_sdk::{paper_judge_reward, FinishedEpisode, Result, Reward, Rewards, Spec, Step, Verdict};

// ---------------------------------------------------------------------------
// The lexicon: all the domain knowledge there is.
// ---------------------------------------------------------------------------

/// Predicates whose name is not the words the texts use (PlanBench's templates,
/// configs/*.yaml; Planetarium's wording). Any other predicate is looked for by the
/// words of its name split at `-` and `_` (`in-city` → "in", "city").
const SYNONYMS: &[(&str, &[&str])] = &[("ontable", &["table"]), ("handempty", &["hand", "empty"])];

/// Predicates worded with their arguments in another order: Planetarium writes
/// `(carry ball1 gripper1)` as "Gripper gripper1 is carrying ball1". Every other
/// predicate names its arguments in PDDL order (all PlanBench templates do).
const ARGUMENT_ORDER: &[(&str, &[usize])] = &[("carry", &[1, 0])];

/// Type predicates named otherwise than their objects' kind: Logistics' `(OBJ p0)`
/// is a package.
const KINDS: &[(&str, &str)] = &[("obj", "package")];

/// PlanBench's `encoded_objects` for BlocksWorld: its PDDL names the red block `a`,
/// the blue one `b`, and so on (configs/blocksworld.yaml).
const COLOURS: [&str; 12] =
    ["red", "blue", "orange", "yellow", "white", "magenta", "black", "cyan", "green", "violet", "silver", "gold"];

/// Words that name a kind of object in a spec's object name (`red_block`,
/// `object_a`) and are dropped when matching it.
const KIND_WORDS: &[&str] = &["block", "object", "obj"];

/// Words that precede "block" without naming one ("the block", "another block").
const NOT_NAMES: &[&str] = &[
    "the", "a", "an", "one", "each", "every", "another", "other", "any", "all", "no", "that", "this", "same", "of",
    "top", "first", "second", "third", "last", "which", "some",
];

/// Words that follow "object" without naming one ("the object is", "object of").
const NOT_OBJECT_NAMES: &[&str] = &["the", "is", "in", "on", "and", "of", "that", "which", "to"];

// ---------------------------------------------------------------------------
// Words.
// ---------------------------------------------------------------------------

/// The words of `s`: lower case, `_` and `-` kept inside a word (`location_0_0`).
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_matches(|c| c == '-' || c == '_').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A crude stem, enough for the four domains' wording: "blocks" → "block",
/// "cities" → "city", "carrying" → "carry", "craves" → "crave". Names (anything
/// with a digit, `_` or `-`) and short words are kept as they are.
fn stem(w: &str) -> String {
    if w.len() <= 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return w.to_string();
    }
    if let Some(s) = w.strip_suffix("ies") {
        return format!("{s}y");
    }
    if let Some(s) = w.strip_suffix("ing") {
        if s.len() >= 3 {
            return s.to_string();
        }
    }
    if w.ends_with('s') && !w.ends_with("ss") {
        return w[..w.len() - 1].to_string();
    }
    w.to_string()
}

/// The letters a name starts with: `location_0_0` → `location`, `ball1` → `ball`.
fn kind_of(name: &str) -> String {
    name.chars().take_while(|c| c.is_ascii_alphabetic()).collect()
}

/// A name with numbers as (first letter, numbers): `p0` and `package_0` are both
/// (`p`, [0]); `l1-0` and `location_1_0` both (`l`, [1, 0]). `None` without a digit.
fn abbreviation(name: &str) -> Option<(char, Vec<u64>)> {
    let first = name.chars().next().filter(char::is_ascii_alphabetic)?;
    let numbers: Vec<u64> = name
        .split(|c: char| !c.is_ascii_digit())
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().unwrap_or(u64::MAX))
        .collect();
    (!numbers.is_empty()).then_some((first, numbers))
}

// ---------------------------------------------------------------------------
// The text: clauses, each in the initial or the goal part, and the objects it names.
// ---------------------------------------------------------------------------

/// An object the text names.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mention {
    /// As it appears among the words: `red`, `a`, `location_0_0`, `ball1`.
    name: String,
    /// What it is: `block`, `object`, `location`, `ball`.
    kind: String,
}

/// One clause of the text: one fact, in PlanBench's and Planetarium's wording.
#[derive(Clone, Debug)]
struct Clause {
    words: Vec<String>,
    stems: BTreeSet<String>,
    goal: bool,
    /// Names an object: counts toward recall.
    names_object: bool,
}

/// The task text, read once per episode.
#[derive(Clone, Debug)]
struct Text {
    clauses: Vec<Clause>,
    mentions: Vec<Mention>,
}

impl Text {
    fn read(text: &str) -> Text {
        let mentions = mentions(text);
        let mut clauses = Vec::new();
        let mut goal = false;
        for sentence in text.split(['.', '\n', ';', ':']) {
            for part in sentence.split(',') {
                let all = words(part);
                for clause in all.split(|w| w == "and") {
                    if clause.is_empty() {
                        continue;
                    }
                    goal |= clause.iter().any(|w| w == "goal");
                    let names_object = clause.iter().any(|w| mentions.iter().any(|m| &m.name == w));
                    let stems = clause.iter().map(|w| stem(w)).collect();
                    clauses.push(Clause { words: clause.to_vec(), stems, goal, names_object });
                }
            }
        }
        // No "goal" anywhere: a text of another shape; every clause may serve either part.
        if !clauses.iter().any(|c| c.goal) {
            let both: Vec<Clause> = clauses.iter().map(|c| Clause { goal: true, ..c.clone() }).collect();
            clauses.extend(both);
        }
        Text { clauses, mentions }
    }

    fn mention(&self, name: &str) -> Option<usize> {
        self.mentions.iter().position(|m| m.name == name)
    }
}

/// The objects `text` names, each once, in order of first mention:
/// - a word with a digit that starts with a letter (`ball1`, `location_0_0`);
/// - `X` in "X block" (BlocksWorld: "the red block", "holding red block");
/// - `X` in "object X" (Mystery BlocksWorld);
/// - and, where the text counts a kind it names by number ("You have 3 rooms" beside
///   `room1`), the rest of that count (`room2`, `room3`): Planetarium does not always
///   name every room.
fn mentions(text: &str) -> Vec<Mention> {
    let w = words(text);
    let mut out: Vec<Mention> = Vec::new();
    fn add(out: &mut Vec<Mention>, name: &str, kind: &str) {
        if !out.iter().any(|m| m.name == name) {
            out.push(Mention { name: name.to_string(), kind: kind.to_string() });
        }
    }
    let is_word = |x: &str| x.bytes().all(|b| b.is_ascii_lowercase()) && !NOT_NAMES.contains(&x);
    for (i, x) in w.iter().enumerate() {
        if x.starts_with(|c: char| c.is_ascii_alphabetic()) && x.bytes().any(|b| b.is_ascii_digit()) {
            add(&mut out, x, &kind_of(x));
        }
        if (x == "block" || x == "blocks") && i >= 1 && is_word(&w[i - 1]) {
            add(&mut out, &w[i - 1], "block");
        }
        if x == "object" {
            // Mystery BlocksWorld's objects are letters: "object a" names `a`.
            if let Some(next) = w.get(i + 1).filter(|n| !NOT_OBJECT_NAMES.contains(&n.as_str())) {
                add(&mut out, next, "object");
            }
        }
    }
    // "You have 3 rooms": rooms 1-3 (or 0-2), named like the room the text does name.
    for pair in w.windows(2) {
        let (Ok(n), kind) = (pair[0].parse::<u64>(), stem(&pair[1])) else { continue };
        let Some(named) = out.iter().find(|m| {
            let k = &m.kind;
            !k.is_empty() && kind.starts_with(k.as_str()) && abbreviation(&m.name).is_some_and(|(_, d)| d.len() == 1)
        }) else {
            continue;
        };
        let prefix = named.name.trim_end_matches(|c: char| c.is_ascii_digit()).to_string();
        let kind = named.kind.clone();
        let from = if out.iter().any(|m| m.name == format!("{prefix}0")) { 0 } else { 1 };
        for k in from..from + n.min(64) {
            add(&mut out, &format!("{prefix}{k}"), &kind);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The spec's objects, matched to the text's.
// ---------------------------------------------------------------------------

/// The named object `name` stands for, by anything but its exact name: the words of
/// a split name, the abbreviation, PlanBench's colour letters.
fn alias(name: &str, text: &Text) -> Option<usize> {
    let parts: Vec<&str> =
        name.split(['-', '_']).filter(|p| !p.is_empty() && !KIND_WORDS.contains(p)).collect();
    let candidates = [parts.join("_"), parts.join(""), parts.join("-")];
    if let Some(i) = candidates.iter().find_map(|c| text.mention(c)) {
        return Some(i);
    }
    if let Some(short) = abbreviation(name) {
        let same: Vec<usize> =
            (0..text.mentions.len()).filter(|&i| abbreviation(&text.mentions[i].name) == Some(short.clone())).collect();
        if let [one] = same[..] {
            return Some(one);
        }
    }
    match name.as_bytes() {
        [c @ b'a'..=b'l'] => text.mention(COLOURS[(c - b'a') as usize]).filter(|&i| text.mentions[i].kind == "block"),
        _ => None,
    }
}

/// For each declared object (lower case, each once), the named object it claims:
/// exact names first, then aliases, each named object at most once.
fn claim(objects: &[String], text: &Text) -> Vec<Option<usize>> {
    let mut taken = vec![false; text.mentions.len()];
    let mut out: Vec<Option<usize>> = objects
        .iter()
        .map(|o| {
            let i = text.mention(o).filter(|&i| !taken[i])?;
            taken[i] = true;
            Some(i)
        })
        .collect();
    for (o, slot) in objects.iter().zip(out.iter_mut()) {
        if slot.is_none() {
            if let Some(i) = alias(o, text).filter(|&i| !taken[i]) {
                taken[i] = true;
                *slot = Some(i);
            }
        }
    }
    out
}

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

/// The words a text uses for `predicate`.
fn cue(predicate: &str) -> Vec<String> {
    let p = predicate.to_ascii_lowercase();
    match SYNONYMS.iter().find(|(name, _)| *name == p) {
        Some((_, words)) => words.iter().map(|w| stem(w)).collect(),
        None => p.split(['-', '_']).filter(|w| !w.is_empty()).map(stem).collect(),
    }
}

/// Does `clause` state `predicate` of `args` (the named objects' words, in PDDL order)?
fn states(clause: &Clause, predicate: &str, args: &[&str]) -> bool {
    if !cue(predicate).iter().all(|w| clause.stems.contains(w)) {
        return false;
    }
    let p = predicate.to_ascii_lowercase();
    let order: Vec<usize> = match ARGUMENT_ORDER.iter().find(|(name, o)| *name == p && o.len() == args.len()) {
        Some((_, o)) => o.to_vec(),
        None => (0..args.len()).collect(),
    };
    // Each argument at a later word than the one before it.
    let mut at = 0;
    order.iter().all(|&i| match clause.words[at..].iter().position(|w| w == args[i]) {
        Some(k) => {
            at += k + 1;
            true
        }
        None => false,
    })
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

    let mut objects: Vec<String> = Vec::new();
    for o in &problem.objects {
        let name = o.name.to_ascii_lowercase();
        if !objects.contains(&name) {
            objects.push(name);
        }
    }
    let claimed = claim(&objects, &text);
    let named_as = |arg: &str| -> Option<usize> {
        let arg = arg.to_ascii_lowercase();
        match objects.iter().position(|o| *o == arg) {
            Some(i) => claimed[i],
            // Not declared (a domain constant, or a mistake): matched, never claimed.
            None => text.mention(&arg).or_else(|| alias(&arg, &text)),
        }
    };

    let mut covered = vec![false; text.clauses.len()];
    let mut check = |atom: &Atom, goal: bool| -> bool {
        let Some(args): Option<Vec<usize>> = atom.args.iter().map(|t| named_as(&t.name)).collect() else {
            return false;
        };
        let names: Vec<&str> = args.iter().map(|&i| text.mentions[i].name.as_str()).collect();
        let mut said = false;
        for (c, clause) in text.clauses.iter().enumerate() {
            if clause.goal == goal && states(clause, &atom.predicate, &names) {
                covered[c] = true;
                said = true;
            }
        }
        // A type fact is said by the object's name: (truck t0) for truck_0.
        let kind = |i: usize| {
            let k = text.mentions[i].kind.as_str();
            KINDS.iter().find(|(_, to)| *to == k).map_or(k, |(from, _)| *from).to_string()
        };
        said || (!goal && args.len() == 1 && {
            let p = stem(&atom.predicate.to_ascii_lowercase());
            p == stem(&text.mentions[args[0]].kind) || p == kind(args[0])
        })
    };

    let mut seen = BTreeSet::new();
    let init: Vec<&Atom> = problem.init.iter().filter(|a| seen.insert(a.to_string().to_ascii_lowercase())).collect();
    let init_agree = init.iter().filter(|a| check(a, false)).count();
    let mut seen = BTreeSet::new();
    let goal: Vec<_> = problem.goal.iter().filter(|l| seen.insert(l.to_string().to_ascii_lowercase())).collect();
    let goal_agree = goal.iter().filter(|l| l.positive && !l.atom.is_equality() && check(&l.atom, true)).count();

    let clauses = |goal: bool| {
        let mine = || text.clauses.iter().zip(&covered).filter(move |(c, _)| c.goal == goal && c.names_object);
        (mine().count(), mine().filter(|(_, &cov)| cov).count())
    };
    let declared = claimed.iter().flatten().count();
    Ok(Agreement {
        objects: (objects.len(), declared),
        init: (init.len(), init_agree),
        goal: (goal.len(), goal_agree),
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
    fn reads_planbench_wording() {
        let text = said(&bw("a b c d ", INIT, GOAL));
        assert_eq!(
            text,
            "As initial conditions I have that, the red block is clear, the yellow block is clear, the hand is empty, \
             the red block is on top of the blue block, the yellow block is on top of the orange block, the blue block \
             is on the table and the orange block is on the table.\nMy goal is to have that the blue block is on top of \
             the yellow block and the orange block is on top of the red block."
        );
        let t = Text::read(&text);
        let names: Vec<&str> = t.mentions.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["red", "yellow", "blue", "orange"]);
        assert_eq!(t.clauses.iter().filter(|c| !c.goal && c.names_object).count(), 6);
        assert_eq!(t.clauses.iter().filter(|c| c.goal && c.names_object).count(), 2);
    }

    #[test]
    fn names_match_by_words_abbreviation_and_planbench_colours() {
        let t = Text::read("As initial conditions I have that, location_1_0 is an airport and package_0 is at location_1_0.");
        let m = |name: &str| t.mention(name);
        assert_eq!(alias("p0", &t), m("package_0"));
        assert_eq!(alias("l1-0", &t), m("location_1_0"));
        assert_eq!(alias("location-1-0", &t), m("location_1_0"));
        assert_eq!(alias("l0-0", &t), None);
        // Exact names claim first: `p0` comes second to `package_0` and is invented.
        let objects: Vec<String> = ["p0", "package_0", "l1-0"].map(String::from).to_vec();
        assert_eq!(claim(&objects, &t), [None, m("package_0"), m("location_1_0")]);

        let t = Text::read("As initial conditions I have that, the hand is currently holding red block and the blue block is clear.");
        let m = |name: &str| t.mention(name);
        assert_eq!(alias("red_block", &t), m("red"));
        assert_eq!(alias("a", &t), m("red"), "PlanBench's letter for the red block");
        assert_eq!(alias("c", &t), None, "the orange block is not in this text");

        // In Mystery BlocksWorld the letters are the names.
        let t = Text::read("As initial conditions I have that, object a craves object b.");
        assert_eq!(alias("object_b", &t), t.mention("b"));
        assert_eq!(claim(&["a".to_string()], &t), [t.mention("a")]);
    }

    #[test]
    fn a_counted_kind_names_its_unnamed_members() {
        let t = Text::read("You have 3 rooms.\nYou have 1 balls.\nball1 is at room2.\nYour goal is to have the following:\nball1 should be at room1.");
        let names: Vec<&str> = t.mentions.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["ball1", "room2", "room1", "room3"]);
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

    /// `../shared/data` beside the repository, or `None` (the test then skips, saying so).
    fn data() -> Option<std::path::PathBuf> {
        let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
        if d.is_dir() {
            Some(d)
        } else {
            eprintln!("skipping: benchmark data not found at {}", d.display());
            None
        }
    }

    /// Every PlanBench row of `folder`, read in place: (statement, reference spec).
    fn planbench(data: &std::path::Path, folder: &str) -> Vec<(String, Spec)> {
        let dir = data.join("planbench").join(folder);
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut rows = Vec::new();
        for path in files {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !(name.starts_with("nl_tasks") && name.ends_with(".jsonl")) {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines().filter(|l| !l.trim().is_empty()) {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                let read = |k: &str| std::fs::read_to_string(dir.join(row[k].as_str().unwrap())).unwrap();
                rows.push((row["nl_statement"].as_str().unwrap().to_string(), spec(&read("domain_pddl"), &read("problem_pddl"))));
            }
        }
        rows
    }

    #[test]
    fn every_planbench_reference_agrees_fully_and_other_tasks_do_not() {
        let Some(data) = data() else { return };
        for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
            let rows = planbench(&data, folder);
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

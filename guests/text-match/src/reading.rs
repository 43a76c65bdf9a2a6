//! A spec's problem read against the text: which of its objects name an object of the
//! text, which of its facts a clause states, and which clauses it states.

use std::collections::BTreeSet;

use onebrain_sdk::pddl::{Atom, Literal, Problem, Span};

use crate::lexicon::{ARGUMENT_ORDER, COLOURS, KINDS, KIND_WORDS, SYNONYMS};
use crate::text::{Clause, Text};
use crate::words::{abbreviation, stem};

/// The named object `name` stands for, by anything but its exact name: the words of
/// a split name, the abbreviation, PlanBench's colour letters.
pub fn alias(name: &str, text: &Text) -> Option<usize> {
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
pub fn claim(objects: &[String], text: &Text) -> Vec<Option<usize>> {
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

/// The words a text uses for `predicate`, stemmed.
pub fn cue(predicate: &str) -> Vec<String> {
    let p = predicate.to_ascii_lowercase();
    match SYNONYMS.iter().find(|(name, _)| *name == p) {
        Some((_, words)) => words.iter().map(|w| stem(w)).collect(),
        None => p.split(['-', '_']).filter(|w| !w.is_empty()).map(stem).collect(),
    }
}

/// The order in which a text names the `n` arguments of `predicate`: PDDL order, or the
/// lexicon's (`(carry ball1 gripper1)` is "gripper1 is carrying ball1": `[1, 0]`).
pub fn worded_order(predicate: &str, n: usize) -> Vec<usize> {
    let p = predicate.to_ascii_lowercase();
    match ARGUMENT_ORDER.iter().find(|(name, o)| *name == p && o.len() == n) {
        Some((_, o)) => o.to_vec(),
        None => (0..n).collect(),
    }
}

/// Does `clause` state `predicate` of `args` (the named objects' words, in PDDL order)?
pub fn states(clause: &Clause, predicate: &str, args: &[&str]) -> bool {
    if !cue(predicate).iter().all(|w| clause.stems.contains(w)) {
        return false;
    }
    // Each argument at a later word than the one before it.
    let mut at = 0;
    worded_order(predicate, args.len()).iter().all(|&i| match clause.words[at..].iter().position(|w| w == args[i]) {
        Some(k) => {
            at += k + 1;
            true
        }
        None => false,
    })
}

/// One declared object.
#[derive(Clone, Debug)]
pub struct ObjectReading {
    /// Its name, lower case.
    pub name: String,
    /// Where the problem declares it (first declaration).
    pub span: Span,
    /// The named object of the text it stands for, if any.
    pub mention: Option<usize>,
}

/// One initial or goal fact of the spec.
#[derive(Clone, Debug)]
pub struct FactReading {
    /// The fact (a goal literal's sign is in `positive`).
    pub atom: Atom,
    /// False for a negative goal literal.
    pub positive: bool,
    /// Where it is: the atom's `(`, or a goal literal's.
    pub span: Span,
    /// The named objects its arguments stand for, in PDDL order; `None` when one of them
    /// names nothing in the text.
    pub mentions: Option<Vec<usize>>,
    /// A clause of its part states it (or, for a one-place initial fact, the object's
    /// name says it: `(truck t0)` for `truck_0`).
    pub said: bool,
}

/// A problem read against a text.
#[derive(Clone, Debug)]
pub struct Reading {
    /// The declared objects, each once, in order.
    pub objects: Vec<ObjectReading>,
    /// The initial facts, each once, in order.
    pub init: Vec<FactReading>,
    /// The goal literals, each once, in order.
    pub goal: Vec<FactReading>,
    /// For each clause of the text, whether an agreeing fact of its part states it.
    pub covered: Vec<bool>,
}

impl Reading {
    /// Reads `problem` against `text`.
    pub fn of(text: &Text, problem: &Problem) -> Reading {
        let mut objects: Vec<ObjectReading> = Vec::new();
        for o in &problem.objects {
            let name = o.name.to_ascii_lowercase();
            if !objects.iter().any(|x| x.name == name) {
                objects.push(ObjectReading { name, span: o.span, mention: None });
            }
        }
        let names: Vec<String> = objects.iter().map(|o| o.name.clone()).collect();
        for (o, m) in objects.iter_mut().zip(claim(&names, text)) {
            o.mention = m;
        }
        let named_as = |arg: &str| -> Option<usize> {
            let arg = arg.to_ascii_lowercase();
            match objects.iter().find(|o| o.name == arg) {
                Some(o) => o.mention,
                // Not declared (a domain constant, or a mistake): matched, never claimed.
                None => text.mention(&arg).or_else(|| alias(&arg, text)),
            }
        };

        let mut covered = vec![false; text.clauses.len()];
        let mut check = |atom: &Atom, goal: bool| -> (Option<Vec<usize>>, bool) {
            let Some(args): Option<Vec<usize>> = atom.args.iter().map(|t| named_as(&t.name)).collect() else {
                return (None, false);
            };
            let words: Vec<&str> = args.iter().map(|&i| text.mentions[i].name.as_str()).collect();
            let mut said = false;
            for (c, clause) in text.clauses.iter().enumerate() {
                if clause.goal == goal && states(clause, &atom.predicate, &words) {
                    covered[c] = true;
                    said = true;
                }
            }
            // A type fact is said by the object's name: (truck t0) for truck_0.
            let kind = |i: usize| {
                let k = text.mentions[i].kind.as_str();
                KINDS.iter().find(|(_, to)| *to == k).map_or(k, |(from, _)| *from).to_string()
            };
            let said = said
                || (!goal && args.len() == 1 && {
                    let p = stem(&atom.predicate.to_ascii_lowercase());
                    p == stem(&text.mentions[args[0]].kind) || p == kind(args[0])
                });
            (Some(args), said)
        };

        let mut seen = BTreeSet::new();
        let init: Vec<FactReading> = problem
            .init
            .iter()
            .filter(|a| seen.insert(a.to_string().to_ascii_lowercase()))
            .map(|a| {
                let (mentions, said) = check(a, false);
                FactReading { atom: a.clone(), positive: true, span: a.span, mentions, said }
            })
            .collect();
        let mut seen = BTreeSet::new();
        let goal: Vec<FactReading> = problem
            .goal
            .iter()
            .filter(|l| seen.insert(l.to_string().to_ascii_lowercase()))
            .map(|l: &Literal| {
                // A negative goal fact never agrees (no task of the four domains states one),
                // nor does an equality; neither marks a clause.
                let (mentions, said) = if l.positive && !l.atom.is_equality() {
                    check(&l.atom, true)
                } else {
                    (None, false)
                };
                FactReading { atom: l.atom.clone(), positive: l.positive, span: l.span, mentions, said }
            })
            .collect();
        Reading { objects, init, goal, covered }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_sdk::pddl;

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
    fn a_reading_says_which_facts_and_clauses_agree() {
        let text = Text::read(
            "As initial conditions I have that, the red block is clear, the hand is empty, the red block is on top of \
             the blue block and the blue block is on the table.\nMy goal is to have that the blue block is on top of the red block.",
        );
        let problem = pddl::parse_problem(
            "(define (problem p) (:domain bw) (:objects a b table)
               (:init (clear a) (handempty) (ontable a) (ontable b) (ontable b) (on b table))
               (:goal (and (on b a) (not (clear a)))))",
        )
        .unwrap();
        let r = Reading::of(&text, &problem);
        let claimed: Vec<(&str, Option<usize>)> = r.objects.iter().map(|o| (o.name.as_str(), o.mention)).collect();
        assert_eq!(claimed, [("a", text.mention("red")), ("b", text.mention("blue")), ("table", None)]);
        assert_eq!(r.objects[2].span.line, 1);
        let said: Vec<(String, bool)> = r.init.iter().map(|f| (f.atom.to_string(), f.said)).collect();
        assert_eq!(
            said,
            [
                ("(clear a)".into(), true),
                ("(handempty)".into(), true),
                ("(ontable a)".into(), false),
                ("(ontable b)".into(), true),
                ("(on b table)".into(), false),
            ]
        );
        assert_eq!(r.init[4].mentions, None, "`table` names nothing in the text");
        assert_eq!((r.goal[0].said, r.goal[1].said, r.goal[1].positive), (true, false, false));
        // The clause "the red block is on top of the blue block" is the one nothing states.
        let uncovered: Vec<String> = text
            .clauses
            .iter()
            .zip(&r.covered)
            .filter(|(c, &cov)| c.names_object && !cov)
            .map(|(c, _)| c.quote())
            .collect();
        assert_eq!(uncovered, ["the red block is on top of the blue block"]);
    }

    #[test]
    fn arguments_are_found_in_their_worded_order() {
        let text = Text::read("Gripper gripper1 is carrying ball1.");
        assert!(states(&text.clauses[0], "carry", &["ball1", "gripper1"]));
        assert!(!states(&text.clauses[0], "carry", &["gripper1", "ball1"]));
        assert_eq!(worded_order("carry", 2), [1, 0]);
        assert_eq!(cue("ontable"), ["table"]);
        assert_eq!(cue("in-city"), ["in", "city"]);
    }
}

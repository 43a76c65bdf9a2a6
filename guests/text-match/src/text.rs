//! The text: clauses, each in the initial or the goal part, and the objects it names.

use std::collections::BTreeSet;

use crate::lexicon::{NOT_NAMES, NOT_OBJECT_NAMES};
use crate::words::{abbreviation, kind_of, stem, words};

/// An object the text names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    /// As it appears among the words: `red`, `a`, `location_0_0`, `ball1`.
    pub name: String,
    /// What it is: `block`, `object`, `location`, `ball`.
    pub kind: String,
}

impl Mention {
    /// How a message names it, in the text's own words: "the red block", "object a",
    /// `location_0_0`.
    pub fn describe(&self) -> String {
        match self.kind.as_str() {
            "block" => format!("the {} block", self.name),
            "object" => format!("object {}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// One clause of the text: one fact, in PlanBench's and Planetarium's wording.
#[derive(Clone, Debug)]
pub struct Clause {
    /// Its words, lower case, in order.
    pub words: Vec<String>,
    /// The stems of its words.
    pub stems: BTreeSet<String>,
    /// In the goal part (at or after the first clause that says "goal").
    pub goal: bool,
    /// Names an object: counts toward recall.
    pub names_object: bool,
}

impl Clause {
    /// The clause as words, for quoting: "the red block is on top of the blue block".
    pub fn quote(&self) -> String {
        self.words.join(" ")
    }
}

/// The task text, read once per episode.
#[derive(Clone, Debug)]
pub struct Text {
    /// Every clause, in order; with no "goal" anywhere, each twice (once per part).
    pub clauses: Vec<Clause>,
    /// The objects it names, each once, in order of first mention.
    pub mentions: Vec<Mention>,
    /// Some clause says "goal": the text has an initial and a goal part.
    pub has_parts: bool,
}

impl Text {
    /// Reads `text`: its sentences cut at commas and at "and", so one clause is one fact.
    pub fn read(text: &str) -> Text {
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
        let has_parts = clauses.iter().any(|c| c.goal);
        if !has_parts {
            let both: Vec<Clause> = clauses.iter().map(|c| Clause { goal: true, ..c.clone() }).collect();
            clauses.extend(both);
        }
        Text { clauses, mentions, has_parts }
    }

    /// The index of the named object called exactly `name`.
    pub fn mention(&self, name: &str) -> Option<usize> {
        self.mentions.iter().position(|m| m.name == name)
    }

    /// The named object a clause speaks of first ("the red block is on ..." → red).
    pub fn subject(&self, clause: &Clause) -> Option<usize> {
        clause.words.iter().find_map(|w| self.mention(w))
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

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_sdk::DomainAdapter;

    /// Red on blue, yellow on orange; the goal: blue on yellow, orange on red.
    const PROBLEM: &str = "(define (problem BW-rand-4)\n(:domain blocksworld-4ops)\n(:objects a b c d )\n\
        (:init\n(handempty)\n(ontable b)\n(on a b)\n(clear a)\n(ontable c)\n(on d c)\n(clear d)\n)\n\
        (:goal\n(and\n(on b d)\n(on c a))\n)\n)\n";

    #[test]
    fn reads_planbench_wording() {
        let text = blocksworld::Blocksworld.describe(PROBLEM).unwrap();
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
        assert!(t.has_parts);
        let on = t.clauses.iter().find(|c| c.quote() == "the yellow block is on top of the orange block").unwrap();
        assert_eq!(t.subject(on), t.mention("yellow"));
        assert_eq!(t.mentions[0].describe(), "the red block");
    }

    #[test]
    fn a_counted_kind_names_its_unnamed_members() {
        let t = Text::read("You have 3 rooms.\nYou have 1 balls.\nball1 is at room2.\nYour goal is to have the following:\nball1 should be at room1.");
        let names: Vec<&str> = t.mentions.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["ball1", "room2", "room1", "room3"]);
    }

    #[test]
    fn a_text_without_a_goal_part_serves_both_parts() {
        let t = Text::read("object a craves object b.");
        assert!(!t.has_parts);
        assert_eq!(t.clauses.len(), 2);
        assert_eq!(t.clauses.iter().filter(|c| c.goal).count(), 1);
        assert_eq!(t.mentions[0].describe(), "object a");
    }
}

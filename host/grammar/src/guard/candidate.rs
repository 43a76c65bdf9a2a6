//! A problem read as sets (objects, facts): what the guard compares a finishing answer against.

use std::collections::BTreeSet;

use super::scan::{Event, Fact, Scan};

/// What a problem says, as sets: what a guard compares a finishing answer against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// (name, type) pairs, lower-case, sorted.
    pub(super) objects: Vec<(String, String)>,
    pub(super) facts: BTreeSet<Fact>,
}

impl Candidate {
    /// Reads the problem in `text` (which may start mid-problem, after `prefix`), or `None`
    /// when its goal never closed: such a text cannot equal a grammatical answer.
    pub(crate) fn read(prefix: &[u8], text: &[u8]) -> Option<Candidate> {
        let mut scan = Scan::default();
        let mut events = Vec::new();
        scan.feed(prefix, &mut events);
        scan.feed(text, &mut events);
        let mut objects = None;
        let mut facts = BTreeSet::new();
        for e in events {
            match e {
                Event::ObjectsClosed(o, _) => objects = Some(o),
                Event::Fact(f, ..) => {
                    facts.insert(f);
                }
                Event::GoalClosed => return Some(Candidate::of(objects?, facts)),
                Event::Name { .. } => {}
            }
        }
        None
    }

    pub(super) fn of(mut objects: Vec<(String, String)>, facts: BTreeSet<Fact>) -> Candidate {
        objects.sort();
        objects.dedup();
        Candidate { objects, facts }
    }
}

//! What disagrees: a spec's problem read against the task's text ([`text_match::Reading`])
//! turned into findings, worst first. No wording here (that is `lib.rs`).

use onebrain_sdk::pddl::{Problem, Span};
use text_match::{states, worded_order, Clause, FactReading, Reading, Text};

/// What the text says, as a fact in the spec's names when a predicate of the spec states
/// the clause, else the clause's own words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// `(on a b)`.
    Fact(String),
    /// "the red block is on top of the blue block".
    Quote(String),
}

/// One disagreement between a spec and its task's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// A declared object that names no object of the text.
    Invented {
        /// Its name.
        object: String,
        /// Where it is declared.
        span: Span,
    },
    /// An object the text names that no declared object stands for.
    Missing {
        /// The text's words for it: "the orange block", `location_0_1`.
        named: String,
    },
    /// A fact of the spec the text does not state, where the text says something else of
    /// the same object, or of the same objects (a clause no fact of the spec states).
    Contradicted {
        /// A goal fact (else an initial one).
        goal: bool,
        /// The spec's fact, `(ontable a)`.
        fact: String,
        /// Where it is.
        span: Span,
        /// What the text says of its object instead.
        text_says: Said,
    },
    /// A fact of the spec the text does not state.
    Unsaid {
        /// A goal fact (else an initial one).
        goal: bool,
        /// The spec's fact.
        fact: String,
        /// Where it is.
        span: Span,
    },
    /// A fact the text states that no fact of the spec states.
    Unstated {
        /// In the text's goal (else its initial conditions).
        goal: bool,
        /// What the text says.
        text_says: Said,
    },
}

/// Every disagreement between `problem` and `text`, worst first: invented objects, missing
/// objects, then the goal's facts, then the initial facts (for each: contradicted, unsaid,
/// unstated), each in the spec's or the text's order. `predicates` (name, arity) are the
/// spec's, for wording a clause as a fact.
///
/// A fact one of whose objects names nothing in the text is left to that object's finding.
/// An initial fact the text does not state is reported only where the text speaks of it:
/// a clause of the initial part uses the predicate's words or has the fact's object as its
/// subject. Otherwise the text is silent, not contradicting (Gripper's texts never say
/// where the robot is). Facts the text states are reported only for a text with a goal
/// part: without one, no clause can be said to belong to either.
pub fn findings(text: &Text, problem: &Problem, predicates: &[(String, usize)]) -> Vec<Finding> {
    let reading = Reading::of(text, problem);
    let name_of = |mention: usize| -> String {
        match reading.objects.iter().find(|o| o.mention == Some(mention)) {
            Some(o) => o.name.clone(),
            None => text.mentions[mention].name.clone(),
        }
    };
    let said = |clause: &Clause| -> Said {
        match as_fact(clause, text, predicates) {
            Some((predicate, args)) => {
                let names: Vec<String> = args.into_iter().map(name_of).collect();
                Said::Fact(format!("({predicate} {})", names.join(" ")))
            }
            None => Said::Quote(clause.quote()),
        }
    };

    let mut out: Vec<Finding> = reading
        .objects
        .iter()
        .filter(|o| o.mention.is_none())
        .map(|o| Finding::Invented { object: o.name.clone(), span: o.span })
        .collect();
    for (i, m) in text.mentions.iter().enumerate() {
        if !reading.objects.iter().any(|o| o.mention == Some(i)) {
            out.push(Finding::Missing { named: m.describe() });
        }
    }

    // A clause paired with a contradicted fact is said once, there.
    let mut paired = vec![false; text.clauses.len()];
    for goal in [true, false] {
        let facts = if goal { &reading.goal } else { &reading.init };
        let open = |c: usize, paired: &[bool]| {
            let clause = &text.clauses[c];
            clause.goal == goal && clause.names_object && !reading.covered[c] && !paired[c]
        };
        let mut unsaid = Vec::new();
        for fact in facts.iter().filter(|f| !f.said) {
            let Some(args) = &fact.mentions else {
                // A negative goal names objects too; its literal is never said (no task states one).
                if goal && !fact.positive {
                    unsaid.push(Finding::Unsaid { goal, fact: shown(fact), span: fact.span });
                }
                continue;
            };
            let subject = worded_order(&fact.atom.predicate, args.len()).first().map(|&i| args[i]);
            // The clause the fact misreads: one about the same object, else one that names
            // all of its objects (`(on a c)` for "c is on top of a").
            let about = |c: usize| subject.is_some() && text.subject(&text.clauses[c]) == subject;
            let names_all = |c: usize| {
                let words = &text.clauses[c].words;
                !args.is_empty() && args.iter().all(|&m| words.contains(&text.mentions[m].name))
            };
            let pair = (0..text.clauses.len())
                .find(|&c| open(c, &paired) && about(c))
                .or_else(|| (0..text.clauses.len()).find(|&c| open(c, &paired) && names_all(c)));
            match pair {
                Some(c) => {
                    paired[c] = true;
                    let text_says = said(&text.clauses[c]);
                    out.push(Finding::Contradicted { goal, fact: shown(fact), span: fact.span, text_says });
                }
                None => {
                    let spoken_of = goal
                        || text.clauses.iter().any(|c| {
                            !c.goal && (speaks_of(c, &fact.atom.predicate) || subject.is_some() && text.subject(c) == subject)
                        });
                    if spoken_of {
                        unsaid.push(Finding::Unsaid { goal, fact: shown(fact), span: fact.span });
                    }
                }
            }
        }
        out.extend(unsaid);
        if text.has_parts {
            for c in (0..text.clauses.len()).filter(|&c| open(c, &paired)) {
                out.push(Finding::Unstated { goal, text_says: said(&text.clauses[c]) });
            }
        }
    }
    out
}

/// A fact as the spec writes it: `(on a b)`, `(not (clear a))`.
fn shown(fact: &FactReading) -> String {
    if fact.positive {
        fact.atom.to_string()
    } else {
        format!("(not {})", fact.atom)
    }
}

/// Does `clause` use every word the text would use for `predicate`?
fn speaks_of(clause: &Clause, predicate: &str) -> bool {
    let cue = text_match::cue(predicate);
    !cue.is_empty() && cue.iter().all(|w| clause.stems.contains(w))
}

/// The fact `clause` states with one of `predicates` and the objects it names: the
/// predicate with the most arguments that states it, the first such in `predicates`; its
/// arguments are the text's named objects, in PDDL order.
fn as_fact(clause: &Clause, text: &Text, predicates: &[(String, usize)]) -> Option<(String, Vec<usize>)> {
    let mut named: Vec<usize> = Vec::new();
    for w in &clause.words {
        if let Some(i) = text.mention(w).filter(|i| !named.contains(i)) {
            named.push(i);
        }
    }
    let mut best: Option<(String, Vec<usize>)> = None;
    for (predicate, arity) in predicates {
        if *arity == 0 || *arity > named.len() || best.as_ref().is_some_and(|(_, a)| a.len() >= *arity) {
            continue;
        }
        let found = tuples(&named, *arity).into_iter().find(|args| {
            let words: Vec<&str> = args.iter().map(|&i| text.mentions[i].name.as_str()).collect();
            states(clause, predicate, &words)
        });
        if let Some(args) = found {
            best = Some((predicate.clone(), args));
        }
    }
    best
}

/// Every ordered choice of `k` distinct items of `items` (a clause names two or three).
fn tuples(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, &first) in items.iter().enumerate() {
        let rest: Vec<usize> = items.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &x)| x).collect();
        for mut tail in tuples(&rest, k - 1) {
            tail.insert(0, first);
            out.push(tail);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_sdk::pddl;

    const TEXT: &str = "As initial conditions I have that, the red block is clear, the yellow block is clear, the hand \
        is empty, the red block is on top of the blue block, the yellow block is on top of the orange block, the blue \
        block is on the table and the orange block is on the table.\nMy goal is to have that the orange block is on top \
        of the red block.";

    fn predicates() -> Vec<(String, usize)> {
        [("clear", 1), ("ontable", 1), ("handempty", 0), ("holding", 1), ("on", 2)]
            .map(|(p, n)| (p.to_string(), n))
            .to_vec()
    }

    fn problem(objects: &str, init: &str, goal: &str) -> String {
        format!("(define (problem p) (:domain bw)\n(:objects {objects})\n(:init {init})\n(:goal (and {goal})))")
    }

    fn found(problem: &str) -> Vec<Finding> {
        findings(&Text::read(TEXT), &pddl::parse_problem(problem).unwrap(), &predicates())
    }

    /// Where `needle` first starts in `text`, 1-based.
    fn span_of(text: &str, needle: &str) -> Span {
        let at = text.find(needle).unwrap();
        let line = text[..at].matches('\n').count() + 1;
        let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
        Span::new(line as u32, column as u32)
    }

    const INIT: &str = "(handempty) (on a b) (ontable b) (ontable c) (on d c) (clear a) (clear d)";

    #[test]
    fn the_reference_has_nothing_to_report() {
        assert_eq!(found(&problem("a b c d", INIT, "(on c a)")), []);
        // In the text's own names too.
        let coloured = "(handempty) (on red blue) (ontable blue) (ontable orange) (on yellow orange) (clear red) (clear yellow)";
        assert_eq!(found(&problem("red blue orange yellow", coloured, "(on orange red)")), []);
    }

    #[test]
    fn a_contradicted_fact_is_paired_with_what_the_text_says() {
        let p = problem("a b c d", &INIT.replace("(on a b)", "(ontable a)"), "(on c a)");
        assert_eq!(
            found(&p),
            [Finding::Contradicted {
                goal: false,
                fact: "(ontable a)".into(),
                span: span_of(&p, "(ontable a)"),
                text_says: Said::Fact("(on a b)".into()),
            }]
        );
    }

    #[test]
    fn the_table_as_an_object() {
        let p = problem("a b c d table", &INIT.replace("(ontable b)", "(on b table)"), "(on c a)");
        assert_eq!(
            found(&p),
            [
                Finding::Invented { object: "table".into(), span: span_of(&p, "table") },
                Finding::Unstated { goal: false, text_says: Said::Fact("(ontable b)".into()) },
            ]
        );
    }

    #[test]
    fn missing_objects_goals_and_unsaid_facts() {
        // No orange block (c), and its facts gone; the goal asks for something else.
        let p = problem("a b d", "(handempty) (on a b) (ontable b) (clear a) (clear d) (clear b)", "(on d a)");
        assert_eq!(
            found(&p),
            [
                Finding::Missing { named: "the orange block".into() },
                Finding::Unsaid { goal: true, fact: "(on d a)".into(), span: span_of(&p, "(on d a)") },
                Finding::Unstated { goal: true, text_says: Said::Fact("(on orange a)".into()) },
                Finding::Unsaid { goal: false, fact: "(clear b)".into(), span: span_of(&p, "(clear b)") },
                Finding::Unstated { goal: false, text_says: Said::Fact("(on d orange)".into()) },
                Finding::Unstated { goal: false, text_says: Said::Fact("(ontable orange)".into()) },
            ]
        );
    }

    #[test]
    fn a_goal_fact_about_the_goal_clauses_object_is_paired_with_it() {
        // The goal reversed: (on a c) where the text asks for the orange block on the red one.
        let p = problem("a b c d", INIT, "(on c d)");
        assert_eq!(
            found(&p),
            [Finding::Contradicted {
                goal: true,
                fact: "(on c d)".into(),
                span: span_of(&p, "(on c d)"),
                text_says: Said::Fact("(on c a)".into()),
            }]
        );
        // A negative goal literal is never in the text.
        let p = problem("a b c d", INIT, "(on c a) (not (clear d))");
        assert_eq!(
            found(&p),
            [Finding::Unsaid { goal: true, fact: "(not (clear d))".into(), span: span_of(&p, "(not (clear d))") }]
        );
    }

    #[test]
    fn an_unsaid_fact_the_text_never_speaks_of_is_left_alone() {
        // The text never words `at-robby` and has no clause about the object: silence, not a finding.
        let text = Text::read("You have 1 rooms.\nball1 is at room1.\nYour goal is to have the following:\nball1 should be at room1.");
        let problem = pddl::parse_problem(
            "(define (problem p) (:domain g) (:objects ball1 room1) (:init (at ball1 room1) (at-robby room1)) (:goal (at ball1 room1)))",
        )
        .unwrap();
        let predicates = [("at".to_string(), 2), ("at-robby".to_string(), 1)];
        assert_eq!(findings(&text, &problem, &predicates), []);
    }

    #[test]
    fn every_ordered_choice() {
        assert_eq!(tuples(&[1, 2], 2), [vec![1, 2], vec![2, 1]]);
        assert_eq!(tuples(&[1, 2, 3], 1), [vec![1], vec![2], vec![3]]);
        assert_eq!(tuples(&[1, 2, 3], 2).len(), 6);
    }
}

//! Tells the Editor what in a spec disagrees with the task's own text. The planner's
//! diagnostics say nothing about an invented `table` block or an `(ontable a)` the text
//! contradicts; these do. A `diagnostic-parser` plugin that serves `review` (WIT 0.4.0):
//! a config lists it in `diagnostic-reviewers`, and the host calls it on every unsolved
//! spec, adding what it returns to the diagnostics the Editor reads.
//!
//! The spec's problem is read against the text by the `text-match` crate, the very
//! matching the `text-agreement` reward scores (so a spec with nothing to report here is
//! one text-agreement scores 1 before its gaming check). Each disagreement becomes one short
//! warning in the spec's own names, worst first:
//!
//! | finding | category | message |
//! |---|---|---|
//! | an object the text does not name | `object-type` | `object "table" is not named in the task text` |
//! | an object the text names, not declared | `object-type` | `the text names the orange block, but the problem declares no object for it` |
//! | a goal fact the text's goal does not ask for | `goal-constraint` | `goal (on c d): the text's goal says (on c a)` / `goal (on d a): the text's goal does not ask for this` |
//! | a goal fact the text asks for, missing | `goal-constraint` | `the text's goal asks for (on c a), the problem's goal does not` |
//! | an initial fact the text does not state | `goal-constraint` | `(ontable a): the text says (on a b)` / `(clear b): the text does not say this` |
//! | an initial fact the text states, missing | `goal-constraint` | `the text states (ontable b), the problem does not` |
//!
//! Facts are the paper's "goal/constraint drift" (the WIT has no category of its own for
//! the initial state). A finding about one place in the spec carries its line and column
//! in the problem file. What the text says is written as a fact with the spec's names when
//! a predicate of the spec states it, else quoted. At most [`MAX_DIAGNOSTICS`] are
//! returned, each at most [`MAX_MESSAGE_CHARS`] characters: the Editor's prompt lists
//! eight diagnostics in all. All are warnings: the matching can misread a wording it does
//! not know, and b is the planner's.
//!
//! It says nothing when the problem does not parse (the syntax error is already there), when
//! the text names no object (an abstract text: nothing to hold the spec to), and about an
//! initial fact the text never speaks of (Gripper's texts never say where the robot is).
//!
//! Tests run natively: `cargo test --manifest-path guests/Cargo.toml -p text-diagnostics`
//! (PlanBench is read in place from `../shared/data` when it is there).

mod findings;

use onebrain_sdk::pddl;
use onebrain_sdk::{Category, Diagnostic, DiagnosticParser, Result, Spec, SpecFile};
use text_match::Text;

pub use findings::{findings, Finding, Said};

/// The most diagnostics one review returns: the Editor's prompt lists eight in all, and
/// the verifier's own come first when they are errors.
pub const MAX_DIAGNOSTICS: usize = 6;

/// The longest message, in characters; a longer quote of the text is cut with "…".
pub const MAX_MESSAGE_CHARS: usize = 160;

/// The longest quote of the text inside a message, in characters.
const MAX_QUOTE_CHARS: usize = 90;

/// The plugin: no state, every call reads the text afresh.
#[derive(Default)]
pub struct TextDiagnostics;

impl DiagnosticParser for TextDiagnostics {
    fn review(&self, task_text: &str, candidate: &Spec, _found: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        Ok(review(task_text, candidate))
    }
}

onebrain_sdk::export_diagnostic_parser!(TextDiagnostics);

/// The diagnostics for `candidate` against `task_text`, worst first, at most
/// [`MAX_DIAGNOSTICS`] (the last one then says how many more there were).
pub fn review(task_text: &str, candidate: &Spec) -> Vec<Diagnostic> {
    let Ok(problem) = pddl::parse_problem(&candidate.problem) else { return Vec::new() };
    let text = Text::read(task_text);
    if text.mentions.is_empty() {
        return Vec::new();
    }
    let all = findings(&text, &problem, &predicates(&candidate.domain, &problem));
    let mut out: Vec<Diagnostic> = all.iter().take(MAX_DIAGNOSTICS).map(diagnostic).collect();
    if all.len() > MAX_DIAGNOSTICS {
        let more = all.len() - (MAX_DIAGNOSTICS - 1);
        out[MAX_DIAGNOSTICS - 1] =
            Diagnostic::warning(Category::GoalConstraint, format!("{more} more facts or objects disagree with the task text"));
    }
    out
}

/// The spec's predicates with their arities: the domain's, in its order, then any other
/// the problem uses (a domain that does not parse still has a problem to word facts with).
fn predicates(domain: &str, problem: &pddl::Problem) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = match pddl::parse_domain(domain) {
        Ok(d) => d.predicates.iter().map(|p| (p.name.clone(), p.params.len())).collect(),
        Err(_) => Vec::new(),
    };
    let used = problem.init.iter().chain(problem.goal.iter().map(|l| &l.atom));
    for atom in used.filter(|a| !a.is_equality()) {
        let p = (atom.predicate.clone(), atom.args.len());
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// One finding as the Editor reads it.
fn diagnostic(f: &Finding) -> Diagnostic {
    let (category, message, at) = match f {
        Finding::Invented { object, span } => {
            (Category::ObjectType, format!("object \"{object}\" is not named in the task text"), Some(*span))
        }
        Finding::Missing { named } => {
            (Category::ObjectType, format!("the text names {named}, but the problem declares no object for it"), None)
        }
        Finding::Contradicted { goal: true, fact, span, text_says } => {
            (Category::GoalConstraint, format!("goal {fact}: the text's goal says {}", said(text_says)), Some(*span))
        }
        Finding::Contradicted { goal: false, fact, span, text_says } => {
            (Category::GoalConstraint, format!("{fact}: the text says {}", said(text_says)), Some(*span))
        }
        Finding::Unsaid { goal: true, fact, span } => {
            (Category::GoalConstraint, format!("goal {fact}: the text's goal does not ask for this"), Some(*span))
        }
        Finding::Unsaid { goal: false, fact, span } => {
            (Category::GoalConstraint, format!("{fact}: the text does not say this"), Some(*span))
        }
        Finding::Unstated { goal: true, text_says } => (
            Category::GoalConstraint,
            format!("the text's goal asks for {}, the problem's goal does not", said(text_says)),
            None,
        ),
        Finding::Unstated { goal: false, text_says } => {
            (Category::GoalConstraint, format!("the text states {}, the problem does not", said(text_says)), None)
        }
    };
    let d = Diagnostic::warning(category, cut(&message, MAX_MESSAGE_CHARS));
    match at {
        Some(span) => d.at(SpecFile::Problem, span),
        None => d,
    }
}

/// What the text says, as a message shows it: a fact as written, a clause in quotes.
fn said(s: &Said) -> String {
    match s {
        Said::Fact(f) => f.clone(),
        Said::Quote(q) => format!("\"{}\"", cut(q, MAX_QUOTE_CHARS)),
    }
}

/// `s` cut to `max` characters, the cut marked with "…".
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let kept: String = s.chars().take(max - 1).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PlanBench BlocksWorld's instance 2 (the first row), read in place.
    fn instance_2(data: &std::path::Path) -> (String, Spec) {
        let (text, spec) = text_match::planbench::rows(data, "blocksworld").into_iter().next().unwrap();
        assert!(text.starts_with("As initial conditions I have that, the red block is clear, the yellow block is clear"));
        assert!(spec.problem.contains("(on a b)") && spec.problem.contains("(ontable b)") && spec.problem.contains("(on c a)"));
        (text, spec)
    }

    fn edited(spec: &Spec, from: &str, to: &str) -> Spec {
        assert!(spec.problem.contains(from), "{from}");
        Spec { problem: spec.problem.replacen(from, to, 1), ..spec.clone() }
    }

    /// Each diagnostic as the Editor's prompt lists it: `[category] problem line L, column C: message`.
    fn shown(ds: &[Diagnostic]) -> Vec<String> {
        ds.iter()
            .map(|d| match (d.line, d.column) {
                (Some(l), Some(c)) => format!("[{}] problem line {l}, column {c}: {}", d.category, d.message),
                _ => format!("[{}] {}", d.category, d.message),
            })
            .collect()
    }

    #[test]
    fn an_invented_table_block_on_a_real_blocksworld_task() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        let (text, reference) = instance_2(&data);
        let spec = edited(&edited(&reference, "(:objects a b c d", "(:objects a b c d table"), "(ontable b)", "(on b table)");
        let got = review(&text, &spec);
        for line in shown(&got) {
            eprintln!("{line}");
        }
        assert_eq!(
            shown(&got),
            [
                "[object-type] problem line 5, column 19: object \"table\" is not named in the task text",
                "[goal-constraint] the text states (ontable b), the problem does not",
            ]
        );
        assert!(got.iter().all(|d| d.severity == onebrain_sdk::Severity::Warning));
    }

    #[test]
    fn a_fact_the_text_contradicts_a_hand_object_and_a_dropped_goal() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        let (text, reference) = instance_2(&data);
        let got = review(&text, &edited(&reference, "(on a b)", "(ontable a)"));
        assert_eq!(shown(&got), ["[goal-constraint] problem line 8, column 1: (ontable a): the text says (on a b)"]);

        let hand = edited(&edited(&reference, "(:objects a b c d", "(:objects a b c d hand"), "(handempty)", "(handempty)\n(clear hand)");
        let got = review(&text, &hand);
        assert_eq!(
            shown(&got),
            [
                "[object-type] problem line 5, column 19: object \"hand\" is not named in the task text",
            ],
            "(clear hand) names nothing in the text: the object's finding says it"
        );

        let got = review(&text, &edited(&reference, "(on c a)", "(on a c)"));
        assert_eq!(shown(&got), ["[goal-constraint] problem line 17, column 1: goal (on a c): the text's goal says (on c a)"]);
        let got = review(&text, &edited(&reference, "(and\n(on c a))", "(and)"));
        assert_eq!(shown(&got), ["[goal-constraint] the text's goal asks for (on c a), the problem's goal does not"]);
    }

    #[test]
    fn a_missing_block_in_the_texts_names() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        let (text, reference) = instance_2(&data);
        // The model wrote the text's colours and left the orange block out.
        let problem = "(define (problem p) (:domain blocksworld-4ops)\n(:objects red blue yellow)\n\
            (:init (handempty) (on red blue) (ontable blue) (clear red) (clear yellow) (ontable yellow))\n\
            (:goal (and (on yellow red))))";
        let got = review(&text, &Spec { problem: problem.into(), ..reference });
        assert_eq!(
            shown(&got),
            [
                "[object-type] the text names the orange block, but the problem declares no object for it",
                "[goal-constraint] problem line 4, column 13: goal (on yellow red): the text's goal does not ask for this",
                "[goal-constraint] the text's goal asks for (on orange red), the problem's goal does not",
                "[goal-constraint] problem line 3, column 76: (ontable yellow): the text says (on yellow orange)",
                "[goal-constraint] the text states (ontable orange), the problem does not",
            ]
        );
    }

    #[test]
    fn every_planbench_reference_has_nothing_to_report() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
            let rows = text_match::planbench::rows(&data, folder);
            assert!(rows.len() >= 285, "{folder}: {} rows", rows.len());
            for (text, reference) in &rows {
                assert_eq!(review(text, reference), [], "{folder}\n{text}\n{}", reference.problem);
            }
        }
    }

    #[test]
    fn another_tasks_spec_is_reported_within_the_bounds() {
        let Some(data) = text_match::planbench::data_dir() else { return };
        for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
            let rows = text_match::planbench::rows(&data, folder);
            let mut capped = 0;
            for (i, (text, _)) in rows.iter().enumerate() {
                let (other_text, other) = &rows[(i + 1) % rows.len()];
                if other_text == text {
                    continue;
                }
                let got = review(text, other);
                assert!(!got.is_empty(), "{folder} row {i}: another task's spec raised nothing");
                assert!(got.len() <= MAX_DIAGNOSTICS, "{folder} row {i}: {}", got.len());
                for d in &got {
                    let n = d.message.chars().count();
                    assert!(n > 0 && n <= MAX_MESSAGE_CHARS && !d.message.contains('\n'), "{folder} row {i}: {}", d.message);
                }
                capped += usize::from(got.last().is_some_and(|d| d.message.ends_with("disagree with the task text")));
            }
            eprintln!("{folder}: {} rows, {capped} with more findings than {MAX_DIAGNOSTICS}", rows.len());
        }
    }

    #[test]
    fn the_count_is_capped_with_a_line_that_says_how_many_more() {
        let text = "As initial conditions I have that, the red block is clear, the blue block is clear, the orange block \
            is clear, the hand is empty, the red block is on the table, the blue block is on the table and the orange \
            block is on the table.\nMy goal is to have that the red block is on top of the blue block.";
        let problem = "(define (problem p) (:domain bw) (:objects x1 x2 x3 x4 x5 x6 x7 x8) (:init) (:goal (and)))";
        let got = review(text, &Spec { domain: String::new(), problem: problem.into() });
        assert_eq!(got.len(), MAX_DIAGNOSTICS);
        // 8 invented, 3 missing, 1 goal and 6 initial clauses unstated: 18 findings, 5 shown.
        assert_eq!(got[MAX_DIAGNOSTICS - 1].message, "13 more facts or objects disagree with the task text");
        assert_eq!(got[0].message, "object \"x1\" is not named in the task text");
    }

    #[test]
    fn nothing_to_say_without_a_problem_or_a_named_object() {
        let text = "As initial conditions I have that, the red block is clear.\nMy goal is to have that the red block is clear.";
        assert_eq!(review(text, &Spec { domain: String::new(), problem: "(define (problem".into() }), []);
        let problem = "(define (problem p) (:domain g) (:objects table) (:init (free table)) (:goal (free table)))";
        assert_eq!(review("Gather all the balls in one room.", &Spec { domain: String::new(), problem: problem.into() }), []);
    }

    #[test]
    fn long_quotes_are_cut() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        let long = Said::Quote("word ".repeat(40));
        assert_eq!(said(&long).chars().count(), MAX_QUOTE_CHARS + 2);
    }
}

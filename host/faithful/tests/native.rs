//! Every constructed case, checked natively.

mod common;

use onebrain_faithful::{check, Limits};

#[test]
fn constructed_cases_get_their_verdicts() {
    let Some(cases) = common::cases() else { return };
    assert!(cases.len() >= 20, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let r = check(&c.reference, &c.candidate, Some(&c.plan), true, &Limits::default()).expect("reference is fine");
        println!("{:45} faithful={:5} drift={:?} decision={:?} f1={:.3} {:?}", c.name, r.faithful, r.drift, r.decision, r.schema_f1, r.explanation.first());
        if let Err(e) = std::panic::catch_unwind(|| c.assert(&r)) {
            failures.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

const D: &str = "(define (domain d) (:predicates (at ?x) (road ?x ?y))
  (:action go :parameters (?x ?y) :precondition (and (at ?x) (road ?x ?y)) :effect (and (at ?y) (not (at ?x)))))";
const P: &str = "(define (problem p) (:domain d) (:objects a b c) (:init (at a) (road a b) (road b c)) (:goal (at c)))";

fn spec(d: &str, p: &str) -> onebrain_core::Spec {
    onebrain_core::Spec { domain: d.into(), problem: p.into() }
}

#[test]
fn malformed_candidates_are_reports_not_errors() {
    let r = spec(D, P);
    for (c, why) in [
        (spec("(define (domain d)", P), "candidate domain does not parse"),
        (spec(D, "(define (problem p) (:domain d) (:objects a) (:init (at z)) (:goal (at a)))"), "ill-formed"),
        (spec(D, "(define (problem p) (:domain d) (:objects a) (:init (fly a)) (:goal (at a)))"), "unknown predicate"),
    ] {
        let rep = check(&r, &c, None, true, &Limits::default()).unwrap();
        assert!(!rep.faithful && rep.explanation.iter().any(|l| l.contains(why)), "{rep:#?}");
    }
}

#[test]
fn a_bad_reference_is_a_typed_error() {
    let e = check(&spec("(define", P), &spec(D, P), None, true, &Limits::default()).unwrap_err();
    assert!(matches!(e, onebrain_faithful::CheckError::ReferenceParse { file: "domain", .. }), "{e}");
}

#[test]
fn a_spent_budget_is_undecided_not_a_guess() {
    let r = spec(D, P);
    let limits = Limits { max_nodes: 1, ..Limits::default() };
    let rep = check(&r, &r, Some(&["(go a b)".into(), "(go b c)".into()]), true, &limits).unwrap();
    assert_eq!(rep.decision, onebrain_faithful::Decision::Undecided);
    assert!(!rep.faithful);
    assert!(rep.explanation[0].contains("undecided"), "{rep:#?}");
}

#[test]
fn unsolved_candidates_are_never_faithful_and_have_no_drift() {
    let r = spec(D, P);
    let rep = check(&r, &r, None, false, &Limits::default()).unwrap();
    assert!(!rep.faithful && !rep.solvable && rep.goal_preserved && rep.schema_consistent);
    assert_eq!(rep.drift, None);
}

#[test]
fn a_plan_that_misses_the_goal_fails_replay() {
    let r = spec(D, P);
    let rep = check(&r, &r, Some(&["(go a b)".into()]), true, &Limits::default()).unwrap();
    assert!(!rep.faithful && !rep.plan_replay_ok && rep.goal_preserved);
    assert!(rep.explanation.iter().any(|l| l.contains("goal not satisfied")), "{rep:#?}");
}

//! `E(y)` on one spec per outcome: solved, malformed, ill-typed, unreachable
//! goal (native), unsolvable (planner), and a plugin-free planner error.

mod common;

use common::{spec, verifier};
use onebrain_core::{Category, Outcome, Severity, Spec, SpecFile, Verifier};
use onebrain_pddl as pddl;
use onebrain_verifier::SolverLimits;

#[test]
fn solvable_spec_gets_a_validated_plan() {
    let v = verifier(SolverLimits::default())
        .verify(&spec("gripper-domain.pddl", "gripper-problem.pddl"));
    assert!(v.solved, "{v:?}");
    assert_eq!(v.outcome, Outcome::Solved);
    assert!(
        v.diagnostics
            .iter()
            .all(|d| d.severity == Severity::Warning),
        "{:?}",
        v.diagnostics
    );
    assert!(
        v.plan.len() >= 7,
        "three balls need at least 7 steps: {:?}",
        v.plan
    );
    assert!(v
        .plan
        .iter()
        .all(|s| s.starts_with('(') && s == &s.to_lowercase()));
    // The plan is checked again here, independently of the verifier.
    let s = spec("gripper-domain.pddl", "gripper-problem.pddl");
    let d = pddl::parse_domain(&s.domain).unwrap();
    let p = pddl::parse_problem(&s.problem).unwrap();
    let plan = pddl::parse_plan(&v.plan.join("\n")).unwrap();
    assert!(pddl::validate(&d, &p, &plan).valid);
    assert!(v.solver_time_ms > 0 && v.time_ms >= v.solver_time_ms);
}

#[test]
fn malformed_spec_is_a_syntax_error_with_position() {
    let v = verifier(SolverLimits::default()).verify(&spec(
        "gripper-domain.pddl",
        "gripper-problem-malformed.pddl",
    ));
    assert!(!v.solved);
    assert_eq!(v.outcome, Outcome::Rejected);
    let d = &v.diagnostics[0];
    assert_eq!(d.category, Category::Syntax, "{d:?}");
    assert_eq!(d.file, Some(SpecFile::Problem));
    assert!(d.line.is_some() && d.column.is_some(), "{d:?}");
    assert_eq!(
        v.solver_time_ms, 0,
        "the planner must not run on a malformed spec"
    );
}

#[test]
fn ill_typed_spec_is_an_object_type_error() {
    let v = verifier(SolverLimits::default()).verify(&spec(
        "gripper-domain.pddl",
        "gripper-problem-illtyped.pddl",
    ));
    assert_eq!(v.outcome, Outcome::Rejected);
    let d = v
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error)
        .unwrap();
    assert_eq!(d.category, Category::ObjectType, "{:?}", v.diagnostics);
    assert!(d.message.contains("left"), "{}", d.message);
    assert_eq!(d.line, Some(5), "{d:?}");
}

#[test]
fn relaxed_unreachable_goal_is_named_without_the_planner() {
    let v = verifier(SolverLimits::default()).verify(&spec(
        "gripper-domain.pddl",
        "gripper-problem-unsolvable.pddl",
    ));
    assert_eq!(v.outcome, Outcome::Rejected);
    assert_eq!(v.solver_time_ms, 0);
    let d = v
        .diagnostics
        .iter()
        .find(|d| d.category == Category::GoalConstraint)
        .expect("goal-constraint diagnostic");
    assert!(d.message.contains("(at ball1 roomb)"), "{}", d.message);
}

#[test]
fn unsolvable_spec_is_proved_by_the_planner() {
    let v = verifier(SolverLimits::default()).verify(&spec(
        "blocks-domain.pddl",
        "blocks-problem-unsolvable.pddl",
    ));
    assert_eq!(v.outcome, Outcome::Unsolvable, "{v:?}");
    assert!(!v.solved);
    assert!(v.solver_time_ms > 0);
    assert_eq!(v.dominant_category(), Some(Category::Unreachable));
}

#[test]
fn undefined_predicate_is_a_schema_error() {
    let mut s = spec("blocks-domain.pddl", "blocks-problem-unsolvable.pddl");
    s.problem = s.problem.replace("(on b a)", "(onn b a)");
    let v = verifier(SolverLimits::default()).verify(&s);
    assert_eq!(v.outcome, Outcome::Rejected);
    assert_eq!(
        v.dominant_category(),
        Some(Category::PredicateSchema),
        "{:?}",
        v.diagnostics
    );
}

#[test]
fn empty_and_garbage_input_never_panic() {
    let verifier = verifier(SolverLimits::default());
    for (domain, problem) in [
        ("", ""),
        ("(define", "(((("),
        ("\u{0}\u{ff}", "🙂"),
        ("(define (domain d))", ""),
    ] {
        let v = verifier.verify(&Spec {
            domain: domain.into(),
            problem: problem.into(),
        });
        assert!(!v.solved);
        assert_eq!(
            v.dominant_category(),
            Some(Category::Syntax),
            "{domain:?}: {:?}",
            v.diagnostics
        );
    }
}

#[test]
fn verdict_serialises_with_the_cli_contract_fields() {
    let v = verifier(SolverLimits::default()).verify(&spec(
        "gripper-domain.pddl",
        "gripper-problem-malformed.pddl",
    ));
    let json = serde_json::to_value(&v).unwrap();
    for key in ["solved", "plan", "diagnostics", "time_ms"] {
        assert!(json.get(key).is_some(), "missing {key}: {json}");
    }
    let d = &json["diagnostics"][0];
    assert_eq!(d["category"], "syntax");
    for key in ["message", "line", "column"] {
        assert!(d.get(key).is_some(), "missing {key}: {d}");
    }
}

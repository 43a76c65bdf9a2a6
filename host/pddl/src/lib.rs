//! PDDL toolkit for onebrain: a parser with 1-based line/column spans, semantic checks that
//! produce the paper's diagnostic categories, grounding, delete-relaxed reachability, state
//! simulation and plan validation. Pure Rust with no I/O, so it also builds for `wasm32-wasip2`
//! and is re-exported to plugins by the guest SDK.
//!
//! | step | entry points | result |
//! |---|---|---|
//! | parse | [`parse_domain`], [`parse_problem`], [`parse_plan`] | [`Domain`], [`Problem`], [`Plan`], or a [`ParseError`] with its [`Span`] |
//! | check | [`check`], [`check_sources`], [`check_domain`] | `Vec<`[`Diagnostic`]`>` in the six [`Category`]s, each an error or a warning ([`Severity`]) |
//! | ground | [`ground`] | a [`GroundTask`]: interned atoms ([`AtomId`]), bit-set [`State`]s, [`GroundAction`]s, [`Reachability`] |
//! | validate | [`validate`] | a [`ValidationReport`], as VAL would judge the plan |
//! | compare | [`ProblemShape`], [`same_up_to_renaming`] | a key no renaming of objects changes, and [`Renaming`]: `Same`, `Different` or `Undecided` |
//!
//! Every AST node prints back as PDDL through `Display`, and equality between nodes ignores
//! spans, so `parse(print(x)) == x`.
//!
//! # What is supported
//!
//! `:strips`, `:typing` (type hierarchies), `:negative-preconditions`, `:equality`, domain
//! `:constants`, `and`/`not`/`=` in preconditions and goals, add and delete effects; a missing
//! `:requirements` section; any case (names are stored lower-case); `;` comments. `:adl` is
//! accepted as a keyword, but its constructs are not. Rejected with
//! [`ParseErrorKind::Unsupported`], naming the construct: `either` types, `or`, `imply`,
//! `forall`, `exists`, `when`, numeric fluents (`:functions`, `increase`, comparisons),
//! `:durative-action`, `:derived`, `:constraints`, and `:metric` (rejected rather than ignored:
//! with no numeric fluents there is nothing to minimise, and ignoring it would silently change
//! what "solved" means).
//!
//! # Example
//!
//! ```
//! use onebrain_pddl::{check_sources, ground, parse_domain, parse_plan, parse_problem, validate, Category};
//!
//! let domain_src = "(define (domain d) (:predicates (p ?x) (q ?x))
//!     (:action go :parameters (?x) :precondition (p ?x) :effect (and (q ?x) (not (p ?x)))))";
//! let problem_src = "(define (problem t) (:domain d) (:objects a b) (:init (p a)) (:goal (q a)))";
//!
//! // Native checks: this spec is clean.
//! assert!(check_sources(domain_src, problem_src).is_empty());
//!
//! // A goal no action can reach is a `goal-constraint` error, located in the problem file.
//! let bad = check_sources(domain_src, &problem_src.replace("(q a)", "(q b)"));
//! assert_eq!(bad[0].category, Category::GoalConstraint);
//! assert_eq!(bad[0].message, "goal (q b) can never be true: it is not in :init and no reachable action adds it (even ignoring delete effects)");
//!
//! // Grounding, simulation and validation.
//! let (domain, problem) = (parse_domain(domain_src).unwrap(), parse_problem(problem_src).unwrap());
//! let task = ground(&domain, &problem).unwrap();
//! let next = task.apply(task.init(), 0);
//! assert!(task.is_goal(&next));
//! let report = validate(&domain, &problem, &parse_plan("(go a)\n; cost = 1 (unit cost)\n").unwrap());
//! assert!(report.valid);
//! let report = validate(&domain, &problem, &parse_plan("(go b)").unwrap());
//! assert_eq!((report.failed_step, report.unsatisfied), (Some(1), vec!["(p b)".to_string()]));
//!
//! // Parse errors carry their position.
//! let err = parse_domain("(define (domain d) (:predicates (p ?x))").unwrap_err();
//! assert_eq!(err.to_string(), "line 1, column 40: unexpected end of input: '(' at line 1, column 1 is never closed");
//! ```
#![deny(missing_docs)]

mod ast;
mod check;
mod diag;
mod error;
mod ground;
mod parser;
mod renaming;
mod sexpr;
mod validate;
mod world;

pub use ast::{
    Action, Atom, Domain, Literal, Plan, PlanStep, Predicate, Problem, Term, TypedName, OBJECT,
};
pub use check::{check, check_domain, check_sources};
pub use diag::{has_errors, Category, Diagnostic, Severity, Span, SpecFile};
pub use error::{GroundError, ParseError, ParseErrorKind};
pub use ground::{
    ground, AtomId, GroundAction, GroundTask, Reachability, State, MAX_GROUND_ACTIONS,
    MAX_JOIN_STEPS,
};
pub use parser::{parse_domain, parse_plan, parse_problem, SUPPORTED_REQUIREMENTS};
pub use renaming::{same_up_to_renaming, ProblemShape, Renaming, RENAMING_NODE_BUDGET};
pub use validate::{validate, ValidationReport};

//! PDDL toolkit for onebrain: a parser with 1-based line/column spans, semantic checks that
//! produce the paper's diagnostic categories, grounding, delete-relaxed reachability, state
//! simulation and plan validation. Pure Rust with no I/O, so it also builds for `wasm32-wasip2`
//! and is re-exported to plugins by the guest SDK.
//!
//! The main entry points:
//!
//! - [`parse_domain`], [`parse_problem`], [`parse_plan`] build the AST ([`Domain`], [`Problem`],
//!   [`Plan`]) or return a [`ParseError`] with its [`Span`]. Every AST node prints back as PDDL
//!   through `Display`.
//! - [`Diagnostic`] is one finding, with a [`Category`] and a [`Severity`].
//!
//! ```
//! use onebrain_pddl::{parse_domain, parse_problem, parse_plan};
//!
//! let domain = parse_domain("(define (domain d) (:predicates (p ?x) (q ?x))
//!     (:action go :parameters (?x) :precondition (p ?x) :effect (and (q ?x) (not (p ?x)))))").unwrap();
//! let problem = parse_problem("(define (problem t) (:domain d) (:objects a) (:init (p a)) (:goal (q a)))").unwrap();
//! let plan = parse_plan("(go a)\n; cost = 1 (unit cost)\n").unwrap();
//! assert_eq!(domain.actions[0].name, "go");
//! assert_eq!(problem.goal[0].to_string(), "(q a)");
//! assert_eq!(plan.steps[0].to_string(), "(go a)");
//!
//! let err = parse_domain("(define (domain d) (:predicates (p ?x))").unwrap_err();
//! assert_eq!(err.span().line, 1);
//! ```
#![deny(missing_docs)]

mod ast;
mod check;
mod diag;
mod error;
mod ground;
mod parser;
mod sexpr;
mod validate;
mod world;

pub use ast::{Action, Atom, Domain, Literal, Plan, PlanStep, Predicate, Problem, Term, TypedName, OBJECT};
pub use diag::{has_errors, Category, Diagnostic, Severity, SpecFile, Span};
pub use error::{ParseError, ParseErrorKind};
pub use check::{check, check_domain, check_sources};
pub use ground::{
    ground, AtomId, GroundAction, GroundError, GroundTask, Reachability, State, MAX_GROUND_ACTIONS, MAX_JOIN_STEPS,
};
pub use parser::{parse_domain, parse_plan, parse_problem};
pub use validate::{validate, ValidationReport};

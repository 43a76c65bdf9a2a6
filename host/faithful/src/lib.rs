//! The reference faithfulness checker: does a solvable spec still mean the task?
//!
//! [`check`] compares a candidate (domain, problem) with the reference spec of the same task,
//! and returns the [`FaithfulnessReport`] of `onebrain faithful`. Names never decide: the
//! candidate may rename every predicate, action, object and type (Mystery BlocksWorld does),
//! except that a candidate written against the reference's own domain keeps its names.
//!
//! 1. **Mapping.** A bijection of predicates (with an argument order) and objects under which
//!    the candidate's initial state equals the reference's, found by backtracking with colour
//!    refinement; a node budget ([`Limits::max_nodes`]) that runs out gives
//!    [`Decision::Undecided`], never a guess. Types count as one-place facts, so a typed and an
//!    untyped spec of the same task correspond. When the candidate's domain *is* the
//!    reference's (the same text once comments, case and layout are normalised, as in
//!    problem mode), its predicates, actions, types and constants mean themselves and only
//!    objects are renamed: a grid read with `up` as `right` is another grid. A generated
//!    domain keeps the name-free mapping; when that pairs predicates against the names they
//!    share with the reference (a symmetry of the reference domain), the report says so.
//! 2. **Goal.** The mapped candidate goal and the reference goal hold in the same reachable
//!    states of the reference model: enumerated exactly when small ([`Decision::Exact`]).
//!    Otherwise every fact one goal states and the other does not is proved implied from
//!    invariants the checker proves for the reference task ("each block has exactly one
//!    support"), or refuted by a reachable state a search finds ([`Decision::Closure`]);
//!    neither, within the bounds, is [`Decision::Undecided`]. A weaker goal is
//!    [`Drift::GoalWeakening`].
//! 3. **Objects and types.** No object map at all, because objects or types differ, is
//!    [`Drift::TypeDrift`]; a map that exists only fails on other facts is a changed initial
//!    state (unfaithful, no drift category).
//! 4. **Schemas.** Actions are paired by structure; precision, recall and F1 over
//!    (action, role, literal) triples. A lost precondition is [`Drift::ConstraintOmission`],
//!    anything else [`Drift::SchemaDrift`].
//! 5. **Replay.** The candidate's plan, translated, must validate in the reference model.
//!
//! The checker is pure computation (no I/O, no threads), so the `faithfulness-checker` plugin
//! runs the very same code under WebAssembly. It never calls a planner: the caller says whether
//! the candidate was solved.
//!
//! [`mutex_groups`] gives a domain's own invariants, lifted ("each block is on the table, held
//! or on one block"), proved from its action schemas with no annotation: what a decoder may
//! hold an answer's initial state to.
//!
//! ```
//! use onebrain_core::{Drift, Spec};
//! use onebrain_faithful::{check, Limits};
//!
//! let domain = "(define (domain d) (:predicates (at ?x) (road ?x ?y))
//!   (:action go :parameters (?x ?y) :precondition (and (at ?x) (road ?x ?y))
//!     :effect (and (at ?y) (not (at ?x)))))";
//! let reference = Spec {
//!     domain: domain.into(),
//!     problem: "(define (problem p) (:domain d) (:objects a b c)
//!       (:init (at a) (road a b) (road b c)) (:goal (at c)))".into(),
//! };
//! // The same task with every name changed is faithful.
//! let renamed = Spec {
//!     domain: "(define (domain e) (:predicates (link ?a ?b) (here ?a))
//!       (:action move :parameters (?to ?from) :precondition (and (link ?from ?to) (here ?from))
//!         :effect (and (not (here ?from)) (here ?to))))".into(),
//!     problem: "(define (problem q) (:domain d) (:objects x y z)
//!       (:init (here x) (link x y) (link y z)) (:goal (here z)))".into(),
//! };
//! let plan = vec!["(move y x)".to_string(), "(move z y)".to_string()];
//! let r = check(&reference, &renamed, Some(&plan), true, &Limits::default()).unwrap();
//! assert!(r.faithful, "{:?}", r.explanation);
//! assert_eq!(r.schema_f1, 1.0);
//!
//! // Asking only to reach b is a weaker goal: solvable, not faithful.
//! let weaker = Spec { problem: reference.problem.replace("(:goal (at c))", "(:goal (at b))"), ..reference.clone() };
//! let r = check(&reference, &weaker, Some(&["(go a b)".to_string()]), true, &Limits::default()).unwrap();
//! assert!(!r.faithful);
//! assert_eq!(r.drift, Some(Drift::GoalWeakening));
//! ```
#![deny(missing_docs)]

mod agreement;
mod check;
mod goal;
mod invariant;
mod lifted;
mod mapping;
mod model;
mod schema;
mod search;
mod work;

pub use agreement::fact_agreement;
pub use lifted::{mutex_groups, GroupPart, MutexGroup};
pub use model::ModelError;
pub use onebrain_core::{Decision, Drift, FactAgreement, FaithfulnessReport, Overlap, Spec};

use onebrain_core::{BoxError, Checker};

/// Bounds on the checker's work. The defaults decide every PlanBench and Planetarium pair we
/// measured well inside a second natively; see the crate's benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Search nodes for all mapping searches of one check together (predicate pairings and
    /// object refinement nodes). Running out gives [`Decision::Undecided`].
    pub max_nodes: u64,
    /// How many viable predicate maps (pairings that admit an object map) are compared by
    /// their action schemas; more arise only when predicates are interchangeable in the init.
    pub max_pred_maps: usize,
    /// How many init-preserving object maps are tried when aligning the goals (symmetric
    /// objects give many; the closures prune all but the fitting ones).
    pub max_mappings: usize,
    /// Reachable reference states enumerated for an exact goal decision. 6-block BlocksWorld
    /// has 4,051 and 7-block 37,633; above the limit the goal is decided by closure.
    pub max_states: usize,
    /// Expanded states per bounded search in closure mode: for a reachable state that
    /// satisfies one goal and violates a fact of the other (a witness), when the invariants
    /// do not prove the fact implied. Running out gives [`Decision::Undecided`].
    pub max_search_nodes: usize,
    /// Work units every check may take whatever its size: a unit is one ground action
    /// scanned, one atom reset or one pool state looked at, the same count natively and under
    /// WebAssembly. Running out gives [`Decision::Undecided`] with what was established.
    pub work_base: u64,
    /// Work units more per unit of the reference task's [`TaskSize::units`] (its ground
    /// actions plus ground atoms), the measure one state expansion's cost grows with.
    pub work_per_size: u64,
}

impl Limits {
    /// The work budget of one check on a reference of `size`: `work_base + work_per_size ×
    /// size.units()`.
    pub fn max_work(&self, size: &TaskSize) -> u64 {
        self.work_base.saturating_add(self.work_per_size.saturating_mul(size.units()))
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_nodes: 200_000,
            max_pred_maps: 16,
            max_mappings: 64,
            max_states: 50_000,
            max_search_nodes: 5_000,
            work_base: WORK_BASE,
            work_per_size: WORK_PER_SIZE,
        }
    }
}

/// The default [`Limits::work_base`]. See [`WORK_PER_SIZE`].
pub const WORK_BASE: u64 = 20_000_000;

/// The default [`Limits::work_per_size`]. The corpus of large tasks (`examples/large.rs`,
/// `results/checker-large/`) measured what its decisions took; this leaves room above the
/// most any of them took per unit of size, so that the budget ends only checks that would
/// have searched far longer, and the plugin's fuel (`plugins/reference-checker/plugin.toml`)
/// is sized from it.
pub const WORK_PER_SIZE: u64 = 400_000;

/// The size of a task as the checker meets it: what it grounds to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskSize {
    /// Declared objects (domain constants included).
    pub objects: u64,
    /// Facts of the initial state.
    pub init_facts: u64,
    /// Ground atoms that can hold in some reachable state (relaxed reachability).
    pub atoms: u64,
    /// Ground actions over those atoms.
    pub actions: u64,
}

impl TaskSize {
    /// The measure budgets scale with: ground actions plus ground atoms. Expanding a state
    /// scans every ground action and a heuristic evaluation resets every atom, so this is what
    /// one step of every state-space stage costs; objects and facts grow slower than the work
    /// on BlocksWorld (actions grow with the square of the blocks) and faster on Logistics.
    pub fn units(&self) -> u64 {
        self.atoms + self.actions
    }
}

/// The size of `spec`'s task; an error when it does not parse or ground.
pub fn task_size(spec: &Spec) -> Result<TaskSize, CheckError> {
    let (domain, problem, task) = check::ground_reference(spec)?;
    Ok(check::size_of(&domain, &problem, &task))
}

/// Why no report could be made: the reference itself is unusable. A bad candidate is never
/// an error; it is an unfaithful report that says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// A reference file does not parse.
    #[error("the reference {file} does not parse: {message}")]
    ReferenceParse {
        /// `"domain"` or `"problem"`.
        file: &'static str,
        /// The parser's message, with its line and column.
        message: String,
    },
    /// The reference names undeclared predicates, objects or types.
    #[error("the reference spec is ill-formed: {0}")]
    ReferenceModel(#[source] ModelError),
    /// The reference cannot be grounded (ill-formed or too large).
    #[error("the reference spec cannot be grounded: {0}")]
    ReferenceGround(String),
}

/// Compares `candidate` with `reference`. `plan` is the plan the verifier found for the
/// candidate (steps like `"(unstack b a)"`), `solvable` whether it solved it; the checker
/// never runs a planner. Malformed candidates give an unfaithful report with the reason in
/// `explanation`; only an unusable reference is an error.
pub fn check(
    reference: &Spec,
    candidate: &Spec,
    plan: Option<&[String]>,
    solvable: bool,
    limits: &Limits,
) -> Result<FaithfulnessReport, CheckError> {
    check::run(reference, candidate, plan, solvable, limits)
}

/// The checker behind the [`Checker`] seam, natively. A candidate counts as solvable when a
/// plan is given, since the seam passes the verifier's plan only for solved specs.
#[derive(Clone, Debug, Default)]
pub struct ReferenceChecker {
    /// The search bounds.
    pub limits: Limits,
}

impl Checker for ReferenceChecker {
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport, BoxError> {
        Ok(check(reference, candidate, plan, plan.is_some(), &self.limits)?)
    }
}

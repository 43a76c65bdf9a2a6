//! Is a solved spec a solved *task*, or a gamed one? Four checks that need no
//! reference spec, only what a reward plugin sees: the task text, the spec and
//! the verifier's verdict. They catch the solvable-but-unfaithful answers this
//! project has measured: a goal stated as already true (the planner's plan is
//! then empty), objects the task names left out, actions stripped of their
//! preconditions.
//!
//! ```
//! use onebrain_sdk::gaming::{findings, GamingCheck};
//! use onebrain_sdk::{Outcome, Spec, Verdict};
//!
//! let domain = "(define (domain d) (:predicates (on ?x ?y))
//!   (:action put :parameters (?x ?y) :precondition (not (on ?x ?y)) :effect (on ?x ?y)))";
//! // The goal is already true at the start: solvable, and meaningless.
//! let problem = "(define (problem p) (:domain d) (:objects a b) (:init (on a b)) (:goal (on a b)))";
//! let spec = Spec { domain: domain.into(), problem: problem.into() };
//! let verdict = Verdict::new(Outcome::Solved, vec![], vec![]);
//! let found = findings("Put object a on object b.", &spec, &verdict).unwrap();
//! let checks: Vec<GamingCheck> = found.iter().map(|f| f.check).collect();
//! assert_eq!(checks, [GamingCheck::GoalAtInit, GamingCheck::EmptyPlan]);
//! ```

use std::collections::BTreeSet;

use crate::pddl;
use crate::types::{Spec, Verdict};

/// One way a solvable spec can stop meaning its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GamingCheck {
    /// The goal already holds in the initial state (closed world): nothing is asked.
    GoalAtInit,
    /// The verdict is solved with an empty plan: the planner had nothing to do.
    EmptyPlan,
    /// An object the task text names is not declared. Where the spec uses the text's
    /// names (one of them is declared), every named object must be; where it renames
    /// them all (PlanBench's references write `a`, `b` for "the red block"), it must
    /// declare at least as many objects as the text names.
    MissingObject,
    /// An action of the domain has no precondition: it can fire anywhere.
    UnguardedAction,
}

/// A failed check and what failed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The check.
    pub check: GamingCheck,
    /// What failed it, e.g. the missing object's name.
    pub detail: String,
}

/// The names the task text marks as objects:
/// - words with a digit that start with a letter (`ball1`, `location_0_1`, `c0`);
/// - `X` in "the X block" (BlocksWorld's wording);
/// - `X` in "object X" (Mystery BlocksWorld's wording).
///
/// Lower case, each once.
pub fn object_mentions(task_text: &str) -> BTreeSet<String> {
    let words: Vec<String> = task_text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_matches('-').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let mut names = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        let starts_with_letter = w.starts_with(|c: char| c.is_ascii_alphabetic());
        if starts_with_letter && w.chars().any(|c| c.is_ascii_digit()) {
            names.insert(w.clone());
        }
        if w == "block" && i >= 2 && words[i - 2] == "the" {
            names.insert(words[i - 1].clone());
        }
        if w == "object" {
            if let Some(next) = words.get(i + 1) {
                names.insert(next.clone());
            }
        }
    }
    names
}

/// Every check `spec` fails, in [`GamingCheck`]'s order; empty for a spec that passes
/// them all. Checks only a spec that parses: an error names the file that does not.
pub fn findings(task_text: &str, spec: &Spec, verdict: &Verdict) -> Result<Vec<Finding>, String> {
    let domain = pddl::parse_domain(&spec.domain).map_err(|e| format!("domain: {e}"))?;
    let problem = pddl::parse_problem(&spec.problem).map_err(|e| format!("problem: {e}"))?;
    let mut out = Vec::new();
    let mut fail = |check, detail: String| out.push(Finding { check, detail });

    let key = |a: &pddl::Atom| {
        let args: Vec<String> = a.args.iter().map(|t| t.name.to_ascii_lowercase()).collect();
        (a.predicate.to_ascii_lowercase(), args)
    };
    let init: BTreeSet<_> = problem.init.iter().map(key).collect();
    let holds = |l: &pddl::Literal| {
        let truth = if l.atom.is_equality() {
            let (_, args) = key(&l.atom);
            args.windows(2).all(|w| w[0] == w[1])
        } else {
            init.contains(&key(&l.atom))
        };
        truth == l.positive
    };
    if problem.goal.iter().all(holds) {
        fail(GamingCheck::GoalAtInit, format!("all {} goal facts hold in the initial state", problem.goal.len()));
    }

    if verdict.solved && verdict.plan.is_empty() {
        fail(GamingCheck::EmptyPlan, "the planner's plan is empty".into());
    }

    let declared: BTreeSet<String> = problem
        .objects
        .iter()
        .chain(&domain.constants)
        .map(|o| o.name.to_ascii_lowercase())
        .collect();
    let named = object_mentions(task_text);
    if named.iter().any(|n| declared.contains(n)) {
        let missing: Vec<&str> = named.iter().filter(|n| !declared.contains(*n)).map(String::as_str).collect();
        if !missing.is_empty() {
            fail(GamingCheck::MissingObject, format!("the task names {} but the spec does not declare it", missing.join(", ")));
        }
    } else if declared.len() < named.len() {
        fail(
            GamingCheck::MissingObject,
            format!("the task names {} objects, the spec declares {}", named.len(), declared.len()),
        );
    }

    for action in domain.actions.iter().filter(|a| a.precondition.is_empty()) {
        fail(GamingCheck::UnguardedAction, format!("action {} has no precondition", action.name));
    }
    Ok(out)
}

//! The rules a constraint holds an answer to on top of its grammar, named once for the guards
//! that apply them and the statistics that record where one gave way.

use serde::{Deserialize, Serialize};

/// A rule a constraint holds an answer to on top of its grammar. Each can give way: where,
/// with the rules judged before it, it would refuse every token the grammar allows, it lets
/// them through and says so ([`Relaxation`](crate::Relaxation)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardRule {
    /// `full` mode's domain guard: no name or literal twice, literals over the declared
    /// predicates, parameters and constants.
    Domain,
    /// The problem guard's own rules: no fact or object twice, sections inside their
    /// [`Limits`](crate::Limits), room left to close the answer.
    Problem,
    /// The Editor's earlier candidates: the goal may not close on one of them (`avoid` in
    /// [`ConstraintSpec::Problem`](crate::ConstraintSpec::Problem) and [`ConstraintSpec::Full`](crate::ConstraintSpec::Full)).
    Avoid,
    /// `forbid-init-mutex`: no two `:init` facts in one instance of a mutex group.
    InitMutex,
    /// `forbid-goal-at-init`: the goal may not close while it holds in `:init`.
    GoalAtInit,
    /// A plan's budget: the ```plan block and each step open only while they fit.
    PlanBudget,
    /// Blank runs and the share of blanks-only tokens.
    Blanks,
}

impl GuardRule {
    /// The rules that keep an answer from gaming the planner: an impossible initial state,
    /// or a goal that already holds. An answer one of them gave way in has a plan that
    /// proves nothing about the task, so it is judged unsolved without one
    /// ([`ConstraintStats::honesty_gave_way`](crate::ConstraintStats::honesty_gave_way)).
    pub const HONESTY: [GuardRule; 2] = [GuardRule::InitMutex, GuardRule::GoalAtInit];
}

//! The verdict on an answer whose honesty guard gave way.
//!
//! `forbid-init-mutex` and `forbid-goal-at-init` keep an answer from gaming the planner with
//! an impossible initial state or a goal that already holds. Where every token the grammar
//! allowed would have broken one of them, the constraint lets the answer go on rather than
//! leave the sampler nothing ([`onebrain_model::ConstraintStats::honesty_gave_way`]). Such an
//! answer still parses, but a plan for it proves nothing about the task: it is judged
//! unsolved, with the rule and the token it gave way at as its reason, and the planner is not
//! called. The Editor, where the budget leaves one, sees that reason as its diagnostic.

use onebrain_core::{Category, Diagnostic, Outcome, Verdict};
use onebrain_model::{ConstraintStats, GuardRule};

/// The verdict on an answer decoded under `stats`: `None` unless an honesty rule gave way.
pub(crate) fn honesty_gave_way_verdict(stats: &ConstraintStats) -> Option<Verdict> {
    let gave_way = stats.honesty_gave_way()?;
    // The spec option that switched the rule on, and what every way on would have written.
    let (option, broken) = match gave_way.rule {
        GuardRule::InitMutex => ("forbid-init-mutex", "put two `:init` facts in one mutex group (an impossible initial state)"),
        _ => ("forbid-goal-at-init", "closed the goal while it holds in `:init` (a goal with an empty plan)"),
    };
    let message = format!(
        "{option} left no token at answer token {}: every way on {broken}, so the answer is \
         unsolved and the planner was not called",
        gave_way.position,
    );
    Some(Verdict::new(Outcome::Rejected, Vec::new(), vec![Diagnostic::error(Category::GoalConstraint, message)]))
}

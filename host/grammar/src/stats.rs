//! What one constrained generation counts: its costs, and each place a rule on top of the
//! grammar gave way.

use serde::{Deserialize, Serialize};

use crate::guard_rule::GuardRule;

/// Counters of one constrained generation, for the cost figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConstraintStats {
    /// Milliseconds spent compiling grammars (every stage).
    pub build_ms: f64,
    /// Microseconds spent computing masks (grammar and guard).
    pub mask_us: f64,
    /// Masks computed.
    pub masks: u32,
    /// Tokens the grammar forced (appended without sampling).
    pub forced: u32,
    /// Grammar stages entered after the first.
    pub stage_switches: u32,
    /// Tokens the guard refused (repeats, full sections, budget).
    pub guard_refusals: u64,
    /// Positions where the rules on top of the grammar would together have refused every
    /// token it allowed, so that some gave way ([`ConstraintStats::relaxations`] says which).
    /// The grammar itself never gives way.
    pub guard_overrides: u32,
    /// Each rule that gave way, and where: what an episode's trace records of the answers
    /// its rules could not hold (see [`TokenConstraint::allowed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relaxations: Vec<Relaxation>,
}

impl ConstraintStats {
    /// The first place one of the [`GuardRule::HONESTY`] rules gave way: the answer there
    /// could only go on into an impossible initial state or a goal that already holds.
    pub fn honesty_gave_way(&self) -> Option<&Relaxation> {
        self.relaxations.iter().find(|r| GuardRule::HONESTY.contains(&r.rule))
    }
}

/// Where a rule gave way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relaxation {
    /// The answer's token (0-based) whose mask the rule gave way in.
    pub position: usize,
    /// The rule.
    pub rule: GuardRule,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Traces written before relaxations were recorded read the same, and one with none
    /// writes none.
    #[test]
    fn relaxations_are_recorded_only_where_a_rule_gave_way() {
        let none = serde_json::to_string(&ConstraintStats::default()).unwrap();
        assert!(!none.contains("relaxations"), "{none}");
        assert_eq!(serde_json::from_str::<ConstraintStats>(&none).unwrap(), ConstraintStats::default());
        let one = ConstraintStats { guard_overrides: 1, relaxations: vec![Relaxation { position: 7, rule: GuardRule::InitMutex }], ..ConstraintStats::default() };
        let json = serde_json::to_string(&one).unwrap();
        assert!(json.contains(r#""rule":"init-mutex""#), "{json}");
        assert_eq!(serde_json::from_str::<ConstraintStats>(&json).unwrap(), one);
    }

    /// Only the rules against gaming the planner make an answer dishonest where they give
    /// way; a repeat of an earlier candidate or a full section does not.
    #[test]
    fn honesty_gave_way_names_the_first_init_mutex_or_goal_at_init_relaxation() {
        let at = |position, rule| Relaxation { position, rule };
        let mut stats = ConstraintStats { relaxations: vec![at(3, GuardRule::Avoid), at(5, GuardRule::Problem)], ..ConstraintStats::default() };
        assert_eq!(stats.honesty_gave_way(), None);
        stats.relaxations.extend([at(9, GuardRule::GoalAtInit), at(11, GuardRule::InitMutex)]);
        assert_eq!(stats.honesty_gave_way(), Some(&at(9, GuardRule::GoalAtInit)));
    }
}

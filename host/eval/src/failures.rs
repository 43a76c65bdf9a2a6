//! Which steps of an episode failed, and why (issue 35's fault-injection soak), read back from
//! what the episode recorded.
//!
//! An episode keeps its failures in one line, [`EpisodeRecord::error`]: first a model error
//! (`model error (actor): …`), then what `onebrain_roles::Finalizer` adds, `reward plugin: …`
//! and `faithfulness checker: …`, joined by `"; "`. A plugin's part is a `PluginError`:
//! `plugin NAME@VERSION` and then a fixed phrase per kind (`trapped: …`, `timed out after …`,
//! `ran out of fuel …`, `returned an invalid value: …`, `reported an error: …`), which gives
//! the [`FailureCause`].
//!
//! A plugin's own message is free text and could imitate a separator, so the record's fields
//! decide which plugins failed: the reward failed only if the record has no rewards, the
//! checker only if it has no faithfulness report (each is set when its plugin answers). The
//! checker's part is the last one, so a reward's message cannot pass for a checker failure
//! when the checker answered.

use std::collections::BTreeMap;

use onebrain_roles::EpisodeRecord;
use serde::{Deserialize, Serialize};

/// The part of an episode that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailedStep {
    /// The language model (an Actor, Editor or Judge request).
    Model,
    /// The reward plugin.
    Reward,
    /// The faithfulness checker.
    Checker,
    /// An error text this reader does not know.
    Other,
}

impl FailedStep {
    /// Every step, in table order.
    pub const ALL: [FailedStep; 4] = [FailedStep::Model, FailedStep::Reward, FailedStep::Checker, FailedStep::Other];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailedStep::Model => "model",
            FailedStep::Reward => "reward",
            FailedStep::Checker => "checker",
            FailedStep::Other => "other",
        }
    }
}

/// Why a step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureCause {
    /// The plugin trapped: a panic (`unreachable` under `panic = "abort"`), another trap, a
    /// stack overflow.
    Trap,
    /// The plugin answered NaN or ±∞ where the host takes only a finite number.
    NonFinite,
    /// The plugin ran past its wall-clock limit.
    Timeout,
    /// The plugin used up its fuel.
    Fuel,
    /// The host refused another value: a reward out of bounds, a self-contradictory report.
    Invalid,
    /// The plugin answered with an error of its own.
    Reported,
    /// Anything else: the memory or output cap, a model error, a text this reader does not know.
    Other,
}

impl FailureCause {
    /// Every cause, in table order.
    pub const ALL: [FailureCause; 7] = [
        FailureCause::Trap,
        FailureCause::NonFinite,
        FailureCause::Timeout,
        FailureCause::Fuel,
        FailureCause::Invalid,
        FailureCause::Reported,
        FailureCause::Other,
    ];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::Trap => "trap",
            FailureCause::NonFinite => "non-finite",
            FailureCause::Timeout => "timeout",
            FailureCause::Fuel => "fuel",
            FailureCause::Invalid => "invalid",
            FailureCause::Reported => "reported",
            FailureCause::Other => "other",
        }
    }
}

/// One failed step of one episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Failure {
    /// What failed.
    pub step: FailedStep,
    /// Why.
    pub cause: FailureCause,
}

/// How many episodes' `step` failed for `cause`: a row of the report's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureCount {
    /// What failed.
    pub step: FailedStep,
    /// Why.
    pub cause: FailureCause,
    /// Episodes.
    pub count: usize,
}

/// The prefixes `onebrain_roles::Finalizer` and the episode driver write.
const MODEL: &str = "model error (";
const REWARD: &str = "reward plugin: ";
const CHECKER: &str = "faithfulness checker: ";
const SEPARATOR: &str = "; ";

/// Where the parts that start with `prefix` begin: at the start of `error`, or after a separator.
fn starts(error: &str, prefix: &str) -> Vec<usize> {
    let at_start = error.starts_with(prefix).then_some(0);
    let separated = format!("{SEPARATOR}{prefix}");
    let after = error.match_indices(&separated).map(|(i, _)| i + SEPARATOR.len());
    at_start.into_iter().chain(after).collect()
}

/// The failed steps of one episode, in the order they happened, each with its cause. Empty
/// when the episode recorded no error.
pub fn failures(rec: &EpisodeRecord) -> Vec<Failure> {
    let Some(error) = rec.error.as_deref() else {
        return Vec::new();
    };
    let checker = starts(error, CHECKER).last().copied().filter(|_| rec.faithfulness.is_none());
    let reward = starts(error, REWARD)
        .first()
        .copied()
        .filter(|&i| rec.rewards.is_none() && checker.is_none_or(|c| i < c));
    let mut out = Vec::new();
    if error.starts_with(MODEL) {
        out.push(Failure { step: FailedStep::Model, cause: FailureCause::Other });
    }
    if let Some(i) = reward {
        let end = checker.map_or(error.len(), |c| c - SEPARATOR.len());
        out.push(Failure { step: FailedStep::Reward, cause: plugin_cause(&error[i + REWARD.len()..end]) });
    }
    if let Some(c) = checker {
        out.push(Failure { step: FailedStep::Checker, cause: plugin_cause(&error[c + CHECKER.len()..]) });
    }
    if out.is_empty() {
        out.push(Failure { step: FailedStep::Other, cause: FailureCause::Other });
    }
    out
}

/// The cause of one plugin's failure, from its `PluginError` text: `plugin NAME@VERSION`
/// (a version has no spaces; a bare component's name is its file's, which may), then the
/// kind's fixed phrase.
fn plugin_cause(text: &str) -> FailureCause {
    let after_name = text.strip_prefix("plugin ").and_then(|t| t.split_once('@')).map(|(_, v)| v);
    let Some(kind) = after_name.and_then(|v| v.split_once(' ')).map(|(_, k)| k) else {
        return FailureCause::Other;
    };
    if kind.starts_with("trapped: ") || kind == "stack overflow" {
        FailureCause::Trap
    } else if kind.starts_with("timed out after ") {
        FailureCause::Timeout
    } else if kind.starts_with("ran out of fuel ") {
        FailureCause::Fuel
    } else if kind.starts_with("reported an error: ") {
        FailureCause::Reported
    } else if let Some(why) = kind.strip_prefix("returned an invalid value: ") {
        if non_finite(why) {
            FailureCause::NonFinite
        } else {
            FailureCause::Invalid
        }
    } else {
        FailureCause::Other
    }
}

/// Whether the host refused a value for not being finite: a reward ("the actor reward is NaN,
/// not a finite number") or a checker's F1 ("schema_f1 is NaN, not a number in [0, 1]").
fn non_finite(why: &str) -> bool {
    if why.starts_with("the ") && why.ends_with(", not a finite number") {
        return true;
    }
    why.strip_prefix("schema_f1 is ")
        .and_then(|v| v.split_once(','))
        .and_then(|(v, _)| v.parse::<f64>().ok())
        .is_some_and(|v| !v.is_finite())
}

/// The failures of `records`, counted by step and cause (the rows with a count, in table order).
pub fn count_failures<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Vec<FailureCount> {
    let mut counts: BTreeMap<(FailedStep, FailureCause), usize> = BTreeMap::new();
    for f in records.into_iter().flat_map(failures) {
        *counts.entry((f.step, f.cause)).or_default() += 1;
    }
    counts.into_iter().map(|((step, cause), count)| FailureCount { step, cause, count }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::{FaithfulnessReport, Rewards};
    use onebrain_runtime::{PluginError, PluginErrorKind, PluginId};
    use std::time::Duration;

    /// An error as a plugin call leaves it: the host's own `PluginError` text.
    fn plugin(kind: PluginErrorKind) -> String {
        let plugin = PluginId { name: "chaos_reward".into(), version: "0.0.0".into() };
        PluginError { plugin, kind }.to_string()
    }

    fn trap() -> String {
        plugin(PluginErrorKind::Trap {
            trap: "wasm `unreachable` instruction executed".into(),
            stderr: "panicked at src/lib.rs:3:5: chaos-reward: a trap on purpose".into(),
        })
    }

    /// A multi-role record with `error`; the plugins answered only where `rewards` and
    /// `faithfulness` say so.
    fn record(error: Option<String>, rewards: bool, faithfulness: bool) -> EpisodeRecord {
        let line = serde_json::json!({
            "task_id": "t", "domain": "d", "strategy": "multi-role", "mode": "problem", "model": "m",
            "task_text": "x", "steps": [], "b0": false, "solved": false, "repairs": 0,
            "solver_calls": 1, "planner_calls": 1, "final_plan": [],
            "timings": { "wall_ms": 0.0, "generation_ms": 0.0, "verification_ms": 0.0,
                         "planner_ms": 0.0, "judge_ms": 0.0, "plugins_ms": 0.0 },
        });
        let mut rec: EpisodeRecord = serde_json::from_value(line).unwrap();
        rec.error = error;
        rec.rewards = rewards.then(Rewards::default);
        rec.faithfulness = faithfulness.then(FaithfulnessReport::default);
        rec
    }

    fn one(step: FailedStep, cause: FailureCause) -> Vec<Failure> {
        vec![Failure { step, cause }]
    }

    #[test]
    fn each_plugin_error_kind_is_read_back_as_its_cause() {
        use FailureCause as C;
        let cases = [
            (trap(), C::Trap),
            (plugin(PluginErrorKind::StackOverflow), C::Trap),
            (plugin(PluginErrorKind::Timeout { limit: Duration::from_secs(2) }), C::Timeout),
            (plugin(PluginErrorKind::FuelExhausted { fuel: 10_000_000_000 }), C::Fuel),
            // The texts of host/runtime/src/validate.rs.
            (plugin(PluginErrorKind::Invalid("the actor reward is NaN, not a finite number".into())), C::NonFinite),
            (plugin(PluginErrorKind::Invalid("the editor step 3 reward is -inf, not a finite number".into())), C::NonFinite),
            (plugin(PluginErrorKind::Invalid("the actor reward 100.5 is outside [-100, 100]".into())), C::Invalid),
            (plugin(PluginErrorKind::Guest("judge score 2 is outside [0, 1]".into())), C::Reported),
            (plugin(PluginErrorKind::MemoryLimit { limit_bytes: 64 << 20 }), C::Other),
            (plugin(PluginErrorKind::OutputTooLarge { bytes: None, limit: 1 << 20 }), C::Other),
        ];
        let spaced = PluginError {
            plugin: PluginId { name: "my reward".into(), version: "0.0.0".into() },
            kind: PluginErrorKind::FuelExhausted { fuel: 1 },
        };
        let rec = record(Some(format!("reward plugin: {spaced}")), false, true);
        assert_eq!(failures(&rec), one(FailedStep::Reward, C::Fuel), "a bare component's file name may have spaces");
        for (text, cause) in cases {
            let rec = record(Some(format!("reward plugin: {text}")), false, true);
            assert_eq!(failures(&rec), one(FailedStep::Reward, cause), "{text}");
        }
        for (f1, cause) in [("NaN", C::NonFinite), ("inf", C::NonFinite), ("1.5", C::Invalid)] {
            let text = plugin(PluginErrorKind::Invalid(format!("schema_f1 is {f1}, not a number in [0, 1]")));
            let rec = record(Some(format!("faithfulness checker: {text}")), true, false);
            assert_eq!(failures(&rec), one(FailedStep::Checker, cause), "{text}");
        }
    }

    #[test]
    fn a_model_error_and_both_plugins_in_one_record_are_three_failures() {
        let timeout = plugin(PluginErrorKind::Timeout { limit: Duration::from_secs(2) });
        let error = format!("model error (editor): out of memory; reward plugin: {}; faithfulness checker: {timeout}", trap());
        let got = failures(&record(Some(error), false, false));
        let want = [
            (FailedStep::Model, FailureCause::Other),
            (FailedStep::Reward, FailureCause::Trap),
            (FailedStep::Checker, FailureCause::Timeout),
        ]
        .map(|(step, cause)| Failure { step, cause });
        assert_eq!(got, want);
        assert!(failures(&record(None, true, true)).is_empty());
        let unknown = record(Some("something new".into()), true, true);
        assert_eq!(failures(&unknown), one(FailedStep::Other, FailureCause::Other));
    }

    #[test]
    fn a_reward_message_cannot_pass_for_a_checker_failure() {
        // The reward reports an error whose text imitates a checker timeout; the checker answered.
        let fake = "x; faithfulness checker: plugin chaos_checker@0.0.0 timed out after 2s";
        let rec = record(Some(format!("reward plugin: {}", plugin(PluginErrorKind::Guest(fake.into())))), false, true);
        assert_eq!(failures(&rec), one(FailedStep::Reward, FailureCause::Reported));
        // Both failed: the checker's part is the last one, the reward's is whole before it.
        let error = format!("reward plugin: {}; faithfulness checker: {}", plugin(PluginErrorKind::Guest(fake.into())), trap());
        let got = failures(&record(Some(error), false, false));
        assert_eq!(got[0], Failure { step: FailedStep::Reward, cause: FailureCause::Reported });
        assert_eq!(got[1], Failure { step: FailedStep::Checker, cause: FailureCause::Trap });
    }

    #[test]
    fn failures_are_counted_by_step_and_cause() {
        let recs = [
            record(Some(format!("reward plugin: {}", trap())), false, true),
            record(Some(format!("reward plugin: {}", trap())), false, true),
            record(Some(format!("faithfulness checker: {}", trap())), true, false),
            record(None, true, true),
        ];
        let rows = count_failures(&recs);
        assert_eq!(
            rows,
            [
                FailureCount { step: FailedStep::Reward, cause: FailureCause::Trap, count: 2 },
                FailureCount { step: FailedStep::Checker, cause: FailureCause::Trap, count: 1 },
            ]
        );
    }
}

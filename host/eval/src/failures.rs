//! Which steps of an episode failed, and why (the fault-injection soak), read back from
//! what the episode recorded.
//!
//! A plugin's failure is read from the record's structured field, [`EpisodeRecord::failures`]:
//! `onebrain_roles::Finalizer` writes one [`PluginFailure`] per failed reward or checker call,
//! with the plugin host's own [`FailureKind`], which gives the [`FailureCause`]. The error's
//! text ([`EpisodeRecord::error`], `reward plugin: …; faithfulness checker: …`) is for people
//! and is never parsed for a plugin: a reworded message cannot move a failure to another
//! cause, and a plugin's message cannot imitate another plugin's failure.
//!
//! There is no fallback to the text for traces written before the field existed: no committed
//! trace has a plugin error (`results/**/trace.jsonl.gz` and `episodes.jsonl.gz`, checked when
//! the field was added), and such a record counts as `other`, not in a bucket its words suggest.
//! A model error has no structured form yet; it is the text's first part, `model error (…`.

use std::collections::BTreeMap;

use onebrain_roles::{EpisodeRecord, FailedPlugin, PluginFailure};
use onebrain_runtime::FailureKind;
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
    /// An error this reader cannot place: neither a model error nor a recorded plugin failure
    /// (a plugin's, in a trace written before `failures` existed).
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
    /// Anything else: the memory or output cap, a plugin that would not load, a native
    /// checker's error (it has no kind), a model error, an error this reader cannot place.
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

/// The prefix of a model error, which the episode driver writes first in `error`.
const MODEL: &str = "model error (";

/// The failed steps of one episode, in the order they happened, each with its cause. Empty
/// when the episode recorded no error and no failure.
pub fn failures(rec: &EpisodeRecord) -> Vec<Failure> {
    let mut out = Vec::new();
    if rec.error.as_deref().is_some_and(|e| e.starts_with(MODEL)) {
        out.push(Failure { step: FailedStep::Model, cause: FailureCause::Other });
    }
    out.extend(rec.failures.iter().map(plugin_failure));
    if out.is_empty() && rec.error.is_some() {
        out.push(Failure { step: FailedStep::Other, cause: FailureCause::Other });
    }
    out
}

/// The step and cause of one failed plugin call, from its kind alone.
fn plugin_failure(f: &PluginFailure) -> Failure {
    let step = match f.plugin {
        FailedPlugin::Reward => FailedStep::Reward,
        FailedPlugin::Checker => FailedStep::Checker,
    };
    let cause = match f.kind {
        Some(FailureKind::Trap | FailureKind::StackOverflow) => FailureCause::Trap,
        Some(FailureKind::NonFinite) => FailureCause::NonFinite,
        Some(FailureKind::Timeout) => FailureCause::Timeout,
        Some(FailureKind::Fuel) => FailureCause::Fuel,
        Some(FailureKind::Invalid) => FailureCause::Invalid,
        Some(FailureKind::Reported) => FailureCause::Reported,
        Some(FailureKind::Memory | FailureKind::OutputTooLarge | FailureKind::Load | FailureKind::Runtime) | None => {
            FailureCause::Other
        }
    };
    Failure { step, cause }
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
    use onebrain_roles::Mode;
    use onebrain_runtime::{PluginError, PluginErrorKind, PluginId};
    use std::time::Duration;

    /// A failed call of `plugin` as `Finalizer` records it: the kind the host's error gives,
    /// and the error's text.
    fn failed(plugin: FailedPlugin, kind: PluginErrorKind) -> PluginFailure {
        let e = PluginError { plugin: PluginId { name: "chaos".into(), version: "0.0.0".into() }, kind };
        PluginFailure { plugin, kind: Some(e.failure_kind()), message: e.to_string() }
    }

    fn trap() -> PluginErrorKind {
        PluginErrorKind::Trap {
            trap: "wasm `unreachable` instruction executed".into(),
            stderr: "panicked at src/lib.rs:3:5: chaos-reward: a trap on purpose".into(),
        }
    }

    /// A multi-role record with `error` and the structured `failures`; the plugins answered
    /// where no failure says otherwise.
    fn record(error: Option<String>, failures: Vec<PluginFailure>) -> EpisodeRecord {
        let failed = |p| failures.iter().any(|f: &PluginFailure| f.plugin == p);
        EpisodeRecord {
            task_id: "t".into(),
            mode: Mode::Problem,
            solver_calls: 1,
            planner_calls: 1,
            rewards: (!failed(FailedPlugin::Reward)).then(Rewards::default),
            faithfulness: (!failed(FailedPlugin::Checker)).then(FaithfulnessReport::default),
            error,
            failures,
            ..Default::default()
        }
    }

    /// A record whose one failure is `f`, with the error text `Finalizer` writes for it.
    fn one_failure(f: PluginFailure) -> EpisodeRecord {
        let prefix = match f.plugin {
            FailedPlugin::Reward => "reward plugin",
            FailedPlugin::Checker => "faithfulness checker",
        };
        record(Some(format!("{prefix}: {}", f.message)), vec![f])
    }

    fn one(step: FailedStep, cause: FailureCause) -> Vec<Failure> {
        vec![Failure { step, cause }]
    }

    #[test]
    fn each_plugin_error_kind_is_read_back_as_its_cause() {
        use FailureCause as C;
        use PluginErrorKind as K;
        // Functions, not values: each case is made twice, once per plugin.
        let cases: [(fn() -> K, C); 10] = [
            (trap, C::Trap),
            (|| K::StackOverflow, C::Trap),
            (|| K::Timeout { limit: Duration::from_secs(2) }, C::Timeout),
            (|| K::FuelExhausted { fuel: 10_000_000_000 }, C::Fuel),
            (|| K::NonFinite("the actor reward is NaN, not a finite number".into()), C::NonFinite),
            (|| K::Invalid("the actor reward 100.5 is outside [-100, 100]".into()), C::Invalid),
            (|| K::Guest("judge score 2 is outside [0, 1]".into()), C::Reported),
            (|| K::MemoryLimit { limit_bytes: 64 << 20 }, C::Other),
            (|| K::OutputTooLarge { bytes: None, limit: 1 << 20 }, C::Other),
            (|| K::Runtime("wasmtime said no".into()), C::Other),
        ];
        for (kind, cause) in cases {
            for (plugin, step) in [(FailedPlugin::Reward, FailedStep::Reward), (FailedPlugin::Checker, FailedStep::Checker)] {
                let f = failed(plugin, kind());
                let msg = f.message.clone();
                assert_eq!(failures(&one_failure(f)), one(step, cause), "{msg}");
            }
        }
        // A native checker's error has no kind.
        let native = PluginFailure { plugin: FailedPlugin::Checker, kind: None, message: "parse error".into() };
        assert_eq!(failures(&one_failure(native)), one(FailedStep::Checker, C::Other));
    }

    #[test]
    fn a_model_error_and_both_plugins_in_one_record_are_three_failures() {
        let reward = failed(FailedPlugin::Reward, trap());
        let checker = failed(FailedPlugin::Checker, PluginErrorKind::Timeout { limit: Duration::from_secs(2) });
        let error =
            format!("model error (editor): out of memory; reward plugin: {}; faithfulness checker: {}", reward.message, checker.message);
        let got = failures(&record(Some(error), vec![reward, checker]));
        let want = [
            (FailedStep::Model, FailureCause::Other),
            (FailedStep::Reward, FailureCause::Trap),
            (FailedStep::Checker, FailureCause::Timeout),
        ]
        .map(|(step, cause)| Failure { step, cause });
        assert_eq!(got, want);
        assert!(failures(&record(None, vec![])).is_empty());
        let unknown = record(Some("something new".into()), vec![]);
        assert_eq!(failures(&unknown), one(FailedStep::Other, FailureCause::Other));
    }

    /// The cause comes from the recorded kind, never from the words: a message reworded to
    /// say something unrelated, or to imitate another failure, leaves the table as it was.
    #[test]
    fn a_reworded_message_does_not_change_the_table() {
        let table = |message: &str| {
            let f = PluginFailure { message: message.into(), ..failed(FailedPlugin::Reward, trap()) };
            count_failures(&[record(Some(format!("reward plugin: {message}")), vec![f])])
        };
        let want = [FailureCount { step: FailedStep::Reward, cause: FailureCause::Trap, count: 1 }];
        for message in [
            "plugin chaos@0.0.0 trapped: wasm `unreachable` instruction executed",
            "the guest stopped: wasm `unreachable` instruction executed",
            "plugin chaos@0.0.0 ran out of fuel (10 units)",
            "plugin chaos@0.0.0 returned an invalid value: the actor reward is NaN, not a finite number",
            "x; faithfulness checker: plugin chaos_checker@0.0.0 timed out after 2s",
            "",
        ] {
            assert_eq!(table(message), want, "{message:?}");
        }
    }

    /// A record written before `failures` existed says what failed only in its text, which is
    /// not parsed: it counts as `other`, never as the cause its words name.
    #[test]
    fn an_old_record_with_only_the_text_counts_as_other() {
        let text = "reward plugin: plugin chaos@0.0.0 ran out of fuel (10 units)";
        let mut rec = record(Some(text.into()), vec![]);
        rec.rewards = None;
        let line = serde_json::to_string(&rec).unwrap();
        assert!(!line.contains("\"failures\""), "an empty list is not written: {line}");
        let back: EpisodeRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(failures(&back), one(FailedStep::Other, FailureCause::Other));
    }

    #[test]
    fn failures_are_counted_by_step_and_cause() {
        let recs = [
            one_failure(failed(FailedPlugin::Reward, trap())),
            one_failure(failed(FailedPlugin::Reward, trap())),
            one_failure(failed(FailedPlugin::Checker, trap())),
            record(None, vec![]),
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

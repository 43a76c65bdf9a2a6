//! Benchmark loaders, metrics, the evaluation runner and its reports.
//!
//! [`run_eval`] is `onebrain eval --config configs/eval-*.toml` ([`EvalConfig`]): it loads the
//! [`Benchmark`] tasks (PlanBench sets, Planetarium rows, plugin-generated tasks), runs every
//! configured strategy on each through `onebrain-roles`, appends each episode to a JSONL trace
//! ([`TraceWriter`], one [`TraceRow`] a line: the episode and its task's size; a rerun
//! resumes from it), and writes the [`Report`] (Markdown, JSON and SVG plots, results per
//! [`SizeBucket`] among them) next to the trace. [`write_report`] recomputes the report from a trace alone.
//! Episodes whose model or plugins failed are recorded like the others; [`failures`] reads
//! back which step failed and why (trap, NaN, timeout, fuel, …), and the report counts them.
//! An episode that stopped on an error of its own (a model error, such as a request the
//! memory budget refused) has no answer: the report counts it apart, in no rate's
//! denominator, and a run whose every episode stopped so is [`EvalError::NoAnswers`] to
//! `onebrain eval`.
//!
//! A run holds its folder's lock ([`onebrain_durable::FolderLock`]: a second process is
//! refused), records its plugins' digests in `plugins.json` and refuses to resume with a
//! plugin whose component changed ([`check_plugins`]), stops between two episodes when SIGINT
//! or SIGTERM asks ([`EvalError::Stopped`]), and writes every file whole: a full disk is an
//! error naming the file, and the trace keeps every record it had.
//!
//! The metrics are the numbers evaluations and training runs report, computed from the
//! faithfulness checker's [`FaithfulnessReport`]s (one per task):
//!
//! - [`FaithfulnessMetrics::from_reports`]: Solvability = mean S_i, FaithfulSuccess = mean C_i,
//!   Drift = Σ S_i(1−C_i) / Σ S_i, Gap = Solvability − FaithfulSuccess, the goal-preservation
//!   rate, mean Schema-F1, the distribution of drift categories and of goal decisions; a
//!   result the checker left undecided (its budget ran out) is counted apart, in no rate.
//! - [`disagreement_bound`]: ε̂, the solver–correctness disagreement, with its Hoeffding bound
//!   ε ≤ ε̂ + sqrt(ln(k/δ) / 2n) (δ split over k checkpoints by the union bound).
//! - [`roc_auc`]: the Judge's ROC AUC, ties counted one half.
//!
//! ```
//! use onebrain_core::{Drift, FaithfulnessReport};
//! use onebrain_eval::{disagreement_bound, roc_auc, FaithfulnessMetrics};
//!
//! let faithful = FaithfulnessReport { solvable: true, faithful: true, ..Default::default() };
//! let weakened = FaithfulnessReport { solvable: true, drift: Some(Drift::GoalWeakening), ..Default::default() };
//! let unsolved = FaithfulnessReport::default();
//! let m = FaithfulnessMetrics::from_reports(&[faithful.clone(), weakened.clone(), unsolved.clone()]);
//! assert!((m.solvability - 2.0 / 3.0).abs() < 1e-12);
//! assert_eq!(m.drift, Some(0.5));
//! assert_eq!(m.drift_categories.goal_weakening, 1);
//!
//! let b = disagreement_bound(&[faithful, weakened, unsolved], 0.05, 1).unwrap();
//! assert!((b.eps_hat - 1.0 / 3.0).abs() < 1e-12 && b.bound > b.eps_hat);
//!
//! assert_eq!(roc_auc(&[0.9, 0.2], &[true, false]).unwrap(), 1.0);
//! ```
#![deny(missing_docs)]

mod config;
mod failures;
mod metrics;
mod planbench;
mod plugins;
mod report;
mod runner;
mod shard;
mod svg;
mod tasks;
mod trace;
mod transfer;

pub use config::{ConfigError, EvalConfig, ReportConfig};
pub use failures::{count_failures, failures, FailedStep, Failure, FailureCause, FailureCount};
pub use report::{
    JudgeReport, Rate, Report, ReportPaths, SizeRate, StrategyReport, Summary, TimingReport, MAX_H,
};
pub use plugins::{check_plugins, check_plugins_against, PluginRecordError, PLUGINS_FILE};
pub use svg::line_chart;
pub use runner::{
    merge_eval, progress_line, run_eval, run_eval_with, trace_path, write_report, EvalError, EvalOutcome,
    Progress,
};
pub use shard::{config_digest, merge_shards, Merged, PlannedEpisode, Shard, ShardError, ShardManifest};
pub use tasks::{planbench_task, plugin_for_set, Benchmark, SourceKind, TaskError};
pub use trace::{
    parse_jsonl, read_jsonl, read_trace, read_trace_rows, retain_jsonl, Retained, TraceContents, TraceError, TraceRow,
    TraceWriter,
};
pub use transfer::{
    run_transfer, run_transfer_eval, transfer_items, transfer_table, TransferBenchmark, TransferItem, TransferKind,
    TransferLoadError, TransferRecord, TransferRunError,
};

pub use metrics::{
    disagreement_bound, AgreementTotals, hoeffding_bound, is_undecided, roc_auc, DecisionCounts, DisagreementBound,
    DriftCounts, FaithfulnessMetrics, MetricsError, SizeBucket, wilson_interval,
};
pub use planbench::{load_planbench, LoadError, PlanBenchSet, PlanBenchTask};

//! Logging (plumbing, not algorithm): one JSON line per update in `metrics.jsonl`, with
//! CleanRL's fixed keys, and the learning curves as `curves.svg`.

use std::path::{Path, PathBuf};

use onebrain_eval::TraceWriter;
use serde::{Deserialize, Serialize};

use crate::batch::{calibration_error, RolloutStats};
use crate::error::TrainError;
use crate::learner::UpdateStats;

/// One update's line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsRow {
    /// Updates completed, this one included.
    pub update: u64,
    /// Episodes run so far.
    pub global_episodes: u64,
    /// Mean b_0 of the batch's episodes (sampled at the training temperature).
    #[serde(rename = "charts/success_b0")]
    pub success_b0: f64,
    /// Mean b_T.
    #[serde(rename = "charts/success_bT")]
    pub success_bt: f64,
    /// Mean R_A.
    #[serde(rename = "charts/reward_actor")]
    pub reward_actor: f64,
    /// Mean R_E over episodes with repairs.
    #[serde(rename = "charts/reward_editor")]
    pub reward_editor: Option<f64>,
    /// Mean of the Judge's logged reward (the ±1 / ±0.5 table).
    #[serde(rename = "charts/reward_judge")]
    pub reward_judge: f64,
    /// Mean repairs per episode.
    #[serde(rename = "charts/repairs")]
    pub repairs: f64,
    /// Episodes that ended in an error.
    #[serde(rename = "charts/errors")]
    pub errors: usize,
    /// Share of the solved episodes whose goal already held in the initial state (empty
    /// plan): reward hacking shows here first.
    #[serde(rename = "charts/solved_goal_at_init", default)]
    pub solved_goal_at_init: Option<f64>,
    /// The Judge's ROC AUC on this batch (needs both outcomes present).
    #[serde(rename = "judge/auc")]
    pub judge_auc: Option<f64>,
    /// The Judge's expected calibration error (10 bins).
    #[serde(rename = "judge/calibration_error")]
    pub judge_ece: Option<f64>,
    /// Mean s_J.
    #[serde(rename = "judge/mean_score")]
    pub judge_mean: Option<f64>,
    /// Actor's clipped surrogate.
    #[serde(rename = "losses/policy_actor")]
    pub policy_actor: Option<f32>,
    /// Editor's clipped surrogate.
    #[serde(rename = "losses/policy_editor")]
    pub policy_editor: Option<f32>,
    /// Value loss.
    #[serde(rename = "losses/value_loss")]
    pub value: Option<f32>,
    /// Judge loss.
    #[serde(rename = "losses/judge_loss")]
    pub judge: Option<f32>,
    /// The joint loss.
    #[serde(rename = "losses/total")]
    pub total: f32,
    /// Mean token entropy.
    #[serde(rename = "losses/entropy")]
    pub entropy: Option<f32>,
    /// Approximate KL(old ‖ new).
    #[serde(rename = "losses/approx_kl")]
    pub approx_kl: f32,
    /// Share of clipped tokens.
    #[serde(rename = "losses/clipfrac")]
    pub clipfrac: f32,
    /// Mean |log π − log π_old| per token of the first minibatch, before its step.
    #[serde(rename = "losses/first_abs_log_ratio", default)]
    pub first_abs_log_ratio: Option<f32>,
    /// Mean |log π_learner − log π_sampler| per token: the sampler's recorded log-probabilities
    /// against the learner's old ones for the same tokens.
    #[serde(rename = "losses/sampler_gap", default)]
    pub sampler_gap: Option<f32>,
    /// Where log π_old came from: `scoring-pass`, `first-forward` or
    /// `first-forward+scoring-pass` ([`crate::UpdateStats::old_logp_source`]).
    #[serde(rename = "losses/old_logp_source", default)]
    pub old_logp_source: String,
    /// KL to the initial policy.
    #[serde(rename = "losses/kl_ref")]
    pub kl_ref: Option<f32>,
    /// Explained variance of the value head.
    #[serde(rename = "losses/explained_variance")]
    pub explained_variance: Option<f32>,
    /// Gradient norm before clipping.
    #[serde(rename = "losses/grad_norm")]
    pub grad_norm: f32,
    /// Optimizer steps dropped for a non-finite gradient.
    #[serde(rename = "losses/dropped_steps", default)]
    pub dropped_steps: usize,
    /// Candidates the task stream has skipped so far (cumulative) because they equal a
    /// held-out task up to a renaming of objects (`skipped-twins.jsonl` names them).
    #[serde(rename = "tasks/twins_skipped", default)]
    pub twins_skipped: u64,
    /// Policy samples the update skipped: every loss term of theirs was zero.
    #[serde(rename = "perf/skipped_samples")]
    pub skipped_samples: usize,
    /// The Actor's and Editor's prompt heads the update took as the rollouts' sampler
    /// computed them (`detach-prompt`; inert samples need none).
    #[serde(rename = "perf/prompt_heads_kept", default)]
    pub prompt_heads_kept: usize,
    /// The Actor's and Editor's prompt heads the update computed itself.
    #[serde(rename = "perf/prompt_heads_computed", default)]
    pub prompt_heads_computed: usize,
    /// Generated tokens per second of the rollouts' wall clock: the aggregate rate of the
    /// episodes decoding together. (Rows written before this divided by the sum of the
    /// episodes' own generation times, which counts a batched second once per row: they read
    /// 1–3 tokens/s where the aggregate was about 40.)
    #[serde(rename = "perf/gen_tokens_per_s")]
    pub gen_tokens_per_s: f64,
    /// Tokens through forward + backward per second during the update.
    #[serde(rename = "perf/train_tokens_per_s")]
    pub train_tokens_per_s: f64,
    /// Seconds of rollouts (generation + verification, overlapped).
    #[serde(rename = "time/rollout_s")]
    pub rollout_secs: f64,
    /// Seconds of verification inside the rollouts.
    #[serde(rename = "time/verify_s")]
    pub verify_secs: f64,
    /// Seconds of the update.
    #[serde(rename = "time/update_s")]
    pub update_secs: f64,
    /// Seconds of the update's scoring pass (π_old, values and reference log-probabilities
    /// before the first step); absent in rows from before it was logged.
    #[serde(rename = "time/score_s", default)]
    pub score_secs: Option<f64>,
    /// CPU seconds the process ran (user and system) during the rollouts: on a shared virtual
    /// machine a truer measure of our own work than wall time.
    #[serde(rename = "time/rollout_cpu_s", default)]
    pub rollout_cpu_secs: Option<f64>,
    /// CPU seconds the process ran during the update.
    #[serde(rename = "time/update_cpu_s", default)]
    pub update_cpu_secs: Option<f64>,
    /// Steal time on the machine during the step (rollouts and update), summed over its CPUs:
    /// seconds the hypervisor gave our cores to another guest. Far from 0, the wall times
    /// above measure the neighbours too.
    #[serde(rename = "time/steal_s", default)]
    pub steal_secs: Option<f64>,
    /// Resident memory after the update, MiB: a run's memory must stay flat.
    #[serde(rename = "perf/rss_mib", default)]
    pub rss_mib: Option<f64>,
    /// The process's peak resident memory so far, MiB (the kernel's high-water marks of
    /// every phase since it started, held-out evaluations included).
    #[serde(rename = "perf/peak_rss_mib", default)]
    pub peak_rss_mib: Option<f64>,
    /// Peak resident memory during this step's rollouts, MiB: which phase sets the peak.
    #[serde(rename = "perf/rollout_peak_rss_mib", default, skip_serializing_if = "Option::is_none")]
    pub rollout_peak_rss_mib: Option<f64>,
    /// Peak resident memory during this step's update, MiB.
    #[serde(rename = "perf/update_peak_rss_mib", default, skip_serializing_if = "Option::is_none")]
    pub update_peak_rss_mib: Option<f64>,
    /// The most heap the rollouts held at once, MiB, where the binary counts it
    /// ([`onebrain_model::CountingAllocator`]): under the resident peak by what the heap
    /// kept mapped and free.
    #[serde(rename = "perf/rollout_peak_heap_mib", default, skip_serializing_if = "Option::is_none")]
    pub rollout_peak_heap_mib: Option<f64>,
    /// The most heap the update held at once, MiB.
    #[serde(rename = "perf/update_peak_heap_mib", default, skip_serializing_if = "Option::is_none")]
    pub update_peak_heap_mib: Option<f64>,
    /// Training over a job array only ([`crate::ClusterRole`]): the accounting of the
    /// actors' episodes this update.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterMetrics>,
}

/// The `cluster/*` metrics of a learner's update: what it did with the actors' groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterMetrics {
    /// Groups dropped this update: sampled more than `max-staleness` updates ago.
    #[serde(rename = "cluster/dropped_stale")]
    pub dropped_stale: u64,
    /// Groups skipped so far by this process as written twice (an id already taken).
    #[serde(rename = "cluster/duplicates")]
    pub duplicates: u64,
    /// The most updates by which a learned group's sampler lagged the learner.
    #[serde(rename = "cluster/max_version_lag")]
    pub max_version_lag: u64,
    /// Bytes of each actor's file consumed after this update.
    #[serde(rename = "cluster/offsets")]
    pub offsets: Vec<u64>,
}

/// Where one step's time went besides its wall clock: what [`MetricsRow::new`] records of
/// the rollouts and the update, read from `/proc` around each.
#[derive(Clone, Debug, Default)]
pub struct StepClock {
    /// Wall seconds of the rollouts.
    pub rollout_secs: f64,
    /// CPU seconds of the rollouts (`None` where `/proc` cannot be read).
    pub rollout_cpu_secs: Option<f64>,
    /// CPU seconds of the update.
    pub update_cpu_secs: Option<f64>,
    /// The machine's steal seconds over the whole step.
    pub steal_secs: Option<f64>,
    /// Peaks of the rollouts (see [`PeakMemory`]).
    pub rollout_peak: PhasePeak,
    /// Peaks of the update.
    pub update_peak: PhasePeak,
    /// The process's peak resident memory so far, MiB.
    pub peak_rss_mib: Option<f64>,
}

/// One phase's memory peaks, MiB: resident (the kernel's high-water mark) and, where the binary
/// counts it, heap held (see [`onebrain_model::CountingAllocator`]). `None` where it cannot
/// be read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhasePeak {
    /// Peak resident memory.
    pub rss_mib: Option<f64>,
    /// The most heap held at once.
    pub heap_mib: Option<f64>,
}

/// Memory peaks read a phase at a time: [`PeakMemory::phase`] returns the peaks since the
/// last call and starts the next phase's marks from the memory resident and held now, while
/// [`PeakMemory::so_far`] keeps the process's resident peak over every phase.
#[derive(Clone, Debug, Default)]
pub struct PeakMemory {
    so_far: Option<f64>,
}

impl PeakMemory {
    /// The peaks since the last call (or since the process started).
    pub fn phase(&mut self) -> PhasePeak {
        let peak = PhasePeak { rss_mib: onebrain_model::peak_rss_mib(), heap_mib: onebrain_model::heap_peak_mib() };
        self.so_far = larger(self.so_far, peak.rss_mib);
        onebrain_model::reset_peak_rss();
        onebrain_model::reset_heap_peak();
        peak
    }

    /// The process's resident peak over every phase read so far, and the one running now.
    pub fn so_far(&self) -> Option<f64> {
        larger(self.so_far, onebrain_model::peak_rss_mib())
    }
}

/// `tokens` over `secs` of wall clock; 0 when no time passed.
fn aggregate_rate(tokens: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        tokens as f64 / secs
    } else {
        0.0
    }
}

/// The larger of two readings, either of which may be missing.
fn larger(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl MetricsRow {
    /// The row of one update.
    pub fn new(
        update: u64,
        global_episodes: u64,
        r: &RolloutStats,
        u: &UpdateStats,
        clock: &StepClock,
    ) -> MetricsRow {
        let scores: Vec<f64> = r.judge.iter().map(|p| p.0).collect();
        let labels: Vec<bool> = r.judge.iter().map(|p| p.1).collect();
        MetricsRow {
            update,
            global_episodes,
            success_b0: r.success_b0,
            success_bt: r.success_bt,
            reward_actor: r.reward_actor,
            reward_editor: r.reward_editor,
            reward_judge: r.reward_judge,
            repairs: r.repairs,
            errors: r.errors,
            solved_goal_at_init: (r.solved > 0)
                .then(|| r.solved_goal_at_init as f64 / r.solved as f64),
            judge_auc: onebrain_eval::roc_auc(&scores, &labels).ok(),
            judge_ece: calibration_error(&r.judge),
            judge_mean: (!scores.is_empty())
                .then(|| scores.iter().sum::<f64>() / scores.len() as f64),
            policy_actor: u.policy_actor,
            policy_editor: u.policy_editor,
            value: u.value,
            judge: u.judge,
            total: u.total,
            entropy: u.entropy,
            approx_kl: u.approx_kl,
            clipfrac: u.clipfrac,
            first_abs_log_ratio: u.first_abs_log_ratio,
            old_logp_source: u.old_logp_source.to_string(),
            sampler_gap: u.sampler_gap,
            kl_ref: u.kl_ref,
            explained_variance: u.explained_variance,
            grad_norm: u.grad_norm,
            dropped_steps: u.dropped_steps,
            // The trainer sets it: the stream's counter, not the batch's.
            twins_skipped: 0,
            skipped_samples: u.skipped,
            prompt_heads_kept: u.prompt_heads_kept,
            prompt_heads_computed: u.prompt_heads_computed,
            gen_tokens_per_s: aggregate_rate(r.gen_tokens, clock.rollout_secs),
            train_tokens_per_s: if u.secs > 0.0 {
                u.tokens as f64 / u.secs
            } else {
                0.0
            },
            rollout_secs: clock.rollout_secs,
            verify_secs: r.verify_secs,
            update_secs: u.secs,
            score_secs: Some(u.score_secs),
            rollout_cpu_secs: clock.rollout_cpu_secs,
            update_cpu_secs: clock.update_cpu_secs,
            steal_secs: clock.steal_secs,
            rss_mib: onebrain_model::rss_mib(),
            peak_rss_mib: clock.peak_rss_mib.or_else(onebrain_model::peak_rss_mib),
            rollout_peak_rss_mib: clock.rollout_peak.rss_mib,
            update_peak_rss_mib: clock.update_peak.rss_mib,
            rollout_peak_heap_mib: clock.rollout_peak.heap_mib,
            update_peak_heap_mib: clock.update_peak.heap_mib,
            cluster: None,
        }
    }

    /// The one-line summary the progress display prints.
    pub fn line(&self) -> String {
        let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        format!(
            "update {:>3}: b0 {:.2} bT {:.2} R_A {:.2} R_E {} judge AUC {} ECE {} | loss {:.3} kl {:.4} clip {:.2} | rollout {:.0}s update {:.0}s rss {} MiB",
            self.update,
            self.success_b0,
            self.success_bt,
            self.reward_actor,
            opt(self.reward_editor),
            opt(self.judge_auc),
            opt(self.judge_ece),
            self.total,
            self.approx_kl,
            self.clipfrac,
            self.rollout_secs,
            self.update_secs,
            self.rss_mib.map_or("-".to_string(), |m| format!("{m:.0}"))
        ) + &if self.dropped_steps > 0 {
            format!(" | {} step(s) dropped: non-finite gradient", self.dropped_steps)
        } else {
            String::new()
        }
    }
}

/// `metrics.jsonl` of a run folder.
#[derive(Debug)]
pub struct MetricsLog {
    path: PathBuf,
    writer: TraceWriter,
}

impl MetricsLog {
    /// The log of `run_dir`; rows past `updates` (written after the checkpoint a resumed run
    /// starts from) are dropped so the log matches the parameters.
    pub fn open(run_dir: &Path, updates: u64) -> Result<MetricsLog, TrainError> {
        Self::open_noting(run_dir, updates, &mut Vec::new())
    }

    /// [`MetricsLog::open`], adding what it dropped (a torn last line, rows past `updates`)
    /// to `notes`.
    pub(crate) fn open_noting(run_dir: &Path, updates: u64, notes: &mut Vec<String>) -> Result<MetricsLog, TrainError> {
        let path = run_dir.join("metrics.jsonl");
        let writer = crate::logs::reopen_log(&path, |r: &MetricsRow| r.update <= updates, notes)?;
        Ok(MetricsLog { path, writer })
    }

    /// Appends one row and flushes it.
    pub fn append(&mut self, row: &MetricsRow) -> Result<(), TrainError> {
        Ok(self.writer.append(row)?)
    }

    /// Syncs every row so far to the disk, before a checkpoint that counts them.
    pub fn sync(&mut self) -> Result<(), TrainError> {
        Ok(self.writer.sync()?)
    }

    /// Every row so far.
    pub fn rows(&self) -> Result<Vec<MetricsRow>, TrainError> {
        read_rows(&self.path)
    }

    /// Writes `curves.svg` beside the log: success b_0 and b_T, the Judge's AUC and
    /// calibration error, per update.
    pub fn plot(&self, title: &str) -> Result<PathBuf, TrainError> {
        let rows = self.rows()?;
        let series = |f: &dyn Fn(&MetricsRow) -> Option<f64>| -> Vec<f64> {
            let mut last = 0.5;
            rows.iter()
                .map(|r| {
                    last = f(r).unwrap_or(last);
                    last
                })
                .collect()
        };
        let mut curves = vec![
            ("success b0".into(), series(&|r| Some(r.success_b0))),
            ("success bT".into(), series(&|r| Some(r.success_bt))),
            ("judge AUC".into(), series(&|r| r.judge_auc)),
            ("judge ECE".into(), series(&|r| r.judge_ece)),
        ];
        // The held-out evaluations, each drawn from its update until the next one.
        let heldout = crate::heldout::read_rows(&self.path.with_file_name("heldout.jsonl"))?;
        if !heldout.is_empty() {
            let at = |f: &dyn Fn(&crate::HeldOutRow) -> f64| -> Vec<f64> {
                rows.iter()
                    .map(|r| {
                        heldout
                            .iter()
                            .filter(|h| h.update <= r.update)
                            .next_back()
                            .map_or(f64::NAN, f)
                    })
                    .collect()
            };
            curves.push(("held-out b0".into(), at(&|h| h.rate(h.solved_b0))));
            curves.push(("held-out bT".into(), at(&|h| h.rate(h.solved))));
            curves.push(("held-out Faithful".into(), at(&|h| h.rate(h.faithful))));
            curves.push(("held-out drift".into(), at(&|h| h.drift.unwrap_or(f64::NAN))));
        }
        let svg = onebrain_eval::line_chart(title, "update", "rate", &curves);
        let path = self.path.with_file_name("curves.svg");
        onebrain_durable::write_atomic(&path, svg)?;
        Ok(path)
    }
}

fn read_rows(path: &Path) -> Result<Vec<MetricsRow>, TrainError> {
    Ok(onebrain_eval::read_jsonl(path)?.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_log_line_is_an_error_naming_it_not_a_silent_loss() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("metrics.jsonl"), "not a row\n{\"cut").unwrap();
        let err = MetricsLog::open(dir.path(), 0).unwrap_err().to_string();
        assert!(err.contains("metrics.jsonl, line 1"), "{err}");
    }

    #[test]
    fn the_generation_rate_is_tokens_over_the_rollouts_wall_clock() {
        // 16 episodes decoding together for 10 s, each with 10 s of its own generation time:
        // 400 tokens in 10 s of wall clock is 40 tokens/s, not 400 / 160 = 2.5.
        let rollouts = crate::RolloutStats { episodes: 16, gen_tokens: 400, gen_secs: 160.0, ..Default::default() };
        let clock = StepClock { rollout_secs: 10.0, ..Default::default() };
        let row = MetricsRow::new(1, 16, &rollouts, &crate::UpdateStats::default(), &clock);
        assert_eq!(row.gen_tokens_per_s, 40.0);
        let idle = StepClock::default();
        assert_eq!(MetricsRow::new(1, 16, &rollouts, &crate::UpdateStats::default(), &idle).gen_tokens_per_s, 0.0);
    }
}

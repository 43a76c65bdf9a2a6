//! `onebrain bench training`: one real training step of each path, the new one and the old one,
//! in the same run.
//!
//! Each path runs as its own `onebrain train --updates 1 --skip-heldout` child process, so its
//! peak resident memory is its own (the kernel's high-water mark of that process, which the
//! run's `metrics.jsonl` records as `perf/peak_rss_mib`), and a path that runs out of memory
//! ends that child, not the benchmark. The step is everything an update of a training run
//! does: grammar-constrained multi-role rollouts of the config's tasks (the verifier, the
//! plugins) and the PPO update.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::write_json;

/// The config of the new path: the learning run's own.
pub const DEFAULT_CONFIG: &str = "configs/train-1.5b-full.toml";
/// The config of the old path (batch-1 rollouts, a dense f32 learner, adapters on
/// every projection, the 384-token Judge tail).
pub const DEFAULT_BASELINE: &str = "configs/train-old-path.toml";

/// What one path's training step measured.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// `new` or `old`.
    pub path: String,
    /// The training config it ran.
    pub config: String,
    /// Episodes of the step.
    pub episodes: u64,
    /// Seconds of rollouts (generation and verification, overlapped).
    pub rollout_secs: f64,
    /// Seconds of the update.
    pub update_secs: f64,
    /// Rollouts plus update.
    pub step_secs: f64,
    /// Episodes per hour of training (rollouts + update).
    pub episodes_per_hour: f64,
    /// Peak resident memory of the whole process, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Peak resident memory during the rollouts, and during the update, MiB (`None` from a
    /// binary that did not record them).
    pub rollout_peak_rss_mib: Option<f64>,
    /// See `rollout_peak_rss_mib`.
    pub update_peak_rss_mib: Option<f64>,
    /// The most heap the rollouts, and the update, held at once, MiB (`None` from a binary
    /// that did not count it): the resident peak's part that the program held.
    pub rollout_peak_heap_mib: Option<f64>,
    /// See `rollout_peak_heap_mib`.
    pub update_peak_heap_mib: Option<f64>,
    /// Mean |log ratio| of the first minibatch (0 up to rounding on the new path).
    pub first_abs_log_ratio: Option<f64>,
    /// Where log π_old came from.
    pub old_logp_source: Option<String>,
    /// Mean |log π_learner − log π_sampler| per token.
    pub sampler_gap: Option<f64>,
    /// CleanRL's approximate KL and clip fraction of the update.
    pub approx_kl: Option<f64>,
    /// See `approx_kl`.
    pub clipfrac: Option<f64>,
    /// Mean b_0 of the step's episodes.
    pub success_b0: Option<f64>,
    /// CPU seconds of the rollouts (user and system): unlike wall time, they do not grow while
    /// the hypervisor runs another guest on our cores.
    pub rollout_cpu_secs: Option<f64>,
    /// CPU seconds of the update.
    pub update_cpu_secs: Option<f64>,
    /// Steal time on the machine while the step ran, summed over its CPUs: seconds the
    /// hypervisor gave our cores to another guest. Far from 0, the times above measure the
    /// neighbours too.
    pub steal_secs: Option<f64>,
}

/// Runs both paths (new first) and prints their table and ratios.
pub fn run(config: Option<&Path>, baseline: Option<&Path>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = config.map_or_else(|| DEFAULT_CONFIG.into(), Path::to_path_buf);
    let baseline = baseline.map_or_else(|| DEFAULT_BASELINE.into(), Path::to_path_buf);
    let work = PathBuf::from(".cache/bench-training");
    let mut reports = Vec::new();
    for (path, cfg) in [("new", &config), ("old", &baseline)] {
        reports.push(one_step(path, cfg, &work.join(path))?);
    }
    if json {
        return write_json(out, &reports);
    }
    let (new, old) = (&reports[0], &reports[1]);
    writeln!(out, "## Training step (onebrain bench training)\n")?;
    writeln!(out, "| measure | new: {} | old: {} | old / new |", new.config, old.config)?;
    writeln!(out, "|---|---:|---:|---:|")?;
    let mut row = |name: &str, a: Option<f64>, b: Option<f64>, digits: usize| -> anyhow::Result<()> {
        let cell = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        let ratio = match (a, b) {
            (Some(a), Some(b)) if a > 0.0 => format!("{:.2}×", b / a),
            _ => "-".into(),
        };
        writeln!(out, "| {name} | {} | {} | {ratio} |", cell(a), cell(b))?;
        Ok(())
    };
    row("episodes", Some(new.episodes as f64), Some(old.episodes as f64), 0)?;
    row("rollouts, s", Some(new.rollout_secs), Some(old.rollout_secs), 1)?;
    row("update, s", Some(new.update_secs), Some(old.update_secs), 1)?;
    row("step (rollouts + update), s", Some(new.step_secs), Some(old.step_secs), 1)?;
    row("rollouts, CPU s", new.rollout_cpu_secs, old.rollout_cpu_secs, 1)?;
    row("update, CPU s", new.update_cpu_secs, old.update_cpu_secs, 1)?;
    row("peak resident memory, MiB", new.peak_rss_mib, old.peak_rss_mib, 0)?;
    row("peak during the rollouts, MiB", new.rollout_peak_rss_mib, old.rollout_peak_rss_mib, 0)?;
    row("peak during the update, MiB", new.update_peak_rss_mib, old.update_peak_rss_mib, 0)?;
    row("most heap held in the rollouts, MiB", new.rollout_peak_heap_mib, old.rollout_peak_heap_mib, 0)?;
    row("most heap held in the update, MiB", new.update_peak_heap_mib, old.update_peak_heap_mib, 0)?;
    row("first minibatch mean |log ratio|", new.first_abs_log_ratio, old.first_abs_log_ratio, 6)?;
    row("sampler gap, mean |Δ log π| per token", new.sampler_gap, old.sampler_gap, 4)?;
    row("approx KL", new.approx_kl, old.approx_kl, 5)?;
    row("clip fraction", new.clipfrac, old.clipfrac, 3)?;
    row("b_0 of the step", new.success_b0, old.success_b0, 2)?;
    writeln!(
        out,
        "\nepisodes per hour: new {:.0}, old {:.0} ({:.2}× faster); old-path log-probabilities: {}",
        new.episodes_per_hour,
        old.episodes_per_hour,
        new.episodes_per_hour / old.episodes_per_hour.max(1e-9),
        old.old_logp_source.as_deref().unwrap_or("-")
    )?;
    let secs = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1} s"));
    writeln!(
        out,
        "steal time on the machine during each step (other guests on our cores; far from 0, the wall times measure them too): new {}, old {}",
        secs(new.steal_secs),
        secs(old.steal_secs)
    )?;
    Ok(())
}

/// One `onebrain train` child of one update on `config`, in a fresh `out`.
fn one_step(path: &str, config: &Path, out: &Path) -> anyhow::Result<StepReport> {
    if !config.is_file() {
        bail!("training config {} not found (run from the repository root)", config.display());
    }
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot clear {}", out.display()))?;
    }
    let exe = std::env::current_exe().context("cannot find the onebrain binary")?;
    // Progress on stderr, as the binary's own; a closed stderr loses it and nothing else.
    let _ = writeln!(std::io::stderr(), "bench training: {path} path, {} (one update) ...", config.display());
    let status = Command::new(exe)
        .args(["train", "--updates", "1", "--skip-heldout", "--config"])
        .arg(config)
        .arg("--out-dir")
        .arg(out)
        .status()
        .context("cannot start `onebrain train`")?;
    if !status.success() {
        bail!("the {path} path's training step failed ({status}); its run folder is {}", out.display());
    }
    let metrics = out.join("metrics.jsonl");
    let text = std::fs::read_to_string(&metrics).with_context(|| format!("cannot read {}", metrics.display()))?;
    let row: serde_json::Value = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .transpose()
        .with_context(|| format!("{} is not JSON lines", metrics.display()))?
        .with_context(|| format!("{} has no update", metrics.display()))?;
    let f = |k: &str| row.get(k).and_then(serde_json::Value::as_f64);
    let rollout_secs = f("time/rollout_s").unwrap_or(0.0);
    let update_secs = f("time/update_s").unwrap_or(0.0);
    let episodes = row.get("global_episodes").and_then(serde_json::Value::as_u64).unwrap_or(0);
    let step_secs = rollout_secs + update_secs;
    Ok(StepReport {
        path: path.into(),
        config: config.display().to_string(),
        episodes,
        rollout_secs,
        update_secs,
        step_secs,
        episodes_per_hour: if step_secs > 0.0 { episodes as f64 * 3600.0 / step_secs } else { 0.0 },
        peak_rss_mib: f("perf/peak_rss_mib"),
        rollout_peak_rss_mib: f("perf/rollout_peak_rss_mib"),
        update_peak_rss_mib: f("perf/update_peak_rss_mib"),
        rollout_peak_heap_mib: f("perf/rollout_peak_heap_mib"),
        update_peak_heap_mib: f("perf/update_peak_heap_mib"),
        first_abs_log_ratio: f("losses/first_abs_log_ratio"),
        sampler_gap: f("losses/sampler_gap"),
        old_logp_source: row.get("losses/old_logp_source").and_then(|v| v.as_str()).map(str::to_string),
        approx_kl: f("losses/approx_kl"),
        clipfrac: f("losses/clipfrac"),
        success_b0: f("charts/success_b0"),
        rollout_cpu_secs: f("time/rollout_cpu_s"),
        update_cpu_secs: f("time/update_cpu_s"),
        steal_secs: f("time/steal_s"),
    })
}

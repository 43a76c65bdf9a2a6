//! `onebrain bench constraint`: what grammar-constrained decoding costs, measured against free
//! decoding of the same Actor prompts, one after the other in one process.
//!
//! For each PlanBench task the Actor's real prompt (from the episode, in `problem` or `full`
//! mode) is decoded greedily twice: under the mode's grammar and free. The figures are the mask's time
//! per token and its share of the constrained decode time, the grammar build time per task
//! (both stages), the tokens the grammar forced, and both arms' tokens and decode speed.

use std::path::Path;
use std::time::Instant;

use onebrain_eval::planbench_task;
use onebrain_roles::{load_model, Episode, Mode, Request, Services, SolveConfig};
use serde::Serialize;

use crate::Table;

/// One task, both arms.
#[derive(Clone, Debug, Serialize)]
pub struct ConstraintRow {
    /// The PlanBench task.
    pub task: String,
    /// Constrained: tokens out, of which forced.
    pub tokens: usize,
    /// Forced tokens (appended without sampling, in one forward pass).
    pub forced: u32,
    /// Constrained decode seconds.
    pub decode_secs: f64,
    /// Microseconds of mask computation (grammar and guard), all tokens.
    pub mask_us: f64,
    /// Masks computed.
    pub masks: u32,
    /// Grammar compilation, both stages, ms.
    pub build_ms: f64,
    /// Why the constrained answer ended.
    pub stop: String,
    /// Free decoding: tokens out, decode seconds, why it ended.
    pub free_tokens: usize,
    /// Free decode seconds.
    pub free_decode_secs: f64,
    /// Why the free answer ended.
    pub free_stop: String,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct ConstraintReport {
    /// Milliseconds to build the token environment (trie and parser factory), once per model.
    pub env_ms: f64,
    /// Per task.
    pub rows: Vec<ConstraintRow>,
}

impl ConstraintReport {
    /// Mean mask microseconds per masked token.
    pub fn mask_us_per_token(&self) -> f64 {
        let masks: u32 = self.rows.iter().map(|r| r.masks).sum();
        self.rows.iter().map(|r| r.mask_us).sum::<f64>() / f64::from(masks.max(1))
    }

    /// The mask's share of constrained decode time.
    pub fn mask_share(&self) -> f64 {
        let decode: f64 = self.rows.iter().map(|r| r.decode_secs).sum();
        self.rows.iter().map(|r| r.mask_us).sum::<f64>() / 1e6 / decode.max(1e-9)
    }

    /// The table `docs/performance.md` shows.
    pub fn table(&self) -> Table {
        let mut t = Table::new([
            "task",
            "grammar: tokens (forced)",
            "tok/s",
            "mask µs/token",
            "mask share of decode",
            "grammar build ms",
            "stop",
            "free: tokens",
            "tok/s",
            "stop",
        ]);
        for r in &self.rows {
            t.row([
                r.task.clone(),
                format!("{} ({})", r.tokens, r.forced),
                format!("{:.1}", r.tokens as f64 / r.decode_secs.max(1e-9)),
                format!("{:.0}", r.mask_us / f64::from(r.masks.max(1))),
                format!("{:.1} %", 100.0 * r.mask_us / 1e6 / r.decode_secs.max(1e-9)),
                format!("{:.1}", r.build_ms),
                r.stop.clone(),
                r.free_tokens.to_string(),
                format!("{:.1}", r.free_tokens as f64 / r.free_decode_secs.max(1e-9)),
                r.free_stop.clone(),
            ]);
        }
        t
    }
}

/// Tokens a `full`-mode answer may take: domain and problem (`configs/eval-full-mode.toml`).
const FULL_MODE_MAX_TOKENS: usize = 1024;

/// Runs the benchmark with the solve config at `config` on PlanBench `tasks` (`set/instance`),
/// the Actor writing in `mode`.
pub fn run(config: &Path, data: &Path, tasks: &[String], mode: Mode) -> Result<ConstraintReport, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut cfg = SolveConfig::from_file(config).map_err(|e| err(&e))?;
    cfg.episode.constrain = onebrain_roles::Constrain::Grammar;
    cfg.episode.mode = mode;
    if mode == Mode::Full {
        cfg.episode.max_tokens = cfg.episode.max_tokens.max(FULL_MODE_MAX_TOKENS);
    }
    let base = onebrain_roles::config_base(config);
    let services = Services::load(&cfg, &base).map_err(|e| err(&e))?;
    let mut brain = load_model(&cfg, &base).map_err(|e| err(&e))?;
    let t = Instant::now();
    brain.token_env().map_err(|e| err(&e))?;
    let env_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut rows = Vec::new();
    for id in tasks {
        let set = id.split('/').next().unwrap_or_default();
        let domain = onebrain_eval::plugin_for_set(set).ok_or_else(|| format!("{id}: no domain plugin describes the PlanBench set `{set}`"))?;
        let task = planbench_task(data, id, domain).map_err(|e| err(&e))?;
        let input = services.episode_input(task).map_err(|e| err(&e))?;
        let mut episode = Episode::new(input, &cfg.episode, "bench");
        let Request::Generate { role, prompt, sampling } = episode.start() else {
            return Err(format!("{id}: the episode did not start with a generation"));
        };
        // The free arm first: it warms the prefix cache for both, so neither pays the prompt.
        let free = onebrain_model::SamplingConfig { constraint: None, ..sampling.clone() };
        let g_free = brain.generate(role, &prompt, &free).map_err(|e| err(&e))?;
        let g = brain.generate(role, &prompt, &sampling).map_err(|e| err(&e))?;
        let stats = g.constraint.clone().unwrap_or_default();
        rows.push(ConstraintRow {
            task: id.clone(),
            tokens: g.tokens.len(),
            forced: stats.forced,
            decode_secs: g.decode_secs,
            mask_us: stats.mask_us,
            masks: stats.masks,
            build_ms: stats.build_ms,
            stop: format!("{:?}", g.stop_reason),
            free_tokens: g_free.tokens.len(),
            free_decode_secs: g_free.decode_secs,
            free_stop: format!("{:?}", g_free.stop_reason),
        });
    }
    Ok(ConstraintReport { env_ms, rows })
}

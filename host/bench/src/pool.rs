//! The compute pool against candle's barrier pool (`onebrain bench pool`): the same greedy
//! decode on each, quiet and beside busy processes, in one run, the two pools alternating.
//!
//! The busy processes stand in for a training arm or a test run on the same cores. candle's
//! pool makes its caller spin until every worker has finished, a descheduled one too, so
//! there it loses the most: CPU seconds per token are the figure to read, with tokens/s.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use onebrain_kernels::pool::use_candle_pool;
use onebrain_meter::cpu_seconds;
use anyhow::{Context, Result};
use onebrain_model::{Brain, ModelConfig, Role, SamplingConfig};
use serde::{Deserialize, Serialize};

use crate::median;

/// One decode shape under one condition, on each pool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolBench {
    /// `decode, 1 row` or `decode, 4 rows`.
    pub shape: String,
    /// Busy processes beside the benchmark (a shell loop each, one core's worth).
    pub busy_neighbours: usize,
    /// Tokens per second (all rows) on our pool, median over the repetitions.
    pub own_tok_per_s: f64,
    /// The same on candle's barrier pool.
    pub candle_tok_per_s: f64,
    /// This process's CPU milliseconds per token on our pool, median.
    pub own_cpu_ms_per_token: f64,
    /// The same on candle's barrier pool.
    pub candle_cpu_ms_per_token: f64,
    /// Both pools decoded the same tokens in every repetition (greedy; the chunks are the same).
    pub same_tokens: bool,
}

/// Busy processes, killed when dropped.
struct Neighbours(Vec<Child>);

impl Neighbours {
    fn start(n: usize) -> Result<Neighbours> {
        let mut children = Vec::new();
        for _ in 0..n {
            let child = Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("starting a busy neighbour (sh)")?;
            children.push(child);
        }
        Ok(Neighbours(children))
    }
}

impl Drop for Neighbours {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct Run {
    tok_per_s: f64,
    cpu_ms_per_token: f64,
    tokens: Vec<Vec<u32>>,
}

fn decode(brain: &mut Brain, prompts: &[String], s: &SamplingConfig, on_candle: bool) -> Result<Run> {
    use_candle_pool(on_candle);
    let cpu = cpu_seconds().unwrap_or(0.0);
    let t = Instant::now();
    let gs = brain.generate_batch(Role::Actor, prompts, s);
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds().unwrap_or(0.0) - cpu;
    use_candle_pool(false);
    let gs = gs?;
    let n: usize = gs.iter().map(|g| g.tokens.len()).sum::<usize>().max(1);
    Ok(Run { tok_per_s: n as f64 / wall, cpu_ms_per_token: 1e3 * cpu / n as f64, tokens: gs.into_iter().map(|g| g.tokens).collect() })
}

/// Greedy decodes of `tokens` tokens from a short Actor prompt, one row and four rows, with 0,
/// 1 and 2 busy neighbours; each pool `reps` times, alternating, after one warm-up each.
pub fn bench_pool(model: &Path, tokens: usize, reps: usize) -> Result<Vec<PoolBench>> {
    let mut brain = Brain::load(&ModelConfig { path: model.to_path_buf(), ..Default::default() })?;
    let prompt = brain.chat_prompt("You write PDDL.", "Write a blocksworld domain.");
    let s = SamplingConfig { ignore_eos: true, ..SamplingConfig::greedy(tokens) };
    let mut out = Vec::new();
    for busy_neighbours in [0, 1, 2] {
        let _busy = Neighbours::start(busy_neighbours)?;
        for rows in [1, 4] {
            let prompts = vec![prompt.clone(); rows];
            decode(&mut brain, &prompts, &s, false)?;
            decode(&mut brain, &prompts, &s, true)?;
            let (mut own, mut candle) = (Vec::new(), Vec::new());
            for _ in 0..reps.max(1) {
                own.push(decode(&mut brain, &prompts, &s, false)?);
                candle.push(decode(&mut brain, &prompts, &s, true)?);
            }
            let med = |runs: &[Run], f: fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            out.push(PoolBench {
                shape: format!("decode, {rows} row{}", if rows == 1 { "" } else { "s" }),
                busy_neighbours,
                own_tok_per_s: med(&own, |r| r.tok_per_s),
                candle_tok_per_s: med(&candle, |r| r.tok_per_s),
                own_cpu_ms_per_token: med(&own, |r| r.cpu_ms_per_token),
                candle_cpu_ms_per_token: med(&candle, |r| r.cpu_ms_per_token),
                same_tokens: own.iter().zip(&candle).all(|(a, b)| a.tokens == b.tokens),
            });
        }
    }
    Ok(out)
}

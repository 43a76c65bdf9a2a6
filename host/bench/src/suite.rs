//! `onebrain bench <what>`: runs one benchmark and writes its Markdown table, or its figures
//! as JSON, to the writer it is given (the binary's stdout). The binary parses the flags into
//! [`Target`] and [`SuiteOptions`]; everything after that is here.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use onebrain_model::{DEFAULT_MODEL_FILE, TEST_MODEL_FILE};

use crate::kernels::{bench_attention, bench_matmul, bench_quantize};
use crate::model::{bench_inference, bench_long_prefill, bench_training, LONG_PREFILL_TOKENS};
use crate::plugins::{bench_plugins, BenchOptions};
use crate::{write_json, Table};

/// The benchmark suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// The verifier: native rejection, plan validation, overhead, throughput.
    Verifier,
    /// The plugin host: call overhead, cached loads, WASM against native.
    Plugins,
    /// Generation: prefill and decode tokens/s, batching, prefix reuse, peak memory, and one cold
    /// prefill of 4k and 16k tokens each against the memory budget's estimate (both models).
    Model,
    /// CPU matrix products streamed from memory: Q8_0 and Q5_0 at the 0.5B's shapes (1 to 64
    /// rows), our tiled kernel against candle's; Q4_K and Q6_K at the 1.5B's (1, 4, 8 and 256 rows),
    /// their own tiles against their Q8_0 re-quantization's.
    Matmul,
    /// The activation quantization in front of every tiled product, at the 1.5B's widths:
    /// chunks shared among the pool's threads against one thread.
    Quantize,
    /// The learner's causal attention, forward and backward of one layer at the 0.5B model's
    /// training shapes: fused against matmul, causal softmax, matmul.
    Attention,
    /// One training step (rollouts of 16 episodes and the update) of the default model on the
    /// new path and on the old one (batch-1 rollouts, a dense f32 learner), each in its own
    /// process: seconds, episodes per hour, peak memory.
    Training,
    /// One forward+backward over 4 × 512 tokens with SmolLM2-135M: adapters only, then the
    /// full backbone.
    TrainingKernel,
    /// Our compute pool against candle's barrier pool: greedy decode of the default model, one
    /// row and four, quiet and beside one and two busy processes; tokens/s and CPU per token.
    Pool,
    /// Grammar-constrained against free decoding of the same Actor prompts (default model):
    /// mask time per token and its share of decode, grammar build time, forced tokens.
    Constraint,
}

/// What the flags of `onebrain bench` set.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Repetitions (scales the corpus and the samples).
    pub reps: usize,
    /// Where the benchmark data lives (PlanBench, Planetarium).
    pub data: PathBuf,
    /// Write one JSON object instead of the tables.
    pub json: bool,
    /// `training` only: the config of the new path.
    pub config: Option<PathBuf>,
    /// `training` only: the config of the path it is compared with.
    pub baseline: Option<PathBuf>,
    /// `constraint` only: what the Actor writes, `problem` (the default) or `full`.
    pub mode: Option<String>,
}

/// Runs the benchmark `what` and writes its table (or JSON) to `out`.
pub fn run(what: Target, options: &SuiteOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    match what {
        Target::Verifier => {
            let report =
                crate::verifier::run(&options.data, options.reps).map_err(|e| anyhow!(e))?;
            if options.json {
                return write_json(out, &report);
            }
            writeln!(
                out,
                "## Verifier (onebrain bench verifier --reps {})\n",
                options.reps
            )?;
            write!(out, "{}", report.table())?;
        }
        Target::Plugins => {
            let plugin_options = BenchOptions {
                plugins_dir: PathBuf::from("plugins"),
                iterations: options.reps.max(1) * 500,
            };
            let r = bench_plugins(&plugin_options)?;
            if options.json {
                return write_json(out, &r);
            }
            writeln!(
                out,
                "## Plugin host (onebrain bench plugins --reps {})\n",
                options.reps
            )?;
            let mut t = Table::new(["measure", "WASM", "native peer", "ratio / target"]);
            t.row([
                "reward call, reused instance".into(),
                format!("{:.2} µs", r.reward_call_reused_us),
                "-".into(),
                "-".into(),
            ]);
            t.row([
                "reward call, fresh instance from InstancePre".into(),
                format!("{:.1} µs", r.reward_call_fresh_us),
                "-".into(),
                "-".into(),
            ]);
            t.row([
                "load blocksworld: cache hit vs Cranelift compile".into(),
                format!("{:.2} ms cached", r.load_cached_ms),
                format!("{:.0} ms compiled", r.load_uncached_ms),
                format!("{:.0}× faster", r.load_uncached_ms / r.load_cached_ms),
            ]);
            t.row([
                "blocksworld generate(seed, 12)".into(),
                format!("{:.1} µs", r.generate_wasm_us),
                format!("{:.1} µs", r.generate_native_us),
                format!("{:.2}× (target ≤ 2×)", r.generate_ratio),
            ]);
            t.row([
                "blocksworld describe, 12 blocks".into(),
                format!("{:.1} µs", r.describe_wasm_us),
                format!("{:.1} µs", r.describe_native_us),
                format!("{:.2}× (target ≤ 2×)", r.describe_ratio),
            ]);
            write!(out, "{t}")?;
        }
        Target::Model => {
            let mut reports = Vec::new();
            for file in [TEST_MODEL_FILE, DEFAULT_MODEL_FILE] {
                reports.push(serde_json::to_value(bench_inference(
                    Path::new(file),
                    512,
                    64,
                )?)?);
            }
            let mut long = Vec::new();
            for file in [TEST_MODEL_FILE, DEFAULT_MODEL_FILE] {
                long.extend(bench_long_prefill(Path::new(file), &LONG_PREFILL_TOKENS)?);
            }
            if options.json {
                return write_json(out, &serde_json::json!({ "generation": reports, "long_prompts": long }));
            }
            print_reports(out, "Generation (onebrain bench model)", &reports, false)?;
            writeln!(out, "\n## Long prompts: one cold prefill each, peak memory against the budget's estimate\n")?;
            let mut t = Table::new(["model", "prompt tokens", "prefill tok/s", "seconds", "peak resident", "estimated"]);
            for r in &long {
                t.row([
                    r.model.clone(),
                    r.prompt_tokens.to_string(),
                    format!("{:.1}", r.prefill_tok_per_s),
                    format!("{:.1}", r.prefill_secs),
                    r.peak_rss_mib.map_or("-".into(), |m| format!("{m:.0} MiB")),
                    format!("{:.0} MiB", r.estimated_mib),
                ]);
            }
            write!(out, "{t}")?;
        }
        Target::Matmul => {
            let r = bench_matmul()?;
            if options.json {
                return write_json(out, &r);
            }
            let kernel = r.first().and_then(|p| p.kernel.clone()).unwrap_or_else(|| "none on this CPU".into());
            writeln!(out, "## CPU Q8_0 / Q5_0 products against candle's, matrices streamed from memory (onebrain bench matmul; tiled kernel: {kernel})\n")?;
            let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} µs"));
            let ratio = |v: Option<f64>| v.map_or("-".into(), |s| format!("{s:.2}×"));
            let (kquants, against_candle): (Vec<_>, Vec<_>) = r.iter().partition(|p| p.q8_tiles_us.is_some());
            let mut t = Table::new(["matrix", "blocks", "rows", "ours", "candle", "candle, padded to 256s", "speed-up"]);
            for p in against_candle {
                t.row([
                    format!("{} × {}", p.shape.0, p.shape.1),
                    p.dtype.clone(),
                    p.rows.to_string(),
                    p.ours_us.map_or("no kernel".into(), |v| us(Some(v))),
                    us(p.candle_us),
                    us(p.candle_padded_us),
                    ratio(p.speedup),
                ]);
            }
            write!(out, "{t}")?;
            if !kquants.is_empty() {
                writeln!(out, "\n## Q4_K / Q6_K in tiles of their own against their Q8_0 re-quantization in tiles (Qwen 1.5B's shapes)\n")?;
                let mut t = Table::new(["matrix", "blocks", "rows", "own tiles", "Q8_0 tiles", "speed-up"]);
                for p in kquants {
                    t.row([
                        format!("{} × {}", p.shape.0, p.shape.1),
                        p.dtype.clone(),
                        p.rows.to_string(),
                        us(p.ours_us),
                        us(p.q8_tiles_us),
                        ratio(p.over_q8_tiles),
                    ]);
                }
                write!(out, "{t}")?;
            }
        }
        Target::Quantize => {
            let r = bench_quantize()?;
            if options.json {
                return write_json(out, &r);
            }
            writeln!(out, "## Activations quantized for a tiled product: the pool's threads against one (onebrain bench quantize)\n")?;
            let mut t = Table::new(["rows × columns", "one thread", "pool", "speed-up"]);
            for p in &r {
                t.row([format!("{} × {}", p.shape.0, p.shape.1), format!("{:.1} µs", p.one_thread_us), format!("{:.1} µs", p.pool_us), format!("{:.2}×", p.speedup)]);
            }
            write!(out, "{t}")?;
        }
        Target::Attention => {
            let r = bench_attention()?;
            if options.json {
                return write_json(out, &r);
            }
            writeln!(out, "## The learner's causal attention, one layer forward + backward, 14 query heads over 2 kv heads (onebrain bench attention)\n")?;
            let mut t = Table::new(["shape", "queries", "keys", "fused", "fused, prompt keys constant", "matmul, softmax, matmul", "speed-up", "score matrices kept before"]);
            for p in &r {
                t.row([
                    p.what.clone(),
                    p.queries.to_string(),
                    p.keys.to_string(),
                    format!("{:.1} ms", p.fused_ms),
                    format!("{:.1} ms ({:.2}×)", p.fused_constant_head_ms, p.fused_ms / p.fused_constant_head_ms),
                    format!("{:.1} ms", p.scores_kept_ms),
                    format!("{:.2}×", p.speedup),
                    format!("{:.0} MiB a layer", p.scores_kept_mib),
                ]);
            }
            write!(out, "{t}")?;
        }
        Target::Constraint => {
            let tasks: Vec<String> = ["blocksworld_3/2", "mystery_blocksworld_3/4", "logistics/2", "blocksworld/10"]
                .iter()
                .map(|s| s.to_string())
                .take(options.reps.clamp(1, 4))
                .collect();
            let mode = options.mode.as_deref().unwrap_or("problem").parse::<onebrain_roles::Mode>().map_err(anyhow::Error::msg)?;
            let r = crate::constraint::run(Path::new("configs/solve-demo.toml"), &options.data, &tasks, mode)
                .map_err(|e| anyhow!(e))?;
            if options.json {
                return write_json(out, &r);
            }
            writeln!(
                out,
                "## Constrained decoding (onebrain bench constraint --reps {} --mode {})\n",
                tasks.len(),
                mode.as_str()
            )?;
            write!(out, "{}", r.table())?;
            writeln!(
                out,
                "\ntoken environment (trie + parser factory), once per model: {:.0} ms; mask {:.0} µs/token, {:.1} % of constrained decode time (target ≤ 10 %)",
                r.env_ms,
                r.mask_us_per_token(),
                100.0 * r.mask_share()
            )?;
        }
        Target::Pool => {
            let r = crate::pool::bench_pool(Path::new(DEFAULT_MODEL_FILE), 32, options.reps.max(1))?;
            if options.json {
                return write_json(out, &r);
            }
            writeln!(out, "## Our compute pool against candle's barrier pool, {DEFAULT_MODEL_FILE}, 32 greedy tokens (onebrain bench pool)\n")?;
            let mut t = Table::new(["decode", "busy neighbours", "tok/s ours", "tok/s candle's", "speed-up", "CPU ms/token ours", "CPU ms/token candle's", "CPU saved", "same tokens"]);
            for p in &r {
                t.row([
                    p.shape.clone(),
                    p.busy_neighbours.to_string(),
                    format!("{:.2}", p.own_tok_per_s),
                    format!("{:.2}", p.candle_tok_per_s),
                    format!("{:.2}×", p.own_tok_per_s / p.candle_tok_per_s),
                    format!("{:.0}", p.own_cpu_ms_per_token),
                    format!("{:.0}", p.candle_cpu_ms_per_token),
                    format!("{:.2}×", p.candle_cpu_ms_per_token / p.own_cpu_ms_per_token),
                    if p.same_tokens { "yes".into() } else { "NO".into() },
                ]);
            }
            write!(out, "{t}")?;
        }
        Target::Training => {
            crate::training::run(options.config.as_deref(), options.baseline.as_deref(), options.json, out)?;
        }
        Target::TrainingKernel => {
            let mut reports = Vec::new();
            for train_backbone in [false, true] {
                let r = bench_training(Path::new(TEST_MODEL_FILE), 4, 512, 1, train_backbone)?;
                reports.push(serde_json::to_value(r)?);
            }
            print_reports(out, 
                "Forward and backward (onebrain bench training-kernel)",
                &reports,
                options.json,
            )?;
        }
    }
    Ok(())
}

/// One column per run, one row per measured field.
fn print_reports(out: &mut dyn Write, title: &str, reports: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    if json {
        return write_json(out, &reports);
    }
    writeln!(out, "## {title}\n")?;
    let Some(first) = reports.first().and_then(|r| r.as_object()) else {
        return Ok(());
    };
    writeln!(out, "| measure |{}", " run |".repeat(reports.len()))?;
    writeln!(out, "|---|{}", "---|".repeat(reports.len()))?;
    for key in first.keys() {
        let cells: Vec<String> = reports
            .iter()
            .map(|r| match &r[key] {
                serde_json::Value::Number(n) if n.is_f64() => {
                    format!("{:.2}", n.as_f64().unwrap_or(0.0))
                }
                v => v.to_string(),
            })
            .collect();
        writeln!(out, "| {key} | {} |", cells.join(" | "))?;
    }
    Ok(())
}

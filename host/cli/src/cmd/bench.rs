use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use onebrain_bench::Table;
use onebrain_model::{
    bench_attention, bench_inference, bench_long_prefill, bench_matmul, bench_quantize, bench_training, DEFAULT_MODEL_FILE, LONG_PREFILL_TOKENS, TEST_MODEL_FILE,
};
use onebrain_bench::plugins::{bench_plugins, BenchOptions};

use crate::cmd::print_json;
use crate::flags::{BenchArgs, BenchTarget};
use crate::out::{out, outln};

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.data.is_dir() {
        bail!(
            "benchmark data not found at {} (pass --data)",
            args.data.display()
        );
    }
    if (args.config.is_some() || args.baseline.is_some()) && !matches!(args.what, BenchTarget::Training) {
        bail!("--config and --baseline apply to `onebrain bench training` only");
    }
    if args.mode.is_some() && !matches!(args.what, BenchTarget::Constraint) {
        bail!("--mode applies to `onebrain bench constraint` only");
    }
    match args.what {
        BenchTarget::Verifier => {
            let report =
                onebrain_bench::verifier::run(&args.data, args.reps).map_err(|e| anyhow!(e))?;
            if args.json {
                return print_json(&report);
            }
            outln!(
                "## Verifier (onebrain bench verifier --reps {})\n",
                args.reps
            )?;
            out!("{}", report.table())?;
        }
        BenchTarget::Plugins => {
            let options = BenchOptions {
                plugins_dir: PathBuf::from("plugins"),
                iterations: args.reps.max(1) * 500,
            };
            let r = bench_plugins(&options)?;
            if args.json {
                return print_json(&r);
            }
            outln!(
                "## Plugin host (onebrain bench plugins --reps {})\n",
                args.reps
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
            out!("{t}")?;
        }
        BenchTarget::Model => {
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
            if args.json {
                return print_json(&serde_json::json!({ "generation": reports, "long_prompts": long }));
            }
            print_reports("Generation (onebrain bench model)", &reports, false)?;
            outln!("\n## Long prompts: one cold prefill each, peak memory against the budget's estimate\n")?;
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
            out!("{t}")?;
        }
        BenchTarget::Matmul => {
            let r = bench_matmul()?;
            if args.json {
                return print_json(&r);
            }
            let kernel = r.first().and_then(|p| p.kernel.clone()).unwrap_or_else(|| "none on this CPU".into());
            outln!("## CPU Q8_0 / Q5_0 products against candle's, matrices streamed from memory (onebrain bench matmul; tiled kernel: {kernel})\n")?;
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
            out!("{t}")?;
            if !kquants.is_empty() {
                outln!("\n## Q4_K / Q6_K in tiles of their own against their Q8_0 re-quantization in tiles (Qwen 1.5B's shapes)\n")?;
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
                out!("{t}")?;
            }
        }
        BenchTarget::Quantize => {
            let r = bench_quantize()?;
            if args.json {
                return print_json(&r);
            }
            outln!("## Activations quantized for a tiled product: the pool's threads against one (onebrain bench quantize)\n")?;
            let mut t = Table::new(["rows × columns", "one thread", "pool", "speed-up"]);
            for p in &r {
                t.row([format!("{} × {}", p.shape.0, p.shape.1), format!("{:.1} µs", p.one_thread_us), format!("{:.1} µs", p.pool_us), format!("{:.2}×", p.speedup)]);
            }
            out!("{t}")?;
        }
        BenchTarget::Attention => {
            let r = bench_attention()?;
            if args.json {
                return print_json(&r);
            }
            outln!("## The learner's causal attention, one layer forward + backward, 14 query heads over 2 kv heads (onebrain bench attention)\n")?;
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
            out!("{t}")?;
        }
        BenchTarget::Constraint => {
            let tasks: Vec<String> = ["blocksworld_3/2", "mystery_blocksworld_3/4", "logistics/2", "blocksworld/10"]
                .iter()
                .map(|s| s.to_string())
                .take(args.reps.clamp(1, 4))
                .collect();
            let mode = args.mode.as_deref().unwrap_or("problem").parse::<onebrain_roles::Mode>().map_err(anyhow::Error::msg)?;
            let r = onebrain_bench::constraint::run(Path::new("configs/solve-demo.toml"), &args.data, &tasks, mode)
                .map_err(|e| anyhow!(e))?;
            if args.json {
                return print_json(&r);
            }
            outln!(
                "## Constrained decoding (onebrain bench constraint --reps {} --mode {})\n",
                tasks.len(),
                mode.as_str()
            )?;
            out!("{}", r.table())?;
            outln!(
                "\ntoken environment (trie + parser factory), once per model: {:.0} ms; mask {:.0} µs/token, {:.1} % of constrained decode time (target ≤ 10 %)",
                r.env_ms,
                r.mask_us_per_token(),
                100.0 * r.mask_share()
            )?;
        }
        BenchTarget::Training => {
            crate::cmd::bench_training::run(args.config, args.baseline, args.json)?;
        }
        BenchTarget::TrainingKernel => {
            let mut reports = Vec::new();
            for train_backbone in [false, true] {
                let r = bench_training(Path::new(TEST_MODEL_FILE), 4, 512, 1, train_backbone)?;
                reports.push(serde_json::to_value(r)?);
            }
            print_reports(
                "Forward and backward (onebrain bench training-kernel)",
                &reports,
                args.json,
            )?;
        }
    }
    Ok(())
}

/// One column per run, one row per measured field.
fn print_reports(title: &str, reports: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&reports);
    }
    outln!("## {title}\n")?;
    let Some(first) = reports.first().and_then(|r| r.as_object()) else {
        return Ok(());
    };
    outln!("| measure |{}", " run |".repeat(reports.len()))?;
    outln!("|---|{}", "---|".repeat(reports.len()))?;
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
        outln!("| {key} | {} |", cells.join(" | "))?;
    }
    Ok(())
}

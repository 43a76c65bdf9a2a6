//! The model benchmarks, as JSON lines:
//! `cargo run --release -p onebrain-bench --example bench_model -- [inference|long|rollout|train|all] [MODEL...]`.
//! Defaults: both models for inference and long prompts (cold prefill of 4k and 16k tokens
//! where the model's context holds them); SmolLM2 4 × 512 for training (adapters, full).

use std::path::PathBuf;

use onebrain_bench::model::{bench_inference, bench_long_prefill, bench_rollout_decode, bench_training, LONG_PREFILL_TOKENS, LONG_PROMPT_TOKENS};
use onebrain_model::{DEFAULT_MODEL_FILE, TEST_MODEL_FILE};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "all".into());
    let mut models: Vec<PathBuf> = args.map(PathBuf::from).collect();
    if models.is_empty() {
        models = vec![TEST_MODEL_FILE.into(), DEFAULT_MODEL_FILE.into()];
    }
    if what == "inference" || what == "all" {
        for m in &models {
            let r = bench_inference(m, 512, 64)?;
            println!("{}", serde_json::to_string(&r)?);
        }
    }
    if what == "long" || what == "all" {
        for m in &models {
            for r in bench_long_prefill(m, &LONG_PREFILL_TOKENS)? {
                println!("{}", serde_json::to_string(&r)?);
            }
        }
    }
    if what == "rollout" || what == "all" {
        // A training update's rollouts: `in-flight = 16` rows at about a repair prompt's
        // length, 4 samples of each of 4 tasks (ROLLOUT_PROMPTS=1: all 16 of one prompt).
        let prompts = std::env::var("ROLLOUT_PROMPTS").ok().and_then(|p| p.parse().ok()).unwrap_or(4);
        for m in &models {
            let r = bench_rollout_decode(m, 16, prompts, LONG_PROMPT_TOKENS, 32)?;
            println!("{}", serde_json::to_string(&r)?);
        }
    }
    if what == "train" || what == "all" {
        let micro = std::env::var("MICRO_BATCH").ok().and_then(|m| m.parse().ok()).unwrap_or(1);
        for full in [false, true] {
            let r = bench_training(&PathBuf::from(TEST_MODEL_FILE), 4, 512, micro, full)?;
            println!("{}", serde_json::to_string(&r)?);
        }
    }
    Ok(())
}

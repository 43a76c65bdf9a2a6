//! How far the quantized generation path's next-token distribution is from the same
//! weights dequantized to f32, with and without the padded layout for the tiled kernels
//! (`ModelConfig::tiled_cpu_kernels`), on three prompts:
//! `cargo run --release -p onebrain-model --example fidelity -- [MODEL...]`.
//! Prints one JSON line per model, layout and prompt: max |Δlogit|, KL(f32 ‖ quantized)
//! in nats, and whether the greedy token agrees.

use std::path::PathBuf;

use onebrain_model::{argmax, Brain, ModelConfig, Role, DEFAULT_MODEL_FILE, TEST_MODEL_FILE};

fn log_sum_exp(v: &[f32]) -> f32 {
    let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    m + v.iter().map(|x| (x - m).exp()).sum::<f32>().ln()
}

fn main() -> anyhow::Result<()> {
    let mut models: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if models.is_empty() {
        models = vec![TEST_MODEL_FILE.into(), DEFAULT_MODEL_FILE.into()];
    }
    for model in &models {
        for tiled in [true, false] {
            let mut brain = Brain::load(&ModelConfig { path: model.clone(), tiled_cpu_kernels: tiled, ..Default::default() })?;
            let prompts = [
                brain.chat_prompt("You write PDDL.", "Define a blocksworld domain with stack and unstack."),
                brain.chat_prompt("You answer briefly.", "What is the capital of France?"),
                brain.chat_prompt("You write PDDL.", "(define (problem p) (:domain blocksworld) (:objects a b c) (:init (clear a)"),
            ];
            for (i, p) in prompts.iter().enumerate() {
                let ids = brain.encode(p)?;
                let quant = brain.next_token_logits(Role::Actor, &[ids.clone()])?.remove(0);
                let dense: Vec<f32> = brain.logits(Role::Actor, &ids)?.get(ids.len() - 1)?.to_vec1()?;
                let max_diff = quant.iter().zip(&dense).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                let (lq, ld) = (log_sum_exp(&quant), log_sum_exp(&dense));
                let kl: f32 = dense.iter().zip(&quant).map(|(d, q)| ((d - ld).exp()) * ((d - ld) - (q - lq))).sum();
                println!(
                    "{}",
                    serde_json::json!({
                        "model": model, "tiled_cpu_kernels": tiled, "prompt": i,
                        "max_abs_logit_diff": max_diff, "kl_f32_to_quantized": kl,
                        "same_greedy_token": argmax(&quant) == argmax(&dense),
                    })
                );
            }
        }
    }
    Ok(())
}

//! Quick look: `cargo run --release -p onebrain-model --example generate -- [MODEL] [PROMPT]`.

use onebrain_model::{Brain, ModelConfig, Role, SamplingConfig};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or_else(|| onebrain_model::TEST_MODEL_FILE.to_string());
    let user = args.next().unwrap_or_else(|| "What is the capital of France? Answer in one sentence.".into());
    let t = std::time::Instant::now();
    let mut brain = Brain::load(&ModelConfig { path: model.into(), ..Default::default() })?;
    println!("loaded in {:.2}s: {:?} {:?}", t.elapsed().as_secs_f64(), brain.arch(), brain.param_counts());
    let prompt = brain.chat_prompt("You are a helpful assistant.", &user);
    for role in Role::ALL {
        let g = brain.generate(role, &prompt, &SamplingConfig::greedy(48))?;
        println!(
            "[{role}] {:?}\n  {} prompt tok ({} cached), prefill {:.1} tok/s, decode {:.1} tok/s, {:?}",
            g.text, g.prompt_tokens, g.cached_prompt_tokens, g.prefill_tokens_per_sec(), g.decode_tokens_per_sec(), g.stop_reason
        );
    }
    println!("judge: {}", brain.judge(&prompt)?);
    Ok(())
}

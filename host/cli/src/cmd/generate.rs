use anyhow::Context;
use onebrain_model::{Brain, ModelConfig, Role, SamplingConfig};
use serde_json::json;

use crate::cmd::print_json;
use crate::flags::GenerateArgs;
use crate::out::{errln, outln};

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let role: Role = args.role.parse()?;
    let mut config = ModelConfig::default();
    if let Some(path) = &args.model {
        config.path = path.clone();
    }
    args.device.apply(&mut config);
    let mut brain = Brain::load(&config).context("cannot load the model")?;
    if let Some(dir) = &args.checkpoint {
        brain
            .load_trainable(dir)
            .with_context(|| format!("cannot load the checkpoint {}", dir.display()))?;
    }
    let prompt = brain.chat_prompt(&args.system, &args.prompt);
    if role == Role::Judge {
        let score = brain.judge(&prompt)?;
        if args.json {
            return print_json(&json!({ "role": "judge", "score": score }));
        }
        outln!("judge score s_J = {score:.4} (predicted probability that the planner solves it)")?;
        return Ok(());
    }
    let sampling = SamplingConfig {
        temperature: args.temperature,
        top_p: args.top_p,
        max_tokens: args.max_tokens,
        seed: args.seed,
        ..SamplingConfig::default()
    };
    let out = brain.generate(role, &prompt, &sampling)?;
    if args.json {
        return print_json(&json!({
            "role": role.as_str(),
            "text": out.text,
            "prompt_tokens": out.prompt_tokens,
            "generated_tokens": out.tokens.len(),
            "prefill_tokens_per_sec": out.prefill_tokens_per_sec(),
            "decode_tokens_per_sec": out.decode_tokens_per_sec(),
        }));
    }
    outln!("{}", out.text)?;
    errln!(
        "[{role}: {} prompt tokens at {:.1} tok/s, {} new tokens at {:.1} tok/s]",
        out.prompt_tokens,
        out.prefill_tokens_per_sec(),
        out.tokens.len(),
        out.decode_tokens_per_sec()
    );
    Ok(())
}

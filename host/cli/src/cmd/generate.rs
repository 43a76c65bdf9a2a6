use anyhow::Context;
use onebrain_model::{
    checkpoint_model_file, with_checkpoint_or_peft_shape, Brain, LearnerWeights, ModelConfig, Role, SamplingConfig,
};
use serde_json::json;

use crate::cmd::{print_json, read};
use crate::flags::GenerateArgs;
use crate::out::{errln, outln};

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let role: Role = args.role.parse()?;
    let mut config = ModelConfig::default();
    if let Some(path) = args.model.clone().or_else(|| args.checkpoint.as_deref().and_then(checkpoint_model_file)) {
        config.path = path;
    }
    args.device.apply(&mut config);
    if args.dense {
        config.learner_weights = LearnerWeights::Dense;
    }
    if let Some(dir) = &args.checkpoint {
        config = with_checkpoint_or_peft_shape(&config, dir)
            .with_context(|| format!("cannot read the checkpoint {}", dir.display()))?;
    }
    let mut brain = Brain::load(&config).context("cannot load the model")?;
    if let Some(dir) = &args.checkpoint {
        brain
            .load_checkpoint_or_peft(dir, Some(role))
            .with_context(|| format!("cannot load the checkpoint {}", dir.display()))?;
    }
    let prompt = match (&args.prompt_file, &args.prompt) {
        (Some(file), _) => read(file)?,
        (None, Some(user)) => brain.chat_prompt(&args.system, user),
        (None, None) => anyhow::bail!("give --prompt or --prompt-file"),
    };
    if let Some(path) = &args.logits_json {
        return write_logits(&mut brain, role, &prompt, &args, path);
    }
    if role == Role::Judge {
        let score = brain.judge(&prompt)?;
        if args.json {
            return print_json(&json!({ "role": "judge", "score": score }));
        }
        outln!("judge score s_J = {score:.4} (predicted probability that the planner solves it)")?;
        return Ok(());
    }
    let out = brain.generate(role, &prompt, &sampling(&args))?;
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

fn sampling(args: &GenerateArgs) -> SamplingConfig {
    SamplingConfig {
        temperature: args.temperature,
        top_p: args.top_p,
        max_tokens: args.max_tokens,
        seed: args.seed,
        ..SamplingConfig::default()
    }
}

/// `--logits-json`: the prompt's ids, the next-token logits on the generation path (and
/// the dense one with `--dense`), the answer's ids and, for the Judge, its score.
fn write_logits(brain: &mut Brain, role: Role, prompt: &str, args: &GenerateArgs, path: &std::path::Path) -> anyhow::Result<()> {
    let tokens = brain.encode(prompt)?;
    let logits = brain.next_token_logits(role, std::slice::from_ref(&tokens))?.remove(0);
    let dense = match args.dense {
        true => {
            let all = brain.logits(role, &tokens)?;
            let last = all.get(tokens.len() - 1)?.to_vec1::<f32>()?;
            Some(last)
        }
        false => None,
    };
    let out = brain.generate(role, prompt, &sampling(args))?;
    let judge_score = match role {
        Role::Judge => Some(brain.judge(prompt)?),
        _ => None,
    };
    let value = json!({
        "model": brain.source().path().file_name().map(|n| n.to_string_lossy().to_string()),
        "checkpoint": args.checkpoint,
        "role": role.as_str(),
        "role_tokens": brain.config().role_tokens,
        "prompt_tokens": tokens,
        "next_token_logits": logits,
        "dense_next_token_logits": dense,
        "answer_tokens": out.tokens,
        "answer_text": out.text,
        "judge_score": judge_score,
    });
    onebrain_durable::write_atomic(path, serde_json::to_string(&value)?)?;
    outln!("{}", out.text)?;
    errln!("[{role}: {} prompt tokens; logits and {} answer tokens in {}]", tokens.len(), out.tokens.len(), path.display());
    Ok(())
}

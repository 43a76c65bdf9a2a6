//! Where did the guard give way? Replays trace steps' tokens through the constraint each was
//! sampled under, and prints every position where the guard would have refused every token
//! the grammar allowed (a guard override) or one of its rules gave way, with the text before
//! it.
//!
//! `cargo run --release -p onebrain-model --example replay_overrides -- TRACE TASK_ID [STEP…]`
//! (all steps when none is named; `ONEBRAIN_MODEL` names another model file than the default,
//! which must be the one the trace was sampled with). A step whose token the constraint now
//! refuses is reported too: the code changed since the trace was written, and from there on
//! the replay only shows what the old tokens meet.

use onebrain_grammar::ConstraintSpec;
use onebrain_model::{Brain, ModelConfig};

/// The last `n` characters of `text`.
fn tail(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: replay_overrides TRACE TASK_ID [STEP…]";
    let trace = args.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let task = args.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let wanted: Vec<usize> = args.map(|s| s.parse()).collect::<Result<_, _>>()?;
    let model = std::env::var("ONEBRAIN_MODEL").unwrap_or_else(|_| onebrain_model::DEFAULT_MODEL_FILE.to_string());
    let brain = Brain::load(&ModelConfig { path: model.into(), ..Default::default() })?;
    let env = brain.token_env()?;
    let mut found = false;
    for line in std::fs::read_to_string(&trace)?.lines() {
        let episode: serde_json::Value = serde_json::from_str(line)?;
        if episode["task_id"] != task.as_str() {
            continue;
        }
        found = true;
        let steps = episode["steps"].as_array().cloned().unwrap_or_default();
        for (i, step) in steps.iter().enumerate().filter(|(i, _)| wanted.is_empty() || wanted.contains(i)) {
            let Some(spec) = step["sampling"].get("constraint").filter(|c| !c.is_null()) else {
                println!("step {i}: sampled without a constraint");
                continue;
            };
            let spec: ConstraintSpec = serde_json::from_value(spec.clone())?;
            let max_tokens = step["sampling"]["max_tokens"].as_u64().unwrap_or(0) as usize;
            let tokens: Vec<u32> = serde_json::from_value(step["output_tokens"].clone())?;
            let mut c = spec.build(&env, max_tokens)?;
            let mut text = String::new();
            let mut diverged = false;
            for (p, &t) in tokens.iter().enumerate() {
                let before = (c.stats().guard_overrides, c.stats().relaxations.len());
                if c.forced().is_empty() {
                    let mask = c.allowed()?;
                    if !mask.is_allowed(t) && !diverged {
                        diverged = true;
                        println!("step {i} token {p}: the constraint now refuses {:?} after {:?}", String::from_utf8_lossy(env.token(t)), tail(&text, 100));
                    }
                }
                if c.stats().guard_overrides > before.0 {
                    println!("step {i} token {p}: override before {:?}, after {:?}", String::from_utf8_lossy(env.token(t)), tail(&text, 100));
                }
                for gave_way in &c.stats().relaxations[before.1..] {
                    println!("step {i} token {p}: {:?} gave way before {:?}, after {:?}", gave_way.rule, String::from_utf8_lossy(env.token(t)), tail(&text, 100));
                }
                c.consume(t)?;
                text.push_str(&String::from_utf8_lossy(env.token(t)));
            }
            let stats = c.stats();
            println!(
                "step {i}: {} tokens, {} overrides, {} rules given way, {} guard refusals",
                tokens.len(),
                stats.guard_overrides,
                stats.relaxations.len(),
                stats.guard_refusals
            );
        }
    }
    anyhow::ensure!(found, "no episode {task} in {trace}");
    Ok(())
}

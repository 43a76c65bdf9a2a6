//! Throughput and memory figures of the model for the README (`onebrain bench model`,
//! `onebrain bench training-kernel` and `examples/bench_model.rs` call these).
//!
//! Peak memory is the process's resident high-water mark, reset before each measurement
//! ([`onebrain_meter::reset_peak_rss`]) so inference and training are measured apart within
//! one process. Linux only; elsewhere it reads as `None`.

use std::{path::Path, time::Instant};

use onebrain_meter::{peak_rss_mib, reset_peak_rss};
use onebrain_model::{Brain, Error, ModelConfig, Result, Role, SamplingConfig};
use serde::{Deserialize, Serialize};

/// Generation figures for one model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InferenceBench {
    /// Model file name.
    pub model: String,
    /// Seconds to load the model.
    pub load_secs: f64,
    /// Prompt length used for the prefill figure.
    pub prompt_tokens: usize,
    /// Prefill throughput (positions/s) of a cold prompt.
    pub prefill_tok_per_s: f64,
    /// Tokens decoded for the decode figure.
    pub decode_tokens: usize,
    /// Single-sequence decode throughput (tokens/s).
    pub decode_tok_per_s: f64,
    /// Single-sequence decode throughput after a long prompt (tokens/s): real episodes
    /// decode at this context length, where attention over the cache costs the most.
    pub long_decode_tok_per_s: f64,
    /// Prompt length for the long-context decode figure.
    pub long_prompt_tokens: usize,
    /// Aggregate decode throughput of a batch of 4 sampled sequences (tokens/s).
    pub batch4_decode_tok_per_s: f64,
    /// Aggregate decode throughput of a batch of 8 sampled sequences (tokens/s).
    pub batch8_decode_tok_per_s: f64,
    /// Seconds to first token for a second prompt sharing all but its last line with
    /// the first (prefix reuse), versus cold.
    pub reuse_first_token_secs: f64,
    /// Seconds to first token for the same prompt without reuse.
    pub cold_first_token_secs: f64,
    /// Peak resident memory during the inference runs, MiB.
    pub peak_rss_mib: Option<f64>,
}

/// Prefill of one long prompt, cold: what a long task costs before its first token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LongPrefillBench {
    /// Model file name.
    pub model: String,
    /// Prompt length, tokens.
    pub prompt_tokens: usize,
    /// Prefill throughput (positions/s).
    pub prefill_tok_per_s: f64,
    /// Seconds to the first token.
    pub prefill_secs: f64,
    /// Peak resident memory of the process during this prefill (weights included), MiB.
    pub peak_rss_mib: Option<f64>,
    /// What the memory budget estimates the same request to hold (weights included), MiB.
    pub estimated_mib: f64,
}

/// One training step's cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainBench {
    /// Model file name.
    pub model: String,
    /// Whether the backbone was trainable (else adapters, role tokens, Judge head).
    pub train_backbone: bool,
    /// Sequences in the batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Sequences per forward/backward pass (gradients summed over the passes).
    pub micro_batch: usize,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// Seconds for one forward (log-probabilities of every token) + backward.
    pub forward_backward_secs: f64,
    /// Peak resident memory during the step, MiB.
    pub peak_rss_mib: Option<f64>,
}

/// Filler text for long prompts: PDDL-like, as the real prompts are.
fn filler(brain: &Brain, tokens: usize) -> Result<String> {
    let unit = "(:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y)) :effect (and (on ?x ?y) (not (holding ?x))))\n";
    let mut text = String::new();
    while brain.encode(&text)?.len() < tokens {
        text.push_str(unit);
    }
    // Trim to the exact token count.
    let ids = brain.encode(&text)?;
    brain.tokenizer().decode(&ids[..tokens])
}

/// Prompt length of the long-context decode figure: a repair prompt's size.
pub const LONG_PROMPT_TOKENS: usize = 1500;

/// Measures prefill and decode throughput of `model` (a path or file name).
pub fn bench_inference(model: &Path, prompt_tokens: usize, decode_tokens: usize) -> Result<InferenceBench> {
    reset_peak_rss();
    let t = Instant::now();
    let mut brain = Brain::load(&ModelConfig { path: model.to_path_buf(), ..Default::default() })?;
    let load_secs = t.elapsed().as_secs_f64();
    let body = filler(&brain, prompt_tokens)?;
    // Prefill: a cold prompt of exactly `prompt_tokens` tokens, one token generated.
    brain.clear_prefix_cache();
    let g = brain.generate(Role::Actor, &body, &SamplingConfig { ignore_eos: true, ..SamplingConfig::greedy(1) })?;
    let prefill = g.prefill_tokens_per_sec();
    // Decode: `decode_tokens` tokens, the end token ignored so the count is exact.
    let s = SamplingConfig { ignore_eos: true, ..SamplingConfig::greedy(decode_tokens) };
    let short = brain.chat_prompt("You write PDDL.", "Write a blocksworld domain.");
    let g = brain.generate(Role::Actor, &short, &s)?;
    let decode = g.decode_tokens_per_sec();
    // Decode after a long prompt (greedy, so only the context length differs).
    let long = filler(&brain, LONG_PROMPT_TOKENS)?;
    brain.clear_prefix_cache();
    let long_decode = brain.generate(Role::Actor, &long, &s)?.decode_tokens_per_sec();
    // Batches of sampled rows of the same prompt (the rollout shape of training).
    let s_batch = SamplingConfig { temperature: 0.7, top_p: 0.95, ignore_eos: true, ..s.clone() };
    let batch4 = decode_batch(&mut brain, &vec![short.clone(); 4], &s_batch)?.tok_per_s();
    let batch8 = decode_batch(&mut brain, &vec![short.clone(); 8], &s_batch)?.tok_per_s();
    // Prefix reuse: an Editor repair after an Actor call on the same task text.
    let task = filler(&brain, prompt_tokens.saturating_sub(40).max(1))?;
    let first = brain.chat_prompt("You write PDDL.", &format!("{task}\nWrite the domain."));
    let second = brain.chat_prompt("You write PDDL.", &format!("{task}\nRepair the domain."));
    let one = SamplingConfig { ignore_eos: true, ..SamplingConfig::greedy(1) };
    brain.generate(Role::Editor, &first, &one)?;
    let warm = brain.generate(Role::Editor, &second, &one)?.prefill_secs;
    brain.clear_prefix_cache();
    let cold = brain.generate(Role::Editor, &second, &one)?.prefill_secs;
    Ok(InferenceBench {
        model: model.display().to_string(),
        load_secs,
        prompt_tokens,
        prefill_tok_per_s: prefill,
        decode_tokens,
        decode_tok_per_s: decode,
        long_decode_tok_per_s: long_decode,
        long_prompt_tokens: LONG_PROMPT_TOKENS,
        batch4_decode_tok_per_s: batch4,
        batch8_decode_tok_per_s: batch8,
        reuse_first_token_secs: warm,
        cold_first_token_secs: cold,
        peak_rss_mib: peak_rss_mib(),
    })
}

/// Batched sampled decode in the shape of a training update's rollouts: `rows` sequences
/// (a config's `in-flight`) sampled at T = 0.7, `rows / prompts` from each of `prompts`
/// distinct prompts of `prompt_tokens` tokens (a group's samples of one task).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RolloutDecodeBench {
    /// Model file name.
    pub model: String,
    /// Sequences decoded together.
    pub rows: usize,
    /// Distinct prompts among the rows (absent in figures from before it was a parameter:
    /// one).
    #[serde(default = "one")]
    pub prompts: usize,
    /// Prompt length: the rows of one prompt share its cached keys and values.
    pub prompt_tokens: usize,
    /// Tokens decoded per row.
    pub decode_tokens: usize,
    /// Seconds to prefill the prompt once for all rows.
    pub prefill_secs: f64,
    /// Seconds a decode step of all rows takes, the prefill excluded.
    pub step_secs: f64,
    /// Aggregate decode throughput (tokens/s).
    pub decode_tok_per_s: f64,
}

fn one() -> usize {
    1
}

/// Times [`RolloutDecodeBench`]: `rows` sampled rows, `rows / prompts` of each of `prompts`
/// distinct `prompt_tokens`-token prompts, each row decoding exactly `decode_tokens` tokens.
pub fn bench_rollout_decode(model: &Path, rows: usize, prompts: usize, prompt_tokens: usize, decode_tokens: usize) -> Result<RolloutDecodeBench> {
    if prompts == 0 || rows % prompts != 0 {
        return Err(Error::InvalidConfig(format!("{rows} rows do not split into {prompts} prompts' samples")));
    }
    let mut brain = Brain::load(&ModelConfig { path: model.to_path_buf(), ..Default::default() })?;
    let body = filler(&brain, prompt_tokens)?;
    // Distinct from their first token, each cut back to the same length.
    let mut distinct = Vec::with_capacity(prompts);
    for task in 0..prompts {
        let ids = brain.encode(&format!("Task {task}.\n{body}"))?;
        let cut = ids.get(..prompt_tokens).ok_or_else(|| Error::InvalidConfig(format!("task {task}'s prompt has {} tokens, under {prompt_tokens}", ids.len())))?;
        distinct.push(brain.tokenizer().decode(cut)?);
    }
    let rows_text: Vec<String> = distinct.iter().flat_map(|p| std::iter::repeat_n(p.clone(), rows / prompts)).collect();
    let s = SamplingConfig { temperature: 0.7, top_p: 0.95, ignore_eos: true, ..SamplingConfig::greedy(decode_tokens) };
    let batch = decode_batch(&mut brain, &rows_text, &s)?;
    Ok(RolloutDecodeBench {
        model: model.display().to_string(),
        rows,
        prompts,
        prompt_tokens,
        decode_tokens,
        prefill_secs: batch.prefill_secs,
        step_secs: batch.decode_secs / decode_tokens.max(1) as f64,
        decode_tok_per_s: batch.tok_per_s(),
    })
}

/// One batch of `prompts`, timed: their prefill apart from the decode of every row.
struct BatchTiming {
    prefill_secs: f64,
    decode_secs: f64,
    tokens: usize,
}

impl BatchTiming {
    /// Aggregate decode throughput of the rows.
    fn tok_per_s(&self) -> f64 {
        self.tokens as f64 / self.decode_secs
    }
}

fn decode_batch(brain: &mut Brain, prompts: &[String], s: &SamplingConfig) -> Result<BatchTiming> {
    let t = Instant::now();
    let gs = brain.generate_batch(Role::Actor, prompts, s)?;
    let prefill_secs = gs.first().map_or(0.0, |g| g.prefill_secs);
    Ok(BatchTiming {
        prefill_secs,
        decode_secs: (t.elapsed().as_secs_f64() - prefill_secs).max(1e-9),
        tokens: gs.iter().map(|g| g.tokens.len()).sum(),
    })
}

/// The prompt lengths of the long-prompt figures.
pub const LONG_PREFILL_TOKENS: [usize; 2] = [4096, 16384];

/// Cold prefill of one prompt of each length in `lengths` that fits `model`'s context
/// (SmolLM2's is 8,192), each with the process's peak memory reset before it, so the figure
/// is the weights plus that prompt's keys, values and prefill work.
pub fn bench_long_prefill(model: &Path, lengths: &[usize]) -> Result<Vec<LongPrefillBench>> {
    let mut brain = Brain::load(&ModelConfig { path: model.to_path_buf(), ..Default::default() })?;
    let mut out = Vec::new();
    let fits = brain.context_len() - brain.config().role_tokens - 1;
    for &tokens in lengths.iter().filter(|&&n| n < fits) {
        let body = filler(&brain, tokens)?;
        brain.clear_prefix_cache();
        reset_peak_rss();
        let g = brain.generate(Role::Actor, &body, &SamplingConfig { ignore_eos: true, ..SamplingConfig::greedy(1) })?;
        out.push(LongPrefillBench {
            model: model.display().to_string(),
            prompt_tokens: tokens,
            prefill_tok_per_s: g.prefill_tokens_per_sec(),
            prefill_secs: g.prefill_secs,
            peak_rss_mib: peak_rss_mib(),
            // The positions `generate` asks the budget for: role tokens, prompt, one new token.
            estimated_mib: brain.memory_estimate(1, brain.config().role_tokens + tokens + 1).total_mib(),
        });
    }
    Ok(out)
}

/// Times one forward + backward of the log-probabilities of `batch × seq_len` tokens
/// (the PPO / language-model loss shape) and records the peak memory. The batch runs as
/// `batch / micro_batch` micro-batches whose gradients are summed, as a trainer on this
/// machine must: without activation checkpointing, 4 × 512 tokens of SmolLM2 in f32 keep
/// more activations alive than 24 GB hold.
pub fn bench_training(
    model: &Path,
    batch: usize,
    seq_len: usize,
    micro_batch: usize,
    train_backbone: bool,
) -> Result<TrainBench> {
    reset_peak_rss();
    let cfg = ModelConfig { path: model.to_path_buf(), train_backbone, ..Default::default() };
    let brain = Brain::load(&cfg)?;
    brain.prepare_training()?;
    let text = filler(&brain, seq_len)?;
    let ids = brain.encode(&text)?;
    let micro = micro_batch.clamp(1, batch.max(1));
    let vars = brain.trainable().all_vars();
    let t = Instant::now();
    let mut sums: Vec<Option<candle_core::Tensor>> = vec![None; vars.len()];
    let mut done = 0;
    while done < batch {
        let n = micro.min(batch - done);
        let items: Vec<(Vec<u32>, Vec<u32>)> =
            (0..n).map(|_| (ids[..1].to_vec(), ids[1..seq_len].to_vec())).collect();
        let lp = brain.batch_logprobs(Role::Actor, &items)?;
        let grads = lp.logprobs.sum_all()?.neg()?.backward()?;
        for (sum, var) in sums.iter_mut().zip(&vars) {
            if let Some(g) = grads.get(var.as_tensor()) {
                *sum = Some(match sum.take() {
                    Some(s) => (s + g)?,
                    None => g.clone(),
                });
            }
        }
        done += n;
    }
    let secs = t.elapsed().as_secs_f64();
    Ok(TrainBench {
        model: model.display().to_string(),
        train_backbone,
        batch,
        seq_len,
        micro_batch: micro,
        trainable_params: vars.iter().map(|v| v.elem_count()).sum(),
        forward_backward_secs: secs,
        peak_rss_mib: peak_rss_mib(),
    })
}


//! Throughput and memory figures for the README (`onebrain bench model` calls these).
//!
//! Peak memory is the process's resident high-water mark (`VmHWM`), reset before each
//! measurement through `/proc/self/clear_refs` so inference and training are measured
//! apart within one process. Linux only; elsewhere it reads as `None`.

use std::{path::Path, time::Instant};

use serde::{Deserialize, Serialize};

use candle_core::{
    quantized::{GgmlDType, QMatMul, QTensor},
    Module, Tensor,
};

use crate::{cpu_matmul::TiledMatrix, Brain, DeviceChoice, Error, ModelConfig, Result, Role, SamplingConfig};

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

/// Resets the peak-RSS counter (Linux ≥ 4.0).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident memory since the last reset, MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resident memory now, MiB.
pub fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds this process has run (user and system), from `/proc/self/stat`: unlike wall
/// time, it does not grow while the hypervisor runs another guest on our cores.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis (the command may hold spaces);
    // utime and stime are the stat's 14th and 15th fields.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_second())
}

/// Seconds of steal time summed over the machine's CPUs, from `/proc/stat`: time a virtual
/// CPU was ready to run but the hypervisor ran something else. A timing taken while this
/// grows measures the host's neighbours as much as our code.
pub fn steal_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = cpu.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
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

/// One (matrix shape, activation rows) point of the CPU matmul comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatmulBench {
    /// Weight matrix `(out, in)`: Qwen 0.5B's MLP for Q8_0 and Q5_0, Qwen 1.5B's for the
    /// k-quants (and its output matrix for Q6_K).
    pub shape: (usize, usize),
    /// The block type: `Q8_0`, `Q5_0` (most of Qwen 0.5B's file), `Q4K` or `Q6K` (Qwen 1.5B's).
    pub dtype: String,
    /// The tiled kernel this CPU ran (`Avx512Vnni` or `Avx2`); `None` where it runs none.
    pub kernel: Option<String>,
    /// Activation rows multiplied at once (1 = decode, 4 / 8 = batched decode, 64 = prefill).
    pub rows: usize,
    /// Our tiles of the block type (`None` where this CPU runs no tiled kernel), µs per
    /// product.
    pub ours_us: Option<f64>,
    /// candle's `QMatMul` on the same matrix, µs per product (Q8_0 and Q5_0).
    pub candle_us: Option<f64>,
    /// candle's tiled x86 kernel, given a copy padded to a multiple of 256 columns (the
    /// layout this project used before its own kernel), µs per product (Q8_0 and Q5_0).
    pub candle_padded_us: Option<f64>,
    /// Fastest candle figure over ours.
    pub speedup: Option<f64>,
    /// The k-quants: the same matrix re-quantized to Q8_0, in tiles (how they were kept
    /// before tiles of their own), µs per product.
    pub q8_tiles_us: Option<f64>,
    /// `q8_tiles_us` over ours.
    pub over_q8_tiles: Option<f64>,
}

/// Matrices per shape cycled through, so that none is in the cache when multiplied (40 ×
/// 4.6 MB ≫ the 32 MB L3): decode streams every weight from memory once per token.
const MATMUL_SETS: usize = 40;

/// Qwen 1.5B's k-quant matrices: Q4_K FFN gate / up and down, and Q6_K down (half the layers)
/// and the untied output matrix.
const KQUANT_MATRICES: [(usize, usize, GgmlDType); 4] = [
    (8960, 1536, GgmlDType::Q4K),
    (1536, 8960, GgmlDType::Q4K),
    (1536, 8960, GgmlDType::Q6K),
    (151_936, 1536, GgmlDType::Q6K),
];

/// Bytes of a k-quant matrix's blocks cycled through, in copies of one matrix (the cache
/// holds addresses, not values), so that none is in the 32 MB L3 when multiplied.
const KQUANT_STREAM_BYTES: usize = 160 << 20;

/// Times Q8_0 and Q5_0 products of 1, 2, 4, 8 and 64 activation rows against Qwen 0.5B's
/// MLP shapes, ours and candle's in the same run; then Q4_K and Q6_K products of 1, 4 and 8
/// rows (and 256, a prefill, but for the output matrix) against Qwen 1.5B's shapes, their own
/// tiles against their Q8_0 re-quantization's.
pub fn bench_matmul() -> Result<Vec<MatmulBench>> {
    let dev = DeviceChoice::Cpu.open()?;
    let mut out = Vec::new();
    let kernel = crate::cpu_matmul::Kernel::best().map(|k| format!("{k:?}"));
    let shapes = [(4864usize, 896usize), (896, 4864)];
    for ((n, k), dtype) in shapes.into_iter().flat_map(|s| [(s, GgmlDType::Q8_0), (s, GgmlDType::Q5_0)]) {
        let padded_k = k.div_ceil(256) * 256;
        let (mut ours, mut candle, mut padded) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..MATMUL_SETS {
            let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
            let q = QTensor::quantize(&w, dtype)?;
            ours.push(TiledMatrix::from_qtensor(&q)?);
            candle.push(QMatMul::from_qtensor(q)?);
            let wp = w.pad_with_zeros(1, 0, padded_k - k)?;
            padded.push(QMatMul::from_qtensor(QTensor::quantize(&wp, dtype)?)?);
        }
        for rows in [1, 2, 4, 8, 64] {
            let x = Tensor::randn(0f32, 1.0, (rows, k), &dev)?;
            let xp = x.pad_with_zeros(1, 0, padded_k - k)?;
            let candle_us = time_cycled(candle.len(), |i| Ok(candle[i].forward(&x).map(drop)?))?;
            let candle_padded_us = time_cycled(padded.len(), |i| Ok(padded[i].forward(&xp).map(drop)?))?;
            let ours_us = match ours.iter().all(Option::is_some) {
                true => Some(time_cycled(ours.len(), |i| ours[i].as_ref().expect("checked").matmul(&x).map(drop))?),
                false => None,
            };
            out.push(MatmulBench {
                shape: (n, k),
                dtype: format!("{dtype:?}"),
                kernel: kernel.clone(),
                rows,
                ours_us,
                candle_us: Some(candle_us),
                candle_padded_us: Some(candle_padded_us),
                speedup: ours_us.map(|o| candle_us.min(candle_padded_us) / o),
                q8_tiles_us: None,
                over_q8_tiles: None,
            });
        }
    }
    if !TiledMatrix::available() {
        return Ok(out);
    }
    for (n, k, dtype) in KQUANT_MATRICES {
        let q = QTensor::quantize(&Tensor::randn(0f32, 1.0, (n, k), &dev)?, dtype)?;
        let q8 = QTensor::quantize(&q.dequantize(&dev)?, GgmlDType::Q8_0)?;
        let sets = KQUANT_STREAM_BYTES.div_ceil(q.storage_size_in_bytes());
        let copies = |q: &QTensor| -> Result<Vec<TiledMatrix>> {
            (0..sets)
                .map(|_| TiledMatrix::from_qtensor(q)?.ok_or_else(|| crate::Error::meta("bench matmul", format!("{n} × {k} {:?} does not tile", q.dtype()))))
                .collect()
        };
        let (own, as_q8) = (copies(&q)?, copies(&q8)?);
        drop((q, q8));
        // 256 rows is a prefill's shape, where the kernel is bound by its arithmetic; the
        // output matrix is multiplied only at a prompt's last position.
        let prefill = if n == KQUANT_MATRICES[3].0 { None } else { Some(256) };
        for rows in [1, 4, 8].into_iter().chain(prefill) {
            let x = Tensor::randn(0f32, 1.0, (rows, k), &dev)?;
            // Alternated, so that a noisy neighbour slows both alike.
            let (mut ours_us, mut q8_tiles_us) = (f64::MAX, f64::MAX);
            for _ in 0..3 {
                ours_us = ours_us.min(time_cycled(sets, |i| own[i].matmul(&x).map(drop))?);
                q8_tiles_us = q8_tiles_us.min(time_cycled(sets, |i| as_q8[i].matmul(&x).map(drop))?);
            }
            out.push(MatmulBench {
                shape: (n, k),
                dtype: format!("{dtype:?}"),
                kernel: kernel.clone(),
                rows,
                ours_us: Some(ours_us),
                candle_us: None,
                candle_padded_us: None,
                speedup: None,
                q8_tiles_us: Some(q8_tiles_us),
                over_q8_tiles: Some(q8_tiles_us / ours_us),
            });
        }
    }
    Ok(out)
}

/// One shape of activations quantized for a tiled product: on the pool's threads (what a
/// product does from [`crate::cpu_matmul`]'s threshold up) against on one thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuantizeBench {
    /// Activation rows and columns.
    pub shape: (usize, usize),
    /// µs on one thread.
    pub one_thread_us: f64,
    /// µs with the chunks of 8 rows shared among the pool's threads.
    pub pool_us: f64,
    /// `one_thread_us` over `pool_us`.
    pub speedup: f64,
}

/// Times the activation quantization in front of every tiled product at Qwen 1.5B's widths:
/// a prefill's 256 rows into a 1,536-wide (attention, gate, up) and an 8,960-wide matrix
/// (down), and batched decode's 16 rows. Empty where this CPU runs no tiled kernel.
pub fn bench_quantize() -> Result<Vec<QuantizeBench>> {
    let mut out = Vec::new();
    for (rows, cols) in [(256usize, 1536usize), (256, 8960), (64, 1536), (16, 1536)] {
        let x: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 13) as f32)).collect();
        if !crate::cpu_matmul::quantize_activations(&x, rows, cols, false) {
            return Ok(out);
        }
        // Alternated, so that a noisy neighbour slows both alike.
        let (mut one, mut pool) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            one = one.min(time_cycled(1, |_| Ok(_ = crate::cpu_matmul::quantize_activations(&x, rows, cols, false)))?);
            pool = pool.min(time_cycled(1, |_| Ok(_ = crate::cpu_matmul::quantize_activations(&x, rows, cols, true)))?);
        }
        out.push(QuantizeBench { shape: (rows, cols), one_thread_us: one, pool_us: pool, speedup: one / pool });
    }
    Ok(out)
}

/// Best-of-5 mean µs of `f(i)` over 20 calls, `i` cycling through `sets`, after a warm-up.
fn time_cycled(sets: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut i = 0;
    let mut call = |f: &mut dyn FnMut(usize) -> Result<()>| {
        i = (i + 1) % sets;
        f(i)
    };
    for _ in 0..sets {
        call(&mut f)?;
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..20 {
            call(&mut f)?;
        }
        best = best.min(t.elapsed().as_secs_f64() / 20.0);
    }
    Ok(best * 1e6)
}

/// The learner's attention at one training shape, fused against the path before it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttentionBench {
    /// What the shape is (`Judge tail`, `Actor tail`).
    pub what: String,
    /// Query positions with a graph (the tail).
    pub queries: usize,
    /// Keys each sees at most (prompt head + tail).
    pub keys: usize,
    /// Query heads and kv heads (Qwen 0.5B: 14 over 2).
    pub heads: (usize, usize),
    /// Forward + backward of one layer, fused (`CausalAttention`), ms.
    pub fused_ms: f64,
    /// The same with the prompt's keys constants of the graph, as a detached prompt head's
    /// are in training (no dK, dV computed for them), ms.
    pub fused_constant_head_ms: f64,
    /// Forward + backward of one layer through matmul, causal softmax, matmul (the learner's
    /// path before), ms.
    pub scores_kept_ms: f64,
    /// `scores_kept_ms / fused_ms`.
    pub speedup: f64,
    /// Bytes the path before kept per layer between forward and backward for its two score
    /// matrices (the fused op keeps none), MiB.
    pub scores_kept_mib: f64,
}

/// Times one layer's attention forward and backward at the 0.5B model's training shapes
/// (`judge-tail` 384 and a 320-token answer against about 1,400 prompt positions), fused
/// against matmul, causal softmax and matmul, and fused with the prompt's keys constant (as
/// the learner's detached heads are), in the same run.
pub fn bench_attention() -> Result<Vec<AttentionBench>> {
    use crate::{attention::CausalSoftmax, causal_attention::CausalAttention};
    let dev = DeviceChoice::Cpu.open()?;
    let (heads, kv, d) = (14usize, 2usize, 64usize);
    let rep = heads / kv;
    let mut out = Vec::new();
    for (what, queries, prompt) in [("Judge tail", 384usize, 1_000usize), ("Actor tail", 321, 1_000), ("long prompt", 64, 8_000)] {
        let keys = prompt + queries;
        let q = candle_core::Var::randn(0f32, 0.2, (1, kv, rep * queries, d), &dev)?;
        let k = candle_core::Var::randn(0f32, 1.0, (1, kv, keys, d), &dev)?;
        let v = candle_core::Var::randn(0f32, 1.0, (1, kv, keys, d), &dev)?;
        let w = Tensor::randn(0f32, 1.0, (1, kv, rep * queries, d), &dev)?;
        let fused = || -> Result<()> {
            let o = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), CausalAttention::causal(queries))?;
            (o * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let constant_head = || -> Result<()> {
            let op = CausalAttention { constant_keys: (0, prompt), ..CausalAttention::causal(queries) };
            let o = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), op)?;
            (o * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let kept = || -> Result<()> {
            let scores = q.as_tensor().matmul(&k.as_tensor().t()?)?.reshape((1, kv, rep, queries, keys))?;
            let p = scores.apply_op1(CausalSoftmax)?.reshape((1, kv, rep * queries, keys))?;
            (p.matmul(v.as_tensor())? * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let time = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
            f()?;
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                f()?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            Ok(best * 1e3)
        };
        // Alternate the two, so a noisy neighbour hits both alike.
        let (mut fused_ms, mut fused_constant_head_ms, mut scores_kept_ms) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..3 {
            fused_ms = fused_ms.min(time(&fused)?);
            fused_constant_head_ms = fused_constant_head_ms.min(time(&constant_head)?);
            scores_kept_ms = scores_kept_ms.min(time(&kept)?);
        }
        out.push(AttentionBench {
            what: what.into(),
            queries,
            keys,
            heads: (heads, kv),
            fused_ms,
            fused_constant_head_ms,
            scores_kept_ms,
            speedup: scores_kept_ms / fused_ms,
            scores_kept_mib: (2 * heads * queries * keys * 4) as f64 / (1 << 20) as f64,
        });
    }
    Ok(out)
}

//! The memory a request to the model may hold, estimated before any model time is spent.
//!
//! Prefill runs in chunks (at most [`PREFILL_POSITIONS`] positions and [`PREFILL_SCORES`]
//! attention scores per forward), so what a request holds beyond the weights grows with
//! its rows × positions (the KV cache), never with their square. That makes the peak
//! predictable from the request's shape alone, and a request whose estimate passes the
//! budget is refused with [`Error::OverBudget`] before its prefill starts.

use crate::error::{Error, Result};
use crate::paths::ModelSource;
use crate::transformer::ArchConfig;

/// Most positions (rows × columns) one prefill forward runs at once.
pub(crate) const PREFILL_POSITIONS: usize = 2048;

/// Most attention scores (rows × heads × columns × keys, f32) one prefill forward holds at
/// once: 128 MiB, and as much again for their softmax. With it, a prompt's prefill memory
/// grows with its length (the KV cache), not with its square: a 17k-token prompt computed
/// at once held 17k² scores per head and took the host past 24 GB.
pub(crate) const PREFILL_SCORES: usize = 32 << 20;

/// The budget when the config names none: the 0.5B default model at its whole 32k context
/// (one row) fits, with room for a batch of rollouts at training-task lengths.
pub const DEFAULT_MEMORY_BUDGET_MIB: usize = 4096;

/// A KV buffer grows by half its length again when full, and the old buffer lives until a
/// layer's copy is made: at most twice what the positions need.
const KV_GROWTH: f64 = 2.0;

/// The allocator's slack over what the request's tensors need: 1,048 MiB resident growth
/// against about 950 MiB counted on the CI machine (SmolLM2, 7,040 tokens), 843 here.
const HEAP_SLACK: f64 = 1.5;

const MIB: f64 = (1 << 20) as f64;

/// What a request of `rows` rows of `positions` positions each is estimated to hold, MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryEstimate {
    /// The weights as loaded.
    pub model_mib: f64,
    /// Keys and values of every row's positions, with room to grow.
    pub kv_mib: f64,
    /// One prefill forward's attention scores, their softmax and its activations.
    pub work_mib: f64,
}

impl MemoryEstimate {
    /// For `rows` rows of up to `positions` positions (prompt, role tokens and the tokens
    /// to generate) on a model of shape `cfg` whose weights hold `model_bytes`.
    pub(crate) fn of(cfg: &ArchConfig, model_bytes: u64, rows: usize, positions: usize) -> MemoryEstimate {
        let f32_bytes = 4.0;
        let kv_per_position = (cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * cfg.head_dim) as f64 * f32_bytes;
        let kv = (rows * positions) as f64 * kv_per_position * KV_GROWTH;
        // Scores and their softmax; per position the residual stream, the attention's
        // q, k, v, o and the MLP's gate, up and product.
        let all_scores = (rows * cfg.num_attention_heads) as f64 * (positions as f64).powi(2);
        let scores = 2.0 * all_scores.min(PREFILL_SCORES as f64) * f32_bytes;
        let per_position = (5 * cfg.hidden_size + 3 * cfg.intermediate_size) as f64 * f32_bytes;
        let activations = PREFILL_POSITIONS.min(rows * positions) as f64 * per_position;
        let logits = rows as f64 * cfg.vocab_size as f64 * f32_bytes;
        MemoryEstimate {
            model_mib: model_bytes as f64 / MIB,
            kv_mib: kv * HEAP_SLACK / MIB,
            work_mib: (scores + activations + logits) * HEAP_SLACK / MIB,
        }
    }

    /// What the request adds to the weights, MiB.
    pub fn request_mib(&self) -> f64 {
        self.kv_mib + self.work_mib
    }

    /// Weights and request, MiB.
    pub fn total_mib(&self) -> f64 {
        self.model_mib + self.request_mib()
    }

    /// `Ok` when the estimate fits `budget_mib`, else the error that names the request,
    /// the figure and the limit.
    pub(crate) fn check(&self, budget_mib: usize, rows: usize, positions: usize) -> Result<()> {
        if self.total_mib() <= budget_mib as f64 {
            return Ok(());
        }
        Err(Error::OverBudget { rows, positions, estimate: *self, budget_mib })
    }
}

/// The bytes a loaded model's weights hold: a GGUF's matrices sit in 8-bit blocks (34 bytes
/// per 32 weights; 4- and 5-bit files are re-quantized up to them), a Hugging Face
/// directory's in the dense dtype.
pub(crate) fn resident_model_bytes(source: &ModelSource, params: usize, dense_bytes_per_param: usize) -> u64 {
    match source {
        ModelSource::Gguf(path) => {
            let file = std::fs::metadata(path).map_or(0, |m| m.len());
            file.max(params as u64 * 34 / 32)
        }
        ModelSource::HfDir(_) => (params * dense_bytes_per_param) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transformer::Arch;

    /// Qwen2.5-0.5B's shape, as its GGUF states it.
    fn qwen_half_b() -> ArchConfig {
        ArchConfig {
            arch: Arch::Qwen2,
            vocab_size: 151_936,
            hidden_size: 896,
            intermediate_size: 4864,
            num_hidden_layers: 24,
            num_attention_heads: 14,
            num_key_value_heads: 2,
            head_dim: 64,
            rms_norm_eps: 1e-6,
            rope_theta: 1e6,
            max_position_embeddings: 32_768,
            rope_interleaved: false,
        }
    }

    /// The README's statement: a `solve` with the default model at its longest accepted
    /// prompt (the whole context, one row) fits the default budget.
    #[test]
    fn the_default_model_at_its_whole_context_fits_the_default_budget() {
        let cfg = qwen_half_b();
        let weights = 494_032_768 * 34 / 32;
        let est = MemoryEstimate::of(&cfg, weights, 1, 32_768);
        eprintln!("{est:?}, total {:.0} MiB", est.total_mib());
        assert!(est.check(DEFAULT_MEMORY_BUDGET_MIB, 1, 32_768).is_ok(), "{est:?}");
        // Rows at training-task lengths fit; eight rows of the whole context do not.
        let widest = (1..=32_768).rev().find(|&p| MemoryEstimate::of(&cfg, weights, 8, p).total_mib() <= 4096.0).unwrap();
        eprintln!("eight rows fit up to {widest} positions each");
        assert!(widest > 2_000);
        let err = MemoryEstimate::of(&cfg, weights, 8, 32_768).check(DEFAULT_MEMORY_BUDGET_MIB, 8, 32_768).unwrap_err();
        assert!(err.to_string().starts_with("8 row(s) of 32768 positions need an estimated"), "{err}");
    }

    /// Memory grows with rows × positions, not with their square: doubling a long prompt
    /// at most doubles the request's estimate.
    #[test]
    fn the_estimate_grows_linearly_past_the_first_chunk() {
        let cfg = qwen_half_b();
        let at = |p| MemoryEstimate::of(&cfg, 0, 1, p).request_mib();
        assert!(at(16_384) <= 2.0 * at(8_192) && at(32_768) <= 2.0 * at(16_384));
        assert!(at(32_768) > at(16_384));
    }
}

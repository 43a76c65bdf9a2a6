//! The memory a request to the model may hold, estimated before any model time is spent.
//!
//! Prefill runs in chunks (at most [`PREFILL_POSITIONS`] positions and [`PREFILL_SCORES`]
//! attention scores per forward), so what a request holds beyond the weights grows with
//! its rows × positions (the KV cache), never with their square. That makes the peak
//! predictable from the request's shape alone, and a request whose estimate passes the
//! budget is refused with [`Error::OverBudget`] before its prefill starts.

use crate::error::{Error, Result};
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
    /// The weights as stored (the model file's size).
    pub model_mib: f64,
    /// Keys and values of every row's positions, with room to grow.
    pub kv_mib: f64,
    /// One prefill forward's attention scores, their softmax and its activations.
    pub work_mib: f64,
}

impl MemoryEstimate {
    /// For `rows` rows of up to `positions` positions (prompt, role tokens and the tokens
    /// to generate) on a model of shape `cfg` whose weights take `model_bytes`.
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

/// The bytes a model's weights take, as stored: a GGUF file's size, or a Hugging Face
/// directory's safetensors files together.
pub(crate) fn stored_model_bytes(path: &std::path::Path) -> u64 {
    if path.is_file() {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    }
    std::fs::read_dir(path).map_or(0, |dir| {
        dir.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

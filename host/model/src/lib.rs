//! The candle backbone of onebrain: one pretrained language model playing three roles.
//!
//! [`Brain`] loads a GGUF file (Qwen2 or Llama; the tokenizer is rebuilt from its
//! metadata) or a Hugging Face safetensors directory, and adds per [`Role`] a few learned
//! soft tokens prepended to the input, LoRA adapters on every attention and MLP
//! projection, and for the Judge a scalar head s_J = σ(w·h + b).
//!
//! * Generation ([`Brain::generate`], [`Brain::generate_batch`], [`Brain::judge`]) runs on
//!   the quantized weights with a KV cache, greedy or temperature + nucleus sampling
//!   ([`SamplingConfig`]), stop strings, and reuse of cached prompt prefixes.
//! * Training ([`Brain::sequence_logprobs`], [`Brain::batch_logprobs`],
//!   [`Brain::judge_logit`]) runs a differentiable f32 copy; every parameter in
//!   [`Brain::trainable`] receives gradients.
//! * Checkpoints: [`Brain::save`], [`Brain::load_trainable`]; a role exported for
//!   transformers + PEFT or llama.cpp ([`Brain::export`], [`ExportFormat`]), and a PEFT LoRA
//!   adapter trained elsewhere loaded into a role ([`Brain::import_peft`]).
//!
//! ```no_run
//! use onebrain_model::{Brain, ModelConfig, Role, SamplingConfig};
//!
//! let mut brain = Brain::load(&ModelConfig::test_model())?;
//! let prompt = brain.chat_prompt("You write PDDL.", "Define a blocksworld domain.");
//! let out = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(64))?;
//! println!("{} ({:.1} tok/s)", out.text, out.decode_tokens_per_sec());
//! let score = brain.judge(&prompt)?;
//! assert!(score > 0.0 && score < 1.0);
//! # Ok::<(), onebrain_model::Error>(())
//! ```
#![deny(missing_docs)]

mod brain;
mod budget;
mod checkpoint;
mod config;
mod constrain;
mod device;
mod error;
mod export;
mod gguf;
mod kv_cache;
mod memory_estimate;
mod logprob;
mod paths;
mod recompute;
mod roles;
mod sampler;
mod tokenizer;
mod transformer;
mod weights;

#[cfg(test)]
mod test_util;

pub use budget::{MemoryEstimate, DEFAULT_MEMORY_BUDGET_MIB};
pub use brain::{BatchLogprobs, Brain, Generation, ParamCounts, PromptHead, StopReason};
/// Constrained decoding: what a [`SamplingConfig::constraint`] holds, and the live masks.
pub use onebrain_grammar::{ConstraintSpec, ConstraintStats, GuardRule, Limits as GrammarLimits, MutexGroup, MutexPart, Relaxation, TokenEnv, TokenSet};
pub use checkpoint::{resolve_checkpoint, with_checkpoint_shape, LATEST_FILE};
pub use config::{LearnerWeights, ModelConfig, RecomputeBlocks, Role, SamplingConfig, DEFAULT_MODEL_FILE, QUICK_MODEL_FILE, TEST_MODEL_FILE};
pub use device::{DeviceChoice, WeightDtype};
pub use error::{Error, Result};
pub use gguf::{check_gguf, GgufHeader};
/// What the process uses (onebrain-meter), re-exported beside the model it mostly measures:
/// the trainer's metrics and the binaries' allocator reach it here.
pub use onebrain_meter::{cpu_seconds, heap_live_mib, heap_peak_mib, peak_rss_mib, reset_heap_peak, reset_peak_rss, rss_mib, steal_seconds, CountingAllocator};
pub use export::{checkpoint_model_file, is_peft_adapter, peft_adapter_role, with_checkpoint_or_peft_shape, ExportFormat, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE};
pub use paths::{resolve_model, ModelSource, MODEL_DIR_ENV};
pub use sampler::{argmax, Sampler};
pub use tokenizer::{chat_prompt, Tokenizer};
pub use transformer::{Arch, ArchConfig, LORA_TARGETS};

/// The tensor type of the training API (candle's), re-exported for callers.
pub use candle_core::{Tensor, Var};
/// The parameter store returned by [`Brain::trainable`].
pub use candle_nn::VarMap;

//! What the user writes: the role names, the model config and the sampling config.
//! No I/O happens here; [`crate::Brain::load`] turns a [`ModelConfig`] into a model.

use std::{fmt, path::PathBuf, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::{transformer::LORA_TARGETS, DeviceChoice, Error, Result, WeightDtype};

/// File name of the default backbone (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M), fetched by
/// `scripts/setup.sh --models default` (and `all`). The 0.5B samples a faithful answer about
/// once in 64 tasks, the 1.5B ten times, so RL has something to reinforce.
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// File name of the small backbone for quick runs (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M),
/// fetched by `scripts/setup.sh --models all`; the backbone of the 0.5B learning arms.
pub const QUICK_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// File name of the small test model (SmolLM2-135M-Instruct, Q4_1), fetched by
/// `scripts/setup.sh --models test`.
pub const TEST_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// One of the three roles the single backbone plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Writes the first (domain, problem) PDDL pair from the task text.
    Actor,
    /// Scores a candidate with s_J ∈ (0, 1).
    Judge,
    /// Repairs a candidate from the verifier's diagnostics.
    Editor,
}

impl Role {
    /// All roles, in the order used for parameter indices.
    pub const ALL: [Role; 3] = [Role::Actor, Role::Judge, Role::Editor];

    /// Lower-case name, as in configs and parameter names.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Actor => "actor",
            Role::Judge => "judge",
            Role::Editor => "editor",
        }
    }

    /// Position in [`Role::ALL`].
    pub fn index(self) -> usize {
        match self {
            Role::Actor => 0,
            Role::Judge => 1,
            Role::Editor => 2,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "actor" => Ok(Role::Actor),
            "judge" => Ok(Role::Judge),
            "editor" => Ok(Role::Editor),
            other => Err(Error::InvalidConfig(format!(
                "unknown role `{other}` (expected actor, judge or editor)"
            ))),
        }
    }
}

/// How to build the backbone and the role parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Kebab-case like every other section; the snake_case spelling is kept as an alias for the
// configs written before, and serialization keeps it so that recorded runs' digests and
// checkpoints' `brain.json` stay the same.
#[serde(default, deny_unknown_fields, rename_all(deserialize = "kebab-case"))]
pub struct ModelConfig {
    /// A `.gguf` file or a Hugging Face directory (`config.json`, `*.safetensors`,
    /// `tokenizer.json`). A bare file name is looked up in `$ONEBRAIN_MODEL_DIR`, then in
    /// `.cache/models/` of the enclosing repository.
    pub path: PathBuf,
    /// Number of learned soft tokens per role, prepended to the input embeddings.
    #[serde(alias = "role_tokens")]
    pub role_tokens: usize,
    /// LoRA rank of the role adapters; `None` picks the rank that makes each role's
    /// parameters `role_param_fraction` of the backbone's.
    #[serde(alias = "lora_rank")]
    pub lora_rank: Option<usize>,
    /// Target share of the backbone's parameter count per role (the paper's ≈ 1.67 %).
    #[serde(alias = "role_param_fraction")]
    pub role_param_fraction: f64,
    /// LoRA scaling numerator: adapters add `alpha / rank · B·A·x`.
    #[serde(alias = "lora_alpha")]
    pub lora_alpha: f32,
    /// Three independent copies of every trainable parameter (the paper's ablation),
    /// instead of one backbone shared by the roles.
    #[serde(alias = "separate_models")]
    pub separate_models: bool,
    /// Train the backbone weights too (dense f32), not only the role parameters.
    #[serde(alias = "train_backbone")]
    pub train_backbone: bool,
    /// Cap on positions (prompt + generation); `None` uses the model's context length,
    /// itself capped at 32768 to bound the rotary tables.
    #[serde(alias = "max_context")]
    pub max_context: Option<usize>,
    /// Seed for initialising the role parameters (LoRA A, Judge head).
    #[serde(alias = "init_seed")]
    pub init_seed: u64,
    /// How many prompt KV caches to keep for prefix reuse.
    #[serde(alias = "prefix_cache_entries")]
    pub prefix_cache_entries: usize,
    /// Where the model runs: `cpu` (default) or `cuda:N`. Left out when `cpu`, so the
    /// digests of existing runs' configs stay the same.
    #[serde(skip_serializing_if = "DeviceChoice::is_cpu")]
    pub device: DeviceChoice,
    /// How the dense frozen backbone is stored: `f32` (default) or `bf16` (CUDA only).
    #[serde(skip_serializing_if = "WeightDtype::is_f32")]
    pub dtype: WeightDtype,
    /// On x86 CPUs with AVX-512 VNNI, keep the GGUF's matrices as tiles for our own kernel
    /// (`cpu_matmul`): about 1.5× faster decode than candle's kernels and 2.5× more
    /// aggregate throughput at batch 4. Q8_0 and Q5_0 blocks stay as they are; Q4_K and Q6_K
    /// keep tiles of their own, Q4_1 is re-quantized to 8 bits (`docs/performance.md`,
    /// "Generation", measures speed and fidelity). `false` keeps candle's kernels and the file's block types
    /// (Q4_1, Q5_0 and Q5_1 still become Q8_0, which candle multiplies faster). Left out
    /// when `true`, so the digests of existing runs' configs stay the same.
    #[serde(skip_serializing_if = "is_true")]
    #[serde(alias = "tiled_cpu_kernels")]
    pub tiled_cpu_kernels: bool,
    /// The projections that get LoRA adapters, by PEFT name (`q_proj`, `k_proj`, `v_proj`,
    /// `o_proj`, `gate_proj`, `up_proj`, `down_proj`); `None` adapts all seven (the paper's
    /// ≈ 1.67 % per role). PEFT's own default is `["q_proj", "v_proj"]` at rank 8: about
    /// 0.5 M parameters a role on Qwen 0.5B, small enough to commit a run's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "lora_targets")]
    pub lora_targets: Option<Vec<String>>,
    /// Which weights the learner's forward and backward run on: `sampler` (the default)
    /// uses the generation path's own quantized weights, so there is no f32 copy and frozen
    /// matrices cost no gradient; `dense`
    /// builds a dequantized f32 copy (the old training path's learner, kept for comparison:
    /// `configs/train-old-path.toml`).
    /// `sampler` needs the backbone frozen and quantized on the CPU (our tiles where the CPU
    /// has AVX-512 VNNI, candle's quantized blocks elsewhere); a dense checkpoint or a GPU
    /// uses the dense weights.
    #[serde(skip_serializing_if = "LearnerWeights::is_sampler")]
    #[serde(alias = "learner_weights")]
    pub learner_weights: LearnerWeights,
    /// With `learner_weights = "sampler"` on our tiles: compute each answer position's logits
    /// only for the tokens its grammar mask allows (exact for the constrained policy), instead
    /// of all of the vocabulary: 38 % less peak memory in the 0.5B model's update, 2 % faster
    /// (`docs/training.md`). Off by default so that a run's recorded config, which leaves it out
    /// when off, resumes with the numerics it started with.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[serde(alias = "allowed_logits")]
    pub allowed_logits: bool,
    /// In the learner's forward over an answer (after a detached prompt head, on the CPU):
    /// whether each block runs again in the backward instead of keeping its activations
    /// (activation checkpointing): one block's graph at a time instead of all of them, for one
    /// more forward of the blocks. The log-probabilities are the same bit for bit either way.
    /// `false` (the default, left out when off, so a run's recorded config resumes as it
    /// started), `true`, or `"auto"`: per answer, from the memory budget.
    #[serde(skip_serializing_if = "RecomputeBlocks::is_never")]
    #[serde(alias = "recompute_blocks")]
    pub recompute_blocks: RecomputeBlocks,
    /// Free the learner's Q8_0 copies of Wᵀ (1.58 GiB on the 1.5B) after each update and
    /// build them again at the next (a few seconds on 2 cores), so that the rollouts between
    /// do not hold them: they carry gradients only. Off by default, left out when off.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[serde(alias = "free_transposed")]
    pub free_transposed: bool,
    /// The most resident memory, MiB, one request to the model (weights, KV cache, prefill
    /// work) may be estimated to need; a request past it is refused before any model time.
    /// `None` is [`crate::DEFAULT_MEMORY_BUDGET_MIB`]. Left out when `None`, so the digests of
    /// existing runs' configs stay the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "memory_budget_mb")]
    pub memory_budget_mb: Option<usize>,
}

/// See [`ModelConfig::recompute_blocks`]; a config writes `false`, `true` or `"auto"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecomputeBlocks {
    /// Keep every block's activations until the backward (`false`).
    #[default]
    Never,
    /// Run every block again in the backward (`true`): the least memory, about 14–22 % more
    /// update time on the 1.5B.
    Always,
    /// Per answer (`"auto"`): keep the blocks' activations when what the process holds plus
    /// their estimate ([`crate::Brain::kept_activations_mib`]) fits `memory-budget-mb`, and
    /// run them again otherwise. Short answers then keep their speed, and only the long ones
    /// that would pass the budget pay for the memory.
    OverBudget,
}

impl RecomputeBlocks {
    fn is_never(&self) -> bool {
        *self == RecomputeBlocks::Never
    }
}

impl Serialize for RecomputeBlocks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            RecomputeBlocks::Never => s.serialize_bool(false),
            RecomputeBlocks::Always => s.serialize_bool(true),
            RecomputeBlocks::OverBudget => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for RecomputeBlocks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Flag(false) => Ok(RecomputeBlocks::Never),
            Written::Flag(true) => Ok(RecomputeBlocks::Always),
            Written::Word(w) if w == "auto" => Ok(RecomputeBlocks::OverBudget),
            Written::Word(w) => {
                Err(serde::de::Error::custom(format!("recompute-blocks is true, false or \"auto\", not {w:?}")))
            }
        }
    }
}

/// See [`ModelConfig::learner_weights`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LearnerWeights {
    /// The sampler's quantized tiles, with an input-only backward.
    #[default]
    Sampler,
    /// A dense f32 copy of the backbone.
    Dense,
}

impl LearnerWeights {
    fn is_sampler(&self) -> bool {
        *self == LearnerWeights::Sampler
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            path: PathBuf::from(DEFAULT_MODEL_FILE),
            role_tokens: 4,
            lora_rank: None,
            role_param_fraction: 0.0167,
            lora_alpha: 16.0,
            separate_models: false,
            train_backbone: false,
            max_context: None,
            init_seed: 0,
            prefix_cache_entries: 8,
            device: DeviceChoice::Cpu,
            dtype: WeightDtype::F32,
            tiled_cpu_kernels: true,
            lora_targets: None,
            learner_weights: LearnerWeights::Sampler,
            allowed_logits: false,
            recompute_blocks: RecomputeBlocks::Never,
            free_transposed: false,
            memory_budget_mb: None,
        }
    }
}

impl ModelConfig {
    /// The default config pointed at the small test model (SmolLM2-135M).
    pub fn test_model() -> Self {
        ModelConfig { path: PathBuf::from(TEST_MODEL_FILE), ..Default::default() }
    }

    /// Which of [`LORA_TARGETS`] get adapters, in their order.
    pub fn lora_target_mask(&self) -> [bool; 7] {
        match &self.lora_targets {
            None => [true; 7],
            Some(list) => LORA_TARGETS.map(|t| list.iter().any(|n| n == t)),
        }
    }

    /// The adapted projections' names, in [`LORA_TARGETS`] order.
    pub fn lora_target_list(&self) -> Vec<&'static str> {
        let mask = self.lora_target_mask();
        LORA_TARGETS.into_iter().zip(mask).filter(|(_, on)| *on).map(|(t, _)| t).collect()
    }

    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<()> {
        if let Some(list) = &self.lora_targets {
            if let Some(bad) = list.iter().find(|n| !LORA_TARGETS.contains(&n.as_str())) {
                return Err(Error::InvalidConfig(format!(
                    "unknown LoRA target `{bad}` (expected some of {})",
                    LORA_TARGETS.join(", ")
                )));
            }
            if list.is_empty() {
                return Err(Error::InvalidConfig("lora_targets is empty: name at least one projection".into()));
            }
        }
        if self.dtype == WeightDtype::Bf16 && self.device.is_cpu() {
            return Err(Error::InvalidConfig(
                "dtype = \"bf16\" is for a CUDA device (device = \"cuda:N\"); the CPU runs f32".into(),
            ));
        }
        if self.lora_rank == Some(0) {
            return Err(Error::InvalidConfig("lora_rank must be at least 1".into()));
        }
        if !(self.role_param_fraction > 0.0 && self.role_param_fraction < 1.0) {
            return Err(Error::InvalidConfig(format!(
                "role_param_fraction must be in (0, 1), got {}",
                self.role_param_fraction
            )));
        }
        if !(self.lora_alpha.is_finite() && self.lora_alpha > 0.0) {
            return Err(Error::InvalidConfig(format!(
                "lora_alpha must be positive, got {}",
                self.lora_alpha
            )));
        }
        if self.memory_budget_mb == Some(0) {
            return Err(Error::InvalidConfig("memory-budget-mb must be at least 1".into()));
        }
        if self.max_context == Some(0) {
            return Err(Error::InvalidConfig("max_context must be at least 1".into()));
        }
        if self.path.as_os_str().is_empty() {
            return Err(Error::InvalidConfig("model path is empty".into()));
        }
        Ok(())
    }
}

/// How to pick tokens during generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingConfig {
    /// Softmax temperature; `0` means greedy (arg-max).
    pub temperature: f32,
    /// Nucleus mass: sample among the most likely tokens whose probabilities sum to this.
    pub top_p: f32,
    /// Most new tokens to generate.
    pub max_tokens: usize,
    /// Generation stops when the text contains any of these; the stop string is cut off.
    pub stop: Vec<String>,
    /// Seed of the sampler's RNG (row `i` of a batch uses `seed + i`).
    pub seed: u64,
    /// Keep generating past end-of-turn tokens (benchmarks that need exact counts).
    pub ignore_eos: bool,
    /// Hold the answer to a grammar (llguidance): disallowed tokens get probability zero
    /// before temperature and nucleus, and the answer ends where the grammar does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<onebrain_grammar::ConstraintSpec>,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        // Greedy is the paper's evaluation setting; training uses `nucleus(0.7, ..)`.
        SamplingConfig {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 512,
            stop: Vec::new(),
            seed: 0,
            ignore_eos: false,
            constraint: None,
        }
    }
}

impl SamplingConfig {
    /// Greedy decoding of at most `max_tokens` tokens.
    pub fn greedy(max_tokens: usize) -> Self {
        SamplingConfig { max_tokens, ..Default::default() }
    }

    /// Temperature + nucleus sampling with a seed.
    pub fn nucleus(temperature: f32, top_p: f32, max_tokens: usize, seed: u64) -> Self {
        SamplingConfig { temperature, top_p, max_tokens, seed, ..Default::default() }
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(Error::InvalidConfig(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::InvalidConfig(format!("top_p must be in (0, 1], got {}", self.top_p)));
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err(Error::InvalidConfig("stop strings must not be empty".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_parses_and_prints_lowercase() {
        for role in Role::ALL {
            assert_eq!(role.to_string().parse::<Role>().unwrap(), role);
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{role}\""));
        }
        assert_eq!(" Judge ".parse::<Role>().unwrap(), Role::Judge);
        assert!(matches!("critic".parse::<Role>(), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn model_config_rejects_unknown_keys_and_bad_values() {
        let cfg: ModelConfig = serde_json::from_str(r#"{"role_tokens": 2}"#).unwrap();
        assert_eq!(cfg.role_tokens, 2);
        assert_eq!(cfg.path, PathBuf::from(DEFAULT_MODEL_FILE));
        assert!(serde_json::from_str::<ModelConfig>(r#"{"rank": 2}"#).is_err());
        let bad = ModelConfig { lora_rank: Some(0), ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = ModelConfig { role_param_fraction: 1.5, ..Default::default() };
        assert!(bad.validate().is_err());
        assert!(ModelConfig::default().validate().is_ok());
    }

    /// `recompute-blocks` reads a flag or `"auto"`, and its refusal of anything else names the
    /// three.
    #[test]
    fn recompute_blocks_is_a_flag_or_auto() {
        let read = |v: &str| serde_json::from_str::<ModelConfig>(&format!(r#"{{"recompute-blocks": {v}}}"#));
        assert_eq!(read("false").unwrap().recompute_blocks, RecomputeBlocks::Never);
        assert_eq!(read("true").unwrap().recompute_blocks, RecomputeBlocks::Always);
        let auto = read(r#""auto""#).unwrap();
        assert_eq!(auto.recompute_blocks, RecomputeBlocks::OverBudget);
        assert!(serde_json::to_string(&auto).unwrap().contains(r#""recompute_blocks":"auto""#));
        let err = read(r#""sometimes""#).unwrap_err().to_string();
        assert!(err.contains(r#"true, false or "auto""#) && err.contains("sometimes"), "{err}");
    }

    /// `[model]` takes kebab-case like every other section and still reads the
    /// underscore spelling; what it writes (run digests, `brain.json`) is unchanged.
    #[test]
    fn model_keys_are_kebab_case_with_the_old_spelling_as_an_alias() {
        let kebab: ModelConfig = serde_json::from_str(
            r#"{"lora-rank": 8, "lora-targets": ["q_proj"], "allowed-logits": true, "memory-budget-mb": 900,
                "learner-weights": "dense", "tiled-cpu-kernels": false, "role-tokens": 2, "recompute-blocks": true, "free-transposed": true}"#,
        )
        .unwrap();
        let snake: ModelConfig = serde_json::from_str(
            r#"{"lora_rank": 8, "lora_targets": ["q_proj"], "allowed_logits": true, "memory_budget_mb": 900,
                "learner_weights": "dense", "tiled_cpu_kernels": false, "role_tokens": 2, "recompute_blocks": true, "free_transposed": true}"#,
        )
        .unwrap();
        assert_eq!(kebab, snake);
        assert_eq!((kebab.lora_rank, kebab.memory_budget_mb, kebab.role_tokens), (Some(8), Some(900), 2));
        assert!(kebab.recompute_blocks == RecomputeBlocks::Always && kebab.free_transposed);
        // Off, they are left out: the digests of configs recorded before it stay the same.
        assert!(!serde_json::to_string(&ModelConfig::default()).unwrap().contains("recompute"));
        assert!(!serde_json::to_string(&ModelConfig::default()).unwrap().contains("transposed"));
        // On, it is written as it was before it had a third value.
        let on = ModelConfig { recompute_blocks: RecomputeBlocks::Always, ..Default::default() };
        assert!(serde_json::to_string(&on).unwrap().contains(r#""recompute_blocks":true"#), "{}", serde_json::to_string(&on).unwrap());
        let written = serde_json::to_string(&kebab).unwrap();
        assert!(written.contains("\"lora_rank\":8") && !written.contains("lora-rank"), "{written}");
        assert_eq!(serde_json::from_str::<ModelConfig>(&written).unwrap(), kebab);
    }

    #[test]
    fn sampling_config_ranges() {
        assert!(SamplingConfig::default().validate().is_ok());
        assert!(SamplingConfig::nucleus(0.7, 0.9, 10, 1).validate().is_ok());
        assert!(SamplingConfig { top_p: 0.0, ..Default::default() }.validate().is_err());
        assert!(SamplingConfig { temperature: -1.0, ..Default::default() }.validate().is_err());
        assert!(SamplingConfig { stop: vec![String::new()], ..Default::default() }
            .validate()
            .is_err());
    }
}

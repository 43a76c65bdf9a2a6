//! [`Brain`]: the one backbone with its three roles, for generation and for training.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::Instant,
};

use candle_core::{DType, Device, Tensor, Var, D};
use onebrain_grammar::{ConstraintSpec, ConstraintStats, TokenConstraint, TokenEnv, TokenSet};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};

mod generate;
mod learn;
mod prefill;
mod prompt_heads;

pub use generate::StopReason;
pub use generate::Generation;
pub use learn::{BatchLogprobs, PromptHead};

use crate::{
    config::{ModelConfig, Role, SamplingConfig},
    constrain::apply_mask,
    paths::{resolve_model, ModelSource},
    roles::{auto_rank, init_judge_head, init_role, rng_for, JudgeHead, RoleParams},
    sampler::{sample_rows, Sampler},
    tokenizer::{chat_prompt, Tokenizer},
    transformer::{ArchConfig, Backbone, KvCache, Mode, RoleView, Step, MASKED},
    weights::{dense_backbone, load_gguf, load_hf_dir, DenseSource},
    Error, Result,
};

/// Parameter counts, to check the "≈ 1.67 % per role" budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ParamCounts {
    /// Backbone parameters (embedding, layers, norms, untied output matrix).
    pub backbone: usize,
    /// Parameters of one role (soft tokens + adapters; the Judge head is extra).
    pub per_role: usize,
    /// Judge head parameters (hidden + 1).
    pub judge_head: usize,
    /// The LoRA rank in use.
    pub lora_rank: usize,
}

impl ParamCounts {
    /// `per_role / backbone`.
    pub fn role_fraction(&self) -> f64 {
        self.per_role as f64 / self.backbone as f64
    }
}

/// The Judge's final hidden states of the prompts it scored lately, under one set of Judge
/// role parameters (their fingerprint). A Judge that learns its head alone (training's
/// `judge-head-only`) reads at the update the very states the sampler scored with, instead
/// of prefilling every Judge prompt again (3.5 s a prompt of the 0.5B model on 2 cores).
/// Parameters never return to old values, so states of other parameters are dropped.
#[derive(Debug, Default)]
struct JudgeStates {
    fingerprint: u64,
    entries: HashMap<Vec<u32>, Vec<f32>>,
}

impl JudgeStates {
    /// States kept at most (an update's Judge prompts, with room for a held-out
    /// evaluation's); past it the oldest batch is not worth tracking, so all are dropped.
    const CAPACITY: usize = 1024;

    fn get(&self, fp: u64, prompt: &[u32]) -> Option<&Vec<f32>> {
        (self.fingerprint == fp).then(|| self.entries.get(prompt)).flatten()
    }

    fn insert(&mut self, fp: u64, prompt: Vec<u32>, state: Vec<f32>) {
        if self.fingerprint != fp || self.entries.len() >= Self::CAPACITY {
            self.entries.clear();
            self.fingerprint = fp;
        }
        self.entries.insert(prompt, state);
    }
}

#[derive(Debug, Clone)]
struct CacheEntry {
    role: Role,
    fingerprint: u64,
    tokens: Vec<u32>,
    kv: KvCache,
    last_used: u64,
}

/// Prompt KV caches of recent calls. A new prompt reuses the entry with the longest
/// common token prefix (same role, same parameter values), truncated to that prefix;
/// that is how the system prompt and task text are computed once per task.
#[derive(Debug, Clone, Default)]
struct PrefixCache {
    entries: Vec<CacheEntry>,
    capacity: usize,
    clock: u64,
}

impl PrefixCache {
    fn lookup(&mut self, role: Role, fp: u64, tokens: &[u32], n_soft: usize) -> Result<Option<(usize, KvCache)>> {
        self.clock += 1;
        let mut best: Option<(usize, usize)> = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.role != role || e.fingerprint != fp {
                continue;
            }
            let m = common_prefix(&e.tokens, tokens);
            if m > 0 && best.is_none_or(|(_, bm)| m > bm) {
                best = Some((i, m));
            }
        }
        let Some((i, m)) = best else { return Ok(None) };
        self.entries[i].last_used = self.clock;
        Ok(Some((m, self.entries[i].kv.truncate(n_soft + m)?)))
    }

    fn insert(&mut self, role: Role, fp: u64, tokens: &[u32], kv: KvCache) {
        if self.capacity == 0 || tokens.is_empty() {
            return;
        }
        self.clock += 1;
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.role == role && e.fingerprint == fp && e.tokens == tokens)
        {
            e.last_used = self.clock;
            return;
        }
        // An entry that is a prefix of the new one is redundant.
        self.entries.retain(|e| {
            !(e.role == role && e.fingerprint == fp && tokens.starts_with(&e.tokens))
        });
        if self.entries.len() >= self.capacity {
            if let Some(oldest) =
                self.entries.iter().enumerate().min_by_key(|(_, e)| e.last_used).map(|(i, _)| i)
            {
                self.entries.swap_remove(oldest);
            }
        }
        self.entries.push(CacheEntry { role, fingerprint: fp, tokens: tokens.to_vec(), kv, last_used: self.clock });
    }
}

impl PrefixCache {
    /// Whether entry `e` is a whole prefix of one of `role`'s `prompts` (with parameters
    /// `fp`): the request then writes on in its buffers and counts them itself. An entry
    /// that shares only part of a prompt keeps its buffers beside the request's own.
    fn reused_by(e: &CacheEntry, role: Role, fp: u64, prompts: &[Vec<u32>]) -> bool {
        e.role == role && e.fingerprint == fp && prompts.iter().any(|p| p.starts_with(&e.tokens))
    }

    /// Bytes the KV buffers of the entries a request of `prompts` would not reuse hold, each
    /// buffer once however many entries share it.
    pub(crate) fn held_bytes_beside(&self, role: Role, fp: u64, prompts: &[Vec<u32>]) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.entries
            .iter()
            .filter(|e| !Self::reused_by(e, role, fp, prompts))
            .flat_map(|e| e.kv.layers.iter().flatten())
            .filter(|l| seen.insert(l.buffer_id()))
            .map(|l| l.buffer_bytes())
            .sum()
    }

    /// Drops the least recently used entry the request would not reuse; false when there
    /// is none.
    pub(crate) fn evict_oldest_beside(&mut self, role: Role, fp: u64, prompts: &[Vec<u32>]) -> bool {
        let oldest = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !Self::reused_by(e, role, fp, prompts))
            .min_by_key(|(_, e)| e.last_used)
            .map(|(i, _)| i);
        let Some(oldest) = oldest else { return false };
        self.entries.swap_remove(oldest);
        true
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// One pretrained backbone and the parameters of its three roles.
///
/// Generation runs on the quantized GGUF weights (or the dense ones of a safetensors
/// checkpoint, or the trained dense ones when the backbone is trainable) with the
/// role's soft tokens and adapters. Training runs a differentiable f32 copy that is
/// built the first time it is asked for.
pub struct Brain {
    cfg: ModelConfig,
    source: ModelSource,
    tokenizer: Tokenizer,
    /// Weights for generation: quantized (GGUF) or dense frozen (safetensors).
    base: Backbone,
    /// Dense f32 backbones for the differentiable path: one shared, or one per role
    /// when `separate_models && train_backbone`.
    dense: OnceLock<Vec<Backbone>>,
    varmap: VarMap,
    roles: Vec<RoleParams>,
    judge_head: JudgeHead,
    rank: usize,
    scale: f64,
    cache: PrefixCache,
    judge_states: JudgeStates,
    /// Prompt heads kept from a training step's rollouts for its update.
    prompt_heads: prompt_heads::PromptHeads,
    /// The vocabulary as llguidance sees it, built on the first constrained generation.
    token_env: OnceLock<Arc<TokenEnv>>,
    /// The weights' resident size, for [`Brain::memory_estimate`].
    model_bytes: u64,
}

impl std::fmt::Debug for Brain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brain")
            .field("source", &self.source)
            .field("arch", &self.base.cfg)
            .field("lora_rank", &self.rank)
            .finish_non_exhaustive()
    }
}

impl Brain {
    /// Loads the backbone named by `cfg.path` and initialises the role parameters.
    pub fn load(cfg: &ModelConfig) -> Result<Self> {
        cfg.validate()?;
        onebrain_meter::keep_large_blocks();
        let dev = cfg.device.open()?;
        let source = resolve_model(&cfg.path)?;
        let (base, tokenizer, hf) = match &source {
            ModelSource::Gguf(p) => {
                let m = load_gguf(p, cfg.max_context, cfg.tiled_cpu_kernels, &dev)?;
                (m.backbone, m.tokenizer, None)
            }
            ModelSource::HfDir(p) => {
                let m = load_hf_dir(p, &dev)?;
                let b = dense_backbone(&DenseSource::Hf(&m), None, cfg.max_context, cfg.dtype.dtype())?;
                let tok = m.tokenizer.clone();
                (b, tok, Some(m))
            }
        };
        if tokenizer.vocab_size() > base.cfg.vocab_size {
            return Err(Error::meta(
                "vocab_size",
                format!(
                    "tokenizer has {} ids but the embedding only {} rows",
                    tokenizer.vocab_size(),
                    base.cfg.vocab_size
                ),
            ));
        }
        let targets = cfg.lora_target_mask();
        let rank = cfg
            .lora_rank
            .unwrap_or_else(|| auto_rank(&base, &targets, cfg.role_param_fraction, cfg.role_tokens));
        let varmap = VarMap::new();
        let mut roles = Vec::with_capacity(3);
        for role in Role::ALL {
            let words = tokenizer.encode(&format!("You are the {role}."))?;
            let mut rng = rng_for(cfg.init_seed, role);
            roles.push(init_role(&varmap, role, &base, rank, &targets, cfg.role_tokens, &words, &mut rng)?);
        }
        let mut rng = rng_for(cfg.init_seed ^ 0x5eed, Role::Judge);
        let judge_head = init_judge_head(&varmap, base.cfg.hidden_size, &dev, &mut rng)?;
        let model_bytes = crate::budget::resident_model_bytes(&source, base.param_count(), cfg.dtype.dtype().size_in_bytes());
        let brain = Brain {
            cfg: cfg.clone(),
            source,
            tokenizer,
            dense: OnceLock::new(),
            varmap,
            roles,
            judge_head,
            rank,
            scale: f64::from(cfg.lora_alpha) / rank as f64,
            cache: PrefixCache { capacity: cfg.prefix_cache_entries, ..Default::default() },
            judge_states: JudgeStates::default(),
            prompt_heads: Default::default(),
            token_env: OnceLock::new(),
            model_bytes,
            base,
        };
        if cfg.train_backbone {
            // The optimizer must see the backbone's Vars from the start.
            brain.build_dense(hf.as_ref())?;
        } else if let Some(m) = hf {
            // A dense checkpoint is already differentiable: reuse it, frozen.
            drop(m);
            let _ = brain.dense.set(vec![brain.base.clone()]);
        }
        Ok(brain)
    }

    /// Whether training reads the quantized tiles generation uses (see
    /// [`ModelConfig::learner_weights`]) rather than a dense f32 copy.
    pub fn learns_on_sampler_weights(&self) -> bool {
        self.cfg.learner_weights == crate::config::LearnerWeights::Sampler
            && !self.cfg.train_backbone
            && self.base.frozen_quantized()
    }

    fn build_dense(&self, hf: Option<&crate::weights::HfModel>) -> Result<&Vec<Backbone>> {
        if let Some(d) = self.dense.get() {
            return Ok(d);
        }
        if self.learns_on_sampler_weights() {
            // The learner runs the generation path's own quantized weights (an input-only
            // backward): nothing to copy, and no gradient for the frozen matrices.
            return Ok(self.dense.get_or_init(|| vec![self.base.clone()]));
        }
        let src = match hf {
            Some(m) => DenseSource::Hf(m),
            None => DenseSource::Dequantize(&self.base),
        };
        let copies: Vec<Backbone> = if !self.cfg.train_backbone {
            vec![dense_backbone(&src, None, self.cfg.max_context, self.cfg.dtype.dtype())?]
        } else if self.cfg.separate_models {
            Role::ALL
                .iter()
                .map(|r| {
                    let prefix = format!("{r}.backbone.");
                    dense_backbone(&src, Some((&self.varmap, &prefix)), self.cfg.max_context, DType::F32)
                })
                .collect::<Result<_>>()?
        } else {
            vec![dense_backbone(&src, Some((&self.varmap, "backbone.")), self.cfg.max_context, DType::F32)?]
        };
        let _ = self.dense.set(copies);
        Ok(self.dense.get().expect("just set"))
    }

    /// Where every tensor of the model lives (`model.device`).
    pub fn device(&self) -> &Device {
        self.base.device()
    }

    /// The config the brain was loaded with.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// Where the weights came from.
    pub fn source(&self) -> &ModelSource {
        &self.source
    }

    /// Shape of the backbone.
    pub fn arch(&self) -> &ArchConfig {
        &self.base.cfg
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Positions available to prompt + generation (role tokens included).
    pub fn context_len(&self) -> usize {
        self.base.max_positions()
    }

    /// The LoRA rank of the role adapters.
    pub fn lora_rank(&self) -> usize {
        self.rank
    }

    /// Parameter counts of the backbone and of one role.
    pub fn param_counts(&self) -> ParamCounts {
        ParamCounts {
            backbone: self.base.param_count(),
            per_role: self.roles[0].param_count(),
            judge_head: self.judge_head.w.elem_count() + self.judge_head.b.elem_count(),
            lora_rank: self.rank,
        }
    }

    /// The ChatML prompt for a system and a user message.
    pub fn chat_prompt(&self, system: &str, user: &str) -> String {
        chat_prompt(system, user)
    }

    /// Forgets all cached prompt prefixes, and the Judge states and prompt heads kept for
    /// the next update.
    pub fn clear_prefix_cache(&mut self) {
        self.cache.entries.clear();
        self.judge_states.entries.clear();
        self.prompt_heads.clear();
    }

    /// Forgets generation's cached prompt prefixes alone, and keeps the prompt heads and
    /// Judge states kept for the next update. An update calls it before its forward passes,
    /// which read the kept heads and never this cache: on the 1.5B model the cache holds
    /// several prompts' keys and values in f32, memory the update's peak needs.
    pub fn forget_prompt_prefixes(&mut self) {
        self.cache.entries.clear();
    }

    /// Bytes of the key and value buffers generation's prompt-prefix cache holds now
    /// (buffers its entries share counted once).
    pub fn cached_prefix_bytes(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.cache
            .entries
            .iter()
            .flat_map(|e| e.kv.layers.iter().flatten())
            .filter(|l| seen.insert(l.buffer_id()))
            .map(|l| l.buffer_bytes())
            .sum()
    }

    /// Makes generation keep, for prompts of `roles`, the keys and values of each prompt but
    /// its last token, for the learner's next [`Brain::extend_prompt_head`] of the same prompt
    /// under the same parameters (up to 1 GiB; [`Brain::clear_prefix_cache`] drops them).
    /// A training step's rollouts turn it on and the update reads them, so that no prompt is
    /// prefilled twice; no roles turns it off and leaves what is kept.
    pub fn keep_prompt_heads(&mut self, roles: &[Role]) {
        self.prompt_heads.set_roles(roles);
    }

    /// Bytes of prompt heads kept now (see [`Brain::keep_prompt_heads`]).
    pub fn kept_prompt_head_bytes(&self) -> u64 {
        self.prompt_heads.bytes()
    }

    fn role_params(&self, role: Role) -> &RoleParams {
        &self.roles[role.index()]
    }

    /// The backbone generation runs on for `role`.
    fn gen_backbone(&self, role: Role) -> &Backbone {
        match self.dense.get() {
            Some(d) if self.cfg.train_backbone => &d[if d.len() == 3 { role.index() } else { 0 }],
            _ => &self.base,
        }
    }

    fn fingerprint(&self, role: Role) -> Result<u64> {
        let mut fp = self.role_params(role).fingerprint()?;
        if self.cfg.train_backbone {
            // Trained backbone weights change the cache too; summing 10^8 floats costs
            // ~0.1 s, paid only in this (training) configuration.
            for b in [self.gen_backbone(role)] {
                for blk in &b.blocks {
                    for l in blk.linears() {
                        if let crate::transformer::Weight::Dense(w) = &l.w {
                            let s = w.sum_all()?.to_scalar::<f32>()?;
                            fp = (fp ^ s.to_bits() as u64).wrapping_mul(0x100_0000_01b3);
                        }
                    }
                }
            }
        }
        Ok(fp)
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let vocab = self.base.cfg.vocab_size;
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::TokenOutOfRange { token: t, vocab });
        }
        Ok(())
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer.encode(text)
    }

    // ---------------------------------------------------------------- constraints

    /// The model's vocabulary as llguidance sees it (every logit row, with both end-of-turn
    /// tokens as EOS), built once.
    pub fn token_env(&self) -> Result<Arc<TokenEnv>> {
        if let Some(env) = self.token_env.get() {
            return Ok(env.clone());
        }
        let rows = self.base.cfg.vocab_size;
        let tok = self.tokenizer.clone();
        let tokenize = Box::new(move |b: &[u8]| tok.encode(&String::from_utf8_lossy(b)).unwrap_or_default());
        let env = TokenEnv::new(self.tokenizer.token_bytes(rows), self.tokenizer.eos_ids(), tokenize)?;
        Ok(self.token_env.get_or_init(|| env).clone())
    }

    /// The masks `spec` gave each of `tokens` when they were sampled with `max_tokens`: what
    /// the learner needs to recompute log-probabilities under the constrained policy.
    pub fn constraint_masks(&self, spec: &ConstraintSpec, max_tokens: usize, tokens: &[u32]) -> Result<Vec<TokenSet>> {
        Ok(spec.replay(&self.token_env()?, max_tokens, tokens)?)
    }

    pub(crate) fn roles_params(&self) -> &[RoleParams] {
        &self.roles
    }

    pub(crate) fn judge_params(&self) -> &JudgeHead {
        &self.judge_head
    }
}

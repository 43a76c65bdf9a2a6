//! [`Brain`]: the one backbone with its three roles, for generation and for training.

use std::{
    sync::{Arc, OnceLock},
    time::Instant,
};

use candle_core::{DType, Device, Tensor, Var, D};
use onebrain_grammar::{ConstraintSpec, ConstraintStats, TokenConstraint, TokenEnv, TokenSet};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};

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

/// Why generation of a sequence ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The model emitted an end-of-turn token (not included in the output).
    Eos,
    /// The text reached one of the stop strings (cut off from the output).
    StopString(String),
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The constraint's grammar is complete: nothing may follow.
    Complete,
}

/// One generated sequence with its statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The generated text, without the stop string or end token.
    pub text: String,
    /// The generated token ids (the end token excluded).
    pub tokens: Vec<u32>,
    /// Prompt length in tokens (role tokens not counted).
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys/values came from the prefix cache.
    pub cached_prompt_tokens: usize,
    /// Positions the prefill actually computed for the whole call (role tokens and
    /// every row's uncached part; a prefix shared by the rows of a batch counts once).
    pub prefill_tokens: usize,
    /// Seconds from the call until the first token's logits (shared by a batch).
    pub prefill_secs: f64,
    /// Seconds spent decoding this sequence after the prefill.
    pub decode_secs: f64,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// log π(token | prefix) of each generated token at temperature 1, under the constrained
    /// (masked and renormalised) distribution when a constraint applied; 0 for tokens the
    /// grammar forced.
    #[serde(default)]
    pub logprobs: Vec<f32>,
    /// The constraint's counters, when one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<ConstraintStats>,
}

impl Generation {
    /// Prefill throughput of the call, in positions per second.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        rate(self.prefill_tokens, self.prefill_secs)
    }

    /// Decode throughput of this sequence, in tokens per second.
    pub fn decode_tokens_per_sec(&self) -> f64 {
        rate(self.tokens.len(), self.decode_secs)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

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

/// The keys and values of a prompt head, with no graph: see [`Brain::prompt_head`].
#[derive(Debug, Clone)]
pub struct PromptHead {
    role: Role,
    ids: Vec<u32>,
    kv: KvCache,
}

impl PromptHead {
    /// The role it was computed for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The prompt tokens it covers (role tokens not counted).
    pub fn tokens(&self) -> &[u32] {
        &self.ids
    }
}

/// Per-token log-probabilities of a batch of continuations, for PPO.
#[derive(Debug, Clone)]
pub struct BatchLogprobs {
    /// `(b, max_len)` log π(token | prefix); zero where `mask` is zero.
    pub logprobs: Tensor,
    /// `(b, max_len)` 1 for real continuation tokens, 0 for padding.
    pub mask: Tensor,
    /// `(b, max_len, hidden)` final hidden states at the positions that predict each
    /// continuation token (the state a value head reads).
    pub hidden: Tensor,
    /// `(b, max_len)` entropy of the policy at each continuation position (zero where
    /// `mask` is zero), for PPO's entropy bonus.
    pub entropy: Tensor,
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

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The state after prefilling a batch: caches, per-row positions and last hidden states.
struct Prefilled {
    kv: KvCache,
    /// `(b, hidden)` final hidden state of each row's last prompt token.
    last_hidden: Tensor,
    /// Per row, the RoPE position of the next token.
    next_pos: Vec<u32>,
    /// Per row, the cache slots `[pad_start, pad_start + pads)` that hold left padding.
    pads: Vec<usize>,
    pad_start: usize,
    cached: usize,
    computed: usize,
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
    /// The vocabulary as llguidance sees it, built on the first constrained generation.
    token_env: OnceLock<Arc<TokenEnv>>,
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
        let rank = cfg.lora_rank.unwrap_or_else(|| auto_rank(&base, cfg.role_param_fraction, cfg.role_tokens));
        let varmap = VarMap::new();
        let mut roles = Vec::with_capacity(3);
        for role in Role::ALL {
            let words = tokenizer.encode(&format!("You are the {role}."))?;
            let mut rng = rng_for(cfg.init_seed, role);
            roles.push(init_role(&varmap, role, &base, rank, cfg.role_tokens, &words, &mut rng)?);
        }
        let mut rng = rng_for(cfg.init_seed ^ 0x5eed, Role::Judge);
        let judge_head = init_judge_head(&varmap, base.cfg.hidden_size, &dev, &mut rng)?;
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
            token_env: OnceLock::new(),
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

    fn build_dense(&self, hf: Option<&crate::weights::HfModel>) -> Result<&Vec<Backbone>> {
        if let Some(d) = self.dense.get() {
            return Ok(d);
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

    /// Forgets all cached prompt prefixes.
    pub fn clear_prefix_cache(&mut self) {
        self.cache.entries.clear();
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

    // ---------------------------------------------------------------- generation

    /// Generates a continuation of `prompt` (usually from [`Brain::chat_prompt`]) in `role`.
    pub fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation> {
        let tokens = self.tokenizer.encode(prompt)?;
        let mut out = self.generate_tokens(role, &[tokens], s)?;
        Ok(out.remove(0))
    }

    /// Generates one continuation per prompt, decoding the rows together. Rows sample
    /// with seeds `s.seed + i`; a prefix common to all prompts is computed once.
    pub fn generate_batch(
        &mut self,
        role: Role,
        prompts: &[String],
        s: &SamplingConfig,
    ) -> Result<Vec<Generation>> {
        let tokens = prompts.iter().map(|p| self.tokenizer.encode(p)).collect::<Result<Vec<_>>>()?;
        self.generate_tokens(role, &tokens, s)
    }

    /// [`Brain::generate_batch`] on token ids.
    pub fn generate_tokens(
        &mut self,
        role: Role,
        prompts: &[Vec<u32>],
        s: &SamplingConfig,
    ) -> Result<Vec<Generation>> {
        s.validate()?;
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let start = Instant::now();
        let pre = self.prefill(role, prompts)?;
        let prefill_secs = start.elapsed().as_secs_f64();
        let backbone = self.gen_backbone(role).clone();
        let view = self.role_params(role).view(self.scale, true)?;
        let b = prompts.len();
        let logits = backbone.logits(&pre.last_hidden)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;

        let mut constraints: Vec<Option<Box<dyn TokenConstraint>>> = match &s.constraint {
            Some(spec) => {
                let env = self.token_env()?;
                (0..b).map(|_| spec.build(&env, s.max_tokens).map(Some)).collect::<std::result::Result<_, _>>()?
            }
            None => (0..b).map(|_| None).collect(),
        };
        let mut logps: Vec<Vec<f32>> = vec![Vec::new(); b];
        let mut samplers: Vec<Sampler> = (0..b)
            .map(|i| Sampler::new(s.seed.wrapping_add(i as u64), s.temperature, s.top_p))
            .collect();
        let mut outs: Vec<Option<Generation>> = vec![None; b];
        let mut toks: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut texts: Vec<String> = vec![String::new(); b];
        // Rows still decoding, as indices into the prompts.
        let mut active: Vec<usize> = (0..b).collect();
        let mut kv = pre.kv;
        let mut next_pos = pre.next_pos;
        let mut pads = pre.pads;
        let pad_start = pre.pad_start;
        let mut logits = logits;
        let decode_start = Instant::now();
        let max_positions = backbone.max_positions();
        let stats = |row: usize, toks: Vec<u32>, text: String, reason: StopReason, logprobs: Vec<f32>, constraint: Option<ConstraintStats>| Generation {
            text,
            tokens: toks,
            logprobs,
            constraint,
            prompt_tokens: prompts[row].len(),
            cached_prompt_tokens: pre.cached,
            prefill_tokens: pre.computed,
            prefill_secs,
            decode_secs: decode_start.elapsed().as_secs_f64(),
            stop_reason: reason,
        };

        loop {
            // Sample one token per active row (plus, at batch 1, the tokens the grammar forces
            // after it) and retire the finished rows.
            let mut next: Vec<Vec<u32>> = Vec::with_capacity(active.len());
            let mut keep = Vec::with_capacity(active.len());
            for (slot, &row) in active.iter().enumerate() {
                if let Some(c) = constraints[row].as_mut() {
                    apply_mask(&mut logits[slot], &c.allowed()?);
                }
            }
            let picks = sample_rows(&logits, &active, &mut samplers);
            for (slot, &row) in active.iter().enumerate() {
                let (tok, logp) = picks[slot];
                let mut done = None;
                let mut fed = vec![tok];
                if !s.ignore_eos && self.tokenizer.eos_ids().contains(&tok) {
                    done = Some(StopReason::Eos);
                } else {
                    toks[row].push(tok);
                    logps[row].push(logp);
                    if let Some(c) = constraints[row].as_mut() {
                        c.consume(tok)?;
                        if b == 1 {
                            // Forced tokens skip sampling and enter the cache in one pass
                            // (never past `max_tokens`).
                            let room = s.max_tokens.saturating_sub(toks[row].len());
                            for f in c.forced().into_iter().take(room) {
                                c.consume(f)?;
                                toks[row].push(f);
                                logps[row].push(0.0);
                                fed.push(f);
                            }
                        }
                    }
                    texts[row] = self.tokenizer.decode(&toks[row])?;
                    if let Some((at, stop)) = first_stop(&texts[row], &s.stop) {
                        texts[row].truncate(at);
                        done = Some(StopReason::StopString(stop));
                    } else if constraints[row].as_ref().is_some_and(|c| c.finished()) {
                        done = Some(StopReason::Complete);
                    } else if toks[row].len() >= s.max_tokens {
                        done = Some(StopReason::MaxTokens);
                    } else if kv.len + fed.len() > max_positions {
                        done = Some(StopReason::ContextFull);
                    }
                }
                match done {
                    Some(reason) => {
                        let cstats = constraints[row].as_ref().map(|c| c.stats());
                        outs[row] = Some(stats(
                            row,
                            std::mem::take(&mut toks[row]),
                            std::mem::take(&mut texts[row]),
                            reason,
                            std::mem::take(&mut logps[row]),
                            cstats,
                        ));
                    }
                    None => {
                        keep.push(slot as u32);
                        next.push(fed);
                    }
                }
            }
            if keep.is_empty() {
                break;
            }
            if keep.len() < active.len() {
                kv = kv.select_rows(&keep)?;
                active = keep.iter().map(|&k| active[k as usize]).collect();
                next_pos = keep.iter().map(|&k| next_pos[k as usize]).collect();
                pads = keep.iter().map(|&k| pads[k as usize]).collect();
            }
            let n = active.len();
            let fed = next[0].len();
            let ids = if n == 1 {
                Tensor::new(next[0].as_slice(), self.device())?.unsqueeze(0)?
            } else {
                let flat: Vec<u32> = next.iter().map(|t| t[0]).collect();
                Tensor::from_vec(flat, (n, 1), self.device())?
            };
            let x = backbone.embed(&ids)?;
            let step = decode_step(&next_pos, &pads, pad_start, kv.len, self.device())?;
            let hidden = backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
            logits = backbone.logits(&hidden.narrow(1, fed - 1, 1)?.squeeze(1)?)?.to_vec2::<f32>()?;
            for p in next_pos.iter_mut() {
                *p += fed as u32;
            }
        }
        Ok(outs.into_iter().map(|o| o.expect("every row finished")).collect())
    }

    /// Scores `prompt` (task and candidate, from the Judge's template) with
    /// s_J = σ(w·h + b) ∈ (0, 1), h the final hidden state of the last token.
    pub fn judge(&mut self, prompt: &str) -> Result<f32> {
        let tokens = self.tokenizer.encode(prompt)?;
        let pre = self.prefill(Role::Judge, &[tokens])?;
        let w = self.judge_head.w.as_detached_tensor();
        let b = self.judge_head.b.as_detached_tensor();
        let logit = pre.last_hidden.squeeze(0)?.mul(&w)?.sum_all()?.add(&b.squeeze(0)?)?;
        let logit = logit.to_scalar::<f32>()?;
        Ok(1.0 / (1.0 + (-logit).exp()))
    }

    /// Runs the prompts through the backbone, reusing cached prefixes.
    fn prefill(&mut self, role: Role, prompts: &[Vec<u32>]) -> Result<Prefilled> {
        let n_soft = self.cfg.role_tokens;
        let max_positions = self.context_len();
        for p in prompts {
            if p.is_empty() {
                return Err(Error::EmptyInput("prompt has no tokens"));
            }
            self.check_tokens(p)?;
            if n_soft + p.len() >= max_positions {
                return Err(Error::ContextOverflow { tokens: n_soft + p.len(), max_new: 1, context: max_positions });
            }
        }
        let fp = self.fingerprint(role)?;
        let backbone = self.gen_backbone(role).clone();
        let params = self.role_params(role).clone();
        let view = params.view(self.scale, true)?;
        let soft = params.soft_tokens(true)?;
        let b = prompts.len();

        // The part common to every row, leaving each row at least one own token so that
        // every row gets its own last hidden state.
        let min_len = prompts.iter().map(Vec::len).min().unwrap_or(0);
        let mut shared = prompts.iter().skip(1).fold(prompts[0].len(), |m, p| m.min(common_prefix(&prompts[0], p)));
        shared = shared.min(min_len - 1);
        let head = &prompts[0][..shared];

        let (cached, mut kv) = match self.cache.lookup(role, fp, head, n_soft)? {
            Some((m, kv)) => (m, kv),
            None => (0, KvCache::new(backbone.blocks.len())),
        };
        let mut computed = 0;
        // 1. The shared head (and the soft tokens, if not cached), once, at batch 1.
        if kv.len == 0 || cached < shared {
            let ids = Tensor::new(&head[cached..], self.device())?.unsqueeze(0)?;
            let mut x = if shared > cached { Some(backbone.embed(&ids)?) } else { None };
            if kv.len == 0 {
                if let Some(s) = &soft {
                    x = Some(match x {
                        Some(x) => Tensor::cat(&[s, &x], 1)?,
                        None => s.clone(),
                    });
                }
            }
            if let Some(x) = x {
                computed += x.dim(1)?;
                let step = Step { positions: None, mask: None };
                backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
                self.cache.insert(role, fp, head, kv.clone());
            }
        }
        // 2. Each row's own tail, left-padded to a common length, as one batch.
        let past = kv.len;
        let tails: Vec<&[u32]> = prompts.iter().map(|p| &p[shared..]).collect();
        let t_max = tails.iter().map(|t| t.len()).max().unwrap_or(1);
        let pads: Vec<usize> = tails.iter().map(|t| t_max - t.len()).collect();
        if b > 1 {
            kv = if kv.len > 0 { kv.expand(b)? } else { kv };
        }
        let pad_id = self.tokenizer.eos_ids()[0];
        let mut ids = Vec::with_capacity(b * t_max);
        for (t, &np) in tails.iter().zip(&pads) {
            ids.extend(std::iter::repeat_n(pad_id, np));
            ids.extend_from_slice(t);
        }
        let ids = Tensor::from_vec(ids, (b, t_max), self.device())?;
        let mut x = backbone.embed(&ids)?;
        if past == 0 {
            if let Some(s) = &soft {
                // Nothing cached and no shared head: the role tokens lead every row.
                let (_, n, h) = s.dims3()?;
                x = Tensor::cat(&[&s.broadcast_as((b, n, h))?.contiguous()?, &x], 1)?;
            }
        }
        let lead = x.dim(1)? - t_max; // soft tokens placed in this step, if any
        let step = if pads.iter().any(|&p| p > 0) {
            // Positions skip the pads; pads are invisible to every query.
            let q = lead + t_max;
            let mut positions = Vec::with_capacity(b * q);
            let mut mask = vec![0f32; b * q * (past + q)];
            for (r, &np) in pads.iter().enumerate() {
                for i in 0..q {
                    let real = i >= lead + np || i < lead;
                    let pos = if i < lead { i } else if real { past + lead + (i - lead - np) } else { 0 };
                    positions.push(pos as u32);
                    for j in 0..past + q {
                        let key_in_step = j >= past;
                        let k = j.wrapping_sub(past);
                        let visible = if key_in_step {
                            let key_is_pad = k >= lead && k < lead + np;
                            k <= i && !key_is_pad
                        } else {
                            true
                        };
                        if !visible {
                            mask[(r * q + i) * (past + q) + j] = MASKED;
                        }
                    }
                }
            }
            Step {
                positions: Some(positions),
                mask: Some(Tensor::from_vec(mask, (b, 1, 1, q, past + q), self.device())?),
            }
        } else {
            Step { positions: None, mask: None }
        };
        computed += b * t_max + lead;
        let hidden = backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
        let last_hidden = hidden.narrow(1, lead + t_max - 1, 1)?.squeeze(1)?;
        if b == 1 {
            // The whole prompt, for the next call that extends it (the next repair).
            self.cache.insert(role, fp, &prompts[0], kv.clone());
        }
        let next_pos = tails
            .iter()
            .map(|t| (past + lead + t.len()) as u32)
            .collect();
        Ok(Prefilled {
            kv,
            last_hidden,
            next_pos,
            pads,
            pad_start: past + lead,
            cached,
            computed,
        })
    }

    // ------------------------------------------------------------- training side

    /// Every trainable parameter: role tokens, adapters and the Judge head, plus the
    /// backbone when `train_backbone` is set. Names: `{role}.role_tokens`,
    /// `{role}.lora.{layer}.{target}.{a|b}`, `judge.head.{weight|bias}`,
    /// `[{role}.]backbone.{hf name}`.
    pub fn trainable(&self) -> &VarMap {
        &self.varmap
    }

    /// The parameters one role's loss trains: its soft tokens and adapters (and the
    /// Judge head for the Judge), plus its backbone copy when the backbone is trained.
    pub fn role_vars(&self, role: Role) -> Vec<Var> {
        self.role_named_vars(role).into_iter().map(|(_, v)| v).collect()
    }

    /// [`Brain::role_vars`] with their names (the keys of [`Brain::save`]), sorted by name.
    /// The shared backbone, when trained, is listed under every role.
    pub fn role_named_vars(&self, role: Role) -> Vec<(String, Var)> {
        let data = self.varmap.data().lock().expect("varmap lock");
        let mut named: Vec<(String, Var)> = data
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{role}."))
                    || (self.cfg.train_backbone && !self.cfg.separate_models && k.starts_with("backbone."))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    }

    fn dense_for(&self, role: Role) -> Result<&Backbone> {
        let d = self.build_dense(None)?;
        Ok(&d[if d.len() == 3 { role.index() } else { 0 }])
    }

    /// Builds the differentiable backbone now (it is otherwise built on first use).
    pub fn prepare_training(&self) -> Result<()> {
        self.build_dense(None).map(|_| ())
    }

    /// Differentiable forward over right-padded rows of tokens: the final hidden states
    /// `(b, max_len, hidden)` of the token positions (role tokens dropped). Padding sits
    /// after each row's tokens, so the causal mask keeps it out of every real position.
    pub fn hidden_states(&self, role: Role, rows: &[Vec<u32>]) -> Result<Tensor> {
        if rows.is_empty() || rows.iter().any(|r| r.is_empty()) {
            return Err(Error::EmptyInput("every row needs at least one token"));
        }
        let backbone = self.dense_for(role)?;
        let params = self.role_params(role);
        let view: RoleView = params.view(self.scale, false)?;
        let n_soft = self.cfg.role_tokens;
        let t_max = rows.iter().map(Vec::len).max().unwrap_or(0);
        if n_soft + t_max > backbone.max_positions() {
            return Err(Error::ContextOverflow { tokens: n_soft + t_max, max_new: 0, context: backbone.max_positions() });
        }
        let b = rows.len();
        let pad = self.tokenizer.eos_ids()[0];
        let mut ids = Vec::with_capacity(b * t_max);
        for r in rows {
            self.check_tokens(r)?;
            ids.extend_from_slice(r);
            ids.extend(std::iter::repeat_n(pad, t_max - r.len()));
        }
        let ids = Tensor::from_vec(ids, (b, t_max), self.device())?;
        let mut x = backbone.embed(&ids)?;
        if let Some(s) = params.soft_tokens(false)? {
            let (_, n, h) = s.dims3()?;
            x = Tensor::cat(&[&s.broadcast_as((b, n, h))?, &x], 1)?;
        }
        let step = Step { positions: None, mask: None };
        let hidden = backbone.forward(&x, &step, None, &view, Mode::Diff)?;
        Ok(hidden.narrow(1, n_soft, t_max)?)
    }

    /// The keys and values of a prompt head (role tokens first), computed on the
    /// differentiable path but with no graph kept: the fixed context of
    /// [`Brain::tail_logprobs`]. One head serves every continuation of the same prompt.
    pub fn prompt_head(&self, role: Role, head: &[u32]) -> Result<PromptHead> {
        self.extend_prompt_head(role, head, None)
    }

    /// [`Brain::prompt_head`] that reuses the part `base` shares with `head` (the longest
    /// common prefix of their tokens) and computes only the rest: prompts of one domain
    /// share their system text, domain and example, and prompts of one task their task.
    pub fn extend_prompt_head(&self, role: Role, head: &[u32], base: Option<&PromptHead>) -> Result<PromptHead> {
        self.check_tokens(head)?;
        let backbone = self.dense_for(role)?;
        let params = self.role_params(role);
        let view = params.view(self.scale, true)?;
        let n_soft = self.cfg.role_tokens;
        let (common, mut kv) = match base.filter(|b| b.role == role) {
            Some(b) => {
                let m = common_prefix(&b.ids, head);
                (m, b.kv.truncate(n_soft + m)?)
            }
            None => (0, KvCache::new(backbone.blocks.len())),
        };
        let rest = &head[common..];
        let mut x = if rest.is_empty() {
            None
        } else {
            let ids = Tensor::new(rest, self.device())?.unsqueeze(0)?;
            Some(backbone.embed(&ids)?.detach())
        };
        if kv.len == 0 {
            if let Some(s) = params.soft_tokens(true)? {
                x = Some(match x {
                    Some(x) => Tensor::cat(&[&s, &x], 1)?,
                    None => s,
                });
            }
        }
        if let Some(x) = x {
            let total = kv.len + x.dim(1)?;
            if total >= backbone.max_positions() {
                return Err(Error::ContextOverflow { tokens: total, max_new: 1, context: backbone.max_positions() });
            }
            let step = Step { positions: None, mask: None };
            backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Diff)?;
        }
        Ok(PromptHead { role, ids: head.to_vec(), kv })
    }

    /// Per-token log-probabilities of `continuation` after `head` + `tail`, with gradients
    /// through the `tail` and continuation positions only: the head's keys and values are
    /// constants (truncated backpropagation through the prompt), except the role tokens',
    /// which are recomputed with a graph, so the role tokens get the gradient that reaches
    /// them through the tail's attention. `tail` must hold at least the prompt's last
    /// token, whose hidden state predicts the first continuation token.
    pub fn tail_logprobs(&self, head: &PromptHead, tail: &[u32], continuation: &[u32]) -> Result<BatchLogprobs> {
        self.tail_logprobs_masked(head, tail, continuation, None)
    }

    /// [`Brain::tail_logprobs`] under a decoding constraint: `masks[j]` is the set the sampler
    /// allowed for continuation token `j` (from [`Brain::constraint_masks`]), and each
    /// log-probability is taken from the distribution renormalised over it.
    pub fn tail_logprobs_masked(
        &self,
        head: &PromptHead,
        tail: &[u32],
        continuation: &[u32],
        masks: Option<&[TokenSet]>,
    ) -> Result<BatchLogprobs> {
        if tail.is_empty() {
            return Err(Error::EmptyInput("the tail needs the prompt's last token"));
        }
        let row: Vec<u32> = [tail, continuation].concat();
        self.check_tokens(&row)?;
        let role = head.role;
        let backbone = self.dense_for(role)?;
        if head.kv.len + row.len() > backbone.max_positions() {
            return Err(Error::ContextOverflow { tokens: head.kv.len + row.len(), max_new: 0, context: backbone.max_positions() });
        }
        let hidden = self.tail_hidden(head, &row)?;
        let c = continuation.len();
        let h = hidden.dim(1)?;
        if c == 0 {
            let z = Tensor::zeros((1, 0), DType::F32, self.device())?;
            let hidden = Tensor::zeros((1, 0, h), DType::F32, self.device())?;
            return Ok(BatchLogprobs { logprobs: z.clone(), mask: z.clone(), hidden, entropy: z });
        }
        // Position tail.len()-1+j predicts continuation token j.
        let sel = hidden.narrow(0, tail.len() - 1, c)?;
        let row_masks: Vec<Option<&TokenSet>> = (0..c).map(|j| masks.and_then(|m| m.get(j))).collect();
        let bias = mask_bias(&row_masks, backbone.cfg.vocab_size, self.device())?;
        let (lp, entropy) = token_logprobs(&backbone.logits(&sel)?, continuation, bias.as_ref())?;
        let (lp, entropy) = (lp.reshape((1, c))?, entropy.reshape((1, c))?);
        let mask = Tensor::ones((1, c), DType::F32, self.device())?;
        Ok(BatchLogprobs { logprobs: lp, mask, hidden: sel.unsqueeze(0)?, entropy })
    }

    /// The Judge's logit after `head` + `tail` (gradients through the tail only, as in
    /// [`Brain::tail_logprobs`]); `head` must be a Judge head.
    pub fn judge_tail_logit(&self, head: &PromptHead, tail: &[u32]) -> Result<Tensor> {
        if head.role != Role::Judge {
            return Err(Error::InvalidConfig(format!("a {} prompt head cannot feed the Judge", head.role)));
        }
        if tail.is_empty() {
            return Err(Error::EmptyInput("the tail needs the prompt's last token"));
        }
        self.check_tokens(tail)?;
        let hidden = self.tail_hidden(head, tail)?;
        Ok(self.judge_head_logits(&hidden.narrow(0, tail.len() - 1, 1)?)?.squeeze(0)?)
    }

    /// Final hidden states `(len, hidden)` of `tokens` after the constant `head`, with a
    /// graph to the role's parameters.
    fn tail_hidden(&self, head: &PromptHead, tokens: &[u32]) -> Result<Tensor> {
        let backbone = self.dense_for(head.role)?;
        let params = self.role_params(head.role);
        let view: RoleView = params.view(self.scale, false)?;
        let step = Step { positions: None, mask: None };
        // The role tokens back in the graph: they come first and see nothing before them, so
        // their keys and values, recomputed here with a graph (a few positions), equal the
        // head's; the tail's attention to them then carries a gradient to the role tokens.
        // The prompt's own positions stay constants.
        let mut kv = match params.soft_tokens(false)? {
            Some(soft) if head.kv.len > 0 => {
                let mut role_kv = KvCache::new(backbone.blocks.len());
                backbone.forward(&soft, &step, Some(&mut role_kv), &view, Mode::Diff)?;
                head.kv.with_prefix(&role_kv)?
            }
            _ => head.kv.clone(),
        };
        let ids = Tensor::new(tokens, self.device())?.unsqueeze(0)?;
        let x = backbone.embed(&ids)?;
        Ok(backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Diff)?.squeeze(0)?)
    }

    /// Differentiable logits `(len, vocab)` at every position of one token sequence.
    pub fn logits(&self, role: Role, tokens: &[u32]) -> Result<Tensor> {
        let h = self.hidden_states(role, &[tokens.to_vec()])?;
        self.dense_for(role)?.logits(&h.squeeze(0)?)
    }

    /// Per-token log-probabilities `(len,)` of `continuation` after `prompt`, with
    /// gradients to the role's parameters (what PPO's ratio needs).
    pub fn sequence_logprobs(&self, role: Role, prompt: &str, continuation: &[u32]) -> Result<Tensor> {
        let p = self.tokenizer.encode(prompt)?;
        let out = self.batch_logprobs(role, &[(p, continuation.to_vec())])?;
        Ok(out.logprobs.squeeze(0)?)
    }

    /// Per-token log-probabilities of a batch of `(prompt, continuation)` token pairs.
    pub fn batch_logprobs(&self, role: Role, items: &[(Vec<u32>, Vec<u32>)]) -> Result<BatchLogprobs> {
        self.batch_logprobs_masked(role, items, &[])
    }

    /// [`Brain::batch_logprobs`] under decoding constraints: `masks[r]`, when present, holds
    /// one allowed set per continuation token of row `r` (see [`Brain::tail_logprobs_masked`]).
    pub fn batch_logprobs_masked(
        &self,
        role: Role,
        items: &[(Vec<u32>, Vec<u32>)],
        masks: &[Option<&[TokenSet]>],
    ) -> Result<BatchLogprobs> {
        if items.is_empty() {
            return Err(Error::EmptyInput("no sequences"));
        }
        if items.iter().any(|(p, _)| p.is_empty()) {
            return Err(Error::EmptyInput("prompt has no tokens"));
        }
        let rows: Vec<Vec<u32>> = items.iter().map(|(p, c)| [p.as_slice(), c.as_slice()].concat()).collect();
        let hidden = self.hidden_states(role, &rows)?;
        let (b, t, h) = hidden.dims3()?;
        let c_max = items.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        if c_max == 0 {
            let z = Tensor::zeros((b, 0), DType::F32, self.device())?;
            let hidden = Tensor::zeros((b, 0, h), DType::F32, self.device())?;
            return Ok(BatchLogprobs { logprobs: z.clone(), mask: z.clone(), hidden, entropy: z });
        }
        let mut idx = Vec::with_capacity(b * c_max);
        let mut targets = Vec::with_capacity(b * c_max);
        let mut mask = Vec::with_capacity(b * c_max);
        let mut row_masks: Vec<Option<&TokenSet>> = Vec::with_capacity(b * c_max);
        for (r, (p, c)) in items.iter().enumerate() {
            for j in 0..c_max {
                if j < c.len() {
                    // Position p+j-1 predicts token p+j.
                    idx.push((r * t + p.len() - 1 + j) as u32);
                    targets.push(c[j]);
                    mask.push(1f32);
                    row_masks.push(masks.get(r).copied().flatten().and_then(|m| m.get(j)));
                } else {
                    idx.push((r * t) as u32);
                    targets.push(0);
                    mask.push(0f32);
                    row_masks.push(None);
                }
            }
        }
        let idx = Tensor::from_vec(idx, b * c_max, self.device())?;
        let sel = hidden.reshape((b * t, h))?.index_select(&idx, 0)?;
        let backbone = self.dense_for(role)?;
        let bias = mask_bias(&row_masks, backbone.cfg.vocab_size, self.device())?;
        let (lp, entropy) = token_logprobs(&backbone.logits(&sel)?, &targets, bias.as_ref())?;
        let mask = Tensor::from_vec(mask, (b, c_max), self.device())?;
        let lp = lp.reshape((b, c_max))?.mul(&mask)?;
        let entropy = entropy.reshape((b, c_max))?.mul(&mask)?;
        Ok(BatchLogprobs { logprobs: lp, mask, hidden: sel.reshape((b, c_max, h))?, entropy })
    }

    /// The Judge's logit w·h + b (before the sigmoid) for one prompt, with gradients.
    pub fn judge_logit(&self, prompt: &str) -> Result<Tensor> {
        let p = self.tokenizer.encode(prompt)?;
        Ok(self.judge_logits(&[p])?.squeeze(0)?)
    }

    /// Judge logits `(b,)` of a batch of token prompts, with gradients.
    pub fn judge_logits(&self, prompts: &[Vec<u32>]) -> Result<Tensor> {
        let hidden = self.hidden_states(Role::Judge, prompts)?;
        let (b, t, h) = hidden.dims3()?;
        let idx: Vec<u32> = prompts.iter().enumerate().map(|(r, p)| (r * t + p.len() - 1) as u32).collect();
        let last = hidden.reshape((b * t, h))?.index_select(&Tensor::new(idx.as_slice(), self.device())?, 0)?;
        self.judge_head_logits(&last)
    }

    /// The Judge head's logits w·h + b `(n,)` of final hidden states `(n, hidden)`.
    fn judge_head_logits(&self, last: &Tensor) -> Result<Tensor> {
        let w = self.judge_head.w.as_tensor().unsqueeze(1)?;
        Ok(last.matmul(&w)?.squeeze(1)?.broadcast_add(self.judge_head.b.as_tensor())?)
    }

    pub(crate) fn roles_params(&self) -> &[RoleParams] {
        &self.roles
    }

    pub(crate) fn judge_params(&self) -> &JudgeHead {
        &self.judge_head
    }

    /// Logits of the next token after each row of `prompts`, from the generation path
    /// (quantized weights, fused kernels, prefix cache, batching), e.g. to score choices.
    pub fn next_token_logits(&mut self, role: Role, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
        let pre = self.prefill(role, prompts)?;
        let backbone = self.gen_backbone(role);
        Ok(backbone.logits(&pre.last_hidden)?.to_vec2::<f32>()?)
    }
}

/// log π(target) and the policy's entropy `(n,)` at each of `n` rows of logits
/// `(n, vocab)`, differentiable; with `bias` (0 allowed, [`MASKED`] refused) the policy is the
/// constrained one.
fn token_logprobs(logits: &Tensor, targets: &[u32], bias: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
    let logits = match bias {
        Some(b) => logits.add(b)?,
        None => logits.clone(),
    };
    let logp = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
    let idx = Tensor::new(targets, logits.device())?.unsqueeze(1)?;
    let lp = logp.gather(&idx, 1)?.squeeze(1)?;
    let entropy = logp.exp()?.mul(&logp)?.sum(D::Minus1)?.neg()?;
    Ok((lp, entropy))
}

/// `(n, vocab)` additive mask: 0 where row `i`'s set allows a token, [`MASKED`] where it does
/// not; `None` when no row is constrained. [`MASKED`] rather than −∞ keeps the entropy finite
/// (0 · −1e9 = 0).
fn mask_bias(masks: &[Option<&TokenSet>], vocab: usize, dev: &Device) -> Result<Option<Tensor>> {
    if masks.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut v = vec![0f32; masks.len() * vocab];
    for (r, m) in masks.iter().enumerate() {
        if let Some(m) = m {
            let row = &mut v[r * vocab..(r + 1) * vocab];
            m.iter_unset_entries(|i| {
                if i < vocab {
                    row[i] = MASKED;
                }
            });
            for x in row.iter_mut().skip(m.len()) {
                *x = MASKED;
            }
        }
    }
    Ok(Some(Tensor::from_vec(v, (masks.len(), vocab), dev)?))
}

/// Mask and positions for one decode step of `n` rows.
fn decode_step(next_pos: &[u32], pads: &[usize], pad_start: usize, past: usize, dev: &Device) -> Result<Step> {
    if pads.iter().all(|&p| p == 0) {
        // Every row is at the same position with nothing to hide: plain causal.
        return Ok(Step { positions: None, mask: None });
    }
    let n = next_pos.len();
    let kv = past + 1;
    let mut mask = vec![0f32; n * kv];
    for (r, &np) in pads.iter().enumerate() {
        for j in pad_start..pad_start + np {
            mask[r * kv + j] = MASKED;
        }
    }
    Ok(Step {
        positions: Some(next_pos.to_vec()),
        mask: Some(Tensor::from_vec(mask, (n, 1, 1, 1, kv), dev)?),
    })
}

/// The earliest stop string in `text`: (byte offset, the string).
fn first_stop(text: &str, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
        .min_by_key(|(at, _)| *at)
}

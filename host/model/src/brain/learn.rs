//! The differentiable side: log-probabilities, Judge logits and prompt heads for the learner.

use super::*;
use super::prefill::prefill_columns;
use onebrain_kernels::TiledMatrix;

use crate::{logprob::ConstrainedLogprob, transformer::Weight, RecomputeBlocks};

/// The keys and values of a prompt head, with no graph: see [`Brain::prompt_head`].
#[derive(Debug, Clone)]
pub struct PromptHead {
    role: Role,
    ids: Vec<u32>,
    kv: KvCache,
    kept: bool,
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

    /// Whether it is a head the sampler kept ([`Brain::keep_prompt_heads`]) rather than one
    /// computed here.
    pub fn was_kept(&self) -> bool {
        self.kept
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

impl Brain {
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

    /// Builds the differentiable backbone now (it is otherwise built on first use), and on
    /// the sampler's weights the transposed tiles every block's backward reads: built on the
    /// first backward, one matrix after another, they were 14 s of the first update of the
    /// 0.5B model on 2 cores; here they build on every core (the compute pool), once per
    /// process, or before every update under `free-transposed`. (The output matrix's
    /// transpose, needed only where a position allows many tokens, stays lazy.)
    pub fn prepare_training(&self) -> Result<()> {
        let backbones = self.build_dense(None)?;
        if !self.learns_on_sampler_weights() {
            return Ok(());
        }
        let tiled = Self::tiles_of(backbones, false);
        let failed = std::sync::Mutex::new(None);
        onebrain_kernels::pool::execute_chunked(tiled.len(), |range| {
            for t in &tiled[range] {
                if let Err(e) = t.transposed() {
                    failed.lock().expect("a transpose panicked").get_or_insert(e);
                    return;
                }
            }
        });
        failed.into_inner().expect("a transpose panicked").map_or(Ok(()), |e| Err(e.into()))
    }

    /// The tiled matrices of `backbones`' blocks, and of their output matrices `with_output`.
    fn tiles_of(backbones: &[Backbone], with_output: bool) -> Vec<&TiledMatrix> {
        backbones
            .iter()
            .flat_map(|b| {
                let blocks = b.blocks.iter().flat_map(|blk| blk.linears()).map(|l| &l.w);
                blocks.chain(with_output.then_some(&b.lm_head))
            })
            .filter_map(|w| match w {
                Weight::Tiled(t) => Some(t.as_ref()),
                _ => None,
            })
            .collect()
    }

    /// The learner's tiled matrices (the blocks' and the output matrix), once built.
    fn learner_tiles(&self) -> Vec<&TiledMatrix> {
        self.dense.get().map_or_else(Vec::new, |b| Self::tiles_of(b, true))
    }

    /// Drops the Q8_0 copies of Wᵀ the learner's backward reads (1.58 GiB on the 1.5B),
    /// which generation never reads, and returns their bytes; the next
    /// [`Brain::prepare_training`] or gradient builds them again (`free-transposed`).
    pub fn forget_transposed(&self) -> u64 {
        self.learner_tiles().iter().map(|t| t.forget_transposed()).sum()
    }

    /// Bytes of the Wᵀ copies kept now.
    pub fn transposed_bytes(&self) -> u64 {
        self.learner_tiles().iter().map(|t| t.transposed_bytes()).sum()
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
        let step = Step::causal();
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
    ///
    /// A head the sampler kept (see [`Brain::keep_prompt_heads`]) under the same parameters
    /// is taken as it is, when the learner runs generation's own weights (the sampler's
    /// tiles, or a trained backbone): the keys and values the sampled tokens were drawn after.
    pub fn extend_prompt_head(&self, role: Role, head: &[u32], base: Option<&PromptHead>) -> Result<PromptHead> {
        let same_weights = self.learns_on_sampler_weights() || self.cfg.train_backbone;
        if same_weights && self.prompt_heads.has_any(role) {
            if let Some(kv) = self.prompt_heads.get(role, self.fingerprint(role)?, head)? {
                return Ok(PromptHead { role, ids: head.to_vec(), kv, kept: true });
            }
        }
        self.extend_prompt_head_in_chunks(role, head, base, None)
    }

    /// [`Brain::extend_prompt_head`] with at most `columns` positions per forward (`None`:
    /// as prefill sizes them). Tests set it to check that chunks change nothing.
    #[doc(hidden)]
    pub fn extend_prompt_head_in_chunks(
        &self,
        role: Role,
        head: &[u32],
        base: Option<&PromptHead>,
        columns: Option<usize>,
    ) -> Result<PromptHead> {
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
            // In chunks of columns, as prefill runs: a long head at once would hold its
            // length squared in attention scores per head (the learner's part of bounded
            // memory). On the 0.5B model a head of up to about 1,500 tokens fits one
            // chunk; training prompts are about 1,300, so they compute as before.
            let n = x.dim(1)?;
            let cols = columns.unwrap_or_else(|| prefill_columns(1, total, backbone.cfg.num_attention_heads)).max(1);
            let step = Step::causal();
            let mut c0 = 0;
            while c0 < n {
                let c1 = (c0 + cols).min(n);
                backbone.forward(&x.narrow(1, c0, c1 - c0)?.contiguous()?, &step, Some(&mut kv), &view, Mode::Diff)?;
                c0 = c1;
            }
        }
        Ok(PromptHead { role, ids: head.to_vec(), kv, kept: false })
    }

    /// Per-token log-probabilities of `continuation` after `head` + `tail`, with gradients
    /// through the `tail` and continuation positions only: the head's keys and values are
    /// constants (truncated backpropagation through the prompt), except the role tokens',
    /// which are recomputed with a graph, so the role tokens get the gradient that reaches
    /// them through the tail's attention. `tail` must hold at least the prompt's last
    /// token, whose hidden state predicts the first continuation token.
    pub fn tail_logprobs(&self, head: &PromptHead, tail: &[u32], continuation: &[u32]) -> Result<BatchLogprobs> {
        self.tail_logprobs_masked(head, tail, continuation, None, 1.0)
    }

    /// [`Brain::tail_logprobs`] under a decoding constraint at a sampling temperature:
    /// `masks[j]` is the set the sampler allowed for continuation token `j` (from
    /// [`Brain::constraint_masks`]), and each log-probability is taken from
    /// softmax(logits / `temperature`) renormalised over it: the distribution the sampler drew
    /// from (with top-p off), so that these equal [`Generation::logprobs`] when the learner
    /// runs the sampler's weights.
    pub fn tail_logprobs_masked(
        &self,
        head: &PromptHead,
        tail: &[u32],
        continuation: &[u32],
        masks: Option<&[TokenSet]>,
        temperature: f32,
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
        let (lp, entropy) = self.policy_logprobs(backbone, &sel, continuation, &row_masks, temperature)?;
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
        let step = Step::causal();
        // The role tokens back in the graph: they come first and see nothing before them, so
        // their keys and values, recomputed here with a graph (a few positions), equal the
        // head's; the tail's attention to them then carries a gradient to the role tokens.
        // The prompt's own positions stay constants, which the attention's backward skips.
        let (mut kv, in_graph) = match params.soft_tokens(false)? {
            Some(soft) if head.kv.len > 0 => {
                let mut role_kv = KvCache::new(backbone.blocks.len());
                backbone.forward(&soft, &step, Some(&mut role_kv), &view, Mode::Diff)?;
                (head.kv.with_prefix(&role_kv)?, role_kv.len)
            }
            _ => (head.kv.clone(), 0),
        };
        let step = step.with_constant_keys(in_graph.min(kv.len)..kv.len);
        let ids = Tensor::new(tokens, self.device())?.unsqueeze(0)?;
        let x = backbone.embed(&ids)?;
        if x.device().is_cpu() && x.dtype() == DType::F32 && self.recomputes_blocks(kv.len, tokens.len()) {
            return Ok(backbone.forward_recomputed(&x, &step, Some(&kv), in_graph.min(kv.len), &view)?.squeeze(0)?);
        }
        Ok(backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Diff)?.squeeze(0)?)
    }

    /// What a differentiable forward over `positions` positions after `past` constant ones
    /// keeps in every block for its backward, MiB, as estimated from the model's shape: what
    /// `recompute-blocks` saves. The rest of a backward (logits, gradients) is the same either
    /// way and not counted.
    pub fn kept_activations_mib(&self, past: usize, positions: usize) -> f64 {
        crate::budget::kept_activations_mib(&self.base.cfg, past, positions)
    }

    /// Whether a forward over `positions` positions after `past` runs its blocks again in the
    /// backward ([`RecomputeBlocks`]).
    fn recomputes_blocks(&self, past: usize, positions: usize) -> bool {
        match self.cfg.recompute_blocks {
            RecomputeBlocks::Never => false,
            RecomputeBlocks::Always => true,
            RecomputeBlocks::OverBudget => {
                // The heap's count where the binary keeps one; else the resident set, which
                // also holds freed blocks the heap kept, and so errs toward recomputing.
                let held = onebrain_meter::heap_live_mib().or_else(onebrain_meter::rss_mib).unwrap_or(f64::INFINITY);
                held + self.kept_activations_mib(past, positions) > self.memory_budget_mib() as f64
            }
        }
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
        self.batch_logprobs_masked(role, items, &[], 1.0)
    }

    /// [`Brain::batch_logprobs`] under decoding constraints at a sampling temperature:
    /// `masks[r]`, when present, holds one allowed set per continuation token of row `r` (see
    /// [`Brain::tail_logprobs_masked`]).
    pub fn batch_logprobs_masked(
        &self,
        role: Role,
        items: &[(Vec<u32>, Vec<u32>)],
        masks: &[Option<&[TokenSet]>],
        temperature: f32,
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
        let (lp, entropy) = self.policy_logprobs(backbone, &sel, &targets, &row_masks, temperature)?;
        let mask = Tensor::from_vec(mask, (b, c_max), self.device())?;
        let lp = lp.reshape((b, c_max))?.mul(&mask)?;
        let entropy = entropy.reshape((b, c_max))?.mul(&mask)?;
        Ok(BatchLogprobs { logprobs: lp, mask, hidden: sel.reshape((b, c_max, h))?, entropy })
    }

    /// log π(target) and the entropy `(n,)` at final hidden states `sel (n, hidden)` under the
    /// positions' masks at `temperature`: with `allowed_logits` on the sampler's tiles, only the
    /// allowed tokens' logits ([`ConstrainedLogprob`]); otherwise the whole vocabulary's.
    fn policy_logprobs(
        &self,
        backbone: &Backbone,
        sel: &Tensor,
        targets: &[u32],
        masks: &[Option<&TokenSet>],
        temperature: f32,
    ) -> Result<(Tensor, Tensor)> {
        if let (true, Weight::Tiled(w)) = (self.cfg.allowed_logits && self.learns_on_sampler_weights(), &backbone.lm_head) {
            let op = ConstrainedLogprob::new(w.clone(), backbone.cfg.vocab_size, targets, masks, temperature);
            let out = sel.contiguous()?.apply_op1(op)?;
            return Ok((out.narrow(1, 0, 1)?.squeeze(1)?, out.narrow(1, 1, 1)?.squeeze(1)?));
        }
        let bias = mask_bias(masks, backbone.cfg.vocab_size, self.device())?;
        token_logprobs(&backbone.logits(sel)?, targets, bias.as_ref(), temperature)
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

    /// The Judge head's logits w·h + b `(n,)` of final hidden states `(n, hidden)`, with
    /// gradients to w and b. The states may come from anywhere: a graph, or
    /// [`Brain::judge_features`] when only the head learns (`judge-head-only`).
    pub fn judge_head_logits(&self, last: &Tensor) -> Result<Tensor> {
        let w = self.judge_head.w.as_tensor().unsqueeze(1)?;
        Ok(last.matmul(&w)?.squeeze(1)?.broadcast_add(self.judge_head.b.as_tensor())?)
    }

}


/// log π(target) and the policy's entropy `(n,)` at each of `n` rows of logits
/// `(n, vocab)` at `temperature`, differentiable; with `bias` (0 allowed, [`MASKED`] refused)
/// the policy is the constrained one.
fn token_logprobs(logits: &Tensor, targets: &[u32], bias: Option<&Tensor>, temperature: f32) -> Result<(Tensor, Tensor)> {
    // Greedy decoding records temperature-1 log-probabilities; so does the learner.
    let inv_t = if temperature > 0.0 { 1.0 / f64::from(temperature) } else { 1.0 };
    let logits = if inv_t == 1.0 { logits.clone() } else { (logits * inv_t)? };
    let logits = match bias {
        Some(b) => logits.add(b)?,
        None => logits,
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

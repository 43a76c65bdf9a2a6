//! The update: what one batch of samples does to the parameters.
//!
//! [`Learner`] owns the model's trainable parameters (through the [`Brain`]), the value
//! heads and the optimizer. [`Learner::update`] is CleanRL's inner loop: score the batch
//! under the old policy (when needed), compute advantages, then for each epoch and
//! minibatch sum the gradients of L = L_A + λ_E·L_E + λ_J·L_J over micro-batches, clip,
//! and take one AdamW step.

use std::collections::HashMap;
use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use onebrain_model::{BatchLogprobs, Brain, PromptHead, Role, TokenSet};
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};

use crate::adamw::{clip_grad_norm, AdamW, AdamWParams};
use crate::batch::{Batch, PolicySample};
use crate::config::Ablation;
use crate::error::TrainError;
use crate::ppo::{
    clipped_surrogate_sum, entropy_sum, explained_variance, joint_loss, judge_loss_sum,
    value_loss_sum, Advantage, PpoArgs,
};

/// A linear value head V(s) = w·h + b on a role's hidden state at the prompt's end.
#[derive(Debug, Clone)]
pub struct ValueHead {
    w: Var,
    b: Var,
}

impl ValueHead {
    fn new(hidden: usize, dev: &Device) -> candle_core::Result<ValueHead> {
        // Zero: the first advantages are the plain returns, and nothing random is needed.
        Ok(ValueHead {
            w: Var::zeros(hidden, DType::F32, dev)?,
            b: Var::zeros(1, DType::F32, dev)?,
        })
    }

    /// `(b,)` values of hidden states `(b, hidden)` (detached from the policy: the critic
    /// learns its own two parameters and leaves the roles' representation alone).
    fn forward(&self, h: &Tensor) -> candle_core::Result<Tensor> {
        h.detach()
            .matmul(&self.w.as_tensor().unsqueeze(1)?)?
            .squeeze(1)?
            .broadcast_add(self.b.as_tensor())
    }
}

/// What one update measured (the metrics' `losses/` keys).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateStats {
    /// Mean clipped surrogate of the Actor's tokens (last epoch).
    pub policy_actor: Option<f32>,
    /// Mean clipped surrogate of the Editor's tokens (last epoch).
    pub policy_editor: Option<f32>,
    /// Mean ½(V − G)² (last epoch).
    pub value: Option<f32>,
    /// Mean Judge loss (last epoch).
    pub judge: Option<f32>,
    /// The joint loss L_A + λ_E·L_E + λ_J·L_J (last minibatch run, before its step).
    pub total: f32,
    /// The joint loss of the first minibatch of the first epoch, before its step: against
    /// `total`, how much the update lowered the loss on its own batch.
    pub total_first: Option<f32>,
    /// Mean token entropy (last epoch).
    pub entropy: Option<f32>,
    /// CleanRL's approximate KL(old ‖ new) per token (last epoch).
    pub approx_kl: f32,
    /// Share of tokens whose ratio was clipped (last epoch).
    pub clipfrac: f32,
    /// Mean |log π − log π_old| per token over the first minibatch of the first epoch,
    /// before its step: 0 up to rounding, since π_old is the learner's own forward.
    pub first_abs_log_ratio: Option<f32>,
    /// Where the old log-probabilities came from: `scoring-pass` (the learner's own pass
    /// before the first step) or `first-forward` (the first forward's detached values).
    pub old_logp_source: &'static str,
    /// Mean |log π_learner − log π_sampler| per token between the learner's old
    /// log-probabilities and those the sampler recorded for the same tokens (samples that
    /// recorded them; first epoch): how far sampling and learning numerics are apart.
    pub sampler_gap: Option<f32>,
    /// Mean KL to the initial policy per token (with a KL penalty).
    pub kl_ref: Option<f32>,
    /// Explained variance of the value head.
    pub explained_variance: Option<f32>,
    /// Gradient norm before clipping, at the last optimizer step.
    pub grad_norm: f32,
    /// Epochs run (fewer than asked when `target-kl` stopped them).
    pub epochs: usize,
    /// Optimizer steps taken.
    pub steps: usize,
    /// Steps dropped because the gradient was not finite (the parameters stayed as they were).
    pub dropped_steps: usize,
    /// Tokens through forward + backward (prompts included), all epochs.
    pub tokens: usize,
    /// Policy samples skipped because every loss term of theirs was zero (last epoch).
    pub skipped: usize,
    /// Seconds of the scoring pass.
    pub score_secs: f64,
    /// Seconds spent computing the head-only Judge's states (`judge-head-only`).
    pub judge_states_secs: f64,
    /// The Actor's and Editor's prompt heads (`detach-prompt`) read as the rollouts' sampler
    /// computed them (a head serves the scoring pass and the first minibatch, before any step).
    pub prompt_heads_kept: usize,
    /// The Actor's and Editor's prompt heads the update computed itself (a resumed step's
    /// recorded episodes, a later minibatch, a head past the kept ones' memory cap).
    pub prompt_heads_computed: usize,
    /// Seconds of the whole update.
    pub secs: f64,
}

/// The learning half: parameters, value heads, optimizer.
pub struct Learner {
    brain: Brain,
    reference: Option<Brain>,
    values: HashMap<Role, ValueHead>,
    opt: AdamW,
    args: PpoArgs,
    ablation: Ablation,
    seed: u64,
    updates: u64,
    /// Per policy sample of the current update, the masks its constraint gave each output
    /// token (absent for free decoding): rebuilt by replay at the start of every update.
    masks: HashMap<usize, Vec<TokenSet>>,
    /// With `judge-head-only`, per Judge example of the current update, the final hidden
    /// state h its head reads: computed once at the start of every update, without a graph.
    judge_states: HashMap<usize, Vec<f32>>,
}

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("updates", &self.updates)
            .field("ablation", &self.ablation)
            .finish()
    }
}

impl Learner {
    /// A learner over `brain`'s parameters for the roles `ablation` trains. `reference` is a
    /// frozen copy of the initial model, needed only when `args.kl_coef > 0`.
    pub fn new(
        brain: Brain,
        reference: Option<Brain>,
        args: PpoArgs,
        ablation: Ablation,
        seed: u64,
    ) -> Result<Learner, TrainError> {
        if args.kl_coef > 0.0 && reference.is_none() {
            return Err(TrainError::Config(
                "kl-coef > 0 needs the reference model".into(),
            ));
        }
        brain.prepare_training()?;
        let mut named: Vec<(String, Var)> = Vec::new();
        for role in Role::ALL.into_iter().filter(|r| ablation.trains(*r)) {
            for (name, var) in brain.role_named_vars(role) {
                // A head-only Judge keeps its role parameters as initialised (see
                // `judge-head-only`): its states must stay the ones the sampler computed.
                let frozen = args.judge_head_only && role == Role::Judge && !name.starts_with("judge.head.");
                if !frozen && !named.iter().any(|(n, _)| *n == name) {
                    named.push((name, var));
                }
            }
        }
        let mut values = HashMap::new();
        if args.advantage == Advantage::ValueHead {
            for role in [Role::Actor, Role::Editor]
                .into_iter()
                .filter(|r| ablation.trains(*r))
            {
                let head = ValueHead::new(brain.arch().hidden_size, brain.device())?;
                named.push((format!("value.{role}.weight"), head.w.clone()));
                named.push((format!("value.{role}.bias"), head.b.clone()));
                values.insert(role, head);
            }
        }
        let opt = AdamW::new(
            named,
            AdamWParams {
                lr: args.learning_rate,
                weight_decay: args.weight_decay,
                ..Default::default()
            },
        )?;
        Ok(Learner {
            brain,
            reference,
            values,
            opt,
            args,
            ablation,
            seed,
            updates: 0,
            masks: HashMap::new(),
            judge_states: HashMap::new(),
        })
    }

    /// The model (generation between updates uses it).
    pub fn brain(&mut self) -> &mut Brain {
        &mut self.brain
    }

    /// The model, read-only.
    pub fn brain_ref(&self) -> &Brain {
        &self.brain
    }

    /// The roles whose prompt heads the update computes (with `detach-prompt`, each policy
    /// role it trains) and takes from sampling (`keep-sampler-heads`): a step's rollouts keep
    /// these ([`Brain::keep_prompt_heads`]), so the update prefills no prompt again.
    pub fn prompt_head_roles(&self) -> Vec<Role> {
        if !self.args.detach_prompt || !self.args.keep_sampler_heads {
            return Vec::new();
        }
        [Role::Actor, Role::Editor].into_iter().filter(|&r| self.ablation.trains(r)).collect()
    }

    /// Updates done so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The optimizer's state and the value heads, as named tensors (for checkpoints), and
    /// the optimizer's step count.
    pub fn state(&self) -> (HashMap<String, Tensor>, u64) {
        let (mut tensors, steps) = self.opt.state();
        for (name, var) in self
            .opt
            .vars()
            .iter()
            .filter(|(n, _)| n.starts_with("value."))
        {
            tensors.insert(name.clone(), var.as_detached_tensor());
        }
        (tensors, steps)
    }

    /// Restores [`Learner::state`] and the update count (the model's own parameters are
    /// restored by `Brain::load_trainable`).
    pub fn load_state(
        &mut self,
        tensors: &HashMap<String, Tensor>,
        steps: u64,
        updates: u64,
    ) -> Result<(), String> {
        for (name, var) in self
            .opt
            .vars()
            .iter()
            .filter(|(n, _)| n.starts_with("value."))
        {
            let t = tensors
                .get(name)
                .ok_or_else(|| format!("missing `{name}`"))?;
            var.set(t).map_err(|e| e.to_string())?;
        }
        self.opt.load_state(tensors, steps)?;
        self.updates = updates;
        Ok(())
    }

    /// Trainable parameter count (what the optimizer steps).
    pub fn trainable_params(&self) -> usize {
        self.opt.vars().iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Runs one PPO update on `batch` (advantages are filled in here).
    pub fn update(&mut self, batch: &mut Batch) -> Result<UpdateStats, TrainError> {
        let start = Instant::now();
        let args = self.args.clone();
        let mut stats = UpdateStats::default();

        // 0. The constrained samples' masks, replayed once for the whole update.
        self.masks = replay_masks(&self.brain, batch)?;
        // The head-only Judge's states h, on the sampler's kernels (as it scored them).
        self.judge_states.clear();
        if args.judge_head_only && self.ablation.trains(Role::Judge) && !batch.judge.is_empty() {
            let t = Instant::now();
            self.judge_states = self.judge_states_of(batch)?;
            stats.judge_states_secs = t.elapsed().as_secs_f64();
        }
        // 1. The old policy's log-probabilities, on the learner's own numerics. The sampler's
        //    (recorded at rollout, at the same temperature, on the same quantized weights) are
        //    about 4e-2 per token away from them on SmolLM2 (`tests/ratio.rs`): the learner splits
        //    the arithmetic differently (whole sequences, not token by token), and each layer's
        //    8-bit activation quantization turns last-bit differences into whole steps. Taken as
        //    π_old they would make the ratio noise rather than 1, so they are kept as a measure
        //    (`sampler_gap`), and the update recomputes π_old, as TRL and verl do.
        for s in batch.policy.iter_mut() {
            s.old_logp = None;
        }
        let source = if args.needs_scoring_pass() { OldLogp::ScoringPass } else { OldLogp::FirstForward };
        stats.old_logp_source = source.name();
        let score_from_first_pass = source == OldLogp::FirstForward;
        // Values and reference log-probabilities still need a pass before the first step.
        let scoring_pass = source == OldLogp::ScoringPass
            || args.advantage == Advantage::ValueHead
            || args.kl_coef > 0.0;
        // Prompt heads (`detach-prompt`), shared by every sample of the same prompt.
        let mut heads = Heads::default();
        if scoring_pass {
            let t = Instant::now();
            stats.tokens += self.score(batch, &mut heads, source == OldLogp::ScoringPass)?;
            stats.score_secs = t.elapsed().as_secs_f64();
        }
        // 2. Advantages and returns.
        batch.assign_advantages(&args);
        if args.advantage == Advantage::ValueHead {
            let v: Vec<f32> = batch.policy.iter().map(|s| s.value).collect();
            let g: Vec<f32> = batch.policy.iter().map(|s| s.ret).collect();
            stats.explained_variance = explained_variance(&v, &g);
        }
        // 3. Epochs of minibatch steps.
        let mut rng =
            StdRng::seed_from_u64(self.seed ^ self.updates.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut gap = (0.0f32, 0usize);
        for epoch in 0..args.update_epochs {
            let mut p_order: Vec<usize> = (0..batch.policy.len()).collect();
            let mut j_order: Vec<usize> = (0..batch.judge.len()).collect();
            p_order.shuffle(&mut rng);
            j_order.shuffle(&mut rng);
            let mut epoch_kl = (0.0f32, 0.0f32);
            for mb in 0..args.num_minibatches {
                let p_mb = chunk(&p_order, args.num_minibatches, mb);
                let j_mb = chunk(&j_order, args.num_minibatches, mb);
                if p_mb.is_empty() && j_mb.is_empty() {
                    continue;
                }
                let out = self.minibatch(batch, &p_mb, &j_mb, score_from_first_pass, &mut heads)?;
                // The heads were computed with the parameters this step just changed.
                heads.clear();
                stats.tokens += out.tokens;
                stats.skipped = out.skipped;
                epoch_kl.0 += out.approx_kl_sum;
                epoch_kl.1 += out.policy_tokens;
                stats.grad_norm = out.grad_norm;
                if out.dropped_step {
                    stats.dropped_steps += 1;
                } else {
                    stats.steps += 1;
                }
                // The figures of the last minibatch run are the ones reported.
                let tokens = out.policy_tokens.max(1.0);
                let seqs = out.value_seqs.max(1) as f32;
                stats.policy_actor = out.mean(Role::Actor);
                stats.policy_editor = out.mean(Role::Editor);
                stats.value = (out.value_seqs > 0).then(|| out.value_sum / seqs);
                stats.judge = out.judge;
                stats.entropy = (out.policy_tokens > 0.0).then(|| out.entropy_sum / tokens);
                stats.kl_ref = (args.kl_coef > 0.0).then(|| out.kl_sum / tokens);
                stats.clipfrac = out.clipped / tokens;
                if epoch == 0 && stats.first_abs_log_ratio.is_none() && out.policy_tokens > 0.0 {
                    stats.first_abs_log_ratio = Some(out.abs_log_ratio_sum / tokens);
                }
                if epoch == 0 {
                    gap.0 += out.gap_sum;
                    gap.1 += out.gap_tokens;
                }
                let total = joint_loss(
                    stats.policy_actor.unwrap_or(0.0),
                    stats.policy_editor.unwrap_or(0.0),
                    stats.judge.unwrap_or(0.0),
                    &args,
                );
                stats.total_first.get_or_insert(total);
                stats.total = joint_loss(
                    stats.policy_actor.unwrap_or(0.0),
                    stats.policy_editor.unwrap_or(0.0),
                    stats.judge.unwrap_or(0.0),
                    &args,
                );
            }
            stats.epochs = epoch + 1;
            stats.approx_kl = epoch_kl.0 / epoch_kl.1.max(1.0);
            if args.target_kl.is_some_and(|t| stats.approx_kl > t) {
                break;
            }
        }
        stats.sampler_gap = (gap.1 > 0).then(|| gap.0 / gap.1 as f32);
        (stats.prompt_heads_kept, stats.prompt_heads_computed) = (heads.kept, heads.computed);
        self.updates += 1;
        self.masks.clear();
        // Generation must not reuse prompt caches computed under the old parameters; the
        // fingerprint check would catch it, dropping them frees the memory now.
        self.brain.clear_prefix_cache();
        release_free_memory();
        stats.secs = start.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// The scoring pass: log π_old (when `set_old`), V and log π_ref of every policy sample,
    /// no gradients kept. Returns the tokens it ran.
    fn score(&mut self, batch: &mut Batch, heads: &mut Heads, set_old: bool) -> Result<usize, TrainError> {
        let mut tokens = 0;
        for role in [Role::Actor, Role::Editor] {
            let idx: Vec<usize> = (0..batch.policy.len())
                .filter(|&i| batch.policy[i].role == role)
                .collect();
            let idx = by_prompt(&idx, |i| &batch.policy[i].prompt);
            for chunk in idx.chunks(self.args.micro_batch) {
                for (rows_idx, lp, n) in self.policy_forward(role, chunk, batch, heads)? {
                    tokens += n;
                    let old = rows(
                        &lp.logprobs,
                        rows_idx.iter().map(|&i| batch.policy[i].output.len()),
                    )?;
                    let values = match self.values.get(&role) {
                        Some(head) => head
                            .forward(&lp.hidden.narrow(1, 0, 1)?.squeeze(1)?)?
                            .to_vec1::<f32>()?,
                        None => vec![0.0; rows_idx.len()],
                    };
                    let refs = match &self.reference {
                        Some(r) if self.args.kl_coef > 0.0 => {
                            let items = items(&batch.policy, &rows_idx);
                            let t = batch.policy[rows_idx[0]].temperature;
                            let lp = r.batch_logprobs_masked(role, &items, &self.masks_of(&rows_idx), t)?;
                            Some(rows(
                                &lp.logprobs,
                                rows_idx.iter().map(|&i| batch.policy[i].output.len()),
                            )?)
                        }
                        _ => None,
                    };
                    for (k, &i) in rows_idx.iter().enumerate() {
                        let s = &mut batch.policy[i];
                        if set_old {
                            s.old_logp = Some(old[k].clone());
                        }
                        s.value = values[k];
                        s.ref_logp = refs.as_ref().map(|r| r[k].clone());
                    }
                }
            }
        }
        Ok(tokens)
    }

    /// One optimizer step over the samples `p_mb` and Judge examples `j_mb`.
    fn minibatch(
        &mut self,
        batch: &mut Batch,
        p_mb: &[usize],
        j_mb: &[usize],
        score_from_first_pass: bool,
        heads: &mut Heads,
    ) -> Result<MinibatchOut, TrainError> {
        let args = self.args.clone();
        let mut grads: Vec<Option<Tensor>> = vec![None; self.opt.vars().len()];
        let mut out = MinibatchOut::default();

        // ALGO LOGIC: the Actor's and the Editor's PPO terms, each a mean over its tokens.
        for role in [Role::Actor, Role::Editor] {
            let idx: Vec<usize> = p_mb
                .iter()
                .copied()
                .filter(|&i| batch.policy[i].role == role)
                .collect();
            if idx.is_empty() {
                continue;
            }
            let coef = if role == Role::Actor {
                1.0
            } else {
                args.lambda_editor
            };
            let n_tok: usize = idx.iter().map(|&i| batch.policy[i].output.len()).sum();
            let n_seq = idx.len();
            // A sample whose every loss term is zero (no advantage, and no value, entropy or
            // KL term) adds nothing to the gradient: skip its forward and backward. With a group
            // baseline that is every sample of a group whose returns all agree.
            let inert = |s: &PolicySample| {
                s.advantage == 0.0
                    && !self.values.contains_key(&role)
                    && args.ent_coef == 0.0
                    && args.kl_coef == 0.0
            };
            let idx: Vec<usize> = idx
                .into_iter()
                .filter(|&i| !inert(&batch.policy[i]))
                .collect();
            let idx = by_prompt(&idx, |i| &batch.policy[i].prompt);
            out.skipped += n_seq - idx.len();
            let (mut pg, mut v, mut ent, mut kl) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
            for micro in idx.chunks(args.micro_batch) {
                for (chunk, lp, n) in self.policy_forward(role, micro, batch, heads)? {
                    let chunk = chunk.as_slice();
                    out.tokens += n;
                    let lens: Vec<usize> = chunk
                        .iter()
                        .map(|&i| batch.policy[i].output.len())
                        .collect();
                    if score_from_first_pass {
                        // The policy has not moved since the rollout: these are the old values.
                        let old = rows(&lp.logprobs.detach(), lens.iter().copied())?;
                        for (k, &i) in chunk.iter().enumerate() {
                            batch.policy[i].old_logp = Some(old[k].clone());
                        }
                    }
                    let old = padded(
                        chunk
                            .iter()
                            .map(|&i| batch.policy[i].old_logp.as_deref().expect("scored")),
                        &lp.mask,
                    )?;
                    // Each sample is in one minibatch of an epoch, so epoch 0 counts it once.
                    for s in chunk.iter().map(|&i| &batch.policy[i]) {
                        if let (Some(o), false) = (&s.old_logp, s.rollout_logp.is_empty()) {
                            out.gap_sum += o.iter().zip(&s.rollout_logp).map(|(a, b)| (a - b).abs()).sum::<f32>();
                            out.gap_tokens += o.len();
                        }
                    }
                    let adv: Vec<f32> = chunk.iter().map(|&i| batch.policy[i].advantage).collect();
                    let adv = Tensor::new(adv.as_slice(), lp.logprobs.device())?;
                    let (pg_sum, st) =
                        clipped_surrogate_sum(&lp.logprobs, &old, &adv, &lp.mask, args.clip_coef)?;
                    let ent_sum = entropy_sum(&lp.entropy, &lp.mask)?;
                    let mut loss = ((pg_sum / n_tok as f64)?
                        - (&ent_sum * (f64::from(args.ent_coef) / n_tok as f64))?)?;
                    if let Some(head) = self.values.get(&role) {
                        let values = head.forward(&lp.hidden.narrow(1, 0, 1)?.squeeze(1)?)?;
                        let ret: Vec<f32> = chunk.iter().map(|&i| batch.policy[i].ret).collect();
                        let v_sum =
                            value_loss_sum(&values, &Tensor::new(ret.as_slice(), values.device())?)?;
                        v += v_sum.to_scalar::<f32>()?;
                        loss = (loss + (v_sum * (f64::from(args.vf_coef) / n_seq as f64))?)?;
                    }
                    if args.kl_coef > 0.0 {
                        // k3 = e^{ref − new} − (ref − new) − 1 ≥ 0 per token (Schulman's estimator).
                        let r = padded(
                            chunk
                                .iter()
                                .map(|&i| batch.policy[i].ref_logp.as_deref().expect("scored")),
                            &lp.mask,
                        )?;
                        let d = (r - &lp.logprobs)?;
                        let k3 = ((d.exp()? - &d)?.affine(1.0, -1.0)?.mul(&lp.mask))?.sum_all()?;
                        kl += k3.to_scalar::<f32>()?;
                        loss = (loss + (k3 * (f64::from(args.kl_coef) / n_tok as f64))?)?;
                    }
                    self.accumulate(&(loss * f64::from(coef))?, &mut grads)?;
                    pg += st.loss_sum;
                    ent += ent_sum.to_scalar::<f32>()?;
                    out.clipped += st.clipped;
                    out.approx_kl_sum += st.approx_kl_sum;
                    out.abs_log_ratio_sum += st.abs_log_ratio_sum;
                    out.policy_tokens += st.tokens;
                }
            }
            out.policy.insert(role, pg / n_tok.max(1) as f32);
            out.entropy_sum += ent;
            out.kl_sum += kl;
            if self.values.contains_key(&role) {
                out.value_sum += v;
                out.value_seqs += n_seq;
            }
        }

        // ALGO LOGIC: the Judge's term, BCE + λ_band·ℓ_band, a mean over its examples.
        if !j_mb.is_empty() {
            let n = j_mb.len() as f64;
            let mut sum = 0.0f32;
            let j_mb = by_prompt(j_mb, |i| &batch.judge[i].prompt);
            for micro in j_mb.chunks(args.micro_batch) {
                for (chunk, logits, tokens) in self.judge_forward(micro, batch, heads)? {
                    let chunk = chunk.as_slice();
                    out.tokens += tokens;
                    let labels: Vec<f32> = chunk
                        .iter()
                        .map(|&i| f32::from(u8::from(batch.judge[i].label)))
                        .collect();
                    let labels = Tensor::new(labels.as_slice(), logits.device())?;
                    let l =
                        judge_loss_sum(&logits, &labels, args.lambda_band, args.judge_threshold)?;
                    sum += l.to_scalar::<f32>()?;
                    self.accumulate(&(l * (f64::from(args.lambda_judge) / n))?, &mut grads)?;
                }
            }
            out.judge = Some(sum / n as f32);
        }

        out.grad_norm = clip_grad_norm(&mut grads, args.max_grad_norm)?;
        if out.grad_norm.is_finite() {
            self.opt.step(&grads)?;
        } else {
            // A NaN or infinite gradient would poison every parameter and every later
            // checkpoint: this step is dropped and counted instead.
            out.dropped_step = true;
        }
        Ok(out)
    }

    /// The policy's log-probabilities for samples `idx` of `role`: one batch on the full
    /// differentiable path, or with `detach-prompt` one row at a time after its prompt head
    /// (computed once per distinct prompt, without a graph). Each item: the samples it
    /// covers, their log-probabilities, and the positions run through a graph.
    fn policy_forward(
        &self,
        role: Role,
        idx: &[usize],
        batch: &Batch,
        heads: &mut Heads,
    ) -> Result<Vec<(Vec<usize>, BatchLogprobs, usize)>, TrainError> {
        if !self.args.detach_prompt {
            // One forward per sampling temperature (in practice one).
            let mut out = Vec::new();
            let mut rest: Vec<usize> = idx.to_vec();
            while let Some(&first) = rest.first() {
                let t = batch.policy[first].temperature;
                let (same, other): (Vec<usize>, Vec<usize>) =
                    rest.iter().partition(|&&i| batch.policy[i].temperature == t);
                let items = items(&batch.policy, &same);
                let n = items.iter().map(|(p, c)| p.len() + c.len()).sum();
                let lp = self.brain.batch_logprobs_masked(role, &items, &self.masks_of(&same), t)?;
                out.push((same, lp, n));
                rest = other;
            }
            return Ok(out);
        }
        let mut out = Vec::with_capacity(idx.len());
        for &i in idx {
            let s = &batch.policy[i];
            let split = s.prompt.len().saturating_sub(1);
            let head = heads.get(&self.brain, role, &s.prompt[..split])?;
            let lp = self.brain.tail_logprobs_masked(
                head,
                &s.prompt[split..],
                &s.output,
                self.masks.get(&i).map(Vec::as_slice),
                s.temperature,
            )?;
            out.push((vec![i], lp, s.prompt.len() - split + s.output.len()));
        }
        Ok(out)
    }

    /// The Judge's logits for examples `idx`, on the full path or, with `detach-prompt`,
    /// with gradients through the last `judge-tail` tokens (the candidate and the question).
    fn judge_forward(
        &self,
        idx: &[usize],
        batch: &Batch,
        heads: &mut Heads,
    ) -> Result<Vec<(Vec<usize>, Tensor, usize)>, TrainError> {
        if self.args.judge_head_only {
            // Only the head has a graph: no Judge position runs through the backbone.
            let hidden = self.brain.arch().hidden_size;
            let mut rows = Vec::with_capacity(idx.len() * hidden);
            for i in idx {
                rows.extend_from_slice(&self.judge_states[i]);
            }
            let h = Tensor::from_vec(rows, (idx.len(), hidden), self.brain.device())?;
            return Ok(vec![(idx.to_vec(), self.brain.judge_head_logits(&h)?, 0)]);
        }
        if !self.args.detach_prompt {
            let prompts: Vec<Vec<u32>> =
                idx.iter().map(|&i| batch.judge[i].prompt.clone()).collect();
            let n = prompts.iter().map(Vec::len).sum();
            return Ok(vec![(idx.to_vec(), self.brain.judge_logits(&prompts)?, n)]);
        }
        let mut out = Vec::with_capacity(idx.len());
        for &i in idx {
            let p = &batch.judge[i].prompt;
            let split = p.len().saturating_sub(self.args.judge_tail);
            let head = heads.get(&self.brain, Role::Judge, &p[..split])?;
            let logit = self
                .brain
                .judge_tail_logit(head, &p[split..])?
                .unsqueeze(0)?;
            out.push((vec![i], logit, p.len() - split));
        }
        Ok(out)
    }

    /// The Judge's final hidden state h of every Judge example of `batch`, by index, from
    /// the Judge's role on the sampler's kernels without a graph. Examples that share a
    /// task go in one call, so their common prefix is prefilled once.
    fn judge_states_of(&mut self, batch: &Batch) -> Result<HashMap<usize, Vec<f32>>, TrainError> {
        /// Prompts per prefill: as the sampler's Judge calls batch them.
        const ROWS: usize = 4;
        let mut order: Vec<usize> = (0..batch.judge.len()).collect();
        order.sort_by(|&a, &b| batch.judge[a].prompt.cmp(&batch.judge[b].prompt));
        let mut out = HashMap::with_capacity(order.len());
        for rows in order.chunks(ROWS) {
            let prompts: Vec<Vec<u32>> = rows.iter().map(|&i| batch.judge[i].prompt.clone()).collect();
            // A state that is not finite makes the gradient so, and the step is dropped.
            out.extend(rows.iter().copied().zip(self.brain.judge_features(&prompts)?));
        }
        Ok(out)
    }

    /// Adds `loss`'s gradients to `grads` (aligned with the optimizer's variables).
    fn accumulate(&self, loss: &Tensor, grads: &mut [Option<Tensor>]) -> Result<(), TrainError> {
        let store = loss.backward()?;
        for ((_, var), slot) in self.opt.vars().iter().zip(grads.iter_mut()) {
            if let Some(g) = store.get(var.as_tensor()) {
                *slot = Some(match slot.take() {
                    Some(s) => (s + g)?,
                    None => g.clone(),
                });
            }
        }
        Ok(())
    }

    /// The masks of samples `idx` of the current update, in order.
    fn masks_of(&self, idx: &[usize]) -> Vec<Option<&[TokenSet]>> {
        idx.iter().map(|i| self.masks.get(i).map(Vec::as_slice)).collect()
    }

    /// The mean log-probability per output token of `samples` under the current policy
    /// (constrained, for samples that were) — a diagnostic; tests use it to see an update
    /// move the policy.
    pub fn mean_logprob(&self, samples: &[PolicySample]) -> Result<f32, TrainError> {
        let mut sum = 0.0;
        let mut n = 0usize;
        for s in samples {
            let masks = match &s.constraint {
                Some((spec, max_tokens)) => Some(self.brain.constraint_masks(spec, *max_tokens, &s.output)?),
                None => None,
            };
            let lp = self.brain.batch_logprobs_masked(
                s.role,
                &[(s.prompt.clone(), s.output.clone())],
                &[masks.as_deref()],
                s.temperature,
            )?;
            sum += lp.logprobs.sum_all()?.to_scalar::<f32>()?;
            n += s.output.len();
        }
        Ok(sum / n.max(1) as f32)
    }
}

/// Gives the pages of freed memory back to the system. glibc keeps a freed heap region
/// mapped for reuse, so without this a run's resident memory follows the largest update so
/// far (the longest batch's activations) rather than what is live.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no live
    // allocation and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Prompt heads, by role and tokens: keys and values of the current parameters, read from
/// those the rollouts' sampler kept or computed here, dropped after every optimizer step.
///
/// At most one head per role is kept: a new head is grown from the role's previous one (the
/// longest shared prefix it has: prompts of one domain share ~800 tokens of system text and
/// domain PDDL), which it then replaces. Callers visit samples in prompt order
/// ([`by_prompt`]), so every sample of a prompt finds its head, and the next prompt shares
/// the most with the one before. Keeping every head of a minibatch instead held about 35 MB
/// per distinct prompt on the 0.5B model, over a gigabyte for 16 episodes.
#[derive(Default)]
struct Heads {
    by_role: HashMap<Role, PromptHead>,
    /// The policy's heads taken from the sampler's, and computed here, since the update began.
    kept: usize,
    computed: usize,
}

impl Heads {
    /// The head of `tokens` for `role`, grown from the role's previous head.
    fn get(
        &mut self,
        brain: &Brain,
        role: Role,
        tokens: &[u32],
    ) -> Result<&PromptHead, TrainError> {
        if self.by_role.get(&role).is_none_or(|h| h.tokens() != tokens) {
            let h = brain.extend_prompt_head(role, tokens, self.by_role.get(&role))?;
            // The Judge's heads end `judge-tail` tokens early: never the sampler's.
            match (role, h.was_kept()) {
                (Role::Judge, _) => {}
                (_, true) => self.kept += 1,
                (_, false) => self.computed += 1,
            }
            self.by_role.insert(role, h);
        }
        Ok(&self.by_role[&role])
    }

    /// Drops every head (the parameters they were computed with are about to change).
    fn clear(&mut self) {
        self.by_role.clear();
    }
}

/// The masks of `batch`'s constrained samples, by index: the grammar replayed over each
/// output, on every core (one sample after another it was 12 s of an update of 16 episodes
/// on 2 cores).
fn replay_masks(brain: &Brain, batch: &Batch) -> Result<HashMap<usize, Vec<TokenSet>>, TrainError> {
    let todo: Vec<usize> = (0..batch.policy.len()).filter(|&i| batch.policy[i].constraint.is_some()).collect();
    let slots: Vec<std::sync::Mutex<Option<onebrain_model::Result<Vec<TokenSet>>>>> =
        todo.iter().map(|_| std::sync::Mutex::new(None)).collect();
    // candle's CPU pool, as the sampler's own per-row work.
    candle_core::utils::barrier_pool().execute_chunked(todo.len(), |range| {
        for k in range {
            let s = &batch.policy[todo[k]];
            let (spec, max_tokens) = s.constraint.as_ref().expect("constrained");
            *slots[k].lock().expect("a sample is replayed by one thread") =
                Some(brain.constraint_masks(spec, *max_tokens, &s.output));
        }
    });
    let mut masks = HashMap::with_capacity(todo.len());
    for (i, slot) in todo.into_iter().zip(slots) {
        masks.insert(i, slot.into_inner().expect("no thread panicked").expect("every sample replayed")?);
    }
    Ok(masks)
}

/// `idx` sorted by the prompt `prompt_of` gives each (stable: equal prompts keep their order),
/// so that [`Heads`] computes each prompt head once. The gradient is a sum over samples, so the
/// order changes only its rounding.
fn by_prompt<'a>(idx: &[usize], prompt_of: impl Fn(usize) -> &'a [u32]) -> Vec<usize> {
    let mut sorted = idx.to_vec();
    sorted.sort_by(|&a, &b| prompt_of(a).cmp(prompt_of(b)));
    sorted
}

/// Where an update's old log-probabilities come from (see [`UpdateStats::old_logp_source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OldLogp {
    ScoringPass,
    FirstForward,
}

impl OldLogp {
    fn name(self) -> &'static str {
        match self {
            OldLogp::ScoringPass => "scoring-pass",
            OldLogp::FirstForward => "first-forward",
        }
    }
}

#[derive(Default)]
struct MinibatchOut {
    /// Σ |log π − log π_old| over the policy tokens, before the step.
    abs_log_ratio_sum: f32,
    /// Σ |log π_old − log π_sampler| over the tokens of samples that recorded it, and their count.
    gap_sum: f32,
    gap_tokens: usize,
    policy: HashMap<Role, f32>,
    value_sum: f32,
    value_seqs: usize,
    judge: Option<f32>,
    entropy_sum: f32,
    kl_sum: f32,
    clipped: f32,
    approx_kl_sum: f32,
    policy_tokens: f32,
    grad_norm: f32,
    tokens: usize,
    skipped: usize,
    dropped_step: bool,
}

impl MinibatchOut {
    fn mean(&self, role: Role) -> Option<f32> {
        self.policy.get(&role).copied()
    }
}

/// Part `k` of `n` of `order`, as even as possible.
fn chunk(order: &[usize], n: usize, k: usize) -> Vec<usize> {
    let size = order.len().div_ceil(n);
    order.iter().skip(k * size).take(size).copied().collect()
}

fn items(samples: &[PolicySample], idx: &[usize]) -> Vec<(Vec<u32>, Vec<u32>)> {
    idx.iter()
        .map(|&i| (samples[i].prompt.clone(), samples[i].output.clone()))
        .collect()
}

/// The rows of a `(b, t)` tensor, each cut to its length.
fn rows(t: &Tensor, lens: impl Iterator<Item = usize>) -> candle_core::Result<Vec<Vec<f32>>> {
    let all = t.to_vec2::<f32>()?;
    Ok(all
        .into_iter()
        .zip(lens)
        .map(|(r, n)| r[..n].to_vec())
        .collect())
}

/// Rows of different lengths, zero-padded to `mask`'s shape.
fn padded<'a>(rows: impl Iterator<Item = &'a [f32]>, mask: &Tensor) -> candle_core::Result<Tensor> {
    let (b, t) = mask.dims2()?;
    let mut flat = vec![0f32; b * t];
    for (r, row) in rows.enumerate() {
        flat[r * t..r * t + row.len()].copy_from_slice(row);
    }
    Tensor::from_vec(flat, (b, t), mask.device())
}

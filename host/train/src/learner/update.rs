//! One PPO update, top to bottom, as CleanRL's `ppo.py` reads: the old policy's
//! log-probabilities (a scoring pass before any step over the samples that the first
//! minibatch, run before it, does not give them), the advantages, then for each epoch
//! and minibatch the Actor's and Editor's clipped surrogates and the Judge's loss, joined
//! into L = L_A + λ_E·L_E + λ_J·L_J, one gradient-clipped AdamW step per minibatch, and
//! the early stop on the approximate KL. The forward passes that give log-probabilities
//! (prompt heads, the Judge's states) are the learner's ([`super::Learner`]); the pure
//! math (advantages, the surrogate, the Judge's loss) is in [`crate::ppo`].

use std::collections::HashMap;
use std::time::Instant;

use candle_core::Tensor;
use onebrain_model::Role;
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};

use super::{by_prompt, items, padded, release_free_memory, replay_masks, rows, Heads, Learner, UpdateStats};
use crate::adamw::clip_grad_norm;
use crate::batch::{Batch, PolicySample};
use crate::error::TrainError;
use crate::ppo::{clipped_surrogate_sum, entropy_sum, explained_variance, joint_loss, judge_loss_sum, value_loss_sum, Advantage};

impl Learner {
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
        // Generation's prompt prefixes are of no use from here (the forward passes below read
        // the kept prompt heads): freed now, they leave room for the update's activations.
        self.brain.forget_prompt_prefixes();
        release_free_memory();
        // Wᵀ copies freed after the last update (`free-transposed`) are built again, into
        // the room the prefixes left rather than on top of them (nothing above reads them).
        self.brain.prepare_training()?;
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
        // Every epoch's order of samples and Judge examples, drawn up front (the draws the
        // epochs used to take one at a time): the scoring pass skips the first minibatch's.
        let mut rng =
            StdRng::seed_from_u64(self.seed ^ self.updates.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let orders: Vec<(Vec<usize>, Vec<usize>)> = (0..args.update_epochs)
            .map(|_| {
                let mut p_order: Vec<usize> = (0..batch.policy.len()).collect();
                let mut j_order: Vec<usize> = (0..batch.judge.len()).collect();
                p_order.shuffle(&mut rng);
                j_order.shuffle(&mut rng);
                (p_order, j_order)
            })
            .collect();
        // Values and reference log-probabilities need a pass over every sample before the
        // first step; π_old alone only over the samples a minibatch meets after one.
        let needs_values = args.advantage == Advantage::ValueHead || args.kl_coef > 0.0;
        let source = match (args.needs_scoring_pass(), needs_values) {
            (false, _) => OldLogp::FirstForward,
            (true, true) => OldLogp::ScoringPass,
            (true, false) => OldLogp::FirstForwardThenScoringPass,
        };
        stats.old_logp_source = source.name();
        // Prompt heads (`detach-prompt`), shared by every sample of the same prompt.
        let mut heads = Heads::default();
        let t = Instant::now();
        if needs_values {
            let every = vec![true; batch.policy.len()];
            stats.tokens += self.score(batch, &mut heads, true, &every)?;
        }
        // 2. Advantages and returns (a value head's from the values just scored).
        batch.assign_advantages(&args);
        if source == OldLogp::FirstForwardThenScoringPass {
            // The first minibatch's samples take π_old from their own forward, before any
            // step; a sample no loss term reads is never run. The rest are scored now, with
            // one of the first minibatch's as a witness that the pass gives what the forward
            // does (`first_abs_log_ratio`).
            let first = chunk(&orders[0].0, args.num_minibatches, 0);
            let mut wanted: Vec<bool> = batch.policy.iter().map(|s| !self.inert(s)).collect();
            let witness = first.iter().copied().find(|&i| wanted[i]);
            for &i in first.iter().filter(|&&i| Some(i) != witness) {
                wanted[i] = false;
            }
            stats.tokens += self.score(batch, &mut heads, true, &wanted)?;
        }
        stats.score_secs = t.elapsed().as_secs_f64();
        if args.advantage == Advantage::ValueHead {
            let v: Vec<f32> = batch.policy.iter().map(|s| s.value).collect();
            let g: Vec<f32> = batch.policy.iter().map(|s| s.ret).collect();
            stats.explained_variance = explained_variance(&v, &g);
        }
        // 3. Epochs of minibatch steps.
        let mut gap = (0.0f32, 0usize);
        for (epoch, (p_order, j_order)) in orders.iter().enumerate() {
            let mut epoch_kl = (0.0f32, 0.0f32);
            for mb in 0..args.num_minibatches {
                let p_mb = chunk(p_order, args.num_minibatches, mb);
                let j_mb = chunk(j_order, args.num_minibatches, mb);
                if p_mb.is_empty() && j_mb.is_empty() {
                    continue;
                }
                // Before the first step the policy is π_old: its forward gives the old values.
                let before_any_step = epoch == 0 && mb == 0;
                let out = self.minibatch(batch, &p_mb, &j_mb, before_any_step, &mut heads)?;
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
                    // Over the samples the scoring pass gave π_old, where there are any.
                    stats.first_abs_log_ratio = Some(match out.scored_tokens > 0.0 {
                        true => out.scored_abs_log_ratio_sum / out.scored_tokens,
                        false => out.abs_log_ratio_sum / tokens,
                    });
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
        // Only the update reads the Wᵀ copies: the rollouts until the next need not hold them.
        if self.brain.config().free_transposed {
            self.brain.forget_transposed();
        }
        release_free_memory();
        stats.secs = start.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// The scoring pass: log π_old (when `set_old`), V and log π_ref of the policy samples
    /// `wanted`, no gradients kept. Returns the tokens it ran.
    fn score(&mut self, batch: &mut Batch, heads: &mut Heads, set_old: bool, wanted: &[bool]) -> Result<usize, TrainError> {
        let mut tokens = 0;
        for role in [Role::Actor, Role::Editor] {
            let idx: Vec<usize> = (0..batch.policy.len())
                .filter(|&i| batch.policy[i].role == role && wanted[i])
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
        before_any_step: bool,
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
            let idx: Vec<usize> = idx
                .into_iter()
                .filter(|&i| !self.inert(&batch.policy[i]))
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
                    let scored = chunk.iter().all(|&i| batch.policy[i].old_logp.is_some());
                    if before_any_step && !scored {
                        // The policy has not moved since the rollout: these are the old values.
                        let old = rows(&lp.logprobs.detach(), lens.iter().copied())?;
                        for (k, &i) in chunk.iter().enumerate() {
                            batch.policy[i].old_logp.get_or_insert_with(|| old[k].clone());
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
                    if scored {
                        out.scored_abs_log_ratio_sum += st.abs_log_ratio_sum;
                        out.scored_tokens += st.tokens;
                    }
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
}

/// Where an update's old log-probabilities come from (see [`UpdateStats::old_logp_source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OldLogp {
    /// A pass over every sample before the first step (which values or KL need anyway).
    ScoringPass,
    /// One epoch of one minibatch: its forward, before its step.
    FirstForward,
    /// The first minibatch's samples from their forward, the others' from a scoring pass.
    FirstForwardThenScoringPass,
}

impl OldLogp {
    fn name(self) -> &'static str {
        match self {
            OldLogp::ScoringPass => "scoring-pass",
            OldLogp::FirstForward => "first-forward",
            OldLogp::FirstForwardThenScoringPass => "first-forward+scoring-pass",
        }
    }
}

impl Learner {
    /// Whether every loss term of `s` is zero (no advantage, and no value, entropy or KL
    /// term): it adds nothing to the gradient, and its forward and backward are skipped.
    /// With a group baseline that is every sample of a group whose returns all agree.
    fn inert(&self, s: &PolicySample) -> bool {
        s.advantage == 0.0 && !self.values.contains_key(&s.role) && self.args.ent_coef == 0.0 && self.args.kl_coef == 0.0
    }
}

#[derive(Default)]
struct MinibatchOut {
    /// Σ |log π − log π_old| over the policy tokens, before the step.
    abs_log_ratio_sum: f32,
    /// The same over the samples whose π_old the scoring pass gave, and their tokens.
    scored_abs_log_ratio_sum: f32,
    scored_tokens: f32,
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

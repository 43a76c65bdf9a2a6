//! The learner: the trainable parameters (through the [`Brain`]), the value heads, the
//! optimizer, and one PPO update of a batch, [`Learner::update`]. Its algorithm reads top to
//! bottom in `ppo_update`, as CleanRL's `ppo.py` does; the loss terms are [`crate::ppo`]'s.
//! Below it sit the forward passes it calls: the policy's log-probabilities of recorded
//! samples after their prompt heads, the Judge's logits or states, the grammar's masks
//! replayed. The model's memory around an update ([`memory`]), the figures it reports
//! ([`stats`]) and the prompt heads it reads ([`update_heads`]) live in their own modules.

mod memory;
mod stats;
mod update_heads;

pub use stats::UpdateStats;

use std::collections::HashMap;
use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use onebrain_model::{BatchLogprobs, Brain, Role, TokenSet};
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};

use crate::adamw::{clip_grad_norm, AdamW, AdamWParams};
use crate::batch::{Batch, PolicySample};
use crate::config::Ablation;
use crate::error::TrainError;
use crate::ppo::{
    clipped_surrogate_sum, entropy_sum, judge_loss_sum, kl_k3_sum, policy_loss, value_loss_sum,
    Advantage, PolicyTerms, PpoArgs,
};
use memory::UpdateMemory;
use stats::{MinibatchOut, UpdateStatsAccumulator};
use update_heads::{by_prompt, UpdateHeads};

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
        // With `free-transposed` the Wᵀ copies wait for the first update (the rollouts before
        // it need none of them).
        if !brain.config().free_transposed {
            brain.prepare_training()?;
        }
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
        // The constrained samples' masks, replayed once for the whole update.
        self.masks = replay_masks(&self.brain, batch)?;
        // The head-only Judge's states h, on the sampler's kernels (as it scored them).
        self.judge_states.clear();
        let mut judge_states_secs = 0.0;
        if self.args.judge_head_only && self.ablation.trains(Role::Judge) && !batch.judge.is_empty() {
            let t = Instant::now();
            self.judge_states = self.judge_states_of(batch)?;
            judge_states_secs = t.elapsed().as_secs_f64();
        }
        self.brain.enter_update()?;
        let mut stats = self.ppo_update(batch)?;
        self.updates += 1;
        self.masks.clear();
        self.brain.leave_update();
        stats.judge_states_secs = judge_states_secs;
        stats.secs = start.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// ALGO LOGIC: one PPO update, top to bottom as CleanRL's `ppo.py`: π_old, the
    /// advantages, then epochs × minibatches, each the clipped surrogate of the Actor's and
    /// the Editor's tokens (with the value, entropy and KL terms) and the Judge's loss, joined
    /// into L = L_A + λ_E·L_E + λ_J·L_J, and one gradient-clipped AdamW step; the epochs stop
    /// early past `target-kl`.
    fn ppo_update(&mut self, batch: &mut Batch) -> Result<UpdateStats, TrainError> {
        let args = self.args.clone();
        let orders = self.epoch_orders(batch);
        let source = OldLogp::of(&args);
        let mut stats = UpdateStatsAccumulator::new(&args, source.name());
        let mut heads = UpdateHeads::default();

        // 1. The old policy's log-probabilities, on the learner's own numerics. The sampler's
        //    (recorded at rollout, at the same temperature, on the same quantized weights) are
        //    about 4e-2 per token away from them on SmolLM2 (`tests/ratio.rs`): the learner splits
        //    the arithmetic differently (whole sequences, not token by token), and each layer's
        //    8-bit activation quantization turns last-bit differences into whole steps. Taken as
        //    π_old they would make the ratio noise rather than 1, so they are kept as a measure
        //    (`sampler_gap`), and the update recomputes π_old, as TRL and verl do.
        let scoring = Instant::now();
        let mut scored_tokens = 0;
        for s in batch.policy.iter_mut() {
            s.old_logp = None;
        }
        if source == OldLogp::ScoringPass {
            scored_tokens += self.score(batch, &mut heads, &vec![true; batch.policy.len()])?;
        }
        // 2. Advantages and returns (a value head's from the values just scored).
        batch.assign_advantages(&args);
        if source == OldLogp::FirstForwardThenScoringPass {
            let first = chunk(&orders[0].0, args.num_minibatches, 0);
            let wanted = self.scoring_pass_samples(batch, &first);
            scored_tokens += self.score(batch, &mut heads, &wanted)?;
        }
        stats.add_scoring_pass(scored_tokens, scoring.elapsed().as_secs_f64(), batch);

        // 3. Epochs of minibatch steps.
        for (epoch, (b_policy, b_judge)) in orders.iter().enumerate() {
            for mb in 0..args.num_minibatches {
                let mb_policy = chunk(b_policy, args.num_minibatches, mb);
                let mb_judge = chunk(b_judge, args.num_minibatches, mb);
                if mb_policy.is_empty() && mb_judge.is_empty() {
                    continue;
                }
                // Before the first step the policy is π_old: its forward gives the old values.
                let before_any_step = epoch == 0 && mb == 0;
                let mut grads: Vec<Option<Tensor>> = vec![None; self.opt.vars().len()];
                let mut out = MinibatchOut::default();

                // The Actor's and the Editor's PPO terms, each a mean over its tokens.
                for role in [Role::Actor, Role::Editor] {
                    let Some(part) = self.role_part(role, &mb_policy, batch) else { continue };
                    let value_head = self.values.contains_key(&role);
                    out.start_role(role, part.tokens, part.seqs, part.skipped, value_head);
                    for micro in part.samples.chunks(args.micro_batch) {
                        for (rows_idx, lp, tokens) in self.policy_forward(role, micro, batch, &mut heads)? {
                            let scored = rows_idx.iter().all(|&i| batch.policy[i].old_logp.is_some());
                            if before_any_step && !scored {
                                keep_as_old(&mut batch.policy, &rows_idx, &lp.logprobs)?;
                            }
                            out.add_forward(tokens, rows_idx.iter().map(|&i| &batch.policy[i]));
                            let mask = &lp.mask;
                            let old = padded(rows_idx.iter().map(|&i| old_logp(&batch.policy[i])), mask)?;
                            let adv = per_sample(&batch.policy, &rows_idx, |s| s.advantage, mask)?;
                            // ratio = e^{log π − log π_old}, its surrogate clipped at 1 ± ε
                            let (pg_sum, pg) =
                                clipped_surrogate_sum(&lp.logprobs, &old, &adv, mask, args.clip_coef)?;
                            let ent_sum = entropy_sum(&lp.entropy, mask)?;
                            let v_sum = match self.values.get(&role) {
                                Some(head) => Some(value_loss_sum(
                                    &head.forward(&prompt_end(&lp.hidden)?)?,
                                    &per_sample(&batch.policy, &rows_idx, |s| s.ret, mask)?,
                                )?),
                                None => None,
                            };
                            let kl_sum = match args.kl_coef > 0.0 {
                                true => {
                                    let r = padded(rows_idx.iter().map(|&i| ref_logp(&batch.policy[i])), mask)?;
                                    Some(kl_k3_sum(&lp.logprobs, &r, mask)?)
                                }
                                false => None,
                            };
                            let terms = PolicyTerms {
                                surrogate: &pg_sum,
                                entropy: &ent_sum,
                                value: v_sum.as_ref(),
                                kl: kl_sum.as_ref(),
                            };
                            let loss = policy_loss(&terms, part.tokens, part.seqs, part.weight, &args)?;
                            self.accumulate(&loss, &mut grads)?;
                            out.add_policy(&pg, scored, &ent_sum, v_sum.as_ref(), kl_sum.as_ref())?;
                        }
                    }
                }

                // The Judge's term, BCE + λ_band·ℓ_band, a mean over its examples.
                out.start_judge(mb_judge.len());
                let n_judge = mb_judge.len() as f64;
                for micro in by_prompt(&mb_judge, |i| &batch.judge[i].prompt).chunks(args.micro_batch) {
                    for (rows_idx, logits, tokens) in self.judge_forward(micro, batch, &mut heads)? {
                        let labels: Vec<f32> =
                            rows_idx.iter().map(|&i| f32::from(u8::from(batch.judge[i].label))).collect();
                        let labels = Tensor::new(labels.as_slice(), logits.device())?;
                        let j_sum = judge_loss_sum(&logits, &labels, args.lambda_band, args.judge_threshold)?;
                        let loss = (&j_sum * (f64::from(args.lambda_judge) / n_judge))?;
                        self.accumulate(&loss, &mut grads)?;
                        out.add_judge(tokens, &j_sum)?;
                    }
                }

                let grad_norm = clip_grad_norm(&mut grads, args.max_grad_norm)?;
                // A NaN or infinite gradient would poison every parameter and every later
                // checkpoint: that step is dropped (and counted) instead.
                if grad_norm.is_finite() {
                    self.opt.step(&grads)?;
                }
                // The heads were computed with the parameters this step just changed.
                heads.clear();
                stats.add_minibatch(epoch, grad_norm, &out);
            }
            let approx_kl = stats.finish_epoch(epoch);
            if args.target_kl.is_some_and(|t| approx_kl > t) {
                break;
            }
        }
        Ok(stats.finish(heads.kept_and_computed()))
    }

    // ------------------------------------------------------------------------ plumbing

    /// Every epoch's order of policy samples and Judge examples, drawn up front from the
    /// update's seed: the scoring pass skips the first minibatch's samples.
    fn epoch_orders(&self, batch: &Batch) -> Vec<(Vec<usize>, Vec<usize>)> {
        let mut rng =
            StdRng::seed_from_u64(self.seed ^ self.updates.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (0..self.args.update_epochs)
            .map(|_| {
                let mut p_order: Vec<usize> = (0..batch.policy.len()).collect();
                let mut j_order: Vec<usize> = (0..batch.judge.len()).collect();
                p_order.shuffle(&mut rng);
                j_order.shuffle(&mut rng);
                (p_order, j_order)
            })
            .collect()
    }

    /// The samples the scoring pass gives π_old when the first minibatch `first` takes its
    /// own from its forward, before any step: every sample a loss term reads, outside `first`
    /// but for one of `first` as a witness that the pass gives what the forward does
    /// (`first_abs_log_ratio`).
    fn scoring_pass_samples(&self, batch: &Batch, first: &[usize]) -> Vec<bool> {
        let mut wanted: Vec<bool> = batch.policy.iter().map(|s| !self.inert(s)).collect();
        let witness = first.iter().copied().find(|&i| wanted[i]);
        for &i in first.iter().filter(|&&i| Some(i) != witness) {
            wanted[i] = false;
        }
        wanted
    }

    /// The scoring pass: log π_old, V and log π_ref of the policy samples `wanted`, no
    /// gradients kept. Returns the tokens it ran.
    fn score(
        &mut self,
        batch: &mut Batch,
        heads: &mut UpdateHeads,
        wanted: &[bool],
    ) -> Result<usize, TrainError> {
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
                        Some(head) => head.forward(&prompt_end(&lp.hidden)?)?.to_vec1::<f32>()?,
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
                        s.old_logp = Some(old[k].clone());
                        s.value = values[k];
                        s.ref_logp = refs.as_ref().map(|r| r[k].clone());
                    }
                }
            }
        }
        Ok(tokens)
    }

    /// The samples of `role` in the minibatch `mb` that a loss term reads, in prompt order,
    /// and the counts the role's means divide by; `None` when `mb` holds none of the role.
    fn role_part(&self, role: Role, mb: &[usize], batch: &Batch) -> Option<RolePart> {
        let idx: Vec<usize> = mb.iter().copied().filter(|&i| batch.policy[i].role == role).collect();
        if idx.is_empty() {
            return None;
        }
        let tokens = idx.iter().map(|&i| batch.policy[i].output.len()).sum();
        let seqs = idx.len();
        let live: Vec<usize> = idx.into_iter().filter(|&i| !self.inert(&batch.policy[i])).collect();
        let samples = by_prompt(&live, |i| &batch.policy[i].prompt);
        let weight = if role == Role::Actor { 1.0 } else { self.args.lambda_editor };
        Some(RolePart { skipped: seqs - samples.len(), samples, tokens, seqs, weight })
    }

    /// Whether every loss term of `s` is zero (no advantage, and no value, entropy or KL
    /// term): it adds nothing to the gradient, and its forward and backward are skipped.
    /// With a group baseline that is every sample of a group whose returns all agree.
    fn inert(&self, s: &PolicySample) -> bool {
        s.advantage == 0.0 && !self.values.contains_key(&s.role) && self.args.ent_coef == 0.0 && self.args.kl_coef == 0.0
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
        heads: &mut UpdateHeads,
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
        heads: &mut UpdateHeads,
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
    /// The source `args` call for: values and reference log-probabilities need a pass over
    /// every sample before the first step; π_old alone only over the samples a minibatch
    /// meets after one.
    fn of(args: &PpoArgs) -> OldLogp {
        let needs_values = args.advantage == Advantage::ValueHead || args.kl_coef > 0.0;
        match (args.needs_scoring_pass(), needs_values) {
            (false, _) => OldLogp::FirstForward,
            (true, true) => OldLogp::ScoringPass,
            (true, false) => OldLogp::FirstForwardThenScoringPass,
        }
    }

    fn name(self) -> &'static str {
        match self {
            OldLogp::ScoringPass => "scoring-pass",
            OldLogp::FirstForward => "first-forward",
            OldLogp::FirstForwardThenScoringPass => "first-forward+scoring-pass",
        }
    }
}

/// The samples of one policy role in a minibatch that a loss term reads, and the counts the
/// role's means divide by.
struct RolePart {
    /// The samples run, in prompt order.
    samples: Vec<usize>,
    /// Output tokens and samples of the role in the minibatch, inert ones included.
    tokens: usize,
    seqs: usize,
    /// Inert samples, not run.
    skipped: usize,
    /// The role's weight in the joint loss: 1 for the Actor, λ_E for the Editor.
    weight: f32,
}

/// The masks of `batch`'s constrained samples, by index: the grammar replayed over each
/// output, on every core (one sample after another it was 12 s of an update of 16 episodes
/// on 2 cores).
fn replay_masks(brain: &Brain, batch: &Batch) -> Result<HashMap<usize, Vec<TokenSet>>, TrainError> {
    let todo: Vec<usize> = (0..batch.policy.len()).filter(|&i| batch.policy[i].constraint.is_some()).collect();
    let slots: Vec<std::sync::Mutex<Option<onebrain_model::Result<Vec<TokenSet>>>>> =
        todo.iter().map(|_| std::sync::Mutex::new(None)).collect();
    // The compute pool, as the sampler's own per-row work.
    onebrain_kernels::pool::execute_chunked(todo.len(), |range| {
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

/// Sets the π_old of samples `idx` that have none to their rows of `logprobs`, detached:
/// before any step the policy has not moved since the rollout.
fn keep_as_old(policy: &mut [PolicySample], idx: &[usize], logprobs: &Tensor) -> candle_core::Result<()> {
    let old = rows(&logprobs.detach(), idx.iter().map(|&i| policy[i].output.len()))?;
    for (k, &i) in idx.iter().enumerate() {
        policy[i].old_logp.get_or_insert_with(|| old[k].clone());
    }
    Ok(())
}

fn old_logp(s: &PolicySample) -> &[f32] {
    s.old_logp.as_deref().expect("scored")
}

fn ref_logp(s: &PolicySample) -> &[f32] {
    s.ref_logp.as_deref().expect("scored")
}

/// A `(b,)` tensor of one number of each sample `idx`, on `like`'s device.
fn per_sample(
    policy: &[PolicySample],
    idx: &[usize],
    f: impl Fn(&PolicySample) -> f32,
    like: &Tensor,
) -> candle_core::Result<Tensor> {
    let v: Vec<f32> = idx.iter().map(|&i| f(&policy[i])).collect();
    Tensor::new(v.as_slice(), like.device())
}

/// The hidden state at each row's first position of `hidden` `(b, t, h)`, the prompt's end,
/// which the value head reads.
fn prompt_end(hidden: &Tensor) -> candle_core::Result<Tensor> {
    hidden.narrow(1, 0, 1)?.squeeze(1)
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

//! The learner: the trainable parameters (through the [`Brain`]), the value heads, the
//! optimizer, and the forward passes an update needs: the policy's log-probabilities of
//! recorded samples after their prompt heads, the Judge's logits or states, the grammar's
//! masks replayed. The update itself, read top to bottom, is [`update`].

mod update;

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use onebrain_model::{BatchLogprobs, Brain, PromptHead, Role, TokenSet};

use crate::adamw::{AdamW, AdamWParams};
use crate::batch::{Batch, PolicySample};
use crate::config::Ablation;
use crate::error::TrainError;
use crate::ppo::{Advantage, PpoArgs};

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
    /// before its step, over its samples whose π_old the scoring pass gave (all of them,
    /// or the one witness the pass scores beside the later minibatches' samples; where
    /// none, its every sample): 0 up to rounding, since π_old is the learner's own forward.
    pub first_abs_log_ratio: Option<f32>,
    /// Where the old log-probabilities came from: `scoring-pass` (the learner's own pass
    /// over every sample before the first step, as values or KL need), `first-forward` (one
    /// minibatch's forward, detached) or `first-forward+scoring-pass` (the first
    /// minibatch's forward for its samples, the pass for the others).
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

//! What an update measured: [`UpdateStats`] (the metrics' `losses/` keys), gathered by
//! [`UpdateStatsAccumulator`] from each minibatch's [`MinibatchOut`]. The figures of the last
//! minibatch run are the ones reported, as CleanRL logs its last.

use onebrain_model::Role;

use crate::batch::{Batch, PolicySample};
use crate::ppo::{explained_variance, joint_loss, Advantage, PolicyStats, PpoArgs};

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

/// What one minibatch measured, filled in as its terms are computed.
#[derive(Default)]
pub(crate) struct MinibatchOut {
    /// Per policy role the minibatch holds, in order, its sums.
    roles: Vec<RoleSums>,
    /// Σ |log π − log π_old| over the policy tokens, before the step.
    abs_log_ratio_sum: f32,
    /// The same over the samples whose π_old the scoring pass gave, and their tokens.
    scored_abs_log_ratio_sum: f32,
    scored_tokens: f32,
    /// Σ |log π_old − log π_sampler| over the tokens of samples that recorded it, and their count.
    gap_sum: f32,
    gap_tokens: usize,
    /// Σ of the Judge's loss, and its examples.
    judge_sum: f32,
    judge_examples: usize,
    clipped: f32,
    approx_kl_sum: f32,
    policy_tokens: f32,
    tokens: usize,
    skipped: usize,
}

/// One policy role's sums in a minibatch: each is added to its own total, in role order.
struct RoleSums {
    role: Role,
    /// Output tokens and samples of the role in the minibatch (inert ones included).
    tokens: usize,
    seqs: usize,
    /// Whether the role has a value head.
    value_head: bool,
    surrogate: f32,
    value: f32,
    entropy: f32,
    kl: f32,
}

impl MinibatchOut {
    /// Starts a policy role's terms: `tokens` output tokens in `seqs` samples, `skipped` of
    /// them inert; `value_head` when the role has one.
    pub(crate) fn start_role(
        &mut self,
        role: Role,
        tokens: usize,
        seqs: usize,
        skipped: usize,
        value_head: bool,
    ) {
        self.skipped += skipped;
        let sums = RoleSums { role, tokens, seqs, value_head, surrogate: 0.0, value: 0.0, entropy: 0.0, kl: 0.0 };
        self.roles.push(sums);
    }

    /// One forward's `tokens` and its policy `samples`, whose π_old is set: how far π_old is
    /// from the log-probabilities the sampler recorded. Each sample is in one minibatch of an
    /// epoch, so the first epoch counts it once.
    pub(crate) fn add_forward<'a>(&mut self, tokens: usize, samples: impl Iterator<Item = &'a PolicySample>) {
        self.tokens += tokens;
        for s in samples {
            if let (Some(o), false) = (&s.old_logp, s.rollout_logp.is_empty()) {
                self.gap_sum += o.iter().zip(&s.rollout_logp).map(|(a, b)| (a - b).abs()).sum::<f32>();
                self.gap_tokens += o.len();
            }
        }
    }

    /// One forward's policy terms, of the role started last: the surrogate's statistics
    /// (`scored` when the scoring pass gave its π_old), and the entropy, value and KL sums.
    pub(crate) fn add_policy(
        &mut self,
        surrogate: &PolicyStats,
        scored: bool,
        entropy: &candle_core::Tensor,
        value: Option<&candle_core::Tensor>,
        kl: Option<&candle_core::Tensor>,
    ) -> candle_core::Result<()> {
        let role = self.roles.last_mut().expect("a role was started");
        if let Some(v) = value {
            role.value += v.to_scalar::<f32>()?;
        }
        if let Some(k3) = kl {
            role.kl += k3.to_scalar::<f32>()?;
        }
        role.surrogate += surrogate.loss_sum;
        role.entropy += entropy.to_scalar::<f32>()?;
        self.clipped += surrogate.clipped;
        self.approx_kl_sum += surrogate.approx_kl_sum;
        self.abs_log_ratio_sum += surrogate.abs_log_ratio_sum;
        self.policy_tokens += surrogate.tokens;
        if scored {
            self.scored_abs_log_ratio_sum += surrogate.abs_log_ratio_sum;
            self.scored_tokens += surrogate.tokens;
        }
        Ok(())
    }

    /// Starts the Judge's term over `examples` examples.
    pub(crate) fn start_judge(&mut self, examples: usize) {
        self.judge_examples = examples;
    }

    /// One forward's `tokens` and the sum of its Judge loss.
    pub(crate) fn add_judge(
        &mut self,
        tokens: usize,
        loss_sum: &candle_core::Tensor,
    ) -> candle_core::Result<()> {
        self.tokens += tokens;
        self.judge_sum += loss_sum.to_scalar::<f32>()?;
        Ok(())
    }

    /// The mean clipped surrogate per token of `role`, if the minibatch holds it.
    fn surrogate_mean(&self, role: Role) -> Option<f32> {
        self.roles.iter().find(|r| r.role == role).map(|r| r.surrogate / r.tokens.max(1) as f32)
    }
}

/// Gathers an update's [`UpdateStats`], minibatch by minibatch.
pub(crate) struct UpdateStatsAccumulator {
    stats: UpdateStats,
    args: PpoArgs,
    /// Σ approximate KL and policy tokens of the epoch in progress.
    epoch_kl: (f32, f32),
    /// Σ |log π_old − log π_sampler| and its tokens, over the first epoch.
    gap: (f32, usize),
}

impl UpdateStatsAccumulator {
    /// An update under `args`, whose old log-probabilities come from `old_logp_source`.
    pub(crate) fn new(args: &PpoArgs, old_logp_source: &'static str) -> Self {
        UpdateStatsAccumulator {
            stats: UpdateStats { old_logp_source, ..UpdateStats::default() },
            args: args.clone(),
            epoch_kl: (0.0, 0.0),
            gap: (0.0, 0),
        }
    }

    /// The scoring pass ran `tokens` in `secs`; `batch` holds its values and returns.
    pub(crate) fn add_scoring_pass(&mut self, tokens: usize, secs: f64, batch: &Batch) {
        self.stats.tokens += tokens;
        self.stats.score_secs = secs;
        if self.args.advantage == Advantage::ValueHead {
            let v: Vec<f32> = batch.policy.iter().map(|s| s.value).collect();
            let g: Vec<f32> = batch.policy.iter().map(|s| s.ret).collect();
            self.stats.explained_variance = explained_variance(&v, &g);
        }
    }

    /// A minibatch of epoch `epoch` that ended in a gradient of norm `grad_norm` (a step
    /// was taken if it is finite).
    pub(crate) fn add_minibatch(&mut self, epoch: usize, grad_norm: f32, out: &MinibatchOut) {
        let stats = &mut self.stats;
        stats.tokens += out.tokens;
        stats.skipped = out.skipped;
        self.epoch_kl.0 += out.approx_kl_sum;
        self.epoch_kl.1 += out.policy_tokens;
        stats.grad_norm = grad_norm;
        if grad_norm.is_finite() {
            stats.steps += 1;
        } else {
            stats.dropped_steps += 1;
        }
        let (mut value_sum, mut value_seqs, mut entropy_sum, mut kl_sum) = (0.0f32, 0usize, 0.0f32, 0.0f32);
        for r in &out.roles {
            entropy_sum += r.entropy;
            kl_sum += r.kl;
            if r.value_head {
                value_sum += r.value;
                value_seqs += r.seqs;
            }
        }
        let tokens = out.policy_tokens.max(1.0);
        let seqs = value_seqs.max(1) as f32;
        stats.policy_actor = out.surrogate_mean(Role::Actor);
        stats.policy_editor = out.surrogate_mean(Role::Editor);
        stats.value = (value_seqs > 0).then(|| value_sum / seqs);
        stats.judge = (out.judge_examples > 0).then(|| out.judge_sum / out.judge_examples as f32);
        stats.entropy = (out.policy_tokens > 0.0).then(|| entropy_sum / tokens);
        stats.kl_ref = (self.args.kl_coef > 0.0).then(|| kl_sum / tokens);
        stats.clipfrac = out.clipped / tokens;
        if epoch == 0 && stats.first_abs_log_ratio.is_none() && out.policy_tokens > 0.0 {
            // Over the samples the scoring pass gave π_old, where there are any.
            stats.first_abs_log_ratio = Some(match out.scored_tokens > 0.0 {
                true => out.scored_abs_log_ratio_sum / out.scored_tokens,
                false => out.abs_log_ratio_sum / tokens,
            });
        }
        if epoch == 0 {
            self.gap.0 += out.gap_sum;
            self.gap.1 += out.gap_tokens;
        }
        let total = joint_loss(
            stats.policy_actor.unwrap_or(0.0),
            stats.policy_editor.unwrap_or(0.0),
            stats.judge.unwrap_or(0.0),
            &self.args,
        );
        stats.total_first.get_or_insert(total);
        stats.total = total;
    }

    /// Ends epoch `epoch` and returns its approximate KL per token.
    pub(crate) fn finish_epoch(&mut self, epoch: usize) -> f32 {
        self.stats.epochs = epoch + 1;
        self.stats.approx_kl = self.epoch_kl.0 / self.epoch_kl.1.max(1.0);
        self.epoch_kl = (0.0, 0.0);
        self.stats.approx_kl
    }

    /// The update's figures, with the prompt heads it `kept` from the sampler and `computed`.
    pub(crate) fn finish(mut self, (kept, computed): (usize, usize)) -> UpdateStats {
        self.stats.sampler_gap = (self.gap.1 > 0).then(|| self.gap.0 / self.gap.1 as f32);
        (self.stats.prompt_heads_kept, self.stats.prompt_heads_computed) = (kept, computed);
        self.stats
    }
}

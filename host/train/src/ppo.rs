//! PPO for the Actor and the Editor, and the Judge's loss: the whole objective, in one place.
//!
//! Read it top to bottom like CleanRL's `ppo.py`: the hyperparameters ([`PpoArgs`], every
//! default the paper's), then the returns and advantages, then the losses (the clipped
//! surrogate, the value, entropy and k3 KL terms, the Judge's BCE + band), then the lines
//! that join them. Everything here is pure math on numbers or candle tensors; the update that
//! applies it, epochs × minibatches, is `ppo_update` in `learner.rs`, and the rollouts are
//! `trainer.rs`'s.
//!
//! One generation (a whole PDDL answer) is one action. An episode is the trajectory
//! Actor (step 0) → Editor repairs (steps 1..T); the Actor's return is R_A, and the Editor's
//! terminal reward R_E is discounted back over the repairs with γ. Every token of a
//! generation shares its step's advantage.

use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// How advantages are estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Advantage {
    /// A learned value head per PPO role reads the prompt's last hidden state; advantages
    /// by GAE over the episode's steps. Needs a scoring pass before the update.
    #[default]
    ValueHead,
    /// Group-relative: several samples per task (`group-size`), each return compared with
    /// the mean of its task's group at the same step (no critic).
    Group,
}

/// The hyperparameters, as CleanRL's `Args`. Defaults are the paper's table where it gives
/// a value; the others are CleanRL's and are marked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct PpoArgs {
    /// AdamW learning rate (paper: 3e-5).
    pub learning_rate: f64,
    /// AdamW weight decay (candle's and PyTorch's default 0.01).
    pub weight_decay: f64,
    /// Episodes per update (paper: 32).
    pub batch_size: usize,
    /// Optimizer steps per epoch: the batch is split into this many minibatches.
    pub num_minibatches: usize,
    /// Passes over each batch (CleanRL: 4; more epochs cost a forward+backward each).
    pub update_epochs: usize,
    /// Sequences per forward/backward; gradients are summed up to the minibatch.
    pub micro_batch: usize,
    /// Truncated backpropagation through the prompt: its keys and values are computed once
    /// per distinct prompt without a graph, and gradients flow only through the generated
    /// tokens (and the Judge's last tokens). Several times cheaper in time and memory on
    /// long prompts. The role tokens, which open the prompt, keep a gradient: their few keys
    /// and values are recomputed in the graph. Off: the exact gradient.
    pub detach_prompt: bool,
    /// With `detach-prompt`, the Judge prompt's last tokens that keep their gradient: the
    /// candidate (at most the episode's `max-tokens`) and the closing question. The Judge's
    /// share of an update's time grows with it. Unused with `judge-head-only`.
    pub judge_tail: usize,
    /// The Judge learns its head w·h + b alone: h, the final hidden state of its prompt, comes
    /// from the Judge's role at its initial parameters on the sampler's kernels, without a
    /// graph, so no Judge token runs through the update's forward and backward (about half
    /// of them otherwise). The role's soft tokens and adapters stay as initialised, so h is
    /// the one the sampler computed when it scored the candidate. Off: the Judge's last
    /// `judge-tail` tokens (or whole prompt) train its role parameters too.
    pub judge_head_only: bool,
    /// With `detach-prompt`, the update takes each Actor and Editor prompt head as the
    /// rollouts' sampler computed it (kept in f16 during the rollouts) instead of
    /// prefilling the prompt again. Off: the update computes every head itself, as the four
    /// committed arms did (`configs/train-arms-as-run.toml`, the benchmark's baseline).
    pub keep_sampler_heads: bool,
    /// PPO clip ε (paper: 0.2).
    pub clip_coef: f32,
    /// γ across an episode's steps (paper: 0.9).
    pub gamma: f32,
    /// GAE λ (CleanRL: 0.95).
    pub gae_lambda: f32,
    /// Where advantages come from.
    pub advantage: Advantage,
    /// Samples of each task per batch (the group of `advantage = "group"`).
    pub group_size: usize,
    /// Normalise advantages over the minibatch (CleanRL: true).
    pub norm_adv: bool,
    /// Weight of the value loss (CleanRL: 0.5).
    pub vf_coef: f32,
    /// Weight of the entropy bonus (CleanRL: 0.01; 0 here: the answers are long and the
    /// temperature already explores).
    pub ent_coef: f32,
    /// Weight of a KL penalty to the initial policy (0 = off; >0 loads a frozen copy).
    pub kl_coef: f32,
    /// Global gradient-norm clip (CleanRL: 0.5; 1.0 is the usual choice for LMs).
    pub max_grad_norm: f32,
    /// Stop an update's later epochs once the approximate KL exceeds this.
    pub target_kl: Option<f32>,
    /// λ_E: the Editor's weight in the joint loss (paper: 0.5).
    pub lambda_editor: f32,
    /// λ_J: the Judge's weight in the joint loss (paper: 0.3).
    pub lambda_judge: f32,
    /// λ_band: the banded penalty's weight in the Judge loss (the paper gives none; 1).
    pub lambda_band: f32,
    /// τ: the Judge's threshold (paper: 0.5).
    pub judge_threshold: f32,
}

impl Default for PpoArgs {
    fn default() -> Self {
        PpoArgs {
            learning_rate: 3e-5,
            weight_decay: 0.01,
            batch_size: 32,
            num_minibatches: 1,
            update_epochs: 2,
            micro_batch: 1,
            detach_prompt: false,
            judge_tail: 384,
            judge_head_only: false,
            keep_sampler_heads: true,
            clip_coef: 0.2,
            gamma: 0.9,
            gae_lambda: 0.95,
            advantage: Advantage::ValueHead,
            group_size: 4,
            norm_adv: true,
            vf_coef: 0.5,
            ent_coef: 0.0,
            kl_coef: 0.0,
            max_grad_norm: 1.0,
            target_kl: None,
            lambda_editor: 0.5,
            lambda_judge: 0.3,
            lambda_band: 1.0,
            judge_threshold: 0.5,
        }
    }
}

impl PpoArgs {
    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |m: String| Err(TrainError::Config(m));
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return bad(format!(
                "learning-rate must be > 0, got {}",
                self.learning_rate
            ));
        }
        if self.batch_size == 0 || self.num_minibatches == 0 || self.update_epochs == 0 {
            return bad("batch-size, num-minibatches and update-epochs must be at least 1".into());
        }
        if self.micro_batch == 0 || self.group_size == 0 || self.judge_tail == 0 {
            return bad("micro-batch, group-size and judge-tail must be at least 1".into());
        }
        if self.batch_size % self.group_size != 0 {
            return bad(format!(
                "batch-size ({}) must be a multiple of group-size ({})",
                self.batch_size, self.group_size
            ));
        }
        if self.advantage == Advantage::Group && self.group_size < 2 {
            return bad("advantage = \"group\" needs group-size of at least 2".into());
        }
        if !(0.0..1.0).contains(&self.clip_coef) || self.clip_coef == 0.0 {
            return bad(format!(
                "clip-coef must be in (0, 1), got {}",
                self.clip_coef
            ));
        }
        if !(0.0..=1.0).contains(&self.gamma) || !(0.0..=1.0).contains(&self.gae_lambda) {
            return bad("gamma and gae-lambda must be in [0, 1]".into());
        }
        if !(0.0..=1.0).contains(&self.judge_threshold) {
            return bad("judge-threshold must be in [0, 1]".into());
        }
        Ok(())
    }

    /// Episodes per minibatch (derived once, as CleanRL does after parsing).
    pub fn minibatch_size(&self) -> usize {
        self.batch_size.div_ceil(self.num_minibatches)
    }

    /// True when the update needs log-probabilities and values before its first gradient:
    /// with one epoch of one minibatch the policy has not moved when each sample is seen,
    /// so the first forward's detached values *are* the old ones and no extra pass is paid.
    pub fn needs_scoring_pass(&self) -> bool {
        self.update_epochs > 1
            || self.num_minibatches > 1
            || self.advantage == Advantage::ValueHead
            || self.kl_coef > 0.0
    }
}

// ------------------------------------------------------------------ ALGO LOGIC: returns

/// Discounted returns G_t = Σ_k γ^k r_{t+k} of one trajectory that ends after its last step.
pub fn discounted_returns(rewards: &[f32], gamma: f32) -> Vec<f32> {
    let mut out = vec![0.0; rewards.len()];
    let mut g = 0.0;
    for t in (0..rewards.len()).rev() {
        g = rewards[t] + gamma * g;
        out[t] = g;
    }
    out
}

/// GAE over one trajectory that ends after its last step (the value after it is 0):
/// δ_t = r_t + γ V_{t+1} − V_t, A_t = δ_t + γλ A_{t+1}. Returns (advantages, returns = A + V).
pub fn gae(rewards: &[f32], values: &[f32], gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(rewards.len(), values.len(), "one value per step");
    let n = rewards.len();
    let mut adv = vec![0.0; n];
    let mut last = 0.0;
    for t in (0..n).rev() {
        let next_value = if t + 1 < n { values[t + 1] } else { 0.0 };
        let delta = rewards[t] + gamma * next_value - values[t];
        last = delta + gamma * lambda * last;
        adv[t] = last;
    }
    let returns = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    (adv, returns)
}

/// Group-relative advantages: each return minus the mean of its group (samples of one task
/// at the same step). Not divided by the group's spread: with few samples a tiny spread
/// turns noise into ±1 (the bias "Dr. GRPO" removes). A group whose returns all agree, or a
/// group of one, teaches nothing (zeros).
pub fn group_advantages<K: Ord + Clone>(returns: &[f32], groups: &[K]) -> Vec<f32> {
    assert_eq!(returns.len(), groups.len(), "one group id per return");
    let mut sums: std::collections::BTreeMap<K, (f32, usize)> = std::collections::BTreeMap::new();
    for (r, g) in returns.iter().zip(groups) {
        let e = sums.entry(g.clone()).or_insert((0.0, 0));
        e.0 += r;
        e.1 += 1;
    }
    returns
        .iter()
        .zip(groups)
        .map(|(r, g)| {
            let (sum, n) = sums[g];
            r - sum / n as f32
        })
        .collect()
}

/// Normalises advantages to zero mean and unit spread (CleanRL's `norm_adv`); fewer than
/// two values are left alone.
pub fn normalize(adv: &mut [f32]) {
    if adv.len() < 2 {
        return;
    }
    let n = adv.len() as f32;
    let mean = adv.iter().sum::<f32>() / n;
    let std = (adv.iter().map(|a| (a - mean).powi(2)).sum::<f32>() / (n - 1.0)).sqrt();
    for a in adv.iter_mut() {
        *a = (*a - mean) / (std + 1e-8);
    }
}

// ------------------------------------------------------------------- ALGO LOGIC: losses

/// What the clipped surrogate measured, besides the loss.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PolicyStats {
    /// Σ over tokens of max(−A·r, −A·clip(r)): divide by the token count for the mean.
    pub loss_sum: f32,
    /// Tokens whose ratio left [1−ε, 1+ε].
    pub clipped: f32,
    /// Σ of (r − 1) − log r, CleanRL's unbiased estimate of KL(old ‖ new) per token.
    pub approx_kl_sum: f32,
    /// Real (unmasked) tokens.
    pub tokens: f32,
    /// Σ |log r| over the real tokens: how far the policy is from π_old.
    pub abs_log_ratio_sum: f32,
}

/// PPO's clipped surrogate, summed over the real tokens of a micro-batch:
/// Σ max(−A·r, −A·clip(r, 1−ε, 1+ε)), r = exp(log π − log π_old). `new_logp`, `old_logp`
/// and `mask` are `(b, t)`; `adv` is `(b,)`, one advantage per generation. Returns the
/// differentiable sum (to be scaled by the caller) and its statistics.
pub fn clipped_surrogate_sum(
    new_logp: &Tensor,
    old_logp: &Tensor,
    adv: &Tensor,
    mask: &Tensor,
    clip_coef: f32,
) -> candle_core::Result<(Tensor, PolicyStats)> {
    let logratio = (new_logp - old_logp)?.mul(mask)?;
    let ratio = logratio.exp()?;
    let adv = adv.unsqueeze(1)?.broadcast_as(ratio.shape())?;
    let lo = 1.0 - f64::from(clip_coef);
    let hi = 1.0 + f64::from(clip_coef);
    let pg1 = adv.neg()?.mul(&ratio)?;
    let pg2 = adv.neg()?.mul(&ratio.clamp(lo, hi)?)?;
    let loss_sum = pg1.maximum(&pg2)?.mul(mask)?.sum_all()?;

    let ratio_d = ratio.detach();
    let clipped = ratio_d
        .affine(1.0, -1.0)?
        .abs()?
        .gt(f64::from(clip_coef))?
        .to_dtype(candle_core::DType::F32)?
        .mul(mask)?
        .sum_all()?
        .to_scalar::<f32>()?;
    let approx_kl_sum = (ratio_d.affine(1.0, -1.0)? - logratio.detach())?
        .mul(mask)?
        .sum_all()?
        .to_scalar::<f32>()?;
    let abs_log_ratio_sum = logratio.detach().abs()?.sum_all()?.to_scalar::<f32>()?;
    let stats = PolicyStats {
        abs_log_ratio_sum,
        loss_sum: loss_sum.to_scalar::<f32>()?,
        clipped,
        approx_kl_sum,
        tokens: mask.sum_all()?.to_scalar::<f32>()?,
    };
    Ok((loss_sum, stats))
}

/// Σ over a micro-batch of ½(V − G)²: the value head's loss before averaging.
pub fn value_loss_sum(values: &Tensor, returns: &Tensor) -> candle_core::Result<Tensor> {
    (values - returns)?.sqr()?.sum_all()?.affine(0.5, 0.0)
}

/// The Judge's loss per example, before averaging: BCE(σ(x), b) + λ_band·ℓ_band(σ(x), b),
/// ℓ_band(s, b) = (1−b)·max(0, s−τ)² + ½·b·max(0, τ−s)². `logits` and `labels` (0 or 1)
/// are `(n,)`; BCE is computed from the logit (max(x,0) − x·b + log(1 + e^{−|x|})) so a
/// confident Judge cannot overflow it. Returns the sum over the examples.
pub fn judge_loss_sum(
    logits: &Tensor,
    labels: &Tensor,
    lambda_band: f32,
    tau: f32,
) -> candle_core::Result<Tensor> {
    let bce = (logits.relu()? - logits.mul(labels)?)?
        .add(&logits.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?)?;
    let s = candle_nn::ops::sigmoid(logits)?;
    let tau = f64::from(tau);
    let over = s.affine(1.0, -tau)?.relu()?.sqr()?; // max(0, s − τ)²
    let under = s.affine(-1.0, tau)?.relu()?.sqr()?; // max(0, τ − s)²
    let not_b = labels.affine(-1.0, 1.0)?;
    let band = (not_b.mul(&over)? + labels.mul(&under)?.affine(0.5, 0.0)?)?;
    (bce + band.affine(f64::from(lambda_band), 0.0)?)?.sum_all()
}

/// Σ over real tokens of the policy's entropy (for the bonus and the log).
pub fn entropy_sum(entropy: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    entropy.mul(mask)?.sum_all()
}

/// Σ over real tokens of k3 = e^{ref − new} − (ref − new) − 1 ≥ 0, Schulman's estimator of
/// KL(π ‖ π_ref) per token: the KL penalty before averaging. All three are `(b, t)`.
pub fn kl_k3_sum(new_logp: &Tensor, ref_logp: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let d = (ref_logp - new_logp)?;
    ((d.exp()? - &d)?.affine(1.0, -1.0)?.mul(mask))?.sum_all()
}

/// One micro-batch's policy terms, each a sum over its real tokens (the value term over its
/// sequences); the value and KL terms only where they are on.
#[derive(Clone, Copy, Debug)]
pub struct PolicyTerms<'a> {
    /// Σ of the clipped surrogate ([`clipped_surrogate_sum`]).
    pub surrogate: &'a Tensor,
    /// Σ of the entropy ([`entropy_sum`]).
    pub entropy: &'a Tensor,
    /// Σ ½(V − G)² ([`value_loss_sum`]), with a value head.
    pub value: Option<&'a Tensor>,
    /// Σ k3 ([`kl_k3_sum`]), with a KL penalty.
    pub kl: Option<&'a Tensor>,
}

/// One micro-batch's share of a role's term in the joint loss:
/// `weight`·(Σ pg / N − c_ent·Σ H / N + c_v·Σ ½(V − G)² / S + c_kl·Σ k3 / N), N the role's
/// tokens and S its samples in the minibatch, `weight` 1 for the Actor and λ_E for the
/// Editor. Summed over the micro-batches it is exactly the role's term of [`joint_loss`]
/// (with the value, entropy and KL terms CleanRL adds).
pub fn policy_loss(
    terms: &PolicyTerms,
    tokens: usize,
    seqs: usize,
    weight: f32,
    args: &PpoArgs,
) -> candle_core::Result<Tensor> {
    let n_tok = tokens as f64;
    let mut loss = ((terms.surrogate / n_tok)? - (terms.entropy * (f64::from(args.ent_coef) / n_tok))?)?;
    if let Some(v) = terms.value {
        loss = (loss + (v * (f64::from(args.vf_coef) / seqs as f64))?)?;
    }
    if let Some(k3) = terms.kl {
        loss = (loss + (k3 * (f64::from(args.kl_coef) / n_tok))?)?;
    }
    loss * f64::from(weight)
}

/// The joint objective: L = L_A + λ_E·L_E + λ_J·L_J, each term a mean over its role's
/// tokens (or Judge examples). Micro-batches contribute `coef / count` times their sums,
/// which adds up to exactly this.
pub fn joint_loss(l_actor: f32, l_editor: f32, l_judge: f32, args: &PpoArgs) -> f32 {
    l_actor + args.lambda_editor * l_editor + args.lambda_judge * l_judge
}

/// Explained variance 1 − Var(G − V) / Var(G) (CleanRL's diagnostic of the critic).
pub fn explained_variance(values: &[f32], returns: &[f32]) -> Option<f32> {
    let n = returns.len();
    if n < 2 {
        return None;
    }
    let mean = |x: &[f32]| x.iter().sum::<f32>() / x.len() as f32;
    let var = |x: &[f32]| {
        let m = mean(x);
        x.iter().map(|v| (v - m).powi(2)).sum::<f32>() / x.len() as f32
    };
    let var_y = var(returns);
    if var_y == 0.0 {
        return None;
    }
    let diff: Vec<f32> = returns.iter().zip(values).map(|(g, v)| g - v).collect();
    Some(1.0 - var(&diff) / var_y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn t1(v: &[f32]) -> Tensor {
        Tensor::new(v, &Device::Cpu).unwrap()
    }

    fn close(a: f32, b: f32) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }

    #[test]
    fn discounted_returns_by_hand() {
        // r = [0, 0, 1], γ = 0.9 → G = [0.81, 0.9, 1].
        let g = discounted_returns(&[0.0, 0.0, 1.0], 0.9);
        for (a, b) in g.iter().zip([0.81, 0.9, 1.0]) {
            close(*a, b);
        }
        assert!(discounted_returns(&[], 0.9).is_empty());
    }

    #[test]
    fn gae_by_hand() {
        // r = [0, 1], V = [0.5, 0.2], γ = 0.9, λ = 0.95.
        // δ1 = 1 − 0.2 = 0.8;  A1 = 0.8.
        // δ0 = 0 + 0.9·0.2 − 0.5 = −0.32;  A0 = −0.32 + 0.9·0.95·0.8 = 0.364.
        let (adv, ret) = gae(&[0.0, 1.0], &[0.5, 0.2], 0.9, 0.95);
        close(adv[0], 0.364);
        close(adv[1], 0.8);
        close(ret[0], 0.864);
        close(ret[1], 1.0);
        // λ = 1 and V = 0 give the discounted returns.
        let (adv, _) = gae(&[0.0, 0.0, 1.0], &[0.0; 3], 0.9, 1.0);
        for (a, b) in adv.iter().zip(discounted_returns(&[0.0, 0.0, 1.0], 0.9)) {
            close(*a, b);
        }
    }

    #[test]
    fn group_advantages_by_hand() {
        // Group 0: [1, 0] → mean 0.5 → [+0.5, −0.5]. Group 1: [0.3, 0.3] → zeros. Group 2
        // has one member: zero.
        let a = group_advantages(&[1.0, 0.0, 0.3, 0.3, 0.7], &[0, 0, 1, 1, 2]);
        assert_eq!(a, vec![0.5, -0.5, 0.0, 0.0, 0.0]);
        let mut n = vec![1.0, 2.0, 3.0];
        normalize(&mut n);
        close(n[0], -1.0);
        close(n[1], 0.0);
        close(n[2], 1.0);
    }

    #[test]
    fn clipped_surrogate_both_sides() {
        let eps = 0.2;
        // Row 0: A = +1, ratio e^0.5 ≈ 1.6487 > 1.2 → clipped: max(−1.6487, −1.2) = −1.2.
        // Row 1: A = −1, ratio e^−0.5 ≈ 0.6065 < 0.8 → clipped: max(0.6065, 0.8) = 0.8.
        // Row 2: A = +2, ratio e^0.1 ≈ 1.10517 inside → −2.21034.
        // Row 3: A = −1, ratio e^0.5 > 1.2 → unclipped side wins: max(1.6487, 1.2) = 1.6487.
        // Row 4 is padding (mask 0): ignored whatever it holds.
        let new = t1(&[0.5, -0.5, 0.1, 0.5, 9.0]).reshape((5, 1)).unwrap();
        let old = Tensor::zeros((5, 1), candle_core::DType::F32, &Device::Cpu).unwrap();
        let adv = t1(&[1.0, -1.0, 2.0, -1.0, 5.0]);
        let mask = t1(&[1.0, 1.0, 1.0, 1.0, 0.0]).reshape((5, 1)).unwrap();
        let (loss, st) = clipped_surrogate_sum(&new, &old, &adv, &mask, eps).unwrap();
        let expect = -1.2 + 0.8 - 2.0 * 0.1f32.exp() + 0.5f32.exp();
        close(loss.to_scalar::<f32>().unwrap(), expect);
        close(st.loss_sum, expect);
        assert_eq!(st.tokens, 4.0);
        assert_eq!(st.clipped, 3.0);
        // Σ (r − 1) − log r over the four real tokens.
        let kl: f32 = [0.5f32, -0.5, 0.1, 0.5]
            .iter()
            .map(|l| l.exp() - 1.0 - l)
            .sum();
        close(st.approx_kl_sum, kl);
    }

    #[test]
    fn clipped_surrogate_gradient_vanishes_only_on_the_clipped_side() {
        // A = +1 and ratio above 1+ε: the clipped term is constant, so no gradient.
        // A = +1 and ratio below 1−ε: the unclipped term wins, gradient −ratio.
        let x = Var::new(&[[0.5f32], [-0.5]], &Device::Cpu).unwrap();
        let old = Tensor::zeros((2, 1), candle_core::DType::F32, &Device::Cpu).unwrap();
        let adv = t1(&[1.0, 1.0]);
        let mask = Tensor::ones((2, 1), candle_core::DType::F32, &Device::Cpu).unwrap();
        let (loss, _) = clipped_surrogate_sum(x.as_tensor(), &old, &adv, &mask, 0.2).unwrap();
        let g = loss.backward().unwrap();
        let g = g
            .get(x.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        close(g[0], 0.0);
        close(g[1], -(-0.5f32).exp());
    }

    #[test]
    fn judge_loss_by_hand() {
        // x = 0 → s = 0.5: BCE = ln 2 for either label; the band is 0 at s = τ.
        let l = judge_loss_sum(&t1(&[0.0, 0.0]), &t1(&[1.0, 0.0]), 1.0, 0.5).unwrap();
        close(l.to_scalar::<f32>().unwrap(), 2.0 * std::f32::consts::LN_2);
        // x = 2, b = 0: s = 0.880797; BCE = 2 + ln(1 + e^−2) = 2.126928;
        // band = (0.880797 − 0.5)² = 0.145006; λ_band = 2 → 2.126928 + 0.290013.
        let l = judge_loss_sum(&t1(&[2.0]), &t1(&[0.0]), 2.0, 0.5).unwrap();
        close(l.to_scalar::<f32>().unwrap(), 2.126_928 + 0.290_013);
        // x = −2, b = 1: s = 0.119203; BCE = 2.126928; band = ½(0.5 − 0.119203)² = 0.072503.
        let l = judge_loss_sum(&t1(&[-2.0]), &t1(&[1.0]), 1.0, 0.5).unwrap();
        close(l.to_scalar::<f32>().unwrap(), 2.126_928 + 0.072_503);
        // A right and confident Judge pays almost nothing, and nothing overflows.
        let l = judge_loss_sum(&t1(&[200.0, -200.0]), &t1(&[1.0, 0.0]), 1.0, 0.5).unwrap();
        assert!(l.to_scalar::<f32>().unwrap() < 1e-6);
    }

    #[test]
    fn value_loss_and_joint_by_hand() {
        let v = value_loss_sum(&t1(&[1.0, 0.0]), &t1(&[0.0, 0.0])).unwrap();
        close(v.to_scalar::<f32>().unwrap(), 0.5);
        let args = PpoArgs::default();
        close(joint_loss(1.0, 1.0, 1.0, &args), 1.8);
        close(explained_variance(&[1.0, 2.0], &[1.0, 2.0]).unwrap(), 1.0);
        assert!(explained_variance(&[1.0], &[1.0]).is_none());
    }

    #[test]
    fn k3_and_policy_loss_by_hand() {
        // new = [0, −1], ref = [0, 0], second token padding: k3 = 0 on the real token.
        // new = [−0.5], ref = [0]: d = 0.5, k3 = e^0.5 − 0.5 − 1 = 0.148721.
        let mask = t1(&[1.0, 0.0]).reshape((1, 2)).unwrap();
        let new = t1(&[0.0, -1.0]).reshape((1, 2)).unwrap();
        let zero = Tensor::zeros((1, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        let k3 = kl_k3_sum(&new, &zero, &mask).unwrap();
        close(k3.to_scalar::<f32>().unwrap(), 0.0);
        let k3 = kl_k3_sum(&t1(&[-0.5]), &t1(&[0.0]), &t1(&[1.0])).unwrap();
        close(k3.to_scalar::<f32>().unwrap(), 0.148_721);
        // weight 0.5 · (2/4 − 0.1·1/4 + 0.5·3/2 + 0.2·4/4) = 0.5 · 1.425.
        let args = PpoArgs { ent_coef: 0.1, vf_coef: 0.5, kl_coef: 0.2, ..PpoArgs::default() };
        let (pg, ent, v, kl) = (t1(&[2.0]), t1(&[1.0]), t1(&[3.0]), t1(&[4.0]));
        let terms = PolicyTerms { surrogate: &pg, entropy: &ent, value: Some(&v), kl: Some(&kl) };
        let l = policy_loss(&terms, 4, 2, 0.5, &args).unwrap();
        close(l.to_vec1::<f32>().unwrap()[0], 0.5 * 1.425);
        let bare = PolicyTerms { value: None, kl: None, ..terms };
        close(policy_loss(&bare, 4, 2, 1.0, &args).unwrap().to_vec1::<f32>().unwrap()[0], 0.475);
    }

    #[test]
    fn defaults_are_the_papers_and_bad_values_fail() {
        let a = PpoArgs::default();
        assert_eq!(
            (a.learning_rate, a.batch_size, a.clip_coef, a.gamma),
            (3e-5, 32, 0.2, 0.9)
        );
        assert_eq!(
            (a.lambda_editor, a.lambda_judge, a.judge_threshold),
            (0.5, 0.3, 0.5)
        );
        assert!(a.validate().is_ok());
        assert!(PpoArgs {
            batch_size: 30,
            group_size: 4,
            ..a.clone()
        }
        .validate()
        .is_err());
        assert!(PpoArgs {
            clip_coef: 0.0,
            ..a.clone()
        }
        .validate()
        .is_err());
        assert!(PpoArgs {
            advantage: Advantage::Group,
            group_size: 1,
            ..a.clone()
        }
        .validate()
        .is_err());
        assert!(a.needs_scoring_pass());
        let lean = PpoArgs {
            advantage: Advantage::Group,
            update_epochs: 1,
            ..a
        };
        assert!(!lean.needs_scoring_pass());
    }
}

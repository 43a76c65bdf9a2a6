//! Applying a constraint's mask to logits, and the log-probability of the constrained policy.
//!
//! The mask is applied to the raw logits, before temperature, nucleus and softmax, so every
//! later step (greedy, sampling, the stored log-probabilities, the learner's recomputation)
//! sees one distribution: the model's, renormalised over the allowed tokens.

use onebrain_grammar::TokenSet;

/// Sets every disallowed logit (and every row past the mask) to −∞.
pub(crate) fn apply_mask(logits: &mut [f32], mask: &TokenSet) {
    let n = mask.len().min(logits.len());
    mask.iter_unset_entries(|i| {
        if i < n {
            logits[i] = f32::NEG_INFINITY;
        }
    });
    for l in logits.iter_mut().skip(n) {
        *l = f32::NEG_INFINITY;
    }
}

/// log softmax(logits / T)[t]: the log-probability of `t` under the distribution a
/// [`crate::sampler::Sampler`] at temperature `T` draws from (with top-p off). `T <= 0`
/// (greedy) counts as 1. Computed in f64 (a 151,936-way sum in f32 loses the small terms).
pub(crate) fn logprob_at(logits: &[f32], t: u32, temperature: f32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return f32::NEG_INFINITY;
    }
    let inv_t = if temperature > 0.0 { 1.0 / f64::from(temperature) } else { 1.0 };
    // Masked tokens (−∞) add exactly 0: skipped rather than exponentiated.
    let sum: f64 = logits.iter().filter(|&&l| l != f32::NEG_INFINITY).map(|&l| (f64::from(l - max) * inv_t).exp()).sum();
    (f64::from(logits[t as usize] - max) * inv_t - sum.ln()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_tokens_get_no_mass_and_the_rest_renormalise() {
        let mut logits = vec![1.0f32, 2.0, 3.0, 4.0];
        let mut mask = TokenSet::alloc(4);
        mask.allow_token(1);
        mask.allow_token(2);
        apply_mask(&mut logits, &mask);
        assert_eq!(logits[0], f32::NEG_INFINITY);
        assert_eq!(logits[3], f32::NEG_INFINITY);
        let p1 = logprob_at(&logits, 1, 1.0).exp();
        let p2 = logprob_at(&logits, 2, 1.0).exp();
        assert!((p1 + p2 - 1.0).abs() < 1e-6);
        assert!((p2 / p1 - 1f32.exp()).abs() < 1e-5);
        assert_eq!(crate::sampler::argmax(&logits), 2);
        // Greedy counts as temperature 1.
        assert_eq!(logprob_at(&logits, 1, 0.0), logprob_at(&logits, 1, 1.0));
    }

    #[test]
    fn the_temperature_divides_the_logits() {
        // softmax([0, 1] / 0.5) = softmax([0, 2]): p(1) = e² / (1 + e²).
        let logits = [0.0f32, 1.0];
        let want = (2f64.exp() / (1.0 + 2f64.exp())).ln() as f32;
        assert!((logprob_at(&logits, 1, 0.5) - want).abs() < 1e-6);
        assert!((logprob_at(&logits, 1, 1.0) - want).abs() > 0.05, "T = 1 is another distribution");
        // A disallowed (−∞) logit stays at probability zero at any temperature.
        let masked = [f32::NEG_INFINITY, 0.3, 0.1];
        let total: f32 = (1..3).map(|t| logprob_at(&masked, t, 0.7).exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert_eq!(logprob_at(&masked, 0, 0.7), f32::NEG_INFINITY);
    }
}

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

/// log softmax(logits)[t] at temperature 1, computed in f64 (a 151,936-way sum in f32 loses
/// the small terms).
pub(crate) fn logprob_at(logits: &[f32], t: u32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return f32::NEG_INFINITY;
    }
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    (f64::from(logits[t as usize] - max) - sum.ln()) as f32
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
        let p1 = logprob_at(&logits, 1).exp();
        let p2 = logprob_at(&logits, 2).exp();
        assert!((p1 + p2 - 1.0).abs() < 1e-6);
        assert!((p2 / p1 - 1f32.exp()).abs() < 1e-5);
        assert_eq!(crate::sampler::argmax(&logits), 2);
    }
}

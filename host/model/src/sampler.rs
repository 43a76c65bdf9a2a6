//! Picking the next token from logits: greedy, or temperature + nucleus (top-p) with a
//! seeded RNG owned by the sampler (like candle's `LogitsProcessor`).

use std::sync::Mutex;

use rand::{rngs::StdRng, Rng, SeedableRng};

use crate::constrain::logprob_at;

/// Turns a logits row into a token id.
#[derive(Debug, Clone)]
pub struct Sampler {
    rng: StdRng,
    temperature: f32,
    top_p: f32,
    /// The (id, weight) list of the last call, kept so that each token does not allocate
    /// (and fault in) a vocabulary-sized buffer.
    scratch: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler; `temperature == 0` is greedy.
    pub fn new(seed: u64, temperature: f32, top_p: f32) -> Self {
        Sampler { rng: StdRng::seed_from_u64(seed), temperature, top_p, scratch: Vec::new() }
    }

    /// The temperature this sampler draws at (`0`: greedy).
    pub fn temperature(&self) -> f32 {
        self.temperature
    }

    /// The log-probability of `tok` under the distribution this sampler draws from, which
    /// [`crate::Generation::logprobs`] records: log softmax(logits / T)[tok], T = 1 when
    /// greedy. With `top_p < 1` the nucleus cut is not accounted for (the value is that of
    /// the whole, temperature-scaled distribution).
    pub fn logprob(&self, logits: &[f32], tok: u32) -> f32 {
        logprob_at(logits, tok, self.temperature)
    }

    /// The next token for one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.temperature <= 0.0 || logits.len() == 1 {
            return argmax(logits);
        }
        let mut probs = std::mem::take(&mut self.scratch);
        let tok = self.sample_into(logits, &mut probs);
        self.scratch = probs;
        tok
    }

    fn sample_into(&mut self, logits: &[f32], probs: &mut Vec<(u32, f32)>) -> u32 {
        let inv_t = 1.0 / self.temperature;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        probs.clear();
        // A grammar mask leaves −∞ on all but a few of the 151,936 tokens: their weight is 0,
        // which their exponentials (a libm call each) only confirmed.
        probs.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, &l)| l != f32::NEG_INFINITY)
                .map(|(i, &l)| (i as u32, ((l - max) * inv_t).exp()))
                .filter(|(_, p)| *p > 0.0),
        );
        if probs.is_empty() {
            return argmax(logits);
        }
        let total: f32 = probs.iter().map(|(_, p)| p).sum();
        if self.top_p < 1.0 {
            let keep = nucleus(probs, total * self.top_p);
            probs.truncate(keep);
        }
        let mass: f32 = probs.iter().map(|(_, p)| p).sum();
        let mut r = self.rng.gen::<f32>() * mass;
        for (id, p) in probs.iter() {
            if r < *p {
                return *id;
            }
            r -= p;
        }
        probs.last().map(|(id, _)| *id).unwrap_or_else(|| argmax(logits))
    }
}

/// The token of each batch row in `active` (`logits[slot]` is row `active[slot]`, which
/// `samplers[row]` samples) and its log-probability at that sampler's temperature
/// ([`Sampler::logprob`]), rows spread over the compute pool ([`onebrain_kernels::pool`]):
/// each row reads its vocabulary-sized logits twice, which at batch 4 was a fifth of a
/// decode step done on one core. Each row's draws come from its own sampler, so the
/// result does not depend on the spread. `active` is ascending, as the decode loop keeps it.
pub(crate) fn sample_rows(logits: &[Vec<f32>], active: &[usize], samplers: &mut [Sampler]) -> Vec<(u32, f32)> {
    let pick = |logits: &[f32], sampler: &mut Sampler| {
        let tok = sampler.sample(logits);
        (tok, sampler.logprob(logits, tok))
    };
    if active.is_empty() {
        return Vec::new();
    }
    if active.len() == 1 {
        return vec![pick(&logits[0], &mut samplers[active[0]])];
    }
    let mut rows = active.iter().peekable();
    let jobs: Vec<Mutex<(&mut Sampler, (u32, f32))>> = samplers
        .iter_mut()
        .enumerate()
        .filter(|(row, _)| rows.next_if_eq(&row).is_some())
        .map(|(_, s)| Mutex::new((s, (0, 0.0))))
        .collect();
    assert_eq!(jobs.len(), active.len(), "active rows are ascending and have samplers");
    onebrain_kernels::pool::execute_chunked(jobs.len(), |range| {
        for slot in range {
            let mut job = jobs[slot].lock().expect("a row is sampled by one thread");
            job.1 = pick(&logits[slot], job.0);
        }
    });
    jobs.into_iter().map(|j| j.into_inner().expect("no thread panicked").1).collect()
}

/// Orders the most probable entries of `probs` first and returns how many of them it takes
/// to reach `mass`. Mass concentrates in few tokens, so it selects and sorts a growing top
/// `k` instead of the whole vocabulary (a full sort of 150k entries costs milliseconds per
/// token, more than a batch row's share of the forward).
fn nucleus(probs: &mut [(u32, f32)], mass: f32) -> usize {
    let by_prob = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
    let mut k = probs.len().min(64);
    loop {
        if k < probs.len() {
            probs.select_nth_unstable_by(k - 1, by_prob);
        }
        probs[..k].sort_unstable_by(by_prob);
        let mut acc = 0.0;
        for (i, (_, p)) in probs[..k].iter().enumerate() {
            acc += p;
            if acc >= mass {
                return i + 1;
            }
        }
        if k == probs.len() {
            return k;
        }
        k = (k * 8).min(probs.len());
    }
}

/// Index of the largest value (the first on ties); NaN never wins.
pub fn argmax(xs: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in xs.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sampled_on_the_pool_draw_what_each_sampler_draws_alone() {
        let logits: Vec<Vec<f32>> = (0..5).map(|r| (0..300).map(|i| ((i * (r + 3)) as f32 * 0.37).sin() * 4.0).collect()).collect();
        let fresh = || (0..7).map(|row| Sampler::new(row as u64, 0.5 + 0.1 * row as f32, 0.9)).collect::<Vec<_>>();
        let active = [0, 2, 3, 5, 6];
        let (mut pooled, mut alone) = (fresh(), fresh());
        for _ in 0..3 {
            let got = sample_rows(&logits, &active, &mut pooled);
            let want: Vec<(u32, f32)> = active
                .iter()
                .enumerate()
                .map(|(slot, &row)| {
                    let tok = alone[row].sample(&logits[slot]);
                    (tok, logprob_at(&logits[slot], tok, 0.5 + 0.1 * row as f32))
                })
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn greedy_is_argmax() {
        let mut s = Sampler::new(0, 0.0, 1.0);
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 2.9]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
    }

    #[test]
    fn same_seed_same_tokens_and_top_p_cuts_the_tail() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32) * 0.1).collect();
        let run = |seed| {
            let mut s = Sampler::new(seed, 1.0, 1.0);
            (0..20).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        // Two dominant tokens hold > 99 % of the mass: top_p = 0.9 never leaves them.
        let mut peaked = vec![0.0f32; 100];
        peaked[3] = 20.0;
        peaked[9] = 19.5;
        let mut s = Sampler::new(1, 1.0, 0.9);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            seen.insert(s.sample(&peaked));
        }
        assert!(seen.iter().all(|t| *t == 3 || *t == 9), "{seen:?}");
        assert_eq!(seen.len(), 2, "both nucleus tokens are drawn");
    }

    #[test]
    fn nucleus_matches_a_full_sort_on_a_large_vocabulary() {
        // A long flat tail (needs several rounds of the growing top-k) and a peaked one.
        let mut rng = StdRng::seed_from_u64(3);
        for spread in [0.01f32, 8.0] {
            let probs: Vec<(u32, f32)> =
                (0..5000).map(|i| (i, (rng.gen::<f32>() * spread).exp())).collect();
            let total: f32 = probs.iter().map(|p| p.1).sum();
            for top_p in [0.1f32, 0.5, 0.95, 0.999] {
                let mut sorted = probs.clone();
                sorted.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
                let mut acc = 0.0;
                let want = sorted.iter().position(|p| {
                    acc += p.1;
                    acc >= total * top_p
                }).map(|i| i + 1);
                let mut got = probs.clone();
                let n = nucleus(&mut got, total * top_p);
                assert_eq!(Some(n), want, "spread {spread}, top_p {top_p}");
                let mut a: Vec<u32> = got[..n].iter().map(|p| p.0).collect();
                let mut b: Vec<u32> = sorted[..n].iter().map(|p| p.0).collect();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b, "the same tokens");
            }
        }
    }

    #[test]
    fn the_recorded_logprob_is_that_of_the_distribution_sampled_from() {
        // At T = 0.5, softmax([0, ln 3] / 0.5) = [0.1, 0.9]; the recorded log-probability must
        // say 0.9 (not T = 1's 0.75), and the draws must follow it.
        let logits = [0.0f32, 3f32.ln()];
        let mut s = Sampler::new(11, 0.5, 1.0);
        assert!((s.logprob(&logits, 1).exp() - 0.9).abs() < 1e-6, "{}", s.logprob(&logits, 1).exp());
        let n = 20_000;
        let ones = (0..n).filter(|_| s.sample(&logits) == 1).count();
        let freq = ones as f64 / n as f64;
        assert!((freq - 0.9).abs() < 0.01, "{freq}");
        // Greedy records temperature 1.
        assert!((Sampler::new(0, 0.0, 1.0).logprob(&logits, 1).exp() - 0.75).abs() < 1e-6);
    }

    #[test]
    fn sampling_frequencies_follow_the_softmax() {
        // p = softmax([0, ln 3]) = [0.25, 0.75].
        let logits = [0.0f32, 3f32.ln()];
        let mut s = Sampler::new(42, 1.0, 1.0);
        let n = 20_000;
        let ones = (0..n).filter(|_| s.sample(&logits) == 1).count();
        let freq = ones as f64 / n as f64;
        assert!((freq - 0.75).abs() < 0.02, "{freq}");
    }
}

//! The learner's log-probabilities and entropies from final hidden states, computing logits only
//! where the policy can put mass.
//!
//! A grammar-constrained policy allows a handful of tokens at most positions (one, where the
//! grammar forces it), yet the plain path computes all 151,936 logits of every answer token,
//! a log-softmax over them and their gradient: on Qwen 0.5B about a fifth of a position's
//! arithmetic and, for a 300-token answer, several (300 × 151,936) tensors kept for the
//! backward. [`ConstrainedLogprob`] computes, for each position, the logits of the tokens its
//! mask allows, straight from the sampler's tiles ([`TiledMatrix::row_strips_into`]: each
//! value is bit for bit the one the sampler drew with), takes log π(target) and the entropy at
//! the sampling temperature, and keeps only the allowed tokens' probabilities for the
//! backward. A position whose mask allows much of the vocabulary (or that had none) runs the
//! whole product instead, several positions at a time, which the kernel does faster per row.
//!
//! The backward gives the hidden state `Σ_a ∂L/∂z_a · E_a` over the allowed tokens `a`: from
//! dequantized rows of the matrix for small sets, through Wᵀ's tiles for large ones.

use std::sync::{Arc, Mutex};

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use onebrain_grammar::TokenSet;

use onebrain_kernels::TiledMatrix;

/// A position whose allowed tokens touch more than this share of the matrix's 16-row strips
/// runs the whole product: the kernel serves 8 rows per pass over the weights, so a strip
/// costs about a fifth as much per row in a batched whole product as alone.
const SUBSET_MAX_SHARE: f64 = 0.2;

/// log π(target) and the entropy at each of `n` positions, as a graph op on the positions'
/// final hidden states `(n, hidden)`; its output is `(n, 2)`: `[log π(target), entropy]`.
pub(crate) struct ConstrainedLogprob {
    /// The output matrix `(vocab, hidden)`, the sampler's tiles.
    w: Arc<TiledMatrix>,
    /// Per position, the token whose log-probability is wanted.
    targets: Vec<u32>,
    /// Per position, the allowed tokens (ascending), or `None` for the whole vocabulary.
    allowed: Vec<Option<Vec<u32>>>,
    /// Tokens a distribution ranges over (the model's vocabulary; the matrix may pad it).
    vocab: usize,
    /// 1 / the sampling temperature.
    inv_t: f64,
    /// Per position, log π over its allowed tokens (or the whole vocabulary), kept by the
    /// forward for the backward.
    saved: Mutex<Vec<Vec<f32>>>,
}

impl ConstrainedLogprob {
    /// The op for positions with `targets`, under `masks` (`None`: unconstrained) at
    /// `temperature` (≤ 0 means greedy, whose recorded log-probabilities are at 1).
    pub(crate) fn new(
        w: Arc<TiledMatrix>,
        vocab: usize,
        targets: &[u32],
        masks: &[Option<&TokenSet>],
        temperature: f32,
    ) -> Self {
        let allowed = masks
            .iter()
            .map(|m| {
                m.map(|m| {
                    let mut ids = Vec::new();
                    m.iter_set_entries(|i| {
                        if i < vocab {
                            ids.push(i as u32);
                        }
                    });
                    ids
                })
            })
            .collect();
        let inv_t = if temperature > 0.0 { 1.0 / f64::from(temperature) } else { 1.0 };
        ConstrainedLogprob { w, targets: targets.to_vec(), allowed, vocab, inv_t, saved: Mutex::new(Vec::new()) }
    }

    /// The strips holding `ids`, ascending.
    fn strips(ids: &[u32]) -> Vec<usize> {
        let mut s: Vec<usize> = ids.iter().map(|&i| i as usize / TiledMatrix::STRIP_ROWS).collect();
        s.dedup();
        s
    }

    fn small(&self, ids: &[u32]) -> bool {
        let total = (self.w.rows() / TiledMatrix::STRIP_ROWS) as f64;
        (Self::strips(ids).len() as f64) <= SUBSET_MAX_SHARE * total
    }
}

/// log-softmax of `z` (already at temperature), in f64 sums.
fn log_softmax(z: &[f32]) -> Vec<f32> {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = z.iter().map(|&v| f64::from(v - max).exp()).sum();
    let ln = sum.ln();
    z.iter().map(|&v| (f64::from(v - max) - ln) as f32).collect()
}

impl CustomOp1 for ConstrainedLogprob {
    fn name(&self) -> &'static str {
        "constrained-logprob"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, hidden) = layout.shape().dims2()?;
        if hidden != self.w.cols() || n != self.targets.len() {
            candle_core::bail!("constrained-logprob: ({n}, {hidden}) states for {} targets", self.targets.len());
        }
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("constrained-logprob needs contiguous states");
        };
        let h = &storage.as_slice::<f32>()?[start..end];
        let rows = self.w.rows();
        // The positions the whole product serves, several at a time.
        let whole: Vec<usize> =
            (0..n).filter(|&i| self.allowed[i].as_deref().is_none_or(|ids| !self.small(ids))).collect();
        let mut whole_logits = vec![0f32; whole.len() * rows];
        if !whole.is_empty() {
            let x: Vec<f32> = whole.iter().flat_map(|&i| h[i * hidden..(i + 1) * hidden].iter().copied()).collect();
            self.w.matmul_into(&x, whole.len(), &mut whole_logits);
        }
        let mut scratch = vec![0f32; rows];
        let mut saved = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(2 * n);
        for i in 0..n {
            let row: &[f32] = match whole.binary_search(&i) {
                Ok(k) => &whole_logits[k * rows..(k + 1) * rows],
                Err(_) => {
                    let ids = self.allowed[i].as_deref().expect("a small set");
                    self.w.row_strips_into(&h[i * hidden..(i + 1) * hidden], &Self::strips(ids), &mut scratch);
                    &scratch
                }
            };
            let z: Vec<f32> = match &self.allowed[i] {
                Some(ids) => ids.iter().map(|&a| (f64::from(row[a as usize]) * self.inv_t) as f32).collect(),
                None => row[..self.vocab].iter().map(|&v| (f64::from(v) * self.inv_t) as f32).collect(),
            };
            let logp = log_softmax(&z);
            let t = self.targets[i];
            let at = match &self.allowed[i] {
                Some(ids) => ids.binary_search(&t).ok(),
                None => ((t as usize) < self.vocab).then_some(t as usize),
            };
            // A target the mask refused has probability 0; the sampler never draws one, but a
            // replay that disagrees must not turn into a silent -inf gradient.
            let lp = match at {
                Some(k) => logp[k],
                None => candle_core::bail!("constrained-logprob: target {t} at position {i} is not an allowed token"),
            };
            let entropy: f64 = -logp.iter().map(|&l| f64::from(l).exp() * f64::from(l)).sum::<f64>();
            out.push(lp);
            out.push(entropy as f32);
            saved.push(logp);
        }
        *self.saved.lock().expect("one forward at a time") = saved;
        Ok((CpuStorage::F32(out), Shape::from((n, 2))))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let (n, hidden) = arg.dims2()?;
        let g = grad_res.to_dtype(candle_core::DType::F32)?.to_vec2::<f32>()?;
        let saved = self.saved.lock().expect("the forward ran");
        if saved.len() != n {
            candle_core::bail!("constrained-logprob: backward without its forward");
        }
        let mut dh = vec![0f32; n * hidden];
        // Large sets: ∂L/∂logit rows gathered for one product through Wᵀ.
        let mut big_rows: Vec<usize> = Vec::new();
        let mut big_grads: Vec<f32> = Vec::new();
        let rows = self.w.rows();
        for i in 0..n {
            let logp = &saved[i];
            let (g_lp, g_ent) = (f64::from(g[i][0]), f64::from(g[i][1]));
            if g_lp == 0.0 && g_ent == 0.0 {
                continue;
            }
            let entropy: f64 = -logp.iter().map(|&l| f64::from(l).exp() * f64::from(l)).sum::<f64>();
            let t = self.targets[i];
            // ∂/∂z_a of log π(t) is δ_at − p_a; of H = −Σ p log p it is −p_a (log p_a + H);
            // z = logit / T adds the factor 1/T.
            let dz = |k: usize, a: u32| -> f32 {
                let l = f64::from(logp[k]);
                let p = l.exp();
                let d_lp = if a == t { 1.0 - p } else { -p };
                let d_ent = -p * (l + entropy);
                ((g_lp * d_lp + g_ent * d_ent) * self.inv_t) as f32
            };
            match self.allowed[i].as_deref() {
                Some(ids) if self.small(ids) => {
                    let e = self.w.rows_f32(ids).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
                    let out = &mut dh[i * hidden..(i + 1) * hidden];
                    for (k, &a) in ids.iter().enumerate() {
                        let c = dz(k, a);
                        if c != 0.0 {
                            for (o, &w) in out.iter_mut().zip(&e[k * hidden..(k + 1) * hidden]) {
                                *o += c * w;
                            }
                        }
                    }
                }
                allowed => {
                    let mut full = vec![0f32; rows];
                    match allowed {
                        Some(ids) => ids.iter().enumerate().for_each(|(k, &a)| full[a as usize] = dz(k, a)),
                        None => (0..self.vocab).for_each(|a| full[a] = dz(a, a as u32)),
                    }
                    big_rows.push(i);
                    big_grads.extend(full);
                }
            }
        }
        if !big_rows.is_empty() {
            let wt = self.w.transposed().map_err(|e| candle_core::Error::Msg(e.to_string()))?;
            let mut part = vec![0f32; big_rows.len() * hidden];
            wt.matmul_into(&big_grads, big_rows.len(), &mut part);
            for (k, &i) in big_rows.iter().enumerate() {
                dh[i * hidden..(i + 1) * hidden].copy_from_slice(&part[k * hidden..(k + 1) * hidden]);
            }
        }
        Ok(Some(Tensor::from_vec(dh, (n, hidden), arg.device())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Var};

    /// The op against the plain path (whole-vocabulary logits from the same tiles, masked
    /// log-softmax at the temperature): values and gradients, small and large masks, and a
    /// position with no mask.
    #[test]
    fn allowed_token_logprobs_match_the_whole_vocabulary() {
        if !TiledMatrix::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        let dev = Device::Cpu;
        let (vocab, hidden) = (512, 64);
        let w = Tensor::randn(0f32, 0.5, (vocab, hidden), &dev).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let tiles = Arc::new(TiledMatrix::from_qtensor(&q).unwrap().unwrap());
        let mut small = TokenSet::alloc(vocab);
        [3usize, 17, 40].iter().for_each(|&t| small.allow_token(t as u32));
        let mut large = TokenSet::alloc(vocab);
        (0..vocab).filter(|t| t % 3 != 1).for_each(|t| large.allow_token(t as u32));
        let masks = [Some(&small), Some(&large), None];
        let targets = [17u32, 6, 100];
        let h = Var::randn(0f32, 1.0, (3, hidden), &dev).unwrap();
        let t = 0.7;
        let op = ConstrainedLogprob::new(tiles.clone(), vocab, &targets, &masks, t);
        let out = h.as_tensor().apply_op1(op).unwrap();
        // The plain path.
        let logits = h.as_tensor().apply_op1(onebrain_kernels::FrozenProduct(tiles)).unwrap();
        let mut bias = vec![0f32; 3 * vocab];
        for (r, m) in masks.iter().enumerate() {
            if let Some(m) = m {
                (0..vocab).filter(|&i| !m.is_allowed(i as u32)).for_each(|i| bias[r * vocab + i] = -1e9);
            }
        }
        let bias = Tensor::from_vec(bias, (3, vocab), &dev).unwrap();
        let z = ((logits * (1.0 / f64::from(t))).unwrap() + bias).unwrap();
        let logp = candle_nn::ops::log_softmax(&z, 1).unwrap();
        let idx = Tensor::new(&targets, &dev).unwrap().unsqueeze(1).unwrap();
        let lp = logp.gather(&idx, 1).unwrap().squeeze(1).unwrap();
        let ent = logp.exp().unwrap().mul(&logp).unwrap().sum(1).unwrap().neg().unwrap();
        let want = Tensor::stack(&[&lp, &ent], 1).unwrap();
        let diff = (&out - &want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-4, "values differ by {diff}");
        let g = Tensor::new(&[[1f32, 0.3], [-0.5, 0.2], [0.7, -1.0]], &dev).unwrap();
        let ga = (&out * &g).unwrap().sum_all().unwrap().backward().unwrap();
        let gb = (&want * &g).unwrap().sum_all().unwrap().backward().unwrap();
        let (a, b) = (ga.get(h.as_tensor()).unwrap(), gb.get(h.as_tensor()).unwrap());
        let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let err = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        // Small sets read the dequantized rows; large ones the Q8_0 transpose: rounding only.
        assert!(err < 0.02 * scale, "gradients differ by {err} (scale {scale})");
    }
}

//! Attention of one new position over the KV cache, on the CPU.
//!
//! Decode asks for `softmax(q·Kᵀ/√d)·V` with a single query per head. Through candle's
//! general matmul that is two tiny-`M` GEMMs per layer whose operand packing copies the
//! whole cache (the keys are a strided view of the cache's buffers) and allocates fresh
//! pages every step: at a 1,500-token context that made SmolLM2 decode at 0.57× llama.cpp.
//! This op reads the cache in place, one key and value row at a time.

use candle_core::{CpuStorage, CustomOp3, Layout, Shape};

/// `(b, heads, 1, d)` queries against `(b, kv_heads, len, d)` keys and values (any
/// strides with a unit last one), grouped-query: query head `h` reads kv head
/// `h / (heads / kv_heads)`. The output is `(b, heads, 1, d)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeAttention {
    /// Multiplies the scores (1/√d).
    pub(crate) scale: f32,
}

/// The element offset and the `(b, h, pos)` strides of a rank-4 tensor whose last
/// dimension is contiguous.
fn strides4(l: &Layout) -> candle_core::Result<(usize, [usize; 3], [usize; 4])> {
    let dims = l.shape().dims();
    let st = l.stride();
    if dims.len() != 4 || st[3] != 1 {
        candle_core::bail!("decode-attention needs rank-4 tensors with a contiguous last axis, got {dims:?} / {st:?}");
    }
    Ok((l.start_offset(), [st[0], st[1], st[2]], [dims[0], dims[1], dims[2], dims[3]]))
}

/// `Σ a_i b_i` in eight independent lanes, so that it vectorizes.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

impl CustomOp3 for DecodeAttention {
    fn name(&self) -> &'static str {
        "decode-attention"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, k, v) = (qs.as_slice::<f32>()?, ks.as_slice::<f32>()?, vs.as_slice::<f32>()?);
        let (qo, qst, [b, heads, one, d]) = strides4(ql)?;
        let (ko, kst, [kb, kv_heads, len, kd]) = strides4(kl)?;
        let (vo, vst, vdims) = strides4(vl)?;
        if one != 1 || kb != b || kd != d || vdims != [kb, kv_heads, len, kd] || kv_heads == 0 || heads % kv_heads != 0 || len == 0 {
            candle_core::bail!("decode-attention: q {:?}, k {:?}, v {vdims:?}", ql.shape().dims(), kl.shape().dims());
        }
        let rep = heads / kv_heads;
        let mut out = vec![0f32; b * heads * d];
        let out_addr = out.as_mut_ptr() as usize;
        // One work item per (row, kv head): each cached key and value row is read once for
        // the `rep` query heads that share it, not once per query head.
        candle_core::utils::barrier_pool().execute_chunked(b * kv_heads, |items| {
            let mut p = vec![0f32; rep * len];
            for item in items {
                let (bi, kh) = (item / kv_heads, item % kv_heads);
                let kbase = ko + bi * kst[0] + kh * kst[1];
                let vbase = vo + bi * vst[0] + kh * vst[1];
                let qrows: Vec<&[f32]> =
                    (0..rep).map(|r| &q[qo + bi * qst[0] + (kh * rep + r) * qst[1]..][..d]).collect();
                for j in 0..len {
                    let krow = &k[kbase + j * kst[2]..][..d];
                    for (r, qrow) in qrows.iter().enumerate() {
                        p[r * len + j] = self.scale * dot(qrow, krow);
                    }
                }
                for pr in p.chunks_exact_mut(len) {
                    let max = pr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0f32;
                    for pj in pr.iter_mut() {
                        *pj = (*pj - max).exp();
                        sum += *pj;
                    }
                    let inv = 1.0 / sum;
                    pr.iter_mut().for_each(|pj| *pj *= inv);
                }
                // SAFETY: each (row, kv head) item belongs to exactly one chunk and owns the
                // outputs of its `rep` query heads; `out` outlives the pool's execution.
                let o = unsafe {
                    std::slice::from_raw_parts_mut((out_addr as *mut f32).add((bi * heads + kh * rep) * d), rep * d)
                };
                for j in 0..len {
                    let vrow = &v[vbase + j * vst[2]..][..d];
                    for (r, orow) in o.chunks_exact_mut(d).enumerate() {
                        let w = p[r * len + j];
                        for (oi, &vi) in orow.iter_mut().zip(vrow) {
                            *oi += w * vi;
                        }
                    }
                }
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((b, heads, 1, d))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor, D};

    fn wavy(dims: (usize, usize, usize, usize), phase: f32) -> Tensor {
        let n = dims.0 * dims.1 * dims.2 * dims.3;
        let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.23 + phase).sin() * 2.0).collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    }

    #[test]
    fn matches_the_matmul_softmax_path_on_a_strided_cache() {
        // Two rows, 6 query heads over 2 kv heads, 13 positions in a 20-position buffer.
        let (b, heads, kv, len, cap, d) = (2, 6, 2, 13, 20, 16);
        let q = wavy((b, heads, 1, d), 0.0);
        let kbuf = wavy((b, kv, cap, d), 1.0);
        let vbuf = wavy((b, kv, cap, d), 2.0);
        let (k, v) = (kbuf.narrow(2, 0, len).unwrap(), vbuf.narrow(2, 0, len).unwrap());
        let scale = 1.0 / (d as f32).sqrt();
        let got = q.apply_op3(&k, &v, DecodeAttention { scale }).unwrap();
        // The reference: repeat kv heads, then matmul, softmax, matmul.
        let rep = |t: &Tensor| {
            let t = t.contiguous().unwrap().unsqueeze(2).unwrap();
            t.broadcast_as((b, kv, heads / kv, len, d)).unwrap().reshape((b, heads, len, d)).unwrap()
        };
        let (kr, vr) = (rep(&k), rep(&v));
        let scores = (q.matmul(&kr.t().unwrap()).unwrap() * scale as f64).unwrap();
        let want = candle_nn::ops::softmax(&scores, D::Minus1).unwrap().matmul(&vr).unwrap();
        let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "max diff {diff}");
    }
}

//! The learner's causal attention as one op with its own backward: `softmax(q·Kᵀ)·V` with the
//! causal mask built in, holding no score matrix between the forward and the backward.
//!
//! Through candle's ops the graph kept two `rows × keys` matrices per layer for the backward,
//! the scores and the probabilities. For one Judge example of the 0.5B model (a 384-token tail
//! against a 1,400-token prompt, 14 query heads, 24 layers) that is 1.4 GB, most of an update's
//! peak. Here the backward recomputes each block's scores from q and K, as
//! FlashAttention does: one product more, and memory that grows with the rows, not rows × keys.
//!
//! The products run on the `gemm` crate (candle's own matmul kernels), one block of rows at a
//! time inside candle's thread pool.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};

use crate::attention::{seen_before, softmax_rows_in_place, visible_runs};

/// `(b, kv_heads, rows, d)` queries (already scaled by 1/√d; the `rep` query heads that share a
/// kv head folded into `rows = rep × q_len`) against `(b, kv_heads, keys, d)` keys and values.
/// Query `i` of each folded head sees keys `0 ..= keys − q_len + i`. Output `(b, kv_heads,
/// rows, d)`. Every input must be contiguous.
#[derive(Debug, Clone)]
pub struct CausalAttention {
    /// Queries per folded head: the causal diagonal restarts every `q_len` rows.
    pub q_len: usize,
    /// Keys `[start, end)` that are constants of the graph (a detached prompt head's): the
    /// backward gives them a zero gradient without computing it. On a 150-token tail after a
    /// 1,300-token prompt they are most of the keys, and dK and dV two of the backward's
    /// five products.
    pub constant_keys: (usize, usize),
    /// Per batch row, a run of keys `(start, len)` none of its queries sees: a padded batch's
    /// padding (the prefill of several prompts' tails at once). `None`: every key is seen
    /// causally.
    pub hidden: Option<Arc<[(usize, usize)]>>,
}

impl CausalAttention {
    /// Plain causal attention of `q_len` queries per folded head, every key in the graph.
    pub fn causal(q_len: usize) -> CausalAttention {
        CausalAttention { q_len, constant_keys: (0, 0), hidden: None }
    }
}

/// Each head's hidden run of keys: head `h` of `(b, kv_heads)` is batch row `h / kv_heads`.
#[derive(Clone)]
struct HiddenKeys {
    runs: Option<Arc<[(usize, usize)]>>,
    kv_heads: usize,
}

impl HiddenKeys {
    fn of(runs: &Option<Arc<[(usize, usize)]>>, ql: &Layout, keys: usize) -> candle_core::Result<HiddenKeys> {
        let dims = ql.shape().dims();
        if let Some(r) = runs {
            if r.len() != dims[0] || r.iter().any(|&(s, n)| s + n > keys) {
                candle_core::bail!("causal-attention: hidden keys {r:?} for {} rows of {keys} keys", dims[0]);
            }
        }
        Ok(HiddenKeys { runs: runs.clone(), kv_heads: dims[1] })
    }

    fn of_head(&self, h: usize) -> std::ops::Range<usize> {
        self.runs.as_ref().map_or(0..0, |r| {
            let (start, len) = r[h / self.kv_heads];
            start..start + len
        })
    }
}

/// Rows per block: a block's scores (`ROWS × keys` floats) stay in L2 at a 1,400-key prompt.
const ROWS: usize = 64;

/// Keys per step of the forward's p·V: a row's sums split after every this many of the keys
/// it sees, the same for every row however wide its block is and however much padding its
/// batch hides, and every step multiplies exactly this many (zeros past a row's last key),
/// since gemm's kernels for a depth of 1 or 2 round otherwise.
const KEYS: usize = 256;

/// Fewest keys a block's scores are computed for (zero keys past the last): gemm takes a
/// product of at most 16 × 16 entries (64 rows against 4 keys) through dot-product kernels
/// that round otherwise than its blocked ones, which every wider block runs.
const MIN_SCORE_KEYS: usize = 5;

/// The shape of one call, checked.
#[derive(Clone, Copy, Debug)]
struct Dims {
    /// `b × kv_heads`: independent attention problems.
    heads: usize,
    rows: usize,
    keys: usize,
    d: usize,
    q_len: usize,
}

impl Dims {
    fn of(q_len: usize, ql: &Layout, kl: &Layout, vl: &Layout) -> candle_core::Result<Dims> {
        let (q, k, v) = (ql.shape().dims(), kl.shape().dims(), vl.shape().dims());
        let ok = q.len() == 4
            && k == v
            && k.len() == 4
            && q[..2] == k[..2]
            && q[3] == k[3]
            && q_len > 0
            && q[2] % q_len == 0
            && q_len <= k[2];
        if !ok {
            candle_core::bail!("causal-attention: q {q:?}, k {k:?}, v {v:?}, q_len {q_len}");
        }
        Ok(Dims { heads: q[0] * q[1], rows: q[2], keys: k[2], d: q[3], q_len })
    }

    /// Keys row `r` sees.
    fn visible(&self, r: usize) -> usize {
        self.keys - self.q_len + r % self.q_len + 1
    }

    /// The blocks of rows of one head.
    fn blocks(&self) -> usize {
        self.rows.div_ceil(ROWS)
    }

    /// Rows `first..first + n` of block `blk`, and the most keys any of them sees.
    fn block(&self, blk: usize) -> (usize, usize, usize) {
        let first = blk * ROWS;
        let n = ROWS.min(self.rows - first);
        let widest = (first..first + n).map(|r| self.visible(r)).max().unwrap_or(0);
        (first, n, widest)
    }
}

/// `dst (m × n, row stride dst_rs) = [dst +] lhs · rhs`, each operand given by its row and
/// column strides, on one thread (the caller is already one of the pool's workers).
#[allow(clippy::too_many_arguments)]
fn product(
    (m, n, k): (usize, usize, usize),
    dst: &mut [f32],
    dst_rs: usize,
    accumulate: bool,
    lhs: &[f32],
    (lhs_rs, lhs_cs): (usize, usize),
    rhs: &[f32],
    (rhs_rs, rhs_cs): (usize, usize),
) {
    // Every caller multiplies at least one row, one key and one feature.
    assert!(m > 0 && n > 0 && k > 0, "product: empty {m} × {k} · {k} × {n}");
    // The last element each operand's strides reach must lie inside its slice.
    let reach = |rs: usize, cs: usize, r: usize, c: usize| (r - 1) * rs + (c - 1) * cs + 1;
    assert!(reach(dst_rs, 1, m, n) <= dst.len(), "product: destination too short");
    assert!(reach(lhs_rs, lhs_cs, m, k) <= lhs.len(), "product: lhs too short");
    assert!(reach(rhs_rs, rhs_cs, k, n) <= rhs.len(), "product: rhs too short");
    // SAFETY: the asserts above keep every element gemm reads or writes inside its slice.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// The probabilities of rows `first..first + n` of one head in `p` (`m × cols`, row-major,
/// `cols ≥ widest` keys of `k`), from their queries `qb` (`m × d`, `m ≥ n`): scores `q·Kᵀ`,
/// then a softmax over each row's visible keys, zero past them. Rows past `n` are padding:
/// they keep their raw scores, and the caller drops what they produce. Keys `hidden` are
/// seen by none of them.
#[allow(clippy::too_many_arguments)]
fn probabilities(dims: &Dims, qb: &[f32], k: &[f32], first: usize, n: usize, cols: usize, hidden: std::ops::Range<usize>, p: &mut [f32]) {
    let d = dims.d;
    let m = qb.len() / d;
    product((m, cols, d), p, cols, false, qb, (d, 1), k, (1, d));
    let mut seen = Vec::with_capacity(n);
    for (i, row) in p.chunks_exact_mut(cols).take(n).enumerate() {
        let (visible, hidden) = row.split_at_mut(dims.visible(first + i));
        hidden.fill(0.0);
        seen.push(visible);
    }
    softmax_rows_in_place(&mut seen, hidden);
}

/// A contiguous input's elements.
pub fn slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    let Some((start, end)) = l.contiguous_offsets() else {
        candle_core::bail!("a fused CPU op needs contiguous inputs, got strides {:?}", l.stride());
    };
    Ok(&s.as_slice::<f32>()?[start..end])
}

/// One call's inputs, checked: their shape and their elements.
struct Inputs<'a> {
    dims: Dims,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
}

impl<'a> Inputs<'a> {
    fn of(q_len: usize, (qs, ql): (&'a CpuStorage, &Layout), (ks, kl): (&'a CpuStorage, &Layout), (vs, vl): (&'a CpuStorage, &Layout)) -> candle_core::Result<Self> {
        let dims = Dims::of(q_len, ql, kl, vl)?;
        Ok(Inputs { dims, q: slice(qs, ql)?, k: slice(ks, kl)?, v: slice(vs, vl)? })
    }

    /// Head `h`'s queries, keys and values.
    fn head(&self, h: usize) -> (&'a [f32], &'a [f32], &'a [f32]) {
        let Dims { rows, keys, d, .. } = self.dims;
        (&self.q[h * rows * d..][..rows * d], &self.k[h * keys * d..][..keys * d], &self.v[h * keys * d..][..keys * d])
    }
}

/// Elements `start..start + len` of the `f32` buffer at `addr`, for one of the pool's tasks.
///
/// # Safety
/// No other task touches those elements while the slice lives, and the buffer outlives the
/// pool's run.
pub unsafe fn span<'a>(addr: usize, start: usize, len: usize) -> &'a mut [f32] {
    std::slice::from_raw_parts_mut((addr as *mut f32).add(start), len)
}

impl CustomOp3 for CausalAttention {
    fn name(&self) -> &'static str {
        "causal-attention"
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
        let input = Inputs::of(self.q_len, (qs, ql), (ks, kl), (vs, vl))?;
        let dims = input.dims;
        let Dims { heads, rows, keys, d, .. } = dims;
        let hidden = HiddenKeys::of(&self.hidden, ql, keys)?;
        let blocks = dims.blocks();
        let mut out = vec![0f32; heads * rows * d];
        let addr = out.as_mut_ptr() as usize;
        // A row's output must not depend on which block holds it, nor on the padding its
        // batch hides: a prompt prefilled after a cached head, or in a batch, must give the
        // bits of the same prompt prefilled alone at once (prefix reuse and batching may not
        // change what greedy decoding writes). gemm's kernels differ with the row
        // count, so every block is padded to ROWS rows, and p·V runs in steps of KEYS of the
        // keys a row sees (the hidden ones left out), so that each row's sum splits the same
        // way.
        let score_keys = keys.max(MIN_SCORE_KEYS);
        crate::pool::execute_chunked(heads * blocks, |items| {
            let (mut p, mut qb, mut ob) = (vec![0f32; ROWS * score_keys], vec![0f32; ROWS * d], vec![0f32; ROWS * d]);
            // A step's probabilities and values gathered where its keys are not one run of
            // KEYS (across the hidden run, or the last keys), zeros past them.
            let (mut ps, mut vs) = (vec![0f32; ROWS * KEYS], vec![0f32; KEYS * d]);
            // The keys of a sequence shorter than MIN_SCORE_KEYS, zeros past them.
            let mut kpad = vec![0f32; if keys < MIN_SCORE_KEYS { MIN_SCORE_KEYS * d } else { 0 }];
            for item in items {
                let (h, blk) = (item / blocks, item % blocks);
                let (first, n, widest) = dims.block(blk);
                let (qh, kh, vh) = input.head(h);
                let hide = hidden.of_head(h);
                qb[..n * d].copy_from_slice(&qh[first * d..][..n * d]);
                qb[n * d..].fill(0.0);
                let cols = widest.max(MIN_SCORE_KEYS);
                let kh = match kpad.is_empty() {
                    true => kh,
                    false => {
                        kpad[..keys * d].copy_from_slice(kh);
                        &kpad[..]
                    }
                };
                probabilities(&dims, &qb, kh, first, n, cols, hide.clone(), &mut p);
                let seen = seen_before(widest, &hide);
                if seen == 0 {
                    ob.fill(0.0); // every query of the block is padding that sees nothing
                }
                for (step, s0) in (0..seen).step_by(KEYS).enumerate() {
                    let runs = visible_runs(s0..(s0 + KEYS).min(seen), hide.clone());
                    let whole = runs.iter().find(|r| r.1 == KEYS);
                    let (lhs, lhs_rs, rhs): (&[f32], usize, &[f32]) = match whole {
                        Some(&(k0, _)) => (&p[k0..], cols, &vh[k0 * d..]),
                        None => {
                            ps.fill(0.0);
                            vs.fill(0.0);
                            let mut at = 0;
                            for &(k0, kn) in runs.iter().filter(|r| r.1 > 0) {
                                for (row, gathered) in p.chunks_exact(cols).zip(ps.chunks_exact_mut(KEYS)).take(n) {
                                    gathered[at..at + kn].copy_from_slice(&row[k0..k0 + kn]);
                                }
                                vs[at * d..(at + kn) * d].copy_from_slice(&vh[k0 * d..(k0 + kn) * d]);
                                at += kn;
                            }
                            (&ps, KEYS, &vs)
                        }
                    };
                    product((ROWS, d, KEYS), &mut ob, d, step > 0, lhs, (lhs_rs, 1), rhs, (d, 1));
                }
                // SAFETY: rows `first..first + n` of head `h` belong to this item alone.
                let o = unsafe { span(addr, (h * rows + first) * d, n * d) };
                o.copy_from_slice(&ob[..n * d]);
            }
        });
        Ok((CpuStorage::F32(out), ql.shape().clone()))
    }

    fn bwd(&self, q: &Tensor, k: &Tensor, v: &Tensor, _out: &Tensor, grad: &Tensor) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let op = CausalAttentionGrad { q_len: self.q_len, constant_keys: self.constant_keys, hidden: self.hidden.clone(), grad };
        let all = q.apply_op3_no_bwd(k, v, &op)?;
        let (nq, nk) = (q.elem_count(), k.elem_count());
        let dq = all.narrow(0, 0, nq)?.reshape(q.shape())?;
        let dk = all.narrow(0, nq, nk)?.reshape(k.shape())?;
        let dv = all.narrow(0, nq + nk, nk)?.reshape(v.shape())?;
        Ok((Some(dq), Some(dk), Some(dv)))
    }
}

/// The backward of [`CausalAttention`] given the output's gradient: `dq`, `dk` and `dv`,
/// flattened and laid end to end (one op has one output).
///
/// Per block of rows, with `P` recomputed: `dV += Pᵀ·dO`, `dP = dO·Vᵀ`,
/// `dS = P ⊙ (dP − Σ_j P⊙dP)`, `dQ = dS·K`, `dK += dSᵀ·Q`.
struct CausalAttentionGrad {
    q_len: usize,
    /// See [`CausalAttention::constant_keys`]: their dK and dV stay zero.
    constant_keys: (usize, usize),
    /// See [`CausalAttention::hidden`].
    hidden: Option<Arc<[(usize, usize)]>>,
    /// The output's gradient, `(b, kv_heads, rows, d)` flattened.
    grad: Vec<f32>,
}

impl CustomOp3 for CausalAttentionGrad {
    fn name(&self) -> &'static str {
        "causal-attention-grad"
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
        let input = Inputs::of(self.q_len, (qs, ql), (ks, kl), (vs, vl))?;
        let dims = input.dims;
        let Dims { heads, rows, keys, d, .. } = dims;
        let hidden = HiddenKeys::of(&self.hidden, ql, keys)?;
        if self.grad.len() != input.q.len() {
            candle_core::bail!("causal-attention-grad: {} gradient elements for {} outputs", self.grad.len(), input.q.len());
        }
        let blocks = dims.blocks();
        // Each head's blocks are split into parts, so that even one head keeps every core
        // busy; each part sums its own dK and dV, added up below.
        let parts = (2 * candle_core::utils::get_num_threads()).div_ceil(heads).clamp(1, blocks);
        let (nq, nk) = (input.q.len(), input.k.len());
        let mut dq = vec![0f32; nq];
        let mut partial = vec![0f32; heads * parts * 2 * keys * d];
        let (dq_addr, partial_addr) = (dq.as_mut_ptr() as usize, partial.as_mut_ptr() as usize);
        crate::pool::execute_chunked(heads * parts, |items| {
            let mut p = vec![0f32; ROWS * keys];
            let mut dp = vec![0f32; ROWS * keys];
            for item in items {
                let (h, part) = (item / parts, item % parts);
                let (qh, kh, vh) = input.head(h);
                let go = &self.grad[h * rows * d..][..rows * d];
                // SAFETY: each item owns its own dK and dV partial sums.
                let acc = unsafe { span(partial_addr, item * 2 * keys * d, 2 * keys * d) };
                let (dk, dv) = acc.split_at_mut(keys * d);
                for blk in (part..blocks).step_by(parts) {
                    let (first, n, widest) = dims.block(blk);
                    probabilities(&dims, &qh[first * d..][..n * d], kh, first, n, widest, hidden.of_head(h), &mut p);
                    let go_blk = &go[first * d..][..n * d];
                    // The keys whose dK and dV are wanted: those outside the constant run.
                    let (c0, c1) = self.constant_keys;
                    let wanted = [0..c0.min(widest), c1.max(c0).min(widest)..widest];
                    let wanted = || wanted.iter().filter(|r| !r.is_empty());
                    // dV[..widest] += Pᵀ·dO
                    for r in wanted() {
                        product((r.len(), d, n), &mut dv[r.start * d..], d, true, &p[r.start..], (1, widest), go_blk, (d, 1));
                    }
                    // dP = dO·Vᵀ
                    product((n, widest, d), &mut dp, widest, false, go_blk, (d, 1), vh, (1, d));
                    // dS = P ⊙ (dP − Σ_j P⊙dP), in dP's place.
                    for (prow, dprow) in p.chunks_exact(widest).zip(dp.chunks_exact_mut(widest)).take(n) {
                        let s: f32 = prow.iter().zip(dprow.iter()).map(|(a, b)| a * b).sum();
                        for (g, &pj) in dprow.iter_mut().zip(prow) {
                            *g = pj * (*g - s);
                        }
                    }
                    // dQ = dS·K, into this block's own rows.
                    // SAFETY: rows `first..first + n` of head `h` belong to this item alone.
                    let dq_blk = unsafe { span(dq_addr, (h * rows + first) * d, n * d) };
                    product((n, d, widest), dq_blk, d, false, &dp, (widest, 1), kh, (d, 1));
                    // dK[..widest] += dSᵀ·Q
                    for r in wanted() {
                        product((r.len(), d, n), &mut dk[r.start * d..], d, true, &dp[r.start..], (1, widest), &qh[first * d..], (d, 1));
                    }
                }
            }
        });
        let mut all = dq;
        all.resize(nq + 2 * nk, 0.0);
        let (dk_all, dv_all) = all[nq..].split_at_mut(nk);
        for h in 0..heads {
            for part in 0..parts {
                let acc = &partial[(h * parts + part) * 2 * keys * d..][..2 * keys * d];
                let (pk, pv) = acc.split_at(keys * d);
                for (o, x) in dk_all[h * keys * d..][..keys * d].iter_mut().zip(pk) {
                    *o += x;
                }
                for (o, x) in dv_all[h * keys * d..][..keys * d].iter_mut().zip(pv) {
                    *o += x;
                }
            }
        }
        Ok((CpuStorage::F32(all), Shape::from(nq + 2 * nk)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var, D};

    fn wavy(dims: (usize, usize, usize, usize), phase: f32) -> Var {
        let n = dims.0 * dims.1 * dims.2 * dims.3;
        let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37 + phase).sin() * 1.5).collect();
        Var::from_tensor(&Tensor::from_vec(v, dims, &Device::Cpu).unwrap()).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    }

    /// Keys marked constant get a zero gradient; every other gradient is the one the op gives
    /// without the mark (a prompt head's keys, 3..40 of 48, with the role tokens 0..3 and
    /// the 8-token tail still in the graph; blocks of 64 rows and the widest's edges).
    #[test]
    fn constant_keys_get_no_gradient_and_change_no_other() {
        let (b, kv, rep, q_len, past, d) = (1, 2, 7, 8, 40, 16);
        let (rows, keys) = (rep * q_len, past + q_len);
        let q = wavy((b, kv, rows, d), 0.0);
        let k = wavy((b, kv, keys, d), 1.0);
        let v = wavy((b, kv, keys, d), 2.0);
        let w = wavy((b, kv, rows, d), 3.0).as_tensor().detach();
        let grads = |constant_keys| {
            let o = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), CausalAttention { q_len, constant_keys, hidden: None }).unwrap();
            let g = (&o * &w).unwrap().sum_all().unwrap().backward().unwrap();
            [&q, &k, &v].map(|x| g.get(x.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap())
        };
        let (all, marked) = (grads((0, 0)), grads((3, 40)));
        assert_eq!(marked[0], all[0], "dq does not depend on the mark");
        for (x, (got, want)) in ["k", "v"].iter().zip(marked[1..].iter().zip(&all[1..])) {
            for (i, (g, e)) in got.iter().zip(want).enumerate() {
                let key = (i / d) % keys;
                match (3..40).contains(&key) {
                    true => assert_eq!(*g, 0.0, "d{x} of constant key {key}"),
                    false => assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "d{x} of key {key}: {g} vs {e}"),
                }
            }
            assert!(want.iter().enumerate().any(|(i, e)| (3..40).contains(&((i / d) % keys)) && *e != 0.0));
        }
    }

    /// The op against candle's matmul, additive causal mask, softmax and matmul, forward and
    /// all three gradients, over a weighted sum of the output.
    fn check(b: usize, kv: usize, rep: usize, q_len: usize, past: usize, d: usize) {
        let rows = rep * q_len;
        let keys = past + q_len;
        let q = wavy((b, kv, rows, d), 0.0);
        let k = wavy((b, kv, keys, d), 1.0);
        let v = wavy((b, kv, keys, d), 2.0);
        let w = wavy((b, kv, rows, d), 3.0).as_tensor().detach();
        let got = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), CausalAttention::causal(q_len)).unwrap();
        let mask: Vec<f32> = (0..rows)
            .flat_map(|r| (0..keys).map(move |j| if j <= past + r % q_len { 0.0 } else { f32::NEG_INFINITY }))
            .collect();
        let mask = Tensor::from_vec(mask, (rows, keys), &Device::Cpu).unwrap();
        let scores = q.as_tensor().matmul(&k.as_tensor().t().unwrap()).unwrap().broadcast_add(&mask).unwrap();
        let want = candle_nn::ops::softmax(&scores, D::Minus1).unwrap().matmul(v.as_tensor()).unwrap();
        let at = format!("b {b}, kv {kv}, rep {rep}, q_len {q_len}, past {past}, d {d}");
        assert!(max_diff(&got, &want) < 1e-5, "{at}: forward off by {}", max_diff(&got, &want));
        let g_got = (&got * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let g_want = (&want * &w).unwrap().sum_all().unwrap().backward().unwrap();
        for (name, var) in [("q", &q), ("k", &k), ("v", &v)] {
            let (a, e) = (g_got.get(var.as_tensor()).unwrap(), g_want.get(var.as_tensor()).unwrap());
            let scale = e.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap().max(1.0);
            assert!(max_diff(a, e) < 1e-4 * scale, "{at}: d{name} off by {} (scale {scale})", max_diff(a, e));
        }
    }

    #[test]
    fn matches_masked_softmax_attention_with_gradients() {
        // No prompt head, a head, several row blocks with the diagonal restarting inside one
        // (rep heads folded), and one head problem split over parts.
        check(1, 1, 1, 5, 0, 8);
        check(2, 3, 2, 7, 11, 16);
        check(1, 2, 7, 40, 300, 64);
        check(1, 1, 3, 130, 2, 24);
    }

    /// A padded batch: each row hides its own run of keys (its padding) from all its queries,
    /// as the additive mask of the prefill's padded tails does; a query whose every key is
    /// hidden (a padding position with nothing before it) gives 0, not NaN.
    #[test]
    fn hidden_runs_match_the_masked_softmax_of_a_padded_batch() {
        let (b, kv, rep, q_len, past, d) = (3, 2, 3, 9, 20, 16);
        let (rows, keys) = (rep * q_len, past + q_len);
        // Row 0 hides part of its head, row 1 its head's end and its tail's first 4 queries,
        // row 2 everything before its tail's 6th query (its first queries see nothing).
        let runs: Arc<[(usize, usize)]> = vec![(3, 5), (14, 10), (0, past + 5)].into();
        let q = wavy((b, kv, rows, d), 0.0);
        let k = wavy((b, kv, keys, d), 1.0);
        let v = wavy((b, kv, keys, d), 2.0);
        let op = CausalAttention { hidden: Some(runs.clone()), ..CausalAttention::causal(q_len) };
        let got = q.as_tensor().apply_op3_no_bwd(k.as_tensor(), v.as_tensor(), &op).unwrap();
        let got = got.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for bi in 0..b {
            let (start, len) = runs[bi];
            let sees = |r: usize, j: usize| j <= past + r % q_len && !(start..start + len).contains(&j);
            let mask: Vec<f32> = (0..rows).flat_map(|r| (0..keys).map(move |j| if sees(r, j) { 0.0 } else { f32::NEG_INFINITY })).collect();
            let mask = Tensor::from_vec(mask, (1, 1, rows, keys), &Device::Cpu).unwrap();
            let [qb, kb, vb] = [&q, &k, &v].map(|t| t.as_tensor().narrow(0, bi, 1).unwrap());
            let scores = qb.matmul(&kb.t().unwrap()).unwrap().broadcast_add(&mask).unwrap();
            let want = candle_nn::ops::softmax(&scores, D::Minus1).unwrap().matmul(&vb).unwrap();
            let want = want.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for (i, w) in want.iter().enumerate() {
                let (r, x) = ((i / d) % rows, got[bi * kv * rows * d + i]);
                match (0..keys).any(|j| sees(r, j)) {
                    true => assert!((x - w).abs() < 1e-5, "row {bi}, query {r}: {x} against {w}"),
                    false => assert_eq!(x, 0.0, "row {bi}, query {r} sees nothing"),
                }
            }
        }
        // A run past the keys is refused.
        let bad = CausalAttention { hidden: Some(vec![(0, 1), (27, 3), (0, 1)].into()), ..CausalAttention::causal(q_len) };
        assert!(q.as_tensor().apply_op3_no_bwd(k.as_tensor(), v.as_tensor(), &bad).is_err());
    }

    /// A prompt's last `tail` queries, attended after a cached head, give the bits of the same
    /// rows of the whole prompt attended at once: prefix reuse may not change what greedy
    /// decoding writes (`prefix_reuse_gives_the_same_tokens_as_a_cold_run`).
    fn check_tail_is_exact(kv: usize, rep: usize, len: usize, tail: usize, d: usize) {
        let (q, k, v) = (wavy((1, kv, rep * len, d), 0.0), wavy((1, kv, len, d), 1.0), wavy((1, kv, len, d), 2.0));
        let whole = q.as_tensor().apply_op3_no_bwd(k.as_tensor(), v.as_tensor(), &CausalAttention::causal(len)).unwrap();
        let whole = whole.reshape((kv, rep, len, d)).unwrap().narrow(2, len - tail, tail).unwrap();
        let q_tail = q.as_tensor().reshape((kv, rep, len, d)).unwrap().narrow(2, len - tail, tail).unwrap();
        let q_tail = q_tail.contiguous().unwrap().reshape((1, kv, rep * tail, d)).unwrap();
        let alone = q_tail.apply_op3_no_bwd(k.as_tensor(), v.as_tensor(), &CausalAttention::causal(tail)).unwrap();
        let (a, b): (Vec<f32>, Vec<f32>) = (whole.flatten_all().unwrap().to_vec1().unwrap(), alone.flatten_all().unwrap().to_vec1().unwrap());
        let differ = a.iter().zip(&b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
        assert_eq!(differ, 0, "kv {kv}, rep {rep}, len {len}, tail {tail}, d {d}: {differ} of {} outputs differ", a.len());
    }

    #[test]
    fn a_tail_after_a_head_gives_the_bits_of_the_whole() {
        check_tail_is_exact(1, 1, 40, 7, 64);
        check_tail_is_exact(3, 3, 45, 6, 64);
        // 66 tail rows leave a block of 2: gemm's kernel for 2 rows rounded differently
        // before blocks were padded to 64 rows.
        check_tail_is_exact(3, 3, 120, 22, 64);
        check_tail_is_exact(2, 7, 300, 50, 64);
        check_tail_is_exact(1, 2, 700, 130, 64);
    }

    #[test]
    fn refuses_shapes_it_cannot_attend() {
        let q = Tensor::zeros((1, 2, 6, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let k = Tensor::zeros((1, 2, 4, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        // 6 rows are not a whole number of 4-query heads.
        assert!(q.apply_op3(&k, &k, CausalAttention::causal(4)).is_err());
        // More queries per head than keys.
        assert!(q.apply_op3(&k, &k, CausalAttention::causal(6)).is_err());
        // Strided keys.
        let kt = Tensor::zeros((1, 2, 8, 4), candle_core::DType::F32, &Device::Cpu).unwrap().transpose(2, 3).unwrap();
        assert!(q.apply_op3(&kt, &kt, CausalAttention::causal(3)).is_err());
    }
}

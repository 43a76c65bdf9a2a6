//! Attention kernels on the CPU: one new position over the KV cache ([`DecodeAttention`]),
//! and a causal softmax with its backward ([`CausalSoftmax`]), which the learner ran between
//! two matmuls before its fused attention (`causal_attention.rs`); `bench attention` keeps it
//! as the path to compare against.
//!
//! Decode asks for `softmax(q·Kᵀ/√d)·V` with a single query per head. Through candle's
//! general matmul that is two tiny-`M` GEMMs per layer whose operand packing copies the
//! whole cache (the keys are a strided view of the cache's buffers) and allocates fresh
//! pages every step: at a 1,500-token context that made SmolLM2 decode at 0.57× llama.cpp.
//! This op reads the cache in place, one key and value row at a time.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};

/// `(b, heads, q, d)` queries against `(b, kv_heads, len, d)` keys and values (any strides
/// with a unit last one), grouped-query: query head `h` reads kv head `h / (heads / kv_heads)`.
/// Query `i` of a row is position `len − q + i` and sees keys `0 ..= len − q + i`. The output
/// is `(b, heads, q, d)`. `q > 1` serves a row that feeds several forced tokens in one pass.
/// With `hidden`, row `r` skips keys `hidden[r].0 .. hidden[r].0 + hidden[r].1` (a batch's
/// padding, before the new positions), as an additive mask of −∞ there would, but with no
/// exponential taken.
///
/// With `rows`, the keys and values hold more rows than the queries, and query row `r`'s
/// are their row `rows[r]`.
///
/// With `shared`, row `r`'s first `shared[r].1` keys and values are read from row
/// `shared[r].0`, which holds the same bits there (a group's samples of one prompt, or the
/// rows of a prefix group over their common head); the rows that read one source are done
/// one after the other per block of keys, so that only the first fetches the block from
/// memory and the others find it in the core's cache.
///
/// A query's arithmetic is its own (else greedy answers move with the batch they are
/// decoded in): its scores, its blocks of [`POSITION_BLOCK`] keys counted over the keys it
/// sees (hidden ones left out, not zeroed), their sums and their merge are the same bits
/// whatever rows, padding, sharing or other queries share the call.
#[derive(Debug, Clone, Default)]
pub struct DecodeAttention {
    /// Multiplies the scores (1/√d).
    pub scale: f32,
    /// Per row, the run of keys `(start, len)` it must not see.
    pub hidden: Option<std::sync::Arc<[(usize, usize)]>>,
    /// Per row, `(source row, keys)`: its first `keys` keys and values are the source's.
    pub shared: Option<std::sync::Arc<[(usize, usize)]>>,
    /// Per row, the row of the keys and values that holds it: a cache whose finished rows
    /// were dropped from its map, not copied out (`KvCache::select_rows`). `None`: row `r`
    /// is row `r`.
    pub rows: Option<std::sync::Arc<[u32]>>,
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

/// Cached positions per work item. Splitting a (row, kv head) over position blocks keeps
/// both cores busy when there are fewer kv heads than threads × 2 (SmolLM2 has 3, Qwen
/// 0.5B 2), and keeps a block's values in L2 while each query head reads them.
const POSITION_BLOCK: usize = 256;

/// `Σ a_i b_i` in eight independent lanes, so that it vectorizes.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
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

/// Keys whose dot products with one query [`dots`] computes together.
pub const DOTS: usize = 8;

/// [`dot`] of `a` with each of `bs`, each bit for bit as `dot` gives it. One dot is one
/// chain of dependent adds (a head's 64 features: eight, each waiting on the last), so a
/// decode step's scores ran at an add's latency; the chains of several keys interleave.
///
/// In AVX registers by hand where the build targets AVX (x86-64-v3, `.cargo/config.toml`):
/// the portable loop below relies on LLVM keeping its 64 accumulators in registers, and a
/// change elsewhere in the crate (another split into codegen units) once left them on the
/// stack, one scalar add at a time, and the rollouts 15–25 % slower.
#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
pub fn dots(a: &[f32], bs: [&[f32]; DOTS]) -> [f32; DOTS] {
    use std::arch::x86_64::{__m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let whole = a.len() / 8 * 8;
    assert!(bs.iter().all(|b| b.len() >= a.len()), "a key as wide as the query");
    // SAFETY: AVX is enabled at compile time (the cfg above), which is all these intrinsics
    // need; each load reads eight floats at `c` with `c + 8 <= whole`, which is at most the
    // length of `a` and of every key (asserted above); each store writes `lanes`' eight.
    unsafe {
        let mut acc: [__m256; DOTS] = [_mm256_setzero_ps(); DOTS];
        for c in (0..whole).step_by(8) {
            let x = _mm256_loadu_ps(a.as_ptr().add(c));
            for (acc, b) in acc.iter_mut().zip(&bs) {
                // Multiply, then add (no fused multiply-add): `dot`'s rounding.
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(x, _mm256_loadu_ps(b.as_ptr().add(c))));
            }
        }
        std::array::from_fn(|n| {
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[n]);
            let tail: f32 = a[whole..].iter().zip(&bs[n][whole..]).map(|(x, y)| x * y).sum();
            lanes.iter().sum::<f32>() + tail
        })
    }
}

/// [`dots`] where the build does not target AVX.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
pub fn dots(a: &[f32], bs: [&[f32]; DOTS]) -> [f32; DOTS] {
    let whole = a.len() / 8 * 8;
    let mut acc = [[0f32; 8]; DOTS];
    for c in (0..whole).step_by(8) {
        let x: &[f32; 8] = a[c..c + 8].try_into().expect("eight features");
        for (acc, b) in acc.iter_mut().zip(&bs) {
            let y: &[f32; 8] = b[c..c + 8].try_into().expect("a key as wide as the query");
            for i in 0..8 {
                acc[i] += x[i] * y[i];
            }
        }
    }
    std::array::from_fn(|n| {
        let tail: f32 = a[whole..].iter().zip(&bs[n][whole..]).map(|(x, y)| x * y).sum();
        acc[n].iter().sum::<f32>() + tail
    })
}

/// `out[j] = scale · q·k_j` for the keys `k_j = k[base + j · stride ..][..q.len()]`, `j` in
/// `0..out.len()`, [`DOTS`] keys at a time (each score the bits [`dot`] gives it).
fn scaled_scores(q: &[f32], k: &[f32], base: usize, stride: usize, scale: f32, out: &mut [f32]) {
    let d = q.len();
    let key = |j: usize| &k[base + j * stride..][..d];
    let done = out.len() / DOTS * DOTS;
    let mut groups = out.chunks_exact_mut(DOTS);
    for (g, o) in groups.by_ref().enumerate() {
        let s = dots(q, std::array::from_fn(|n| key(g * DOTS + n)));
        for (o, s) in o.iter_mut().zip(s) {
            *o = scale * s;
        }
    }
    for (j, o) in groups.into_remainder().iter_mut().enumerate() {
        *o = scale * dot(q, key(done + j));
    }
}

/// The keys at visible positions `seen` of a row whose keys `hidden` are skipped (visible
/// position `p` is key `p` before the run, key `p + hidden.len()` after it): up to two runs
/// `(first key, count)`, the one before the hidden run and the one after it; either may be
/// empty.
pub(crate) fn visible_runs(seen: std::ops::Range<usize>, hidden: std::ops::Range<usize>) -> [(usize, usize); 2] {
    let before = seen.start.min(hidden.start)..seen.end.min(hidden.start);
    let after = seen.start.max(hidden.start)..seen.end.max(hidden.start);
    [(before.start, before.len()), (after.start + hidden.len(), after.len())]
}

/// How many of keys `0..end` a row whose keys `hidden` are skipped sees.
pub(crate) fn seen_before(end: usize, hidden: &std::ops::Range<usize>) -> usize {
    end - (hidden.start.min(end)..hidden.end.min(end)).len()
}

/// `e^x` for `x ≤ 0` (scores less their maximum), in plain arithmetic so that a loop of it
/// vectorizes: libm's `expf` is a call per element, and its underflow path (scores far
/// below the maximum) is slower still. `x = n ln 2 + r` with `|r| ≤ ln 2 / 2`, `e^r` by its
/// Taylor series to `r⁷` (within two f32 ulps of libm), `2ⁿ` written into
/// the exponent bits. Below −87 it returns `e^−87` (≈ 2 × 10⁻³⁸), nothing beside the 1
/// the maximum contributes.
///
/// `n` is rounded by adding 1.5 × 2²³, which leaves it in the sum's low mantissa bits: the
/// same ties-to-even rounding as `round_ties_even`, and the exponent comes from those bits.
/// Through `n as i32` instead (Rust's saturating cast) each element took a scalar compare
/// and two conditional moves, a quarter of the learner's softmax time.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // 1.5 × 2²³: sums with it lie in [2²³, 2²⁴), where the f32 spacing is 1.
    const ROUNDER: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // The low 9 bits of `shifted` are `n`'s, ROUNDER's are zero: `(n + 127) << 23` is 2ⁿ.
    p * f32::from_bits(shifted.to_bits().wrapping_add(127) << 23)
}

/// Independent accumulators of [`row_max`]: a reduction through one accumulator is a chain
/// the compiler may not reorder, so it would not vectorize.
const LANES: usize = 16;

/// `row ← softmax(row)`, the maximum and e^x each in a loop that vectorizes (a long prompt's
/// prefill spent most of its attention time in one loop that did both with the sum). The
/// sum stays one sequential chain: summed in lanes, the learner's log-probabilities moved
/// by more than its tests allow on the quantized weights (8-bit activations amplify a last
/// bit through the layers), where the order below reproduces the earlier results bit for bit.
pub(crate) fn softmax_in_place(row: &mut [f32]) {
    let max = row_max(row);
    row.iter_mut().for_each(|x| *x = exp_nonpositive(*x - max));
    let inv = 1.0 / row.iter().sum::<f32>();
    row.iter_mut().for_each(|x| *x *= inv);
}

/// Rows whose sums [`softmax_rows_in_place`] interleaves: enough independent chains to
/// cover an add's latency several times over.
const CHAINS: usize = 8;

/// [`softmax_in_place`] on each row, bit for bit, with the sums of [`CHAINS`] rows at a
/// time interleaved: each row's sum is still the one left-to-right chain, but the chains no
/// longer wait on each other (one chain waits an add's whole latency per element; it was a
/// third of the learner's softmax time).
///
/// Entries `hidden` of every row (a padded batch row's padding) take no part: they come out
/// 0, and a row they cover whole comes out all 0 (a padding query, whose output nothing
/// reads, stays finite).
pub(crate) fn softmax_rows_in_place(rows: &mut [&mut [f32]], hidden: std::ops::Range<usize>) {
    for row in rows.iter_mut() {
        let hide = hidden.start.min(row.len())..hidden.end.min(row.len());
        row[hide.clone()].fill(f32::NEG_INFINITY);
        let max = row_max(row);
        if max == f32::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        row.iter_mut().for_each(|x| *x = exp_nonpositive(*x - max));
        row[hide].fill(0.0);
    }
    for group in rows.chunks_mut(CHAINS) {
        let sums = interleaved_sums(group);
        for (row, sum) in group.iter_mut().zip(sums) {
            if sum > 0.0 {
                let inv = 1.0 / sum;
                row.iter_mut().for_each(|x| *x *= inv);
            }
        }
    }
}

/// Each row's left-to-right sum, as `iter().sum()` gives it, for up to [`CHAINS`] rows.
fn interleaved_sums(rows: &[&mut [f32]]) -> [f32; CHAINS] {
    debug_assert!(rows.len() <= CHAINS);
    // −0 is the sum of nothing, as `iter().sum()` starts (and −0 + x is x for every x).
    let mut sums = [-0f32; CHAINS];
    let common = rows.iter().map(|r| r.len()).min().unwrap_or(0);
    if rows.len() == CHAINS {
        let heads: [&[f32]; CHAINS] = std::array::from_fn(|i| &rows[i][..common]);
        for j in 0..common {
            for i in 0..CHAINS {
                sums[i] += heads[i][j];
            }
        }
    } else {
        for (sum, row) in sums.iter_mut().zip(rows) {
            *sum = row[..common].iter().sum();
        }
    }
    for (sum, row) in sums.iter_mut().zip(rows) {
        *sum = row[common..].iter().fold(*sum, |acc, &x| acc + x);
    }
    sums
}

/// The largest entry of `row`, in [`LANES`] accumulators (exact in any order).
fn row_max(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for i in 0..LANES {
            acc[i] = acc[i].max(c[i]);
        }
    }
    acc.into_iter().fold(rest, f32::max)
}

/// `out += Σ_j p_j · v_j` over the value rows of `runs` in turn (`(offset, count)`: `count`
/// rows from `v[offset ..]`, `stride` apart, each `D` wide), `p` holding their weights in
/// that order, the `D` sums held in registers (a width known at compile time lets the loop
/// keep them there) and carried from one run to the next: one chain per feature, as if the
/// rows were adjacent.
fn weighted_rows<const D: usize>(p: &[f32], v: &[f32], stride: usize, runs: &[(usize, usize)], out: &mut [f32]) {
    let mut acc = [0f32; D];
    let mut ws = p.iter();
    for &(offset, count) in runs {
        for r in 0..count {
            let w = *ws.next().expect("a weight per value row");
            let row: &[f32; D] = v[offset + r * stride..][..D].try_into().expect("a value row is D wide");
            for i in 0..D {
                acc[i] += w * row[i];
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o += a;
    }
}

/// [`weighted_rows`] for any width.
fn weighted_rows_any(p: &[f32], v: &[f32], stride: usize, runs: &[(usize, usize)], out: &mut [f32]) {
    let d = out.len();
    let mut acc = vec![0f32; d];
    let mut ws = p.iter();
    for &(offset, count) in runs {
        for r in 0..count {
            let w = *ws.next().expect("a weight per value row");
            for (a, &x) in acc.iter_mut().zip(&v[offset + r * stride..][..d]) {
                *a += w * x;
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o += a;
    }
}

/// The runs of keys `(first key, count)` of [`visible_runs`], each cut where a row's own keys
/// begin (`shared`, the keys it reads from its source row): `(row read, first key, count)`
/// in the same order, up to four, empty ones included.
fn runs_by_reader(runs: [(usize, usize); 2], shared: usize, source: usize, own: usize) -> [(usize, usize, usize); 4] {
    let mut cut = [(own, 0, 0); 4];
    for (i, (first, count)) in runs.into_iter().enumerate() {
        let from_source = shared.saturating_sub(first).min(count);
        cut[2 * i] = (source, first, from_source);
        cut[2 * i + 1] = (own, first + from_source, count - from_source);
    }
    cut
}

/// One work item's share of one query head: its positions' largest score and the sum of
/// `e^(score − max)` over them (the values weighted by those exponentials go to `outs`).
struct Partial {
    max: f32,
    sum: f32,
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
        let (qo, qst, [b, heads, q_len, d]) = strides4(ql)?;
        let (ko, kst, [kb, kv_heads, len, kd]) = strides4(kl)?;
        let (vo, vst, vdims) = strides4(vl)?;
        let buffer_row = |bi: usize| self.rows.as_ref().map_or(bi, |r| r[bi] as usize);
        let rows_fit = match &self.rows {
            None => kb == b,
            Some(r) => r.len() == b && r.iter().all(|&x| (x as usize) < kb),
        };
        if q_len == 0 || q_len > len || !rows_fit || kd != d || vdims != [kb, kv_heads, len, kd] || kv_heads == 0 || heads % kv_heads != 0 {
            candle_core::bail!("decode-attention: q {:?}, k {:?}, v {vdims:?}", ql.shape().dims(), kl.shape().dims());
        }
        let hidden = |bi: usize| self.hidden.as_ref().map_or(0..0, |h| h[bi].0..h[bi].0 + h[bi].1);
        if let Some(h) = &self.hidden {
            // Every query sees itself: the hidden runs lie before the new positions.
            if h.len() != b || (0..b).any(|bi| hidden(bi).end > len - q_len) {
                candle_core::bail!("decode-attention: hidden keys {h:?} for {b} rows of {len} keys, {q_len} new");
            }
        }
        let shared = |bi: usize| self.shared.as_ref().map_or((bi, 0), |s| s[bi]);
        if let Some(s) = &self.shared {
            // A source is a row of this batch, and only keys before the new positions are shared.
            if s.len() != b || s.iter().any(|&(source, keys)| source >= b || keys > len - q_len) {
                candle_core::bail!("decode-attention: shared keys {s:?} for {b} rows of {len} keys, {q_len} new");
            }
        }
        // Keys query `i` of row `bi` sees.
        let seen = |bi: usize, i: usize| seen_before(len - q_len + i + 1, &hidden(bi));
        let rep = heads / kv_heads;
        // Position blocks of the row that sees the most keys; a row with fewer has nothing
        // in its last ones.
        let blocks = (0..b).map(|bi| seen(bi, q_len - 1).div_ceil(POSITION_BLOCK)).max().unwrap_or(0);
        // Per (row, kv head, position block): for each of its `rep` query heads and `q_len`
        // queries, a partial softmax and its unnormalized output, merged below.
        let items = b * kv_heads * blocks;
        let per_item = rep * q_len;
        let item_of = |item: usize| (item / (kv_heads * blocks), item / blocks % kv_heads, item % blocks);
        // The order items run in: the rows that read one source one after the other for each
        // of its (kv head, block)s. The results do not depend on it.
        let mut order: Vec<usize> = (0..items).collect();
        if self.shared.is_some() {
            order.sort_by_key(|&item| {
                let (bi, kh, blk) = item_of(item);
                let reader = match shared(bi) {
                    (source, keys) if keys > 0 => source,
                    _ => bi,
                };
                (reader, kh, blk, bi)
            });
        }
        let mut partials: Vec<Partial> = (0..items * per_item).map(|_| Partial { max: f32::NEG_INFINITY, sum: 0.0 }).collect();
        let mut outs = vec![0f32; items * per_item * d];
        let (partials_addr, outs_addr) = (partials.as_mut_ptr() as usize, outs.as_mut_ptr() as usize);
        crate::pool::execute_chunked(items, |range| {
            let mut p = vec![0f32; POSITION_BLOCK];
            for &item in &order[range] {
                let (bi, kh, blk) = item_of(item);
                let (source, keys) = shared(bi);
                // SAFETY: each item owns its `per_item` partials and `per_item × d` outputs
                // (`order` is a permutation); both vectors outlive the pool's execution.
                let (part, out) = unsafe {
                    (
                        std::slice::from_raw_parts_mut((partials_addr as *mut Partial).add(item * per_item), per_item),
                        std::slice::from_raw_parts_mut((outs_addr as *mut f32).add(item * per_item * d), per_item * d),
                    )
                };
                // The block's keys are its row's visible ones `first..`, the hidden run skipped.
                let first = blk * POSITION_BLOCK;
                for r in 0..rep {
                    for i in 0..q_len {
                        let slot = r * q_len + i;
                        let last = seen(bi, i).min(first + POSITION_BLOCK);
                        if last <= first {
                            continue; // past this query's keys: its partial stays empty
                        }
                        let runs = runs_by_reader(visible_runs(first..last, hidden(bi)), keys, buffer_row(source), buffer_row(bi));
                        let qrow = &q[qo + bi * qst[0] + (kh * rep + r) * qst[1] + i * qst[2]..][..d];
                        let pr = &mut p[..last - first];
                        let mut at = 0;
                        for &(row, key, count) in &runs {
                            let kbase = ko + row * kst[0] + kh * kst[1] + key * kst[2];
                            scaled_scores(qrow, k, kbase, kst[2], self.scale, &mut pr[at..at + count]);
                            at += count;
                        }
                        let max = pr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        pr.iter_mut().for_each(|pj| *pj = exp_nonpositive(*pj - max));
                        part[slot] = Partial { max, sum: pr.iter().sum() };
                        let values = runs.map(|(row, key, count)| (vo + row * vst[0] + kh * vst[1] + key * vst[2], count));
                        let orow = &mut out[slot * d..][..d];
                        match d {
                            64 => weighted_rows::<64>(pr, v, vst[2], &values, orow),
                            128 => weighted_rows::<128>(pr, v, vst[2], &values, orow),
                            _ => weighted_rows_any(pr, v, vst[2], &values, orow),
                        }
                    }
                }
            }
        });
        // Merge each query's own blocks: rescale each to the overall maximum.
        let mut out = vec![0f32; b * heads * q_len * d];
        for bi in 0..b {
            for h in 0..heads {
                let (kh, r) = (h / rep, h % rep);
                for i in 0..q_len {
                    let own = seen(bi, i).div_ceil(POSITION_BLOCK);
                    let at = |blk: usize| ((bi * kv_heads + kh) * blocks + blk) * per_item + r * q_len + i;
                    let max = (0..own).map(|blk| partials[at(blk)].max).fold(f32::NEG_INFINITY, f32::max);
                    let orow = &mut out[((bi * heads + h) * q_len + i) * d..][..d];
                    let mut sum = 0f32;
                    for blk in 0..own {
                        let w = exp_nonpositive(partials[at(blk)].max - max);
                        sum += w * partials[at(blk)].sum;
                        for (o, &x) in orow.iter_mut().zip(&outs[at(blk) * d..][..d]) {
                            *o += w * x;
                        }
                    }
                    let inv = 1.0 / sum;
                    orow.iter_mut().for_each(|o| *o *= inv);
                }
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((b, heads, q_len, d))))
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
    fn exp_matches_libm_to_an_ulp_or_two() {
        let mut worst = 0f32;
        for i in 0..=20_000 {
            let x = -(i as f32) * 0.0043;
            let (got, want) = (exp_nonpositive(x), x.exp());
            worst = worst.max((got - want).abs() / want);
            assert!((got - want).abs() <= 2.5e-7 * want, "e^{x}: {got} vs {want}");
        }
        eprintln!("worst relative error {worst:e}");
        assert!(exp_nonpositive(-1e9) < 1e-37);
        assert_eq!(exp_nonpositive(0.0), 1.0);
    }

    #[test]
    fn exp_gives_the_bits_of_the_rounded_and_cast_formula() {
        // The formula as it stood before the exponent came from the rounding's bits.
        fn cast(x: f32) -> f32 {
            let x = x.max(-87.0);
            let n = (x * std::f32::consts::LOG2_E).round_ties_even();
            let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
            let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
            p * f32::from_bits(((n as i32 + 127) as u32) << 23)
        }
        // Every f32 in [−100, 0] whose low 8 mantissa bits are zero, the halfway points of
        // the rounding (x·log2 e = k + ½) and the edges.
        let sweep = (0u32..1 << 23).map(|i| -f32::from_bits(i << 8)).filter(|x| *x >= -100.0);
        let halves = (0..180).map(|k| -(k as f32 + 0.5) / std::f32::consts::LOG2_E);
        let edges = [0.0, -0.0, -87.0, -87.5, -1e9, f32::NEG_INFINITY, f32::NAN, f32::MIN_POSITIVE.copysign(-1.0)];
        for x in sweep.chain(halves).chain(edges) {
            assert_eq!(exp_nonpositive(x).to_bits(), cast(x).to_bits(), "e^{x}");
        }
    }

    #[test]
    fn interleaved_dots_give_each_dot_bit_for_bit() {
        for d in [64, 67, 5] {
            let q: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).sin() * 3.0).collect();
            let keys: Vec<Vec<f32>> = (0..DOTS).map(|n| (0..d).map(|i| ((i * 13 + n * 7) as f32 * 0.31).cos() * 2.0).collect()).collect();
            let together = dots(&q, std::array::from_fn(|n| keys[n].as_slice()));
            for (n, key) in keys.iter().enumerate() {
                assert_eq!(together[n].to_bits(), dot(&q, key).to_bits(), "d {d}, key {n}");
            }
            // Through the scores of a strided block, hidden keys and a remainder included.
            let flat: Vec<f32> = keys.iter().cycle().take(3 * DOTS + 3).flat_map(|k| [k.as_slice(), &[9.0; 4]].concat()).collect();
            let mut got = vec![f32::NAN; 3 * DOTS + 3];
            scaled_scores(&q, &flat, d + 4, d + 4, 0.125, &mut got[1..]);
            assert!(got[0].is_nan(), "a score outside `out` is left alone");
            for (j, s) in got.iter().enumerate().skip(1) {
                assert_eq!(s.to_bits(), (0.125 * dot(&q, &keys[j % DOTS])).to_bits(), "d {d}, score {j}");
            }
        }
    }

    #[test]
    fn softmax_rows_give_each_rows_softmax_bit_for_bit() {
        // Rows of unequal lengths (a causal block's), in groups of every size up to CHAINS.
        for count in 1..=2 * CHAINS + 3 {
            let mut data: Vec<Vec<f32>> = (0..count)
                .map(|r| (0..1 + (r * 37) % 300).map(|j| ((r * 7 + j) as f32 * 0.61).sin() * 9.0).collect())
                .collect();
            let want: Vec<Vec<f32>> = data
                .iter()
                .map(|row| {
                    let mut row = row.clone();
                    softmax_in_place(&mut row);
                    row
                })
                .collect();
            let mut rows: Vec<&mut [f32]> = data.iter_mut().map(|r| r.as_mut_slice()).collect();
            softmax_rows_in_place(&mut rows, 0..0);
            for (got, want) in data.iter().zip(&want) {
                let bits = |r: &[f32]| r.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(got), bits(want), "{count} rows");
            }
        }
    }

    #[test]
    fn matches_the_matmul_softmax_path_on_a_strided_cache() {
        // Two rows, 6 query heads over 2 kv heads, 13 positions in a 20-position buffer;
        // then 600 positions in 3 blocks, at the widths with a register path and without.
        for (len, cap, d) in [(13, 20, 16), (600, 640, 64), (300, 300, 128), (257, 300, 24)] {
            check(2, 6, 2, len, cap, d, None);
        }
    }

    #[test]
    fn hidden_keys_are_skipped_as_a_mask_would_hide_them() {
        // Runs inside one block, across a block boundary, covering whole blocks, at the
        // start, and none: each row its own.
        let runs: [(usize, usize); 5] = [(3, 4), (250, 20), (0, 512), (0, 1), (0, 0)];
        for (len, d) in [(600, 64), (13 + 512, 24)] {
            let hidden: Vec<(usize, usize)> = runs.iter().map(|&(s, n)| (s, n.min(len - 1 - s))).collect();
            check(runs.len(), 6, 2, len, len + 7, d, Some(&hidden));
        }
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|x| x.to_bits()).collect()
    }

    /// A padded row gives the bits of the same row without its padding, whatever
    /// the padding's length, so that its blocks, sums and merge do not move with the batch.
    #[test]
    fn a_padded_row_gives_the_bits_of_its_unpadded_keys() {
        let (heads, kv, d) = (6, 2, 64);
        // 700 visible keys (3 blocks), padded after 40 of them by runs of several lengths.
        let (seen, at) = (700, 40);
        let (k, v) = (wavy((1, kv, seen, d), 1.0), wavy((1, kv, seen, d), 2.0));
        let q = wavy((1, heads, 1, d), 0.0);
        let op = DecodeAttention { scale: 0.125, ..Default::default() };
        let want = bits(&q.apply_op3(&k, &v, op).unwrap());
        for pad in [1, 7, 216, 300, 600] {
            let widen = |t: &Tensor| {
                let junk = wavy((1, kv, pad, d), 5.0);
                Tensor::cat(&[&t.narrow(2, 0, at).unwrap(), &junk, &t.narrow(2, at, seen - at).unwrap()], 2).unwrap()
            };
            let op = DecodeAttention { scale: 0.125, hidden: Some(vec![(at, pad)].into()), shared: None, rows: None };
            let got = q.apply_op3(&widen(&k), &widen(&v), op).unwrap();
            assert_eq!(bits(&got), want, "{pad} padding keys");
        }
    }

    /// Several new positions in one call (a row's forced tokens fed in one pass)
    /// give each the bits it gets as the one new position of a call of its own, a batch's
    /// padding included.
    #[test]
    fn several_queries_give_each_the_bits_of_one_alone() {
        let (heads, kv, d, len, new) = (4, 2, 64, 520, 5);
        let (k, v) = (wavy((2, kv, len, d), 1.0), wavy((2, kv, len, d), 2.0));
        let q = wavy((2, heads, new, d), 0.0);
        for hidden in [None, Some(vec![(3, 250), (0, 0)])] {
            let op = DecodeAttention { scale: 0.125, hidden: hidden.clone().map(Into::into), shared: None, rows: None };
            let together = q.apply_op3(&k, &v, op.clone()).unwrap();
            for i in 0..new {
                let end = len - new + i + 1;
                let one = q.narrow(2, i, 1).unwrap();
                let alone = one.apply_op3(&k.narrow(2, 0, end).unwrap(), &v.narrow(2, 0, end).unwrap(), op.clone()).unwrap();
                assert_eq!(bits(&together.narrow(2, i, 1).unwrap()), bits(&alone), "query {i}, hidden {hidden:?}");
            }
            check_queries(&q, &k, &v, &op);
        }
        // A hidden run reaching the new positions is refused.
        let op = DecodeAttention { scale: 0.125, hidden: Some(vec![(0, len - new + 1), (0, 0)].into()), shared: None, rows: None };
        assert!(q.apply_op3(&k, &v, op).is_err());
    }

    /// Rows that read their front from a source row give the bits of reading their own copy,
    /// with and without padding, for fronts inside a block, across blocks and past the
    /// padding; the row's own slots there are never read (they hold junk here).
    #[test]
    fn rows_reading_a_shared_front_give_the_bits_of_their_own_copy() {
        let (b, heads, kv, d, len) = (5, 6, 2, 64, 700);
        let q = wavy((b, heads, 1, d), 0.0);
        let (k, v) = (wavy((b, kv, len, d), 1.0), wavy((b, kv, len, d), 2.0));
        for keys in [1, 100, 256, 300, 513, len - 1] {
            // Rows 1, 2 and 4 are copies of row 0 in their first `keys` slots; row 3 is its own.
            let copy_front = |t: &Tensor| {
                let rows: Vec<Tensor> = (0..b)
                    .map(|r| {
                        let row = t.narrow(0, r, 1).unwrap();
                        match r {
                            3 => row,
                            _ => Tensor::cat(&[&t.narrow(0, 0, 1).unwrap().narrow(2, 0, keys).unwrap(), &row.narrow(2, keys, len - keys).unwrap()], 2).unwrap(),
                        }
                    })
                    .collect();
                Tensor::cat(&rows, 0).unwrap()
            };
            let junk_front = |t: &Tensor, junk: &Tensor| {
                let rows: Vec<Tensor> = (0..b)
                    .map(|r| match r {
                        0 | 3 => t.narrow(0, r, 1).unwrap(),
                        _ => Tensor::cat(&[&junk.narrow(0, r, 1).unwrap().narrow(2, 0, keys).unwrap(), &t.narrow(0, r, 1).unwrap().narrow(2, keys, len - keys).unwrap()], 2).unwrap(),
                    })
                    .collect();
                Tensor::cat(&rows, 0).unwrap()
            };
            let (kc, vc) = (copy_front(&k), copy_front(&v));
            let (kj, vj) = (junk_front(&kc, &wavy((b, kv, len, d), 7.0)), junk_front(&vc, &wavy((b, kv, len, d), 8.0)));
            let shared: Vec<(usize, usize)> = (0..b).map(|r| if r == 3 { (3, 0) } else { (0, keys) }).collect();
            for hidden in [None, Some(vec![(20, 50), (20, 50), (0, 0), (3, 9), (20, 50)])] {
                let own = DecodeAttention { scale: 0.125, hidden: hidden.clone().map(Into::into), shared: None, rows: None };
                let want = bits(&q.apply_op3(&kc, &vc, own.clone()).unwrap());
                let op = DecodeAttention { shared: Some(shared.clone().into()), ..own };
                let got = bits(&q.apply_op3(&kj, &vj, op).unwrap());
                assert_eq!(got, want, "{keys} shared keys, hidden {hidden:?}");
            }
        }
        // A source outside the batch, or a shared run reaching the new position, is refused.
        for shared in [vec![(0, 0), (5, 1), (0, 0), (3, 0), (0, 0)], vec![(0, 0), (0, len), (0, 0), (3, 0), (0, 0)]] {
            let op = DecodeAttention { scale: 0.125, hidden: None, shared: Some(shared.into()), rows: None };
            assert!(q.apply_op3(&k, &v, op).is_err());
        }
    }

    /// Rows read through a map of the cache's rows give the bits of the rows copied out in
    /// that order, with padding and shared fronts (whose sources are rows of the batch, read
    /// through the map too); a map naming a row the cache lacks is refused.
    #[test]
    fn rows_read_through_a_map_give_the_bits_of_the_rows_copied_out() {
        let (cache_rows, heads, kv, d, len) = (6, 6, 2, 64, 600);
        let map: Vec<u32> = vec![5, 1, 3];
        let b = map.len();
        let q = wavy((b, heads, 1, d), 0.5);
        let (k, v) = (wavy((cache_rows, kv, len, d), 1.5), wavy((cache_rows, kv, len, d), 2.5));
        // Rows 3 and 5 of the cache share their first 300 slots (batch rows 0 and 2).
        let front = |t: &Tensor| {
            let rows: Vec<Tensor> = (0..cache_rows)
                .map(|r| match r {
                    3 => Tensor::cat(&[&t.narrow(0, 5, 1).unwrap().narrow(2, 0, 300).unwrap(), &t.narrow(0, 3, 1).unwrap().narrow(2, 300, len - 300).unwrap()], 2).unwrap(),
                    _ => t.narrow(0, r, 1).unwrap(),
                })
                .collect();
            Tensor::cat(&rows, 0).unwrap()
        };
        let (k, v) = (front(&k), front(&v));
        let idx = Tensor::new(map.as_slice(), &Device::Cpu).unwrap();
        let (kc, vc) = (k.index_select(&idx, 0).unwrap(), v.index_select(&idx, 0).unwrap());
        for shared in [None, Some(vec![(0, 0), (1, 0), (0, 300)])] {
            for hidden in [None, Some(vec![(10, 40), (0, 0), (10, 40)])] {
                let copied = DecodeAttention { scale: 0.125, hidden: hidden.clone().map(Into::into), shared: shared.clone().map(Into::into), rows: None };
                let want = bits(&q.apply_op3(&kc, &vc, copied.clone()).unwrap());
                let mapped = DecodeAttention { rows: Some(map.clone().into()), ..copied };
                let got = bits(&q.apply_op3(&k.narrow(2, 0, len).unwrap(), &v, mapped).unwrap());
                assert_eq!(got, want, "shared {shared:?}, hidden {hidden:?}");
            }
        }
        for bad in [vec![5, 1, 6], vec![5, 1]] {
            let op = DecodeAttention { scale: 0.125, rows: Some(bad.into()), ..Default::default() };
            assert!(q.apply_op3(&k, &v, op).is_err());
        }
    }

    /// Several queries against the masked softmax of repeat-kv and matmuls.
    fn check_queries(q: &Tensor, k: &Tensor, v: &Tensor, op: &DecodeAttention) {
        let (b, heads, new, d) = q.dims4().unwrap();
        let (_, kv, len, _) = k.dims4().unwrap();
        let got = q.apply_op3(k, v, op.clone()).unwrap();
        let rep = |t: &Tensor| t.unsqueeze(2).unwrap().broadcast_as((b, kv, heads / kv, len, d)).unwrap().reshape((b, heads, len, d)).unwrap();
        let scores = (q.matmul(&rep(k).t().unwrap()).unwrap() * f64::from(op.scale)).unwrap();
        let mut m = vec![0f32; b * new * len];
        for r in 0..b {
            let (s, n) = op.hidden.as_ref().map_or((0, 0), |h| h[r]);
            for i in 0..new {
                let row = &mut m[(r * new + i) * len..][..len];
                row[s..s + n].fill(-1e9);
                row[len - new + i + 1..].fill(-1e9);
            }
        }
        let scores = scores.broadcast_add(&Tensor::from_vec(m, (b, 1, new, len), &Device::Cpu).unwrap()).unwrap();
        let want = candle_nn::ops::softmax(&scores, D::Minus1).unwrap().matmul(&rep(v)).unwrap();
        let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "{new} queries: max diff {diff}");
    }

    /// Our op against repeat-kv, matmul, softmax (with an additive mask where `hidden` is
    /// given), matmul.
    fn check(b: usize, heads: usize, kv: usize, len: usize, cap: usize, d: usize, hidden: Option<&[(usize, usize)]>) {
        let q = wavy((b, heads, 1, d), 0.0);
        let kbuf = wavy((b, kv, cap, d), 1.0);
        let vbuf = wavy((b, kv, cap, d), 2.0);
        let (k, v) = (kbuf.narrow(2, 0, len).unwrap(), vbuf.narrow(2, 0, len).unwrap());
        let scale = 1.0 / (d as f32).sqrt();
        let op = DecodeAttention { scale, hidden: hidden.map(Into::into), shared: None, rows: None };
        let got = q.apply_op3(&k, &v, op).unwrap();
        // The reference: repeat kv heads, then matmul, softmax, matmul.
        let rep = |t: &Tensor| {
            let t = t.contiguous().unwrap().unsqueeze(2).unwrap();
            t.broadcast_as((b, kv, heads / kv, len, d)).unwrap().reshape((b, heads, len, d)).unwrap()
        };
        let (kr, vr) = (rep(&k), rep(&v));
        let scores = (q.matmul(&kr.t().unwrap()).unwrap() * scale as f64).unwrap();
        let scores = match hidden {
            Some(h) => {
                let mut m = vec![0f32; b * len];
                for (r, &(s, n)) in h.iter().enumerate() {
                    m[r * len + s..r * len + s + n].fill(-1e9);
                }
                scores.broadcast_add(&Tensor::from_vec(m, (b, 1, 1, len), &Device::Cpu).unwrap()).unwrap()
            }
            None => scores,
        };
        let want = candle_nn::ops::softmax(&scores, D::Minus1).unwrap().matmul(&vr).unwrap();
        let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "len {len}, width {d}: max diff {diff}");
    }
}

/// Softmax over the last axis of `(.., q, kv)` scores with the causal mask built in:
/// query `i` sees keys `0 ..= kv - q + i`, the rest get probability 0. Has a backward.
///
/// One pass per row for each direction, rows spread over the compute pool. The learner's
/// scores are `heads × tail × (head + tail)` per layer; through candle's ops (a mask add, a
/// softmax, and a backward of a product, a sum and a broadcast product) they took 14 % of a
/// 0.5B update on one core with libm's `expf`.
#[derive(Debug, Clone, Copy)]
pub struct CausalSoftmax;

/// Rows per work item of the causal softmax: enough to amortize a task, few enough that
/// both cores get an even share of a layer's rows.
const SOFTMAX_ROWS: usize = 64;

/// `(q, kv)` of a contiguous `(.., q, kv)` layout, and its element range.
fn causal_rows(layout: &Layout) -> candle_core::Result<(usize, usize, usize, usize)> {
    let dims = layout.shape().dims();
    if dims.len() < 2 {
        candle_core::bail!("causal-softmax needs (.., q, kv), got {dims:?}");
    }
    let (q, kv) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    if q > kv {
        candle_core::bail!("causal-softmax: {q} queries but only {kv} keys");
    }
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("causal-softmax needs a contiguous input");
    };
    Ok((q, kv, start, end))
}

/// Runs `f(row_index, out_row)` over the `kv`-wide rows of `out`, in parallel.
fn for_each_row(out: &mut [f32], kv: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let rows = out.len() / kv.max(1);
    let addr = out.as_mut_ptr() as usize;
    crate::pool::execute_chunked(rows.div_ceil(SOFTMAX_ROWS), |items| {
        for item in items {
            for r in item * SOFTMAX_ROWS..((item + 1) * SOFTMAX_ROWS).min(rows) {
                // SAFETY: each row index is visited once, by one task; `out` outlives the pool's run.
                let row = unsafe { std::slice::from_raw_parts_mut((addr as *mut f32).add(r * kv), kv) };
                f(r, row);
            }
        }
    });
}

impl CustomOp1 for CausalSoftmax {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, kv, start, end) = causal_rows(layout)?;
        let src = &storage.as_slice::<f32>()?[start..end];
        let mut dst = vec![0f32; src.len()];
        let offset = kv - q;
        for_each_row(&mut dst, kv, |r, out| {
            let visible = offset + r % q + 1;
            let out = &mut out[..visible];
            out.copy_from_slice(&src[r * kv..][..visible]);
            softmax_in_place(out);
        });
        Ok((CpuStorage::F32(dst), layout.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(res.contiguous()?.apply_op2_no_bwd(&grad_res.contiguous()?, &CausalSoftmaxGrad)?))
    }
}

/// The causal softmax's backward from its output `y` and the output's gradient `g`:
/// `dx = y ⊙ (g − Σ g ⊙ y)` per row; masked entries have `y = 0` and get none.
#[derive(Debug, Clone, Copy)]
struct CausalSoftmaxGrad;

impl CustomOp2 for CausalSoftmaxGrad {
    fn name(&self) -> &'static str {
        "causal-softmax-grad"
    }

    fn cpu_fwd(&self, ys: &CpuStorage, yl: &Layout, gs: &CpuStorage, gl: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, kv, ystart, yend) = causal_rows(yl)?;
        let (_, _, gstart, gend) = causal_rows(gl)?;
        if yl.shape() != gl.shape() {
            candle_core::bail!("causal-softmax-grad: y {:?} but g {:?}", yl.shape().dims(), gl.shape().dims());
        }
        let (y, g) = (&ys.as_slice::<f32>()?[ystart..yend], &gs.as_slice::<f32>()?[gstart..gend]);
        let mut dx = vec![0f32; y.len()];
        let offset = kv - q;
        for_each_row(&mut dx, kv, |r, out| {
            let visible = offset + r % q + 1;
            let (yr, gr) = (&y[r * kv..][..visible], &g[r * kv..][..visible]);
            let s = dot(yr, gr);
            for ((o, &yi), &gi) in out[..visible].iter_mut().zip(yr).zip(gr) {
                *o = yi * (gi - s);
            }
        });
        Ok((CpuStorage::F32(dx), yl.shape().clone()))
    }
}

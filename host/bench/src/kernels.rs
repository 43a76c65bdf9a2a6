//! The CPU kernels against the paths they replaced, in the same run: tiled quantized
//! products against candle's (`onebrain bench matmul`), the activations' quantization on the
//! pool against one thread (`bench quantize`), and the fused causal attention against matmul,
//! softmax, matmul (`bench attention`).

use std::time::Instant;

use candle_core::{
    quantized::{GgmlDType, QMatMul, QTensor},
    Module, Tensor,
};
use onebrain_kernels::TiledMatrix;
use onebrain_model::{DeviceChoice, Error, Result};
use serde::{Deserialize, Serialize};

/// One (matrix shape, activation rows) point of the CPU matmul comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatmulBench {
    /// Weight matrix `(out, in)`: Qwen 0.5B's MLP for Q8_0 and Q5_0, Qwen 1.5B's for the
    /// k-quants (and its output matrix for Q6_K).
    pub shape: (usize, usize),
    /// The block type: `Q8_0`, `Q5_0` (most of Qwen 0.5B's file), `Q4K` or `Q6K` (Qwen 1.5B's).
    pub dtype: String,
    /// The tiled kernel this CPU ran (`Avx512Vnni` or `Avx2`); `None` where it runs none.
    pub kernel: Option<String>,
    /// Activation rows multiplied at once (1 = decode, 4 / 8 = batched decode, 64 = prefill).
    pub rows: usize,
    /// Our tiles of the block type (`None` where this CPU runs no tiled kernel), µs per
    /// product.
    pub ours_us: Option<f64>,
    /// candle's `QMatMul` on the same matrix, µs per product (Q8_0 and Q5_0).
    pub candle_us: Option<f64>,
    /// candle's tiled x86 kernel, given a copy padded to a multiple of 256 columns (the
    /// layout this project used before its own kernel), µs per product (Q8_0 and Q5_0).
    pub candle_padded_us: Option<f64>,
    /// Fastest candle figure over ours.
    pub speedup: Option<f64>,
    /// The k-quants: the same matrix re-quantized to Q8_0, in tiles (how they were kept
    /// before tiles of their own), µs per product.
    pub q8_tiles_us: Option<f64>,
    /// `q8_tiles_us` over ours.
    pub over_q8_tiles: Option<f64>,
}

/// Matrices per shape cycled through, so that none is in the cache when multiplied (40 ×
/// 4.6 MB ≫ the 32 MB L3): decode streams every weight from memory once per token.
const MATMUL_SETS: usize = 40;

/// Qwen 1.5B's k-quant matrices: Q4_K FFN gate / up and down, and Q6_K down (half the layers)
/// and the untied output matrix.
const KQUANT_MATRICES: [(usize, usize, GgmlDType); 4] = [
    (8960, 1536, GgmlDType::Q4K),
    (1536, 8960, GgmlDType::Q4K),
    (1536, 8960, GgmlDType::Q6K),
    (151_936, 1536, GgmlDType::Q6K),
];

/// Bytes of a k-quant matrix's blocks cycled through, in copies of one matrix (the cache
/// holds addresses, not values), so that none is in the 32 MB L3 when multiplied.
const KQUANT_STREAM_BYTES: usize = 160 << 20;

/// Times Q8_0 and Q5_0 products of 1, 2, 4, 8 and 64 activation rows against Qwen 0.5B's
/// MLP shapes, ours and candle's in the same run; then Q4_K and Q6_K products of 1, 4 and 8
/// rows (and 256, a prefill, but for the output matrix) against Qwen 1.5B's shapes, their own
/// tiles against their Q8_0 re-quantization's.
pub fn bench_matmul() -> Result<Vec<MatmulBench>> {
    let dev = DeviceChoice::Cpu.open()?;
    let mut out = Vec::new();
    let kernel = onebrain_kernels::Kernel::best().map(|k| format!("{k:?}"));
    let shapes = [(4864usize, 896usize), (896, 4864)];
    for ((n, k), dtype) in shapes.into_iter().flat_map(|s| [(s, GgmlDType::Q8_0), (s, GgmlDType::Q5_0)]) {
        let padded_k = k.div_ceil(256) * 256;
        let (mut ours, mut candle, mut padded) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..MATMUL_SETS {
            let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
            let q = QTensor::quantize(&w, dtype)?;
            ours.push(TiledMatrix::from_qtensor(&q)?);
            candle.push(QMatMul::from_qtensor(q)?);
            let wp = w.pad_with_zeros(1, 0, padded_k - k)?;
            padded.push(QMatMul::from_qtensor(QTensor::quantize(&wp, dtype)?)?);
        }
        for rows in [1, 2, 4, 8, 64] {
            let x = Tensor::randn(0f32, 1.0, (rows, k), &dev)?;
            let xp = x.pad_with_zeros(1, 0, padded_k - k)?;
            let candle_us = time_cycled(candle.len(), |i| Ok(candle[i].forward(&x).map(drop)?))?;
            let candle_padded_us = time_cycled(padded.len(), |i| Ok(padded[i].forward(&xp).map(drop)?))?;
            let ours_us = match ours.iter().all(Option::is_some) {
                true => Some(time_cycled(ours.len(), |i| Ok(ours[i].as_ref().expect("checked").matmul(&x).map(drop)?))?),
                false => None,
            };
            out.push(MatmulBench {
                shape: (n, k),
                dtype: format!("{dtype:?}"),
                kernel: kernel.clone(),
                rows,
                ours_us,
                candle_us: Some(candle_us),
                candle_padded_us: Some(candle_padded_us),
                speedup: ours_us.map(|o| candle_us.min(candle_padded_us) / o),
                q8_tiles_us: None,
                over_q8_tiles: None,
            });
        }
    }
    if !TiledMatrix::available() {
        return Ok(out);
    }
    for (n, k, dtype) in KQUANT_MATRICES {
        let q = QTensor::quantize(&Tensor::randn(0f32, 1.0, (n, k), &dev)?, dtype)?;
        let q8 = QTensor::quantize(&q.dequantize(&dev)?, GgmlDType::Q8_0)?;
        let sets = KQUANT_STREAM_BYTES.div_ceil(q.storage_size_in_bytes());
        let copies = |q: &QTensor| -> Result<Vec<TiledMatrix>> {
            (0..sets)
                .map(|_| TiledMatrix::from_qtensor(q)?.ok_or_else(|| Error::Metadata { key: "bench matmul".into(), reason: format!("{n} × {k} {:?} does not tile", q.dtype()) }))
                .collect()
        };
        let (own, as_q8) = (copies(&q)?, copies(&q8)?);
        drop((q, q8));
        // 256 rows is a prefill's shape, where the kernel is bound by its arithmetic; the
        // output matrix is multiplied only at a prompt's last position.
        let prefill = if n == KQUANT_MATRICES[3].0 { None } else { Some(256) };
        for rows in [1, 4, 8].into_iter().chain(prefill) {
            let x = Tensor::randn(0f32, 1.0, (rows, k), &dev)?;
            // Alternated, so that a noisy neighbour slows both alike.
            let (mut ours_us, mut q8_tiles_us) = (f64::MAX, f64::MAX);
            for _ in 0..3 {
                ours_us = ours_us.min(time_cycled(sets, |i| Ok(own[i].matmul(&x).map(drop)?))?);
                q8_tiles_us = q8_tiles_us.min(time_cycled(sets, |i| Ok(as_q8[i].matmul(&x).map(drop)?))?);
            }
            out.push(MatmulBench {
                shape: (n, k),
                dtype: format!("{dtype:?}"),
                kernel: kernel.clone(),
                rows,
                ours_us: Some(ours_us),
                candle_us: None,
                candle_padded_us: None,
                speedup: None,
                q8_tiles_us: Some(q8_tiles_us),
                over_q8_tiles: Some(q8_tiles_us / ours_us),
            });
        }
    }
    Ok(out)
}

/// One shape of activations quantized for a tiled product: on the pool's threads (what a
/// product does from the kernels' threshold up) against on one thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuantizeBench {
    /// Activation rows and columns.
    pub shape: (usize, usize),
    /// µs on one thread.
    pub one_thread_us: f64,
    /// µs with the chunks of 8 rows shared among the pool's threads.
    pub pool_us: f64,
    /// `one_thread_us` over `pool_us`.
    pub speedup: f64,
}

/// Times the activation quantization in front of every tiled product at Qwen 1.5B's widths:
/// a prefill's 256 rows into a 1,536-wide (attention, gate, up) and an 8,960-wide matrix
/// (down), and batched decode's 16 rows. Empty where this CPU runs no tiled kernel.
pub fn bench_quantize() -> Result<Vec<QuantizeBench>> {
    let mut out = Vec::new();
    for (rows, cols) in [(256usize, 1536usize), (256, 8960), (64, 1536), (16, 1536)] {
        let x: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 13) as f32)).collect();
        if !onebrain_kernels::quantize_activations(&x, rows, cols, false) {
            return Ok(out);
        }
        // Alternated, so that a noisy neighbour slows both alike.
        let (mut one, mut pool) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            one = one.min(time_cycled(1, |_| Ok(_ = onebrain_kernels::quantize_activations(&x, rows, cols, false)))?);
            pool = pool.min(time_cycled(1, |_| Ok(_ = onebrain_kernels::quantize_activations(&x, rows, cols, true)))?);
        }
        out.push(QuantizeBench { shape: (rows, cols), one_thread_us: one, pool_us: pool, speedup: one / pool });
    }
    Ok(out)
}

/// Best-of-5 mean µs of `f(i)` over 20 calls, `i` cycling through `sets`, after a warm-up.
fn time_cycled(sets: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut i = 0;
    let mut call = |f: &mut dyn FnMut(usize) -> Result<()>| {
        i = (i + 1) % sets;
        f(i)
    };
    for _ in 0..sets {
        call(&mut f)?;
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..20 {
            call(&mut f)?;
        }
        best = best.min(t.elapsed().as_secs_f64() / 20.0);
    }
    Ok(best * 1e6)
}

/// The learner's attention at one training shape, fused against the path before it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttentionBench {
    /// What the shape is (`Judge tail`, `Actor tail`).
    pub what: String,
    /// Query positions with a graph (the tail).
    pub queries: usize,
    /// Keys each sees at most (prompt head + tail).
    pub keys: usize,
    /// Query heads and kv heads (Qwen 0.5B: 14 over 2).
    pub heads: (usize, usize),
    /// Forward + backward of one layer, fused (`CausalAttention`), ms.
    pub fused_ms: f64,
    /// The same with the prompt's keys constants of the graph, as a detached prompt head's
    /// are in training (no dK, dV computed for them), ms.
    pub fused_constant_head_ms: f64,
    /// Forward + backward of one layer through matmul, causal softmax, matmul (the learner's
    /// path before), ms.
    pub scores_kept_ms: f64,
    /// `scores_kept_ms / fused_ms`.
    pub speedup: f64,
    /// Bytes the path before kept per layer between forward and backward for its two score
    /// matrices (the fused op keeps none), MiB.
    pub scores_kept_mib: f64,
}

/// Times one layer's attention forward and backward at the 0.5B model's training shapes
/// (`judge-tail` 384 and a 320-token answer against about 1,400 prompt positions), fused
/// against matmul, causal softmax and matmul, and fused with the prompt's keys constant (as
/// the learner's detached heads are), in the same run.
pub fn bench_attention() -> Result<Vec<AttentionBench>> {
    use onebrain_kernels::{CausalAttention, CausalSoftmax};
    let dev = DeviceChoice::Cpu.open()?;
    let (heads, kv, d) = (14usize, 2usize, 64usize);
    let rep = heads / kv;
    let mut out = Vec::new();
    for (what, queries, prompt) in [("Judge tail", 384usize, 1_000usize), ("Actor tail", 321, 1_000), ("long prompt", 64, 8_000)] {
        let keys = prompt + queries;
        let q = candle_core::Var::randn(0f32, 0.2, (1, kv, rep * queries, d), &dev)?;
        let k = candle_core::Var::randn(0f32, 1.0, (1, kv, keys, d), &dev)?;
        let v = candle_core::Var::randn(0f32, 1.0, (1, kv, keys, d), &dev)?;
        let w = Tensor::randn(0f32, 1.0, (1, kv, rep * queries, d), &dev)?;
        let fused = || -> Result<()> {
            let o = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), CausalAttention::causal(queries))?;
            (o * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let constant_head = || -> Result<()> {
            let op = CausalAttention { constant_keys: (0, prompt), ..CausalAttention::causal(queries) };
            let o = q.as_tensor().apply_op3(k.as_tensor(), v.as_tensor(), op)?;
            (o * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let kept = || -> Result<()> {
            let scores = q.as_tensor().matmul(&k.as_tensor().t()?)?.reshape((1, kv, rep, queries, keys))?;
            let p = scores.apply_op1(CausalSoftmax)?.reshape((1, kv, rep * queries, keys))?;
            (p.matmul(v.as_tensor())? * &w)?.sum_all()?.backward()?;
            Ok(())
        };
        let time = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
            f()?;
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                f()?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            Ok(best * 1e3)
        };
        // Alternate the two, so a noisy neighbour hits both alike.
        let (mut fused_ms, mut fused_constant_head_ms, mut scores_kept_ms) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..3 {
            fused_ms = fused_ms.min(time(&fused)?);
            fused_constant_head_ms = fused_constant_head_ms.min(time(&constant_head)?);
            scores_kept_ms = scores_kept_ms.min(time(&kept)?);
        }
        out.push(AttentionBench {
            what: what.into(),
            queries,
            keys,
            heads: (heads, kv),
            fused_ms,
            fused_constant_head_ms,
            scores_kept_ms,
            speedup: scores_kept_ms / fused_ms,
            scores_kept_mib: (2 * heads * queries * keys * 4) as f64 / (1 << 20) as f64,
        });
    }
    Ok(out)
}

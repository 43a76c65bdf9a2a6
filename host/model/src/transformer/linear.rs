//! The backbone's projections: a weight in its three storages (block-quantized, dense,
//! tiled for the int8 kernel), a projection with its bias and LoRA adapter, and a role's
//! adapters per layer.

use std::sync::{Arc, OnceLock};

use candle_core::{quantized::QMatMul, DType, Module, Tensor};
use onebrain_kernels::{FrozenProduct, FrozenQuant, TiledMatrix};

use super::Mode;
use crate::Result;


/// A projection matrix, quantized (generation) or dense f32 (training, HF checkpoints).
#[derive(Debug, Clone)]
pub(crate) enum Weight {
    /// GGUF block-quantized weights; no gradient flows through these.
    Quant(QMatMul),
    /// Dense `(out, in)` f32; a `Var` when trainable.
    Dense(Tensor),
    /// GGUF weights as Q8_0 or Q5_0 tiles for our AVX-512 VNNI kernel ([`onebrain_kernels::TiledMatrix`]).
    Tiled(Arc<TiledMatrix>),
}

impl Weight {
    /// `x · Wᵀ` over the last dimension of `x`.
    pub(crate) fn matmul(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            // candle's quantized op has no backward: in a training graph, ours.
            Weight::Quant(QMatMul::QTensor(q)) if x.track_op() => Ok(x.contiguous()?.apply_op1(FrozenQuant(q.clone()))?),
            Weight::Quant(q) => Ok(q.forward(&x.contiguous()?)?),
            // In a training graph the product must pass a gradient to `x` (and only to `x`).
            Weight::Tiled(t) if x.track_op() => Ok(x.contiguous()?.apply_op1(FrozenProduct(t.clone()))?),
            Weight::Tiled(t) => Ok(t.matmul(x)?),
            Weight::Dense(w) => {
                let dims = x.dims().to_vec();
                let last = *dims.last().expect("matmul input has a last dimension");
                // A bf16 matrix multiplies in bf16; the activations stay f32 around it.
                let x2 = x.reshape(((), last))?.to_dtype(w.dtype())?;
                let y = x2.matmul(&w.t()?)?.to_dtype(x.dtype())?;
                let mut out = dims;
                *out.last_mut().unwrap() = w.dim(0)?;
                Ok(y.reshape(out)?)
            }
        }
    }

    /// [`Weight::matmul`] where each row's bits do not depend on the rows beside it.
    /// Our tiles quantize and sum each row on its own already. gemm (dense weights) sums a
    /// row's products in one order for every shape but a few, one row (a matrix-vector
    /// kernel) and at most 16 × 16 outputs (dot-product kernels): such a product gets zero
    /// rows to pass them. candle's quantized kernels, which serve only matrices the tiles
    /// cannot take (or CPUs without AVX2), pick repacked kernels by the row count and are
    /// left as they are.
    pub(crate) fn matmul_rows(&self, x: &Tensor) -> Result<Tensor> {
        let Weight::Dense(w) = self else { return self.matmul(x) };
        let dims = x.dims().to_vec();
        let last = *dims.last().expect("matmul input has a last dimension");
        let (m, n) = (x.elem_count() / last.max(1), w.dim(0)?);
        let least = 2.max((16 * 16 + 1usize).div_ceil(n));
        if m >= least || !x.device().is_cpu() {
            return self.matmul(x);
        }
        let x2 = x.reshape((m, last))?.pad_with_zeros(0, 0, least - m)?;
        let y = self.matmul(&x2)?.narrow(0, 0, m)?;
        let mut out = dims;
        *out.last_mut().expect("checked above") = n;
        Ok(y.reshape(out)?)
    }

    /// Rows of the matrix for token ids (the embedding lookup).
    pub(crate) fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Weight::Quant(q) => Ok(q.embedding(ids)?),
            Weight::Tiled(t) => {
                let mut dims = ids.dims().to_vec();
                dims.push(t.cols());
                let rows = t.rows_f32(&ids.flatten_all()?.to_vec1::<u32>()?)?;
                Ok(Tensor::from_vec(rows, dims, ids.device())?)
            }
            Weight::Dense(w) => {
                let mut dims = ids.dims().to_vec();
                dims.push(w.dim(1)?);
                Ok(w.index_select(&ids.flatten_all()?, 0)?.to_dtype(DType::F32)?.reshape(dims)?)
            }
        }
    }

    /// The weights as dense f32 `(out, in)`.
    pub(crate) fn dequantize(&self) -> Result<Tensor> {
        match self {
            Weight::Quant(QMatMul::QTensor(q)) => Ok(q.dequantize(&q.device())?),
            Weight::Quant(QMatMul::Tensor(t)) | Weight::Dense(t) => Ok(t.to_dtype(DType::F32)?),
            Weight::Quant(QMatMul::TensorF16(t)) => Ok(t.to_dtype(DType::F32)?),
            Weight::Tiled(t) => Ok(t.dequantize()?),
        }
    }

    /// Number of stored parameters.
    pub(crate) fn elem_count(&self) -> usize {
        match self {
            Weight::Quant(QMatMul::QTensor(q)) => q.shape().elem_count(),
            Weight::Quant(QMatMul::Tensor(t))
            | Weight::Quant(QMatMul::TensorF16(t))
            | Weight::Dense(t) => t.elem_count(),
            Weight::Tiled(t) => t.rows() * t.cols(),
        }
    }
}

/// A projection with an optional bias.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    pub(crate) w: Weight,
    pub(crate) b: Option<Tensor>,
    /// `(out, in)`.
    pub(crate) shape: (usize, usize),
}

impl Linear {
    /// `x · Wᵀ (+ b) (+ LoRA)`. In generation ([`Mode::Fast`]) every product gives each row
    /// the bits it gets alone, so that a row decodes the same whatever batch it is in.
    pub(super) fn forward(&self, x: &Tensor, lora: Option<(&LoraPair, f64)>, mode: Mode) -> Result<Tensor> {
        let mut y = match mode {
            Mode::Fast => self.w.matmul_rows(x)?,
            Mode::Diff => self.w.matmul(x)?,
        };
        if let Some(b) = &self.b {
            y = y.broadcast_add(b)?;
        }
        if let (Some((pair, scale)), Mode::Fast) = (lora, mode) {
            if x.device().is_cpu() && x.dtype() == DType::F32 {
                let delta = x.contiguous()?.apply_op1_no_bwd(&*pair.rows(scale)?)?;
                return Ok((y + delta)?);
            }
        }
        if let Some((pair, scale)) = lora {
            // LoRA: W x + s · B (A x). Rank ≪ width, so A first keeps it cheap.
            let dims = x.dims().to_vec();
            let last = dims[dims.len() - 1];
            let x2 = x.reshape(((), last))?;
            // Zero rows up to LORA_LEAST_ROWS, so that each row's bits do not depend on how
            // many rows the learner runs at once (a whole sequence, or a head and its tail).
            let m = x2.dim(0)?;
            let x2 = match m < LORA_LEAST_ROWS {
                true => x2.pad_with_zeros(0, 0, LORA_LEAST_ROWS - m)?,
                false => x2,
            };
            // The scale goes on Bᵀ (rank × out) rather than on the (tokens × out) delta.
            let delta = x2.matmul(&pair.a.t()?)?.matmul(&(pair.b.t()? * scale)?)?.narrow(0, 0, m)?;
            let delta = delta.reshape(y.shape())?;
            y = (y + delta)?;
        }
        Ok(y)
    }
}

/// Fewest rows the learner's LoRA products take (zero rows past a short input): gemm sums a
/// row's products in one order from 65 rows on, but through other kernels at most 16 × 16
/// outputs (a rank-8 product of up to 32 rows), and cuts the depth otherwise up to 64 rows
/// (into 512s; above, into equal parts).
const LORA_LEAST_ROWS: usize = 65;

/// The projections LoRA adapts, in PEFT's naming order.
pub const LORA_TARGETS: [&str; 7] =
    ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

/// One LoRA adapter: `A (rank, in)`, `B (out, rank)`.
#[derive(Debug, Clone)]
pub(crate) struct LoraPair {
    pub(crate) a: Tensor,
    pub(crate) b: Tensor,
    /// A and B laid out for [`LoraRows`], made on the first generation product and kept for
    /// the view's life (one call), instead of copied on every token's product.
    rows: OnceLock<Arc<LoraRows>>,
}

impl LoraPair {
    pub(crate) fn new(a: Tensor, b: Tensor) -> LoraPair {
        LoraPair { a, b, rows: OnceLock::new() }
    }

    /// The pair as [`LoraRows`] at `scale`. A view has one scale, so the first call's
    /// layout serves every later one; a different scale is rebuilt, not reused.
    fn rows(&self, scale: f64) -> Result<Arc<LoraRows>> {
        if let Some(rows) = self.rows.get().filter(|r| r.scale == scale) {
            return Ok(rows.clone());
        }
        let rows = Arc::new(LoraRows::new(self, scale)?);
        let _ = self.rows.set(rows.clone());
        Ok(rows)
    }
}

/// A LoRA pair's `s · (x · Aᵀ) · Bᵀ` on the CPU, row by row in one fixed order. Through
/// candle's matmul a row's sums ran in an order that depends on the row count (gemm picks
/// dot-product kernels for small products, blocked ones for large), so a row's bits moved
/// with the batch it decoded in.
struct LoraRows {
    /// `A (rank, in)`, row-major.
    a: Vec<f32>,
    /// `s · Bᵀ (rank, out)`, row-major: each rank's column of B, scaled, so that a row's
    /// outputs add one rank at a time in vector lanes.
    sbt: Vec<f32>,
    rank: usize,
    /// The `s` folded into `sbt`.
    scale: f64,
}

impl std::fmt::Debug for LoraRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraRows").field("rank", &self.rank).field("scale", &self.scale).finish_non_exhaustive()
    }
}

impl LoraRows {
    fn new(pair: &LoraPair, scale: f64) -> Result<LoraRows> {
        let (rank, _) = pair.a.dims2()?;
        let (out, _) = pair.b.dims2()?;
        let a = pair.a.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let b = pair.b.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let s = scale as f32;
        let sbt = (0..rank * out).map(|i| s * b[(i % out) * rank + i / out]).collect();
        Ok(LoraRows { a, sbt, rank, scale })
    }
}

/// Rows of a LoRA product per task: a row costs `rank × (in + out)` multiply-adds, a few µs.
const LORA_ROWS_PER_TASK: usize = 16;

impl candle_core::CustomOp1 for LoraRows {
    fn name(&self) -> &'static str {
        "lora-rows"
    }

    fn cpu_fwd(&self, storage: &candle_core::CpuStorage, layout: &candle_core::Layout) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use onebrain_kernels::{dot, dots, DOTS};
        let x = onebrain_kernels::slice(storage, layout)?;
        let dims = layout.shape().dims();
        let inp = *dims.last().unwrap_or(&0);
        let rank = self.rank;
        if rank == 0 || self.a.len() != rank * inp {
            candle_core::bail!("lora-rows: input {dims:?} against A of {} × {}", rank, self.a.len() / rank.max(1));
        }
        let out = self.sbt.len() / rank;
        let m = x.len() / inp.max(1);
        let mut y = vec![0f32; m * out];
        let a_row = |k: usize| &self.a[k * inp..][..inp];
        let row = |r: usize, y: &mut [f32]| {
            let xr = &x[r * inp..][..inp];
            // u = A x, DOTS ranks at a time (each the bits `dot` gives it).
            let mut u = vec![0f32; rank];
            let mut k = 0;
            while k + DOTS <= rank {
                u[k..k + DOTS].copy_from_slice(&dots(xr, std::array::from_fn(|n| a_row(k + n))));
                k += DOTS;
            }
            for (k, uk) in u.iter_mut().enumerate().skip(k) {
                *uk = dot(xr, a_row(k));
            }
            // y = (s Bᵀ)ᵀ u, one rank at a time into every output.
            for (k, &uk) in u.iter().enumerate() {
                for (o, &w) in y.iter_mut().zip(&self.sbt[k * out..][..out]) {
                    *o += uk * w;
                }
            }
        };
        let addr = y.as_mut_ptr() as usize;
        onebrain_kernels::pool::execute_chunked(m.div_ceil(LORA_ROWS_PER_TASK), |items| {
            for item in items {
                for r in item * LORA_ROWS_PER_TASK..((item + 1) * LORA_ROWS_PER_TASK).min(m) {
                    // SAFETY: each row is visited once, by one task; `y` outlives the pool's run.
                    row(r, unsafe { onebrain_kernels::span(addr, r * out, out) });
                }
            }
        });
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("an input row") = out;
        Ok((candle_core::CpuStorage::F32(y), candle_core::Shape::from(shape)))
    }
}

/// A role's view for one forward: soft tokens are prepended by the caller, adapters
/// are applied here. Tensors are detached in [`Mode::Fast`] so no graph is kept.
#[derive(Debug, Clone, Default)]
pub(crate) struct RoleView {
    /// Per layer, the adapters of [`LORA_TARGETS`] in order (`None` where a projection has
    /// none); empty when inactive.
    pub(crate) lora: Vec<[Option<LoraPair>; 7]>,
    pub(crate) scale: f64,
}

impl RoleView {
    pub(super) fn get(&self, layer: usize, target: usize) -> Option<(&LoraPair, f64)> {
        self.lora.get(layer).and_then(|l| l[target].as_ref()).map(|p| (p, self.scale))
    }
}

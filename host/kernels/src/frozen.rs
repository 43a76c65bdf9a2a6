//! Frozen quantized products inside a training graph, on candle's kernels.
//!
//! Where the CPU has no AVX-512 VNNI (or `tiled_cpu_kernels` is off) generation multiplies by
//! the GGUF matrices with candle's `QMatMul`, whose op has no backward: a gradient reaching it
//! would stop there. [`FrozenQuant`] is that same product (candle's own forward, so the learner
//! computes what the sampler drew with) with a backward that gives the input its gradient
//! `g · W` through a Q8_0 copy of Wᵀ and gives `W` none, as [`crate::FrozenProduct`]
//! does for our tiles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

/// `x · Wᵀ` for a frozen quantized `W`, with an input-only backward.
#[derive(Clone, Debug)]
pub struct FrozenQuant(pub Arc<QTensor>);

impl CustomOp1 for FrozenQuant {
    fn name(&self) -> &'static str {
        "frozen-qmatmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        CustomOp1::cpu_fwd(self.0.as_ref(), storage, layout)
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let wt = transposed(&self.0)?;
        Ok(Some(grad_res.contiguous()?.apply_op1(FrozenQuant(wt))?))
    }
}

/// Wᵀ as Q8_0, built once per matrix and kept while the matrix lives. Re-quantizing rounds
/// the weights a second time, which touches only the gradient.
fn transposed(w: &Arc<QTensor>) -> candle_core::Result<Arc<QTensor>> {
    type Cache = Mutex<HashMap<usize, (Weak<QTensor>, Arc<QTensor>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = Arc::as_ptr(w) as usize;
    if let Some((alive, t)) = cache.lock().expect("transpose cache").get(&key) {
        if alive.upgrade().is_some_and(|a| Arc::ptr_eq(&a, w)) {
            return Ok(t.clone());
        }
    }
    let wt = w.dequantize(&w.device())?.t()?.contiguous()?;
    let t = Arc::new(QTensor::quantize(&wt, GgmlDType::Q8_0)?);
    let mut map = cache.lock().expect("transpose cache");
    // Matrices of models since dropped give their copies back.
    map.retain(|_, (alive, _)| alive.strong_count() > 0);
    map.insert(key, (Arc::downgrade(w), t.clone()));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frozen_product_is_candles_and_passes_the_input_gradient_only() {
        let dev = candle_core::Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (64, 96), &dev).unwrap();
        let q = Arc::new(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap());
        let x = candle_core::Var::randn(0f32, 1.0, (3, 96), &dev).unwrap();
        let ours = x.as_tensor().apply_op1(FrozenQuant(q.clone())).unwrap();
        let candle = x.as_tensor().apply_op1_no_bwd(q.as_ref()).unwrap();
        let same = (&ours - &candle).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(same, 0.0, "the forward is candle's, bit for bit");
        let g = Tensor::randn(0f32, 1.0, (3, 64), &dev).unwrap();
        let grads = (&ours * &g).unwrap().sum_all().unwrap().backward().unwrap();
        let dx = grads.get(x.as_tensor()).expect("x gets a gradient");
        // Against g · W with the dequantized weights: only the transpose's rounding differs.
        let want = g.matmul(&q.dequantize(&dev).unwrap()).unwrap();
        let err = (dx - &want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let scale = want.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(err < 0.02 * scale, "input gradient off by {err} (scale {scale})");
    }
}

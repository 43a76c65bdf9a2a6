//! Q8_0 matrices stored with zero columns for candle's tiled x86 kernels.
//!
//! candle 0.11's AVX-512 VNNI / AVX-VNNI kernels repack a Q8_0 matrix into tiles of 16 rows
//! and quantize the activations in 256-wide blocks, so they refuse a width that is not a
//! multiple of 256: Qwen 0.5B's 896 and SmolLM2's 576. Those matrices then went through a
//! dot product per (activation row, weight row) that reads every weight once per row; on
//! the 0.5B model that was 72 % of the CPU time of `bench model` (perf), nearly all of it
//! in prefill. Padded with zero columns (which add nothing to any product), they take the
//! tiled kernels: prefill and batched decode read each weight once per tile of rows.
//!
//! At one row (single-sequence decode) the tiles would read the padding too, and decode is
//! bound by memory: [`gemv`] reads only the real blocks of the padded rows instead.

use std::borrow::Cow;

use candle_core::quantized::{
    k_quants::{BlockQ8_0, GgmlType},
    GgmlDType, QTensor,
};

use crate::Result;

/// candle's activation block for the tiled kernels (QK_K).
const BLOCK: usize = 256;
/// Rows per repacked tile.
const TILE_ROWS: usize = 16;

/// The column count to store a Q8_0 `(rows, cols)` matrix with, when padding it lets the
/// tiled kernels take it; `None` where they would not run (no VNNI: plain AVX2 keeps the
/// compact layout) or are not needed. Costs the padding's memory: +14 % at 896 columns,
/// +33 % at 576.
pub(crate) fn stored_cols(rows: usize, cols: usize) -> Option<usize> {
    if cols % BLOCK == 0 || cols % BlockQ8_0::BLCK_SIZE != 0 || rows % TILE_ROWS != 0 || !tiled_kernels_available() {
        return None;
    }
    Some(cols.div_ceil(BLOCK) * BLOCK)
}

/// Whether candle's repacked x86 kernels run Q8_0 on this CPU (its `repack_x86::level`).
fn tiled_kernels_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::env::var("MISTRALRS_FORCE_AVX2").as_deref() == Ok("1") {
            return false;
        }
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
            || (is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `W x` for one activation row `x` (`cols` values) and a Q8_0 matrix padded past `cols`,
/// reading only each row's first `cols / 32` blocks. `None` when `w` is not a CPU Q8_0
/// matrix laid out as expected (the caller then takes the general path).
pub(crate) fn gemv(w: &QTensor, cols: usize, x: &[f32]) -> Result<Option<Vec<f32>>> {
    if w.dtype() != GgmlDType::Q8_0 || x.len() != cols || cols % BlockQ8_0::BLCK_SIZE != 0 {
        return Ok(None);
    }
    let (rows, stored) = w.shape().dims2()?;
    let data = w.data()?;
    let Cow::Borrowed(bytes) = data else { return Ok(None) };
    let n_blocks = rows * stored / BlockQ8_0::BLCK_SIZE;
    if bytes.len() != n_blocks * std::mem::size_of::<BlockQ8_0>()
        || bytes.as_ptr().align_offset(std::mem::align_of::<BlockQ8_0>()) != 0
    {
        return Ok(None);
    }
    // SAFETY: the storage of a CPU Q8_0 tensor is a `Vec<BlockQ8_0>` (length and alignment
    // checked above), and `BlockQ8_0` is plain `repr(C)` data.
    let blocks: &[BlockQ8_0] = unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), n_blocks) };
    let (real, per_row) = (cols / BlockQ8_0::BLCK_SIZE, stored / BlockQ8_0::BLCK_SIZE);
    let mut xq = vec![BlockQ8_0::zeros(); real];
    BlockQ8_0::from_float(x, &mut xq);
    let mut out = vec![0f32; rows];
    let out_addr = out.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(rows, |range| {
        for r in range {
            let dot = BlockQ8_0::vec_dot(cols, &blocks[r * per_row..r * per_row + real], &xq);
            // SAFETY: each row index belongs to exactly one chunk, so no two workers write
            // the same element, and `out` outlives the pool's execution.
            unsafe { *(out_addr as *mut f32).add(r) = dot };
        }
    });
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{quantized::QMatMul, Device, Module, Tensor};

    /// A deterministic `(rows, cols)` matrix with values of both signs and varied sizes.
    fn wavy(rows: usize, cols: usize, phase: f32) -> Tensor {
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37 + phase).sin() * (1.0 + (i % 7) as f32)).collect();
        Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap()
    }

    #[test]
    fn the_padded_row_product_equals_the_compact_one() {
        let (rows, cols) = (48, 96);
        let w = wavy(rows, cols, 0.0);
        let compact = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let padded = QTensor::quantize(&w.pad_with_zeros(1, 0, 160).unwrap(), GgmlDType::Q8_0).unwrap();
        let x = wavy(1, cols, 1.0);
        let want: Vec<f32> =
            QMatMul::from_qtensor(compact).unwrap().forward(&x).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let x: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
        let got = gemv(&padded, cols, &x).unwrap().expect("a CPU Q8_0 matrix");
        assert_eq!(got.len(), rows);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
        }
        // Another type, or an input of the wrong width: the caller's general path.
        let q4 = QTensor::quantize(&w.pad_with_zeros(1, 0, 160).unwrap(), GgmlDType::Q4_0).unwrap();
        assert!(gemv(&q4, cols, &x).unwrap().is_none());
        assert!(gemv(&padded, cols, &x[..64]).unwrap().is_none());
    }
}

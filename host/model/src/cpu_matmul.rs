//! How GGUF matrices are laid out and multiplied on x86 CPUs, beyond what candle does.
//!
//! **Several rows (prefill, batched decode): padded Q8_0 for the tiled kernels.** candle
//! 0.11's AVX-512 VNNI / AVX-VNNI kernels repack a Q8_0 matrix into tiles of 16 rows and
//! quantize the activations in 256-wide blocks, so they refuse a width that is not a
//! multiple of 256: Qwen 0.5B's 896 and SmolLM2's 576. Those matrices then went through a
//! dot product per (activation row, weight row) that reads every weight once per row; on
//! the 0.5B model that was 72 % of the CPU time of `bench model` (perf), nearly all of it in
//! prefill. Padded with zero columns (which add nothing to any product) they take the tiled
//! kernels, which read each weight once per tile of rows.
//!
//! **One row (single-sequence decode).** The tiles would read the padding too: 14 % slower
//! decode on Qwen 0.5B. [`gemv_q8_0`] reads only the real blocks of the padded rows with
//! candle's own dot product instead. (perf shows decode bound by that dot product's
//! arithmetic, not by memory, here: an AVX-512 VNNI kernel and one reading the file's
//! compact Q5_0 blocks, 35 % fewer bytes, were both tried and gained nothing measurable in
//! the model, so neither is kept.)

use std::borrow::Cow;

use candle_core::quantized::{
    k_quants::{BlockQ8_0, GgmlType},
    QTensor,
};

use crate::Result;

/// candle's activation block for the tiled kernels (QK_K).
const BLOCK: usize = 256;
/// Rows per repacked tile.
const TILE_ROWS: usize = 16;
/// Values per Q8_0 block.
const QK: usize = 32;

/// The column count to store a Q8_0 `(rows, cols)` matrix with, when padding it lets the
/// tiled kernels take it; `None` where they would not run (no VNNI: plain AVX2 keeps the
/// compact layout) or are not needed. Costs the padding's memory: +14 % at 896 columns,
/// +33 % at 576.
pub(crate) fn stored_cols(rows: usize, cols: usize) -> Option<usize> {
    if cols % BLOCK == 0 || cols % QK != 0 || rows % TILE_ROWS != 0 || !tiled_kernels_available() {
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

/// The blocks of a CPU quantized matrix, `(rows, stored columns)`, or `None` when it is not
/// a CPU `T` matrix laid out as candle stores one.
fn blocks_of<T: GgmlType>(w: &QTensor) -> Result<Option<(&[T], usize, usize)>> {
    if w.dtype() != T::DTYPE {
        return Ok(None);
    }
    let (rows, stored) = w.shape().dims2()?;
    let Cow::Borrowed(bytes) = w.data()? else { return Ok(None) };
    let n_blocks = rows * stored / T::BLCK_SIZE;
    if stored % T::BLCK_SIZE != 0
        || bytes.len() != n_blocks * std::mem::size_of::<T>()
        || bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0
    {
        return Ok(None);
    }
    // SAFETY: a CPU quantized tensor's storage is a `Vec<T>` (type, length and alignment
    // checked above), and candle's blocks are plain `repr(C)` data.
    let blocks = unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n_blocks) };
    Ok(Some((blocks, rows, stored)))
}

/// Runs `dot(row)` for every row on candle's CPU pool and collects the results.
fn per_row(rows: usize, dot: impl Fn(usize) -> f32 + Sync) -> Vec<f32> {
    let mut out = vec![0f32; rows];
    let out_addr = out.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(rows, |range| {
        for r in range {
            // SAFETY: each row index belongs to exactly one chunk, so no two workers write
            // the same element, and `out` outlives the pool's execution.
            unsafe { *(out_addr as *mut f32).add(r) = dot(r) };
        }
    });
    out
}

/// `W x` for one activation row `x` (`cols` values) and a Q8_0 matrix that may be padded
/// past `cols`, reading only each row's first `cols / 32` blocks. `None` when `w` is not a
/// CPU Q8_0 matrix of at least `cols` columns (the caller then takes the general path).
pub(crate) fn gemv_q8_0(w: &QTensor, cols: usize, x: &[f32]) -> Result<Option<Vec<f32>>> {
    let Some((blocks, rows, stored)) = blocks_of::<BlockQ8_0>(w)? else { return Ok(None) };
    if x.len() != cols || cols % QK != 0 || stored < cols {
        return Ok(None);
    }
    let (real, per) = (cols / QK, stored / QK);
    let mut xq = vec![BlockQ8_0::zeros(); real];
    BlockQ8_0::from_float(x, &mut xq);
    Ok(Some(per_row(rows, |r| BlockQ8_0::vec_dot(cols, &blocks[r * per..r * per + real], &xq))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{
        quantized::{GgmlDType, QMatMul},
        Device, Module, Tensor,
    };

    /// A deterministic `(rows, cols)` matrix with values of both signs and varied sizes.
    fn wavy(rows: usize, cols: usize, phase: f32) -> Tensor {
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37 + phase).sin() * (1.0 + (i % 7) as f32)).collect();
        Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap()
    }

    /// candle's own product of `w` and one row `x`.
    fn reference(w: QTensor, x: &Tensor) -> Vec<f32> {
        QMatMul::from_qtensor(w).unwrap().forward(x).unwrap().flatten_all().unwrap().to_vec1().unwrap()
    }

    fn assert_close(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{what}: {a} vs {b}");
        }
    }

    #[test]
    fn the_padded_q8_0_row_product_equals_the_compact_one() {
        let (rows, cols) = (48, 96);
        let w = wavy(rows, cols, 0.0);
        let padded = QTensor::quantize(&w.pad_with_zeros(1, 0, 160).unwrap(), GgmlDType::Q8_0).unwrap();
        let x = wavy(1, cols, 1.0);
        let want = reference(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap(), &x);
        let x: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
        assert_close(&gemv_q8_0(&padded, cols, &x).unwrap().expect("a CPU Q8_0 matrix"), &want, "padded Q8_0");
        // Another type, or an input of the wrong width: the caller's general path.
        let q4 = QTensor::quantize(&w.pad_with_zeros(1, 0, 160).unwrap(), GgmlDType::Q4_0).unwrap();
        assert!(gemv_q8_0(&q4, cols, &x).unwrap().is_none());
        assert!(gemv_q8_0(&padded, cols, &x[..64]).unwrap().is_none());
    }
}

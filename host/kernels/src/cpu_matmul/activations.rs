//! Activation rows quantized in Q8_0 blocks for the tiled kernels, chunk by chunk, on the
//! pool's threads or on the caller's.

use super::{Kernel, MAX_ROWS, QK};

/// Activation rows quantized in Q8_0 blocks. Rows go in chunks of up to [`MAX_ROWS`]; within
/// a chunk the data is ordered `[block][row]`, so each block's rows are adjacent.
pub(super) struct Activations {
    /// The quantized values, 32 per (chunk row, block).
    pub(super) q: Vec<i8>,
    /// The block scales.
    pub(super) d: Vec<f32>,
    /// `Σ q` per block: takes the weights' offset (+128, or Q5_0's +16) back out, and
    /// Q4_K's minimum.
    pub(super) sum: Vec<i32>,
    /// `Σ q` over each block's first 16 values: Q6_K's offset (+32) comes out per half.
    pub(super) low_sum: Vec<i32>,
    /// `d · Σ q` in f32, what Q4_K's minimum is multiplied by: computed once here rather than
    /// per strip in the kernels' innermost loop (three instructions of about eighteen a row).
    pub(super) d_sum: Vec<f32>,
    pub(super) rows: usize,
    pub(super) blocks: usize,
}

/// A chunk of activation rows: `first .. first + len`.
#[derive(Clone, Copy)]
pub(super) struct Chunk {
    pub(super) first: usize,
    pub(super) len: usize,
}

/// Blocks of activations worth sharing among the pool's threads: about 10 µs of one
/// thread's quantizing, more than waking the pool costs. A prefill of 256 rows of 1,536
/// columns has 12,288; decode's 8 rows, 384.
pub(super) const PARALLEL_QUANTIZE_BLOCKS: usize = 2048;

/// One chunk's ranges of the [`Activations`] arrays (`[block][row]` within the chunk), which
/// one thread fills.
pub(super) struct ChunkOut<'a> {
    pub(super) len: usize,
    pub(super) q: &'a mut [i8],
    pub(super) d: &'a mut [f32],
    pub(super) sum: &'a mut [i32],
    pub(super) low_sum: &'a mut [i32],
    pub(super) d_sum: &'a mut [f32],
}

/// What quantizes one block of 32 activations: the scale and `Σ q` of each half.
pub(super) type QuantizeBlock = unsafe fn(&[f32; QK], &mut [i8; QK]) -> (f32, [i32; 2]);

impl ChunkOut<'_> {
    /// Quantizes the chunk's rows `x (len, cols)` block by block with `block`. Inlined into
    /// each kernel's `quantize_chunk`, so that `block` is inlined too (17 ns a block on the
    /// Emerald Rapids, where the kernel's dispatch for each block took 22).
    ///
    /// # Safety
    /// The CPU runs `block`'s instructions.
    #[inline(always)]
    pub(super) unsafe fn fill(self, x: &[f32], cols: usize, block: QuantizeBlock) {
        for row in 0..self.len {
            for (b, xs) in x[row * cols..][..cols].chunks_exact(QK).enumerate() {
                let at = b * self.len + row;
                let xs: &[f32; QK] = xs.try_into().expect("a block is 32 values");
                let q: &mut [i8; QK] = (&mut self.q[at * QK..][..QK]).try_into().expect("a block is 32 values");
                let (d, [low, high]) = block(xs, q);
                self.d[at] = d;
                self.sum[at] = low + high;
                self.low_sum[at] = low;
                self.d_sum[at] = d * (low + high) as f32;
            }
        }
    }
}

impl Activations {
    pub(super) fn quantize(x: &[f32], rows: usize, cols: usize, kernel: Kernel) -> Self {
        Self::quantize_on(x, rows, cols, kernel, rows * (cols / QK) >= PARALLEL_QUANTIZE_BLOCKS)
    }

    /// [`Activations::quantize`], its chunks shared among the pool's threads or not.
    pub(super) fn quantize_on(x: &[f32], rows: usize, cols: usize, kernel: Kernel, on_pool: bool) -> Self {
        let blocks = cols / QK;
        let mut a = Activations {
            q: vec![0; rows * cols],
            d: vec![0.0; rows * blocks],
            sum: vec![0; rows * blocks],
            low_sum: vec![0; rows * blocks],
            d_sum: vec![0.0; rows * blocks],
            rows,
            blocks,
        };
        // Each chunk's rows own a contiguous range of every array (in 32s for `q`): chunks are
        // quantized apart, on the pool's threads where there are enough blocks to share.
        // Addresses as integers, so that the closure the pool shares is `Sync`.
        let addr = |p: *mut u8| p as usize;
        let (q, d, sum, low_sum, d_sum) = (
            addr(a.q.as_mut_ptr().cast()),
            addr(a.d.as_mut_ptr().cast()),
            addr(a.sum.as_mut_ptr().cast()),
            addr(a.low_sum.as_mut_ptr().cast()),
            addr(a.d_sum.as_mut_ptr().cast()),
        );
        let run = |chunks: std::ops::Range<usize>| {
            for c in chunks {
                let (first, len) = (c * MAX_ROWS, (rows - c * MAX_ROWS).min(MAX_ROWS));
                let (start, n) = (first * blocks, len * blocks);
                // SAFETY: the arrays hold `rows · blocks` entries (`q` 32 for each) and
                // outlive the pool call; chunk `c`'s ranges are disjoint from every other
                // chunk's, so no two threads write the same entry.
                let out = unsafe {
                    ChunkOut {
                        len,
                        q: std::slice::from_raw_parts_mut((q as *mut i8).add(start * QK), n * QK),
                        d: std::slice::from_raw_parts_mut((d as *mut f32).add(start), n),
                        sum: std::slice::from_raw_parts_mut((sum as *mut i32).add(start), n),
                        low_sum: std::slice::from_raw_parts_mut((low_sum as *mut i32).add(start), n),
                        d_sum: std::slice::from_raw_parts_mut((d_sum as *mut f32).add(start), n),
                    }
                };
                // SAFETY: activations are quantized only for a `TiledMatrix`, whose kernel
                // runs on this CPU.
                unsafe { kernel.quantize_chunk(&x[first * cols..(first + len) * cols], cols, out) };
            }
        };
        let chunks = rows.div_ceil(MAX_ROWS);
        if on_pool {
            crate::pool::execute_chunked(chunks, run);
        } else {
            run(0..chunks);
        }
        a
    }

    pub(super) fn chunks(&self) -> impl Iterator<Item = Chunk> + '_ {
        (0..self.rows).step_by(MAX_ROWS).map(|first| Chunk { first, len: (self.rows - first).min(MAX_ROWS) })
    }
}

//! Q8_0, Q5_0, Q4_K and Q6_K matrix products on x86 CPUs with AVX-512 VNNI or AVX2, for any
//! number of activation rows. The kernel is chosen at run time ([`Kernel`]); both compute the same
//! integers and round them the same way, so they agree bit for bit.
//!
//! **Why not candle's kernels.** Measured on one core of the 2-core EPYC (Zen 4) this
//! project runs on, a 4864 × 896 Q8_0 matrix streamed from memory (40 of them in turn, so
//! none sits in the cache; `onebrain bench matmul` measures both in one run):
//!
//! | rows | candle, compact Q8_0 | candle, tiled (padded to 1024) | this module |
//! |---:|---:|---:|---:|
//! | 1 | 324 µs | 350 µs | 170 µs |
//! | 4 | — | 779 µs | 185 µs |
//! | 8 | — | 918 µs | 281 µs |
//!
//! A plain streaming read runs at 31 GB/s on this core, so one row at 4.9 MB should cost
//! about 160 µs: candle's one-row dot product is bound by its own arithmetic (it costs the
//! same with the matrix in cache), and its tiled kernel, fast in cache, loses the overlap of
//! memory and arithmetic when streaming. Decode reads every weight once per token, so the
//! one-row figure is decode speed and the four-row one is what batched rollouts gain.
//!
//! **Layout.** A matrix is cut into tiles of 16 rows × 32 columns (one Q8_0 block per row):
//! the 16 block scales as f16, and the 512 weights offset by +128 (so they are unsigned, as
//! `vpdpbusd` wants its first operand) with the 4 consecutive weights of one row adjacent
//! (`[group of 4 columns][row][4]`). One 64-byte load then holds 4 columns of 16 rows, and
//! one `vpdpbusd` against 4 broadcast activation bytes adds their products into 16 row
//! sums. The +128 comes back out as `128 · Σ activations` per block, computed once when the
//! activations are quantized. The tiles of one 16-row strip are adjacent in memory, so a
//! product streams the matrix front to back once, whatever the row count.
//!
//! **Activations** are quantized per row in Q8_0 blocks of 32 (as candle's one-row path
//! does for Q8_0 weights), laid out so that the rows a kernel call serves are adjacent for
//! each block.
//!
//! **Q5_0** (most of Qwen 0.5B's file, whose 896-wide matrices the k-quants cannot take)
//! keeps its 5-bit weights: per tile, 256 bytes of low nibbles and 64 bytes of fifth bits
//! that the kernel unpacks into the same 8 vectors (an AND or a shift and an AND, and a
//! masked add of 16 per vector), with +16 as the offset. 5.5 bits a weight instead of 8.5:
//! decode is bound by reading the weights, and in an interleaved A/B of Qwen 0.5B decode
//! (6 runs of 128 tokens, 2 threads) it went from 68–70 to 77–80 tok/s in the slower of the
//! machine's two modes and from 86–95 to 94–97 in the faster, and bit for bit it is the
//! file's own weights, where re-quantizing to Q8_0 rounded them.
//!
//! **Q4_K and Q6_K** (Qwen 1.5B's Q4_K_M file: 169 Q4_K and 29 Q6_K matrices) keep their
//! weights too, one 32-column sub-block per tile row. Q4_K's `d · sc · q − dmin · m` keeps
//! its 4-bit `q` (offset 0) and two f16 per row, `d · sc` and `dmin · m`; the kernel takes
//! the minimum out as `dmin · m · d_a · Σ q_a`. Q6_K's `d · sc · (q − 32)` has an i8 `sc` per
//! 16 columns: the kernel keeps the two halves' integer sums apart, multiplies each by its
//! `sc`, and scales the sum by `d`. 5 and 7 bits a weight, where re-quantizing them to Q8_0
//! (as before) gave 9 and rounded every weight a second time.
//!
//! **AVX2** (Zen 2 and 3, older Intel): the same tiles, read as halves of 8 rows; see
//! [`avx2`] for how its byte products avoid `vpmaddubsw`'s saturation. Measured on a 2-core
//! Zen 3 EPYC with `onebrain bench matmul` (README).
//!
//! The memory per matrix is stored once: prefill, batched and single-row decode, and the
//! embedding lookup of a tied matrix all read these tiles.

use std::sync::{Arc, Mutex, OnceLock};

use candle_core::{quantized::GgmlDType, quantized::QTensor, CpuStorage, CustomOp1, Device, Layout, Shape, Tensor};

use crate::{Error, Result};

/// Rows per tile: one 512-bit register of i32 sums.
const TILE_ROWS: usize = 16;
/// Columns per tile: one Q8_0 block.
const QK: usize = 32;
/// Bytes of one Q8_0 block in a GGUF/candle buffer: an f16 scale, then 32 × i8.
const Q8_0_BYTES: usize = 2 + QK;
/// Bytes of one Q5_0 block: an f16 scale, the 32 fifth bits (u32), then 32 low nibbles
/// (weight `j < 16` in the low nibble of byte `j`, weight `j + 16` in its high nibble).
const Q5_0_BYTES: usize = 2 + 4 + QK / 2;
/// Columns of one k-quant superblock: 8 tiles' worth, each a sub-block of its own scale.
const QK_K: usize = 256;
/// Bytes of one Q4_K superblock: f16 `d` and `dmin`, 12 bytes of 6-bit scales and minimums
/// (packed as ggml's `get_scale_min_k4` reads them), then 128 bytes of nibbles (sub-blocks
/// `2 p` and `2 p + 1` in the low and high nibbles of bytes `32 p ..`).
const Q4_K_BYTES: usize = 2 + 2 + 12 + QK_K / 2;
/// Bytes of one Q6_K superblock: 128 bytes of low nibbles, 64 of high bit pairs, 16 i8
/// scales (one per 16 columns), then the f16 `d`.
const Q6_K_BYTES: usize = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;
/// Activation rows one kernel call serves (each row keeps one register of sums).
const MAX_ROWS: usize = 8;

mod activations;
mod tiles;

use activations::{Activations, Chunk, ChunkOut};
use tiles::{nibble, q4k_tiles, q5_tiles, q6k_tiles, q8_0_block, q8_tiles, Scales, Tile, Tile4, Tile5, Tile6, Tiles};


/// Defines a kernel module's `strip`: the same in every module, which differ in their
/// `TileFormat` and `rows::<T, R>`. It picks the tile format and the chunk's row count, a
/// compile-time constant because each row keeps its sums in registers.
#[cfg(target_arch = "x86_64")]
macro_rules! strip_entry {
    () => {
        /// Rows `16 strip ..` of `out (m, rows)` for the activation rows of `chunk`.
        ///
        /// # Safety
        /// The CPU runs this module's kernel; `out` holds `m × w.rows` f32.
        pub(super) unsafe fn strip(w: &TiledMatrix, a: &Activations, chunk: Chunk, strip: usize, out: *mut f32) {
            match &w.tiles {
                Tiles::Q8(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
                Tiles::Q5(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
                Tiles::Q4K(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
                Tiles::Q6K(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
            }
        }

        #[inline(always)]
        unsafe fn strip_of<T: TileFormat>(tiles: &[T], n: usize, a: &Activations, chunk: Chunk, strip: usize, out: *mut f32) {
            let tiles = &tiles[strip * a.blocks..][..a.blocks];
            match chunk.len {
                8 => rows::<T, 8>(tiles, n, a, chunk, strip, out),
                7 => rows::<T, 7>(tiles, n, a, chunk, strip, out),
                6 => rows::<T, 6>(tiles, n, a, chunk, strip, out),
                5 => rows::<T, 5>(tiles, n, a, chunk, strip, out),
                4 => rows::<T, 4>(tiles, n, a, chunk, strip, out),
                3 => rows::<T, 3>(tiles, n, a, chunk, strip, out),
                2 => rows::<T, 2>(tiles, n, a, chunk, strip, out),
                _ => rows::<T, 1>(tiles, n, a, chunk, strip, out),
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

/// The instruction set a tiled product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 F, BW and VNNI: one `vpdpbusd` per 4 columns × 16 rows.
    Avx512Vnni,
    /// AVX2, FMA and F16C: `vpmaddubsw` and `vpmaddwd` per 4 columns × 8 rows.
    Avx2,
}

impl Kernel {
    /// Every kernel this CPU runs, best first.
    pub fn supported() -> Vec<Kernel> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vnni") {
                all.push(Kernel::Avx512Vnni);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
                all.push(Kernel::Avx2);
            }
        }
        all
    }

    /// The fastest kernel this CPU runs, detected once.
    pub fn best() -> Option<Kernel> {
        static BEST: OnceLock<Option<Kernel>> = OnceLock::new();
        *BEST.get_or_init(|| Kernel::supported().first().copied())
    }

    /// # Safety
    /// The CPU runs `self`; `out` holds `m × w.rows` f32.
    #[allow(unused_variables)]
    unsafe fn strip(self, w: &TiledMatrix, a: &Activations, chunk: Chunk, strip: usize, out: *mut f32) {
        #[cfg(target_arch = "x86_64")]
        match self {
            Kernel::Avx512Vnni => avx512::strip(w, a, chunk, strip, out),
            Kernel::Avx2 => avx2::strip(w, a, chunk, strip, out),
        }
    }

    /// One block of activations in Q8_0: its scale and `Σ q` of each half.
    ///
    /// # Safety
    /// The CPU runs `self`.
    #[cfg(test)]
    #[allow(unused_variables)]
    unsafe fn quantize_block(self, x: &[f32; QK], q: &mut [i8; QK]) -> (f32, [i32; 2]) {
        #[cfg(target_arch = "x86_64")]
        return match self {
            Kernel::Avx512Vnni => avx512::quantize_block(x, q),
            Kernel::Avx2 => avx2::quantize_block(x, q),
        };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no tiled kernel exists off x86_64, so no TiledMatrix does")
    }

    /// Quantizes one chunk's rows `x (out.len, cols)` into `out`.
    ///
    /// # Safety
    /// The CPU runs `self`.
    #[allow(unused_variables)]
    unsafe fn quantize_chunk(self, x: &[f32], cols: usize, out: ChunkOut<'_>) {
        #[cfg(target_arch = "x86_64")]
        match self {
            Kernel::Avx512Vnni => avx512::quantize_chunk(x, cols, out),
            Kernel::Avx2 => avx2::quantize_chunk(x, cols, out),
        }
    }
}

/// A Q8_0, Q5_0, Q4_K or Q6_K matrix `(rows, cols)` in tiles for the [`Kernel`]s.
pub struct TiledMatrix {
    /// What multiplies by the tiles.
    kernel: Kernel,
    /// Strip `s` (rows `16 s ..`) holds tiles `s · blocks ..`, one per 32 columns.
    tiles: Tiles,
    rows: usize,
    cols: usize,
    /// The (CPU) device the matrix was read on, for tensors made from it.
    device: Device,
    /// Wᵀ in Q8_0 tiles, built the first time a gradient goes through this matrix and kept
    /// until [`TiledMatrix::forget_transposed`].
    transposed: Mutex<Option<Arc<TiledMatrix>>>,
}

impl std::fmt::Debug for TiledMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TiledMatrix({} × {})", self.rows, self.cols)
    }
}

impl TiledMatrix {
    /// Whether this CPU runs a tiled kernel (AVX-512 VNNI, or AVX2 with FMA and F16C).
    pub fn available() -> bool {
        Kernel::best().is_some()
    }

    /// The tiles of a CPU Q8_0, Q5_0, Q4_K or Q6_K matrix, or `None` where the kernel cannot
    /// take it: no kernel for this CPU, another block type, rows not a multiple of 16 or
    /// columns of the block (32, or 256 for the k-quants), or a Q4_K scale past f16's range.
    pub fn from_qtensor(q: &QTensor) -> Result<Option<Self>> {
        match Kernel::best() {
            Some(kernel) => Self::from_qtensor_on(q, kernel),
            None => Ok(None),
        }
    }

    /// [`TiledMatrix::from_qtensor`] for a chosen kernel (one of [`Kernel::supported`]).
    pub fn from_qtensor_on(q: &QTensor, kernel: Kernel) -> Result<Option<Self>> {
        assert!(Kernel::supported().contains(&kernel), "{kernel:?} does not run on this CPU");
        let (rows, cols) = q.shape().dims2()?;
        let (block_cols, block_bytes) = match q.dtype() {
            GgmlDType::Q8_0 => (QK, Q8_0_BYTES),
            GgmlDType::Q5_0 => (QK, Q5_0_BYTES),
            GgmlDType::Q4K => (QK_K, Q4_K_BYTES),
            GgmlDType::Q6K => (QK_K, Q6_K_BYTES),
            _ => return Ok(None),
        };
        if !q.device().is_cpu() || rows % TILE_ROWS != 0 || cols % block_cols != 0 || cols == 0 {
            return Ok(None);
        }
        let raw = q.data()?;
        // Checked: a shape from a hostile file (2⁶⁰ rows) made the product wrap to the empty
        // buffer's 0 bytes, and the builders below then indexed past it.
        let need = rows.checked_mul(cols).and_then(|n| (n / block_cols).checked_mul(block_bytes));
        if need != Some(raw.len()) {
            return Err(Error::refused("quantized matrix", format!("{} bytes for {rows} × {cols}", raw.len())));
        }
        let blocks = cols / QK;
        let tiles = match q.dtype() {
            GgmlDType::Q8_0 => Tiles::Q8(q8_tiles(&raw, rows, blocks)),
            GgmlDType::Q5_0 => Tiles::Q5(q5_tiles(&raw, rows, blocks)),
            GgmlDType::Q4K => match q4k_tiles(&raw, rows, blocks) {
                Some(tiles) => Tiles::Q4K(tiles),
                None => return Ok(None),
            },
            _ => Tiles::Q6K(q6k_tiles(&raw, rows, blocks)),
        };
        Ok(Some(TiledMatrix { kernel, tiles, rows, cols, device: q.device(), transposed: Mutex::new(None) }))
    }

    /// Rows of the matrix `(rows, cols)`: the product's output width.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix: the width of the activations it multiplies.
    pub fn cols(&self) -> usize {
        self.cols
    }

    fn blocks(&self) -> usize {
        self.cols / QK
    }

    /// Weight `(row, col)` as the f32 it stands for.
    fn weight(&self, row: usize, col: usize) -> f32 {
        let at = (row / TILE_ROWS) * self.blocks() + col / QK;
        let (r, c) = (row % TILE_ROWS, col % QK);
        // Byte `k` of column group `g` holds column `4 g + k % 4` of row `k / 4`.
        let (g, k) = (c / 4, r * 4 + c % 4);
        match &self.tiles {
            Tiles::Q8(tiles) => tiles[at].d[r].to_f32() * (tiles[at].qs[g * 64 + k] as i16 - 128) as f32,
            Tiles::Q5(tiles) => {
                let t = &tiles[at];
                let q = nibble(&t.lo, g, k) | (((t.hi[g] >> k) & 1) as u8) << 4;
                t.d[r].to_f32() * (q as i16 - 16) as f32
            }
            Tiles::Q4K(tiles) => {
                let t = &tiles[at];
                t.d[r].to_f32() * nibble(&t.lo, g, k) as f32 - t.m[r].to_f32()
            }
            Tiles::Q6K(tiles) => {
                // In candle's order, `(d · sc) · (q − 32)`: bit for bit its dequantized weight.
                let t = &tiles[at];
                let q = nibble(&t.lo, g, k) | ((t.hi[(g % 2) * 64 + k] >> (2 * (g / 2))) & 3) << 4;
                t.d[r].to_f32() * t.sc[c / 16][r] as f32 * (q as i16 - 32) as f32
            }
        }
    }

    /// Rows `ids` of the matrix, dequantized: the embedding lookup of a tied matrix.
    pub fn rows_f32(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * self.cols);
        for &id in ids {
            let row = id as usize;
            if row >= self.rows {
                return Err(Error::refused("embedding", format!("token id {id} past {} rows", self.rows)));
            }
            out.extend((0..self.cols).map(|c| self.weight(row, c)));
        }
        Ok(out)
    }

    /// The whole matrix as dense f32 `(rows, cols)`.
    pub fn dequantize(&self) -> Result<Tensor> {
        let ids: Vec<u32> = (0..self.rows as u32).collect();
        Ok(Tensor::from_vec(self.rows_f32(&ids)?, (self.rows, self.cols), &self.device)?)
    }

    /// `x · Wᵀ` for `x` of shape `(…, cols)`, f32 on the CPU.
    ///
    /// It reads `x`'s storage in place: a copy of the input (as `to_vec1` made) cost a
    /// prefill a fresh buffer, its page faults and its copying for every product.
    pub fn matmul(&self, x: &Tensor) -> Result<Tensor> {
        // No-ops for the f32, contiguous activations every caller passes.
        let x = x.to_dtype(candle_core::DType::F32)?.contiguous()?;
        let (storage, layout) = x.storage_and_layout();
        let candle_core::Storage::Cpu(storage) = &*storage else {
            return Err(Error::refused("tiled product", "the input is not on the CPU".to_string()));
        };
        let (out, shape) = self.product(storage, layout)?;
        Ok(Tensor::from_vec(out, shape, x.device())?)
    }

    /// `x · Wᵀ` for `x` a contiguous f32 CPU storage of shape `(…, cols)`.
    fn product(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(Vec<f32>, Shape)> {
        let dims = layout.shape().dims();
        if dims.last() != Some(&self.cols) {
            candle_core::bail!("tiled product: input {dims:?} against a {} × {} matrix", self.rows, self.cols);
        }
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("tiled product needs a contiguous input");
        };
        let x = &storage.as_slice::<f32>()?[start..end];
        let m = x.len() / self.cols;
        let mut out = vec![0f32; m * self.rows];
        self.matmul_into(x, m, &mut out);
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("checked above") = self.rows;
        Ok((out, Shape::from(shape)))
    }

    /// Wᵀ `(cols, rows)` as Q8_0 tiles, built once and kept: what carries a gradient back through
    /// the product (`g · W = g · (Wᵀ)ᵀ`). Re-quantizing rounds the weights a second time
    /// (Q8_0 of the tiles' values, at most half a step of 1/127 of a block's largest
    /// weight), which touches only the gradient: the forward keeps the file's weights.
    pub fn transposed(&self) -> Result<Arc<TiledMatrix>> {
        // Built under the lock: a second caller waits for the first's copy.
        let mut slot = self.transposed.lock().expect("a transpose panicked");
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        if self.rows % QK != 0 || self.cols % TILE_ROWS != 0 {
            return Err(Error::refused(
                "transposed matrix",
                format!("{} × {} cannot be tiled the other way round", self.rows, self.cols),
            ));
        }
        // Tile by tile: each of Wᵀ's tiles (16 of W's columns × 32 of its rows) reads two of
        // W's tiles and is quantized as candle's Q8_0 quantizes a block (the same rounding,
        // bit for bit), with no f32 copy of any part of the matrix. Through an f32 band and
        // candle's quantizer it took 14 s of the 0.5B's first update on 2 cores.
        let (strips_t, blocks_t) = (self.cols / TILE_ROWS, self.rows / QK);
        let mut tiles = Vec::with_capacity(strips_t * blocks_t);
        for strip in 0..strips_t {
            for block in 0..blocks_t {
                let mut tile = Tile::EMPTY;
                for r in 0..TILE_ROWS {
                    let col = strip * TILE_ROWS + r;
                    let xs: [f32; QK] = std::array::from_fn(|k| self.weight(block * QK + k, col));
                    let (d, qs) = q8_0_block(&xs);
                    tile.set_row(r, d, qs);
                }
                tiles.push(tile);
            }
        }
        let t = TiledMatrix {
            kernel: self.kernel,
            tiles: Tiles::Q8(tiles),
            rows: self.cols,
            cols: self.rows,
            device: self.device.clone(),
            transposed: Mutex::new(None),
        };
        Ok(slot.insert(Arc::new(t)).clone())
    }

    /// Drops the kept Wᵀ (the next gradient builds it again) and returns its bytes: between
    /// updates only the update reads it.
    pub fn forget_transposed(&self) -> u64 {
        let freed = self.transposed_bytes();
        *self.transposed.lock().expect("a transpose panicked") = None;
        freed
    }

    /// Bytes of the kept Wᵀ's tiles (0 when none is kept).
    pub fn transposed_bytes(&self) -> u64 {
        let slot = self.transposed.lock().expect("a transpose panicked");
        slot.as_ref().map_or(0, |t| t.tile_bytes())
    }

    /// Bytes of the tiles.
    fn tile_bytes(&self) -> u64 {
        let (n, size) = match &self.tiles {
            Tiles::Q8(t) => (t.len(), std::mem::size_of::<Tile>()),
            Tiles::Q5(t) => (t.len(), std::mem::size_of::<Tile5>()),
            Tiles::Q4K(t) => (t.len(), std::mem::size_of::<Tile4>()),
            Tiles::Q6K(t) => (t.len(), std::mem::size_of::<Tile6>()),
        };
        (n * size) as u64
    }

    /// `out (rows,)` at the rows of strips `strips` (rows `16 s .. 16 s + 16` each) of
    /// `x (cols,) · Wᵀ`; the other entries are left as they are. Each entry is bit for bit the
    /// whole product's: a row's sums depend only on its own activations and its strip's tiles.
    pub fn row_strips_into(&self, x: &[f32], strips: &[usize], out: &mut [f32]) {
        assert_eq!(x.len(), self.cols);
        assert_eq!(out.len(), self.rows);
        assert!(strips.iter().all(|&s| s < self.rows / TILE_ROWS), "strip past the matrix");
        let acts = Activations::quantize(x, 1, self.cols, self.kernel);
        let chunk = acts.chunks().next().expect("one row");
        let out_ptr = out.as_mut_ptr() as usize;
        let run = |range: std::ops::Range<usize>| {
            for &strip in &strips[range] {
                // SAFETY: as in `matmul_into`; strips are distinct, so writes never overlap.
                unsafe { self.kernel.strip(self, &acts, chunk, strip, out_ptr as *mut f32) };
            }
        };
        // A few strips are not worth waking the pool for.
        if strips.len() < 64 {
            run(0..strips.len());
        } else {
            crate::pool::execute_chunked(strips.len(), run);
        }
    }

    /// Rows per strip of tiles: [`TiledMatrix::row_strips_into`] computes whole strips.
    pub const STRIP_ROWS: usize = TILE_ROWS;

    /// `out (m, rows) = x (m, cols) · Wᵀ`.
    pub fn matmul_into(&self, x: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(x.len(), m * self.cols);
        assert_eq!(out.len(), m * self.rows);
        if m == 0 {
            return;
        }
        let acts = Activations::quantize(x, m, self.cols, self.kernel);
        let out_ptr = out.as_mut_ptr() as usize;
        let strips = self.rows / TILE_ROWS;
        crate::pool::execute_chunked(strips, |range| {
            for strip in range {
                for chunk in acts.chunks() {
                    // SAFETY: a `TiledMatrix`'s kernel runs on this CPU; each strip
                    // writes its own 16 columns of `out`, which outlives the pool call.
                    unsafe { self.kernel.strip(self, &acts, chunk, strip, out_ptr as *mut f32) };
                }
            }
        });
    }
}

/// Quantizes activations `x (rows, cols)` as a product would, on the pool's threads or on
/// this one: what `onebrain bench quantize` times. `false` where this CPU runs no kernel.
pub fn quantize_activations(x: &[f32], rows: usize, cols: usize, on_pool: bool) -> bool {
    let Some(kernel) = Kernel::best() else { return false };
    std::hint::black_box(Activations::quantize_on(x, rows, cols, kernel, on_pool));
    true
}

/// `x · Wᵀ` for a frozen tiled `W` inside a training graph: the forward is the sampler's own
/// product (the same tiles and kernel, so a learner sees the log-probabilities the sampler
/// drew with), and the backward gives `x` its gradient `g · W` through Wᵀ's tiles and gives
/// `W` none. candle's matmul backward would also compute the weight gradient, a third of a
/// backward's arithmetic and a matrix of memory per product, for weights nobody trains.
#[derive(Clone, Debug)]
pub struct FrozenProduct(pub Arc<TiledMatrix>);

impl CustomOp1 for FrozenProduct {
    fn name(&self) -> &'static str {
        "frozen-tiled-product"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (out, shape) = self.0.product(storage, layout)?;
        Ok((CpuStorage::F32(out), shape))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let wt = self.0.transposed().map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok(Some(grad_res.contiguous()?.apply_op1(FrozenProduct(wt))?))
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::activations::PARALLEL_QUANTIZE_BLOCKS;
    use super::*;

    fn matrix(rows: usize, cols: usize) -> Tensor {
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 7) as f32)).collect();
        Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap()
    }

    /// Every tiled block type, with a width it takes: the k-quants need 256 columns, and two
    /// superblocks make sure the sub-blocks of the second land where they belong.
    const DTYPES: [(GgmlDType, usize); 4] =
        [(GgmlDType::Q8_0, 96), (GgmlDType::Q5_0, 96), (GgmlDType::Q4K, 512), (GgmlDType::Q6K, 512)];

    /// The product in f64 over the tiles' weights and the activations quantized as the
    /// kernels do (blocks of 32, `d = max |x| / 127` in f32, ties to even). The tiles' weights
    /// are candle's bit for bit but for Q4_K's f16 scales (see the tests below), through
    /// which a product moves by up to 2⁻¹¹ of its terms' magnitudes: 1.3 % of the largest
    /// product here, as a minimum's rounding adds up over 32 columns of smooth activations.
    fn reference(tiles: &TiledMatrix, x: &[f32], m: usize) -> Vec<f32> {
        let w: Vec<f32> = tiles.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let (rows, cols) = (tiles.rows(), tiles.cols());
        let x: Vec<f64> = x
            .chunks(QK)
            .flat_map(|block| {
                let d = block.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
                let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
                block.iter().map(move |v| (v * inv).round_ties_even() as f64 * d as f64)
            })
            .collect();
        let mut out = vec![0f32; m * rows];
        for i in 0..m {
            for r in 0..rows {
                let s: f64 = (0..cols).map(|c| x[i * cols + c] * w[r * cols + c] as f64).sum();
                out[i * rows + r] = s as f32;
            }
        }
        out
    }

    #[test]
    fn products_of_any_row_count_match_the_dequantized_weights() {
        let kernels = Kernel::supported();
        if kernels.is_empty() {
            eprintln!("skipped: this CPU runs no tiled kernel (neither AVX-512 VNNI nor AVX2)");
            return;
        }
        let rows = 48;
        for (dtype, cols) in DTYPES {
            // Each Q8_0 block holds a ±127 weight and each activation block a ±127 value:
            // the AVX2 kernel's byte products would saturate there if they could.
            let q = QTensor::quantize(&matrix(rows, cols), dtype).unwrap();
            let mut outputs = Vec::new();
            for &kernel in &kernels {
                let tiles = TiledMatrix::from_qtensor_on(&q, kernel).unwrap().expect("a 48-row matrix tiles");
                outputs.push((kernel, check_products(&q, &tiles, cols)));
            }
            // Where a CPU runs both kernels, they agree bit for bit.
            for (kernel, out) in &outputs[1..] {
                assert_eq!(out, &outputs[0].1, "{dtype:?}: {kernel:?} against {:?}", outputs[0].0);
            }
        }
    }

    /// Checks every kernel width against [`reference`] and returns the products.
    fn check_products(q: &QTensor, tiles: &TiledMatrix, cols: usize) -> Vec<Vec<f32>> {
        let mut all = Vec::new();
        // Every kernel width, and more rows than one chunk holds (9, 19).
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 19] {
            let x: Vec<f32> = (0..m * cols).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
            let xt = Tensor::from_vec(x.clone(), (1, m, cols), &Device::Cpu).unwrap();
            let got: Vec<f32> = tiles.matmul(&xt).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let want = reference(tiles, &x, m);
            let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            for (g, w) in got.iter().zip(&want) {
                // The same integers: only f32 rounding (2e-7 of `scale` here; 2e-6 for Q4_K,
                // whose minimum comes off a larger sum).
                assert!((g - w).abs() <= 1e-5 * scale, "{:?} on {:?}, m = {m}: {g} vs {w} (scale {scale})", q.dtype(), tiles.kernel);
            }
            all.push(got);
        }
        all
    }

    #[test]
    fn activations_quantize_alike_on_every_kernel() {
        // Ties, zeros, the largest magnitude at each position, negative and positive.
        let mut blocks: Vec<[f32; QK]> = vec![[0.0; QK], std::array::from_fn(|i| i as f32 - 15.5)];
        for at in [0, 7, 8, 31] {
            let mut b: [f32; QK] = std::array::from_fn(|i| ((i * 37 % 11) as f32 - 5.0) * 0.25);
            b[at] = -3.0;
            blocks.push(b);
        }
        for x in &blocks {
            let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            let want: Vec<i8> = x.iter().map(|v| (v * inv).round_ties_even() as i8).collect();
            for kernel in Kernel::supported() {
                let mut q = [0i8; QK];
                // SAFETY: `kernel` is one this CPU supports.
                let (got_d, sums) = unsafe { kernel.quantize_block(x, &mut q) };
                assert_eq!((got_d, q.to_vec()), (d, want.clone()), "{kernel:?} on {x:?}");
                let half = |h: usize| want[16 * h..16 * h + 16].iter().map(|&v| v as i32).sum::<i32>();
                assert_eq!(sums, [half(0), half(1)], "{kernel:?}");
            }
        }
    }

    /// Enough rows that the pool's threads quantize chunks apart, with a last chunk shorter
    /// than the rest: every block lands at its place in the `[chunk][block][row]` layout,
    /// quantized as one block alone is.
    #[test]
    fn activations_quantized_chunk_by_chunk_on_the_pool_land_in_place() {
        let Some(kernel) = Kernel::best() else { return };
        let (rows, cols) = (8 * 9 + 3, 1024);
        let blocks = cols / QK;
        assert!(rows * blocks >= PARALLEL_QUANTIZE_BLOCKS, "the pool's path");
        let x: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.7).sin() * (1.0 + (i % 97) as f32)).collect();
        let a = Activations::quantize(&x, rows, cols, kernel);
        for row in 0..rows {
            let (first, len) = (row / MAX_ROWS * MAX_ROWS, (rows - row / MAX_ROWS * MAX_ROWS).min(MAX_ROWS));
            for b in 0..blocks {
                let at = first * blocks + b * len + (row - first);
                let mut want = [0i8; QK];
                let xs: &[f32; QK] = x[row * cols + b * QK..][..QK].try_into().unwrap();
                // SAFETY: the kernel runs on this CPU.
                let (d, [low, high]) = unsafe { kernel.quantize_block(xs, &mut want) };
                assert_eq!(&a.q[at * QK..][..QK], &want, "row {row}, block {b}");
                assert_eq!((a.d[at], a.sum[at], a.low_sum[at], a.d_sum[at]), (d, low + high, low, d * (low + high) as f32));
            }
        }
    }

    #[test]
    fn rows_and_dequantize_read_back_the_weights() {
        if !TiledMatrix::available() {
            return;
        }
        // Bit for bit: every nibble, fifth bit, top bit pair and scale lands back where candle
        // reads it (Q4_K has its own test: its scales are rounded).
        for (dtype, cols) in DTYPES.into_iter().filter(|&(d, _)| d != GgmlDType::Q4K) {
            let q = QTensor::quantize(&matrix(32, cols), dtype).unwrap();
            let tiles = TiledMatrix::from_qtensor(&q).unwrap().unwrap();
            let want: Vec<f32> = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let got: Vec<f32> = tiles.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
            assert_eq!(got, want, "{dtype:?}");
            assert_eq!(tiles.rows_f32(&[17]).unwrap(), want[17 * cols..18 * cols]);
            assert!(tiles.rows_f32(&[32]).is_err());
        }
    }

    /// Q4_K's `d · sc` and `dmin · m` are rounded to f16, by at most 2⁻¹¹ of each (f16 keeps
    /// 11 significant bits; a product below f16's normal range is a multiple of `d`'s own
    /// subnormal step, so exact). A weight `d · sc · q − dmin · m` with `q ≤ 15` therefore
    /// moves by at most 2⁻¹¹ · (15 · d · sc + dmin · m), plus the f32 rounding of the
    /// subtraction: about a hundredth of a step, where a nibble or scale in the wrong place
    /// would be off by whole steps.
    #[test]
    fn q4k_tiles_round_only_the_scales_and_minimums() {
        if !TiledMatrix::available() {
            return;
        }
        let (rows, cols) = (32, 512);
        let q = QTensor::quantize(&matrix(rows, cols), GgmlDType::Q4K).unwrap();
        let tiles = TiledMatrix::from_qtensor(&q).unwrap().unwrap();
        let Tiles::Q4K(t) = &tiles.tiles else { panic!("Q4_K becomes Tile4") };
        let want: Vec<f32> = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let got: Vec<f32> = tiles.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let mut rounded = 0;
        for row in 0..rows {
            for col in 0..cols {
                let tile = &t[row / TILE_ROWS * (cols / QK) + col / QK];
                let (d, m) = (tile.d[row % TILE_ROWS].to_f32().abs(), tile.m[row % TILE_ROWS].to_f32().abs());
                let (g, w) = (got[row * cols + col], want[row * cols + col]);
                let bound = (15.0 * d + m) * (1.0 + 1e-3) / 2048.0 + f32::EPSILON * w.abs();
                assert!((g - w).abs() <= bound, "({row}, {col}): {g} vs {w}, bound {bound}");
                rounded += usize::from(g != w);
            }
        }
        assert!(rounded > 0, "the f16 rounding shows somewhere, or the bound tests nothing");
        assert_eq!(tiles.rows_f32(&[17]).unwrap(), got[17 * cols..18 * cols]);
    }

    /// Wᵀ, built tile by tile, holds every weight of W at its transposed place, re-rounded by
    /// about half a Q8_0 step: bit for bit candle's Q8_0 of the whole matrix's transpose.
    #[test]
    fn the_transpose_holds_every_weight_at_its_transposed_place() {
        if !TiledMatrix::available() {
            return;
        }
        for (dtype, cols) in DTYPES {
            let q = QTensor::quantize(&matrix(64, cols), dtype).unwrap();
            let tiles = TiledMatrix::from_qtensor(&q).unwrap().unwrap();
            let t = tiles.transposed().unwrap();
            assert_eq!((t.rows(), t.cols()), (cols, 64));
            let w: Vec<f32> = tiles.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let wt: Vec<f32> = t.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
            for c in 0..cols {
                for b in 0..2 {
                    let block: Vec<f32> = (32 * b..32 * b + 32).map(|r| w[r * cols + c]).collect();
                    let step = block.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
                    for (k, r) in (32 * b..32 * b + 32).enumerate() {
                        let err = (wt[c * 64 + r] - block[k]).abs();
                        // Half a step, and the f16 rounding of the block's scale (2⁻¹¹ of it,
                        // times up to 127).
                        assert!(err <= step * (0.5 + 127.0 / 2048.0), "{dtype:?} ({r}, {c}): {} vs {}", wt[c * 64 + r], block[k]);
                    }
                }
            }
            assert!(Arc::ptr_eq(&t, &tiles.transposed().unwrap()), "built once");
            let whole = QTensor::quantize(&tiles.dequantize().unwrap().t().unwrap().contiguous().unwrap(), GgmlDType::Q8_0).unwrap();
            let whole: Vec<f32> = whole.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            assert_eq!(wt, whole, "{dtype:?}: in bands, the whole matrix's transpose");
        }
    }

    #[test]
    fn shapes_the_kernel_cannot_take_are_refused() {
        let q = QTensor::quantize(&matrix(24, 64), GgmlDType::Q8_0).unwrap();
        assert!(TiledMatrix::from_qtensor(&q).unwrap().is_none(), "24 rows are not whole tiles");
        let q = QTensor::quantize(&matrix(24, 256), GgmlDType::Q4K).unwrap();
        assert!(TiledMatrix::from_qtensor(&q).unwrap().is_none(), "24 rows of Q4_K are not whole tiles");
        let q = QTensor::quantize(&matrix(32, 64), GgmlDType::Q4_0).unwrap();
        assert!(TiledMatrix::from_qtensor(&q).unwrap().is_none(), "Q4_0 is not tiled");
    }

    /// The AVX2 kernel adds several groups' byte products in i16 before it widens them
    /// (`avx2::TileFormat::CHAIN`). Every weight at its format's largest magnitude against
    /// activations at ±127 fills a chain the most it can be filled: the products are still
    /// exact. A longer chain than the format allows would wrap here.
    #[test]
    fn the_largest_weights_against_the_largest_activations_do_not_wrap() {
        let one = f16::ONE.to_le_bytes();
        // One block per type, each weight at its extreme: Q8_0's -128, Q5_0's q = 31 (15),
        // Q4_K's q = 15 with scale 1 and no minimum, Q6_K's q = 63 (31) with scale 1.
        let blocks: [(GgmlDType, Vec<u8>, f32, usize); 4] = [
            (GgmlDType::Q8_0, [&one[..], &[0x80; QK]].concat(), -128.0, QK),
            (GgmlDType::Q5_0, [&one[..], &[0xff; 4], &[0xff; QK / 2]].concat(), 15.0, QK),
            (GgmlDType::Q4K, [&one[..], &[0, 0], &[0x01; 12], &[0xff; QK_K / 2]].concat(), 15.0, QK_K),
            (GgmlDType::Q6K, [&[0xff; QK_K / 2][..], &[0xff; QK_K / 4], &[1; QK_K / 16], &one].concat(), 31.0, QK_K),
        ];
        let (rows, cols) = (16, 512);
        for (dtype, block, weight, block_cols) in blocks {
            let raw = block.repeat(rows * cols / block_cols);
            let q = QTensor::new(candle_core::quantized::QStorage::Cpu(dtype.from_data(raw.into())), (rows, cols)).unwrap();
            for kernel in Kernel::supported() {
                let tiles = TiledMatrix::from_qtensor_on(&q, kernel).unwrap().expect("16 rows tile");
                for m in [1, 2, 8, 9] {
                    // Rows of +1 and -1: every activation quantizes to ±127 of scale 1/127.
                    let x: Vec<f32> = (0..m * cols).map(|i| if i / cols % 2 == 0 { 1.0 } else { -1.0 }).collect();
                    let mut out = vec![0f32; m * rows];
                    tiles.matmul_into(&x, m, &mut out);
                    for (i, got) in out.iter().enumerate() {
                        let sign = if i / rows % 2 == 0 { 1.0 } else { -1.0 };
                        let want = sign * weight * cols as f32;
                        assert!((got - want).abs() <= 1e-5 * want.abs(), "{dtype:?} on {kernel:?}, m = {m}: {got} vs {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_buffer_shorter_than_its_shape_is_refused() {
        // 2⁶⁰ × 576 wraps to 0 in a usize product: the empty buffer looked the right size.
        // An empty buffer at an aligned address (candle asserts the blocks' alignment, and
        // `&[]` points at 1).
        let backing = [0u8; 64];
        let at = backing.as_ptr().align_offset(8);
        let empty = GgmlDType::Q8_0.from_data(std::borrow::Cow::Borrowed(&backing[at..at]));
        let q = QTensor::new(candle_core::quantized::QStorage::Cpu(empty), (1usize << 60, 576)).unwrap();
        for kernel in Kernel::supported() {
            let err = TiledMatrix::from_qtensor_on(&q, kernel).err().expect("refused");
            assert!(err.to_string().contains("0 bytes for 1152921504606846976 × 576"), "{err}");
        }
    }
}

//! Q8_0 and Q5_0 matrix products on x86 CPUs with AVX-512 VNNI, for any number of
//! activation rows.
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
//! The memory per matrix is stored once: prefill, batched and single-row decode, and the
//! embedding lookup of a tied matrix all read these tiles.

use std::sync::{Arc, OnceLock};

use candle_core::{quantized::GgmlDType, quantized::QTensor, CpuStorage, CustomOp1, Device, Layout, Shape, Tensor};
use half::f16;

use crate::error::{Error, Result};

/// Rows per tile: one 512-bit register of i32 sums.
const TILE_ROWS: usize = 16;
/// Columns per tile: one Q8_0 block.
const QK: usize = 32;
/// Bytes of one Q8_0 block in a GGUF/candle buffer: an f16 scale, then 32 × i8.
const Q8_0_BYTES: usize = 2 + QK;
/// Bytes of one Q5_0 block: an f16 scale, the 32 fifth bits (u32), then 32 low nibbles
/// (weight `j < 16` in the low nibble of byte `j`, weight `j + 16` in its high nibble).
const Q5_0_BYTES: usize = 2 + 4 + QK / 2;
/// Activation rows one kernel call serves (each row keeps one register of sums).
const MAX_ROWS: usize = 8;

/// One 16 × 32 tile: 512 weights (+128, `[column group of 4][row][4]`) and 16 scales. 576
/// bytes, cache-line aligned so that each of the 8 weight loads is one line.
#[repr(C, align(64))]
#[derive(Clone)]
struct Tile {
    qs: [u8; QK * TILE_ROWS],
    d: [f16; TILE_ROWS],
}

/// One 16 × 32 tile of a Q5_0 matrix: the 5-bit weights `q` (the value is `d · (q − 16)`) in
/// the same `[column group of 4][row][4]` order as [`Tile`], split into their low 4 bits,
/// groups `g` and `g + 4` sharing a byte (`lo[64 g + k]`: low nibble group `g`, high
/// nibble group `g + 4`), and their 5th bits, one bit per byte of a group (`hi[g]`, bit
/// `k`). 352 bytes against [`Tile`]'s 576: decode streams 39 % fewer bytes for these
/// matrices. Aligned to 32 bytes, not 64, so that tiles pack without padding: Zen 4 loads a
/// 512-bit vector as two 256-bit halves, each then within one cache line.
#[repr(C, align(32))]
#[derive(Clone)]
struct Tile5 {
    lo: [u8; QK * TILE_ROWS / 2],
    hi: [u64; 8],
    d: [f16; TILE_ROWS],
}

/// A matrix's tiles, in the format its file's blocks fit without loss.
enum Tiles {
    /// Q8_0, and every block type re-quantized to it.
    Q8(Vec<Tile>),
    /// Q5_0, kept as it is in the file.
    Q5(Vec<Tile5>),
}

/// A Q8_0 or Q5_0 matrix `(rows, cols)` in tiles for the AVX-512 VNNI kernel.
pub(crate) struct TiledMatrix {
    /// Strip `s` (rows `16 s ..`) holds tiles `s · blocks ..`, one per 32 columns.
    tiles: Tiles,
    rows: usize,
    cols: usize,
    /// The (CPU) device the matrix was read on, for tensors made from it.
    device: Device,
    /// Wᵀ in Q8_0 tiles, built the first time a gradient goes through this matrix.
    transposed: OnceLock<Arc<TiledMatrix>>,
}

impl std::fmt::Debug for TiledMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TiledMatrix({} × {})", self.rows, self.cols)
    }
}

impl TiledMatrix {
    /// Whether this CPU runs the kernel (AVX-512 F, BW and VNNI).
    pub(crate) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The tiles of a CPU Q8_0 or Q5_0 matrix, or `None` where the kernel cannot take it: no
    /// AVX-512 VNNI, another block type, rows not a multiple of 16 or columns of 32.
    pub(crate) fn from_qtensor(q: &QTensor) -> Result<Option<Self>> {
        let (rows, cols) = q.shape().dims2()?;
        if !Self::available()
            || !q.device().is_cpu()
            || !matches!(q.dtype(), GgmlDType::Q8_0 | GgmlDType::Q5_0)
            || rows % TILE_ROWS != 0
            || cols % QK != 0
            || cols == 0
        {
            return Ok(None);
        }
        let raw = q.data()?;
        let blocks = cols / QK;
        let block_bytes = if q.dtype() == GgmlDType::Q8_0 { Q8_0_BYTES } else { Q5_0_BYTES };
        if raw.len() != rows * blocks * block_bytes {
            return Err(Error::meta("quantized matrix", format!("{} bytes for {rows} × {cols}", raw.len())));
        }
        let tiles = if q.dtype() == GgmlDType::Q8_0 {
            Tiles::Q8(q8_tiles(&raw, rows, blocks))
        } else {
            Tiles::Q5(q5_tiles(&raw, rows, blocks))
        };
        Ok(Some(TiledMatrix { tiles, rows, cols, device: q.device(), transposed: OnceLock::new() }))
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn cols(&self) -> usize {
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
                let low = (t.lo[(g % 4) * 64 + k] >> (4 * (g / 4))) & 0x0f;
                let q = low | (((t.hi[g] >> k) & 1) as u8) << 4;
                t.d[r].to_f32() * (q as i16 - 16) as f32
            }
        }
    }

    /// Rows `ids` of the matrix, dequantized: the embedding lookup of a tied matrix.
    pub(crate) fn rows_f32(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * self.cols);
        for &id in ids {
            let row = id as usize;
            if row >= self.rows {
                return Err(Error::meta("embedding", format!("token id {id} past {} rows", self.rows)));
            }
            out.extend((0..self.cols).map(|c| self.weight(row, c)));
        }
        Ok(out)
    }

    /// The whole matrix as dense f32 `(rows, cols)`.
    pub(crate) fn dequantize(&self) -> Result<Tensor> {
        let ids: Vec<u32> = (0..self.rows as u32).collect();
        Ok(Tensor::from_vec(self.rows_f32(&ids)?, (self.rows, self.cols), &self.device)?)
    }

    /// `x · Wᵀ` for `x` of shape `(…, cols)`, f32 on the CPU.
    pub(crate) fn matmul(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let m = x.elem_count() / self.cols;
        let xs = x.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        let mut out = vec![0f32; m * self.rows];
        self.matmul_into(&xs, m, &mut out);
        let mut shape = dims;
        *shape.last_mut().expect("matmul input has a last dimension") = self.rows;
        Ok(Tensor::from_vec(out, shape, x.device())?)
    }

    /// Wᵀ `(cols, rows)` as Q8_0 tiles, built once: what carries a gradient back through
    /// the product (`g · W = g · (Wᵀ)ᵀ`). Re-quantizing rounds the weights a second time
    /// (Q8_0 of a Q5_0 or Q8_0 value, at most half a step of 1/127 of a block's largest
    /// weight), which touches only the gradient: the forward keeps the file's weights.
    pub(crate) fn transposed(&self) -> Result<Arc<TiledMatrix>> {
        if let Some(t) = self.transposed.get() {
            return Ok(t.clone());
        }
        if self.rows % QK != 0 || self.cols % TILE_ROWS != 0 {
            return Err(Error::meta(
                "transposed matrix",
                format!("{} × {} cannot be tiled the other way round", self.rows, self.cols),
            ));
        }
        let wt = self.dequantize()?.t()?.contiguous()?;
        let q = QTensor::quantize(&wt, GgmlDType::Q8_0)?;
        drop(wt);
        let t = TiledMatrix::from_qtensor(&q)?
            .ok_or_else(|| Error::meta("transposed matrix", "the tiled kernel refused its own transpose".to_string()))?;
        Ok(self.transposed.get_or_init(|| Arc::new(t)).clone())
    }

    /// `out (rows,)` at the rows of strips `strips` (rows `16 s .. 16 s + 16` each) of
    /// `x (cols,) · Wᵀ`; the other entries are left as they are. Each entry is bit for bit the
    /// whole product's: a row's sums depend only on its own activations and its strip's tiles.
    pub(crate) fn row_strips_into(&self, x: &[f32], strips: &[usize], out: &mut [f32]) {
        assert_eq!(x.len(), self.cols);
        assert_eq!(out.len(), self.rows);
        assert!(strips.iter().all(|&s| s < self.rows / TILE_ROWS), "strip past the matrix");
        let acts = Activations::quantize(x, 1, self.cols);
        let chunk = acts.chunks().next().expect("one row");
        let out_ptr = out.as_mut_ptr() as usize;
        let run = |range: std::ops::Range<usize>| {
            for &strip in &strips[range] {
                // SAFETY: as in `matmul_into`; strips are distinct, so writes never overlap.
                unsafe { kernel::strip(self, &acts, chunk, strip, out_ptr as *mut f32) };
            }
        };
        // A few strips are not worth waking the pool for.
        if strips.len() < 64 {
            run(0..strips.len());
        } else {
            candle_core::utils::barrier_pool().execute_chunked(strips.len(), run);
        }
    }

    /// Rows per strip of tiles: [`TiledMatrix::row_strips_into`] computes whole strips.
    pub(crate) const STRIP_ROWS: usize = TILE_ROWS;

    /// `out (m, rows) = x (m, cols) · Wᵀ`.
    pub(crate) fn matmul_into(&self, x: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(x.len(), m * self.cols);
        assert_eq!(out.len(), m * self.rows);
        if m == 0 {
            return;
        }
        let acts = Activations::quantize(x, m, self.cols);
        let out_ptr = out.as_mut_ptr() as usize;
        let strips = self.rows / TILE_ROWS;
        candle_core::utils::barrier_pool().execute_chunked(strips, |range| {
            for strip in range {
                for chunk in acts.chunks() {
                    // SAFETY: `TiledMatrix` exists only where `available()` held; each strip
                    // writes its own 16 columns of `out`, which outlives the pool call.
                    unsafe { kernel::strip(self, &acts, chunk, strip, out_ptr as *mut f32) };
                }
            }
        });
    }
}

/// `x · Wᵀ` for a frozen tiled `W` inside a training graph: the forward is the sampler's own
/// product (the same tiles and kernel, so a learner sees the log-probabilities the sampler
/// drew with), and the backward gives `x` its gradient `g · W` through Wᵀ's tiles and gives
/// `W` none. candle's matmul backward would also compute the weight gradient, a third of a
/// backward's arithmetic and a matrix of memory per product, for weights nobody trains.
#[derive(Clone, Debug)]
pub(crate) struct FrozenProduct(pub(crate) Arc<TiledMatrix>);

impl CustomOp1 for FrozenProduct {
    fn name(&self) -> &'static str {
        "frozen-tiled-product"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let w = &self.0;
        let dims = layout.shape().dims();
        if dims.last() != Some(&w.cols) {
            candle_core::bail!("frozen product: input {dims:?} against a {} × {} matrix", w.rows, w.cols);
        }
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("frozen product needs a contiguous input");
        };
        let x = &storage.as_slice::<f32>()?[start..end];
        let m = x.len() / w.cols;
        let mut out = vec![0f32; m * w.rows];
        w.matmul_into(x, m, &mut out);
        let mut shape = dims.to_vec();
        *shape.last_mut().expect("checked above") = w.rows;
        Ok((CpuStorage::F32(out), Shape::from(shape)))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let wt = self.0.transposed().map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok(Some(grad_res.contiguous()?.apply_op1(FrozenProduct(wt))?))
    }
}

/// Q8_0 blocks `(rows, blocks)` as tiles, the weights offset by +128.
fn q8_tiles(raw: &[u8], rows: usize, blocks: usize) -> Vec<Tile> {
    let mut tiles = Vec::with_capacity(rows / TILE_ROWS * blocks);
    for strip in 0..rows / TILE_ROWS {
        for b in 0..blocks {
            let mut tile = Tile { qs: [0; QK * TILE_ROWS], d: [f16::ZERO; TILE_ROWS] };
            for r in 0..TILE_ROWS {
                let block = &raw[((strip * TILE_ROWS + r) * blocks + b) * Q8_0_BYTES..][..Q8_0_BYTES];
                tile.d[r] = f16::from_le_bytes([block[0], block[1]]);
                for (c, &w) in block[2..].iter().enumerate() {
                    tile.qs[((c / 4) * TILE_ROWS + r) * 4 + c % 4] = (w as i8 as i16 + 128) as u8;
                }
            }
            tiles.push(tile);
        }
    }
    tiles
}

/// Q5_0 blocks `(rows, blocks)` as tiles, bit for bit.
fn q5_tiles(raw: &[u8], rows: usize, blocks: usize) -> Vec<Tile5> {
    let mut tiles = Vec::with_capacity(rows / TILE_ROWS * blocks);
    for strip in 0..rows / TILE_ROWS {
        for b in 0..blocks {
            let mut tile = Tile5 { lo: [0; QK * TILE_ROWS / 2], hi: [0; 8], d: [f16::ZERO; TILE_ROWS] };
            for r in 0..TILE_ROWS {
                let block = &raw[((strip * TILE_ROWS + r) * blocks + b) * Q5_0_BYTES..][..Q5_0_BYTES];
                tile.d[r] = f16::from_le_bytes([block[0], block[1]]);
                let fifth = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
                let nibbles = &block[6..];
                for c in 0..QK {
                    let low = if c < 16 { nibbles[c] & 0x0f } else { nibbles[c - 16] >> 4 };
                    let (g, k) = (c / 4, r * 4 + c % 4);
                    tile.lo[(g % 4) * 64 + k] |= low << (4 * (g / 4));
                    tile.hi[g] |= u64::from((fifth >> c) & 1) << k;
                }
            }
            tiles.push(tile);
        }
    }
    tiles
}

/// Activation rows quantized in Q8_0 blocks. Rows go in chunks of up to [`MAX_ROWS`]; within
/// a chunk the data is ordered `[block][row]`, so each block's rows are adjacent.
struct Activations {
    /// The quantized values, 32 per (chunk row, block).
    q: Vec<i8>,
    /// The block scales.
    d: Vec<f32>,
    /// `Σ q` per block: takes the weights' offset (+128, or Q5_0's +16) back out.
    sum: Vec<i32>,
    rows: usize,
    blocks: usize,
}

/// A chunk of activation rows: `first .. first + len`.
#[derive(Clone, Copy)]
struct Chunk {
    first: usize,
    len: usize,
}

impl Activations {
    fn quantize(x: &[f32], rows: usize, cols: usize) -> Self {
        let blocks = cols / QK;
        let mut a = Activations {
            q: vec![0; rows * cols],
            d: vec![0.0; rows * blocks],
            sum: vec![0; rows * blocks],
            rows,
            blocks,
        };
        for row in 0..rows {
            for b in 0..blocks {
                let at = a.index(row, b);
                let xs: &[f32; QK] = x[row * cols + b * QK..][..QK].try_into().expect("a block is 32 values");
                let q: &mut [i8; QK] = (&mut a.q[at * QK..][..QK]).try_into().expect("a block is 32 values");
                // SAFETY: activations are quantized only for `TiledMatrix`, which exist only
                // where `available()` held.
                let (d, sum) = unsafe { kernel::quantize_block(xs, q) };
                a.d[at] = d;
                a.sum[at] = sum;
            }
        }
        a
    }

    /// Position of (row, block) in `d` and `sum`, and in 32s in `q`.
    fn index(&self, row: usize, block: usize) -> usize {
        let first = row / MAX_ROWS * MAX_ROWS;
        let len = (self.rows - first).min(MAX_ROWS);
        first * self.blocks + block * len + (row - first)
    }

    fn chunks(&self) -> impl Iterator<Item = Chunk> + '_ {
        (0..self.rows).step_by(MAX_ROWS).map(|first| Chunk { first, len: (self.rows - first).min(MAX_ROWS) })
    }
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::*;
    use std::arch::x86_64::*;

    /// A tile format the kernel reads: its 512 unsigned weights as 8 vectors of 4 columns ×
    /// 16 rows, the 16 row scales, and the offset stored in the weights.
    pub(super) trait TileFormat {
        /// What was added to each signed weight to make it unsigned.
        const BIAS: i32;
        /// # Safety
        /// The CPU has AVX-512 F/BW.
        unsafe fn weights(&self) -> [__m512i; 8];
        /// The 16 rows' block scales, as stored.
        fn scales(&self) -> &[f16; TILE_ROWS];
    }

    impl TileFormat for Tile {
        const BIAS: i32 = 128;
        #[inline(always)]
        unsafe fn weights(&self) -> [__m512i; 8] {
            let qs = self.qs.as_ptr() as *const __m512i;
            std::array::from_fn(|g| _mm512_load_si512(qs.add(g)))
        }
        #[inline(always)]
        fn scales(&self) -> &[f16; TILE_ROWS] {
            &self.d
        }
    }

    impl TileFormat for Tile5 {
        const BIAS: i32 = 16;
        /// Each 64-byte line of nibbles gives two column groups; a group's fifth bits,
        /// one per byte, are a mask that adds 16 where set.
        #[inline(always)]
        unsafe fn weights(&self) -> [__m512i; 8] {
            let lo = self.lo.as_ptr() as *const __m512i;
            let nibble = _mm512_set1_epi8(0x0f);
            let sixteen = _mm512_set1_epi8(16);
            let lines: [__m512i; 4] = std::array::from_fn(|p| _mm512_loadu_si512(lo.add(p)));
            std::array::from_fn(|g| {
                let line = lines[g % 4];
                let low = if g < 4 { line } else { _mm512_srli_epi16::<4>(line) };
                let low = _mm512_and_si512(low, nibble);
                _mm512_mask_add_epi8(low, self.hi[g], low, sixteen)
            })
        }
        #[inline(always)]
        fn scales(&self) -> &[f16; TILE_ROWS] {
            &self.d
        }
    }

    /// Rows `16 strip ..` of `out (m, rows)` for the activation rows of `chunk`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VNNI; `out` holds `m × w.rows` f32.
    pub(super) unsafe fn strip(w: &TiledMatrix, a: &Activations, chunk: Chunk, strip: usize, out: *mut f32) {
        match &w.tiles {
            Tiles::Q8(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
            Tiles::Q5(tiles) => strip_of(tiles, w.rows, a, chunk, strip, out),
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

    /// One block of activations in Q8_0: `q = round(x / d)` (ties to even), `d = max |x| / 127`.
    /// Returns `d` and `Σ q`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn quantize_block(x: &[f32; QK], q: &mut [i8; QK]) -> (f32, i32) {
        let lo = _mm512_loadu_ps(x.as_ptr());
        let hi = _mm512_loadu_ps(x.as_ptr().add(16));
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
        let d = amax / 127.0;
        let inv = _mm512_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
        // The default MXCSR rounding is to nearest, ties to even.
        let qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inv));
        let qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inv));
        _mm_storeu_si128(q.as_mut_ptr() as *mut __m128i, _mm512_cvtepi32_epi8(qlo));
        _mm_storeu_si128(q.as_mut_ptr().add(16) as *mut __m128i, _mm512_cvtepi32_epi8(qhi));
        (d, _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi)))
    }

    /// The kernel: for each block, the tile's 8 vectors of 4 columns × 16 rows, then per
    /// activation row 8 `vpdpbusd` into two independent sums (to halve the dependency chain
    /// at one row), converted and scaled into one f32 accumulator per row. `tiles` is one
    /// strip's, `n` the matrix's row count (the stride of `out`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows<T: TileFormat, const R: usize>(
        tiles: &[T],
        n: usize,
        a: &Activations,
        chunk: Chunk,
        strip: usize,
        out: *mut f32,
    ) {
        let base = chunk.first * a.blocks;
        let mut acc = [_mm512_setzero_ps(); R];
        for (b, tile) in tiles.iter().enumerate() {
            let wv = tile.weights();
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(tile.scales().as_ptr() as *const __m256i));
            let at = base + b * R;
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = a.q.as_ptr().add((at + i) * QK) as *const i32;
                let bcast = |g: usize| _mm512_set1_epi32(x.add(g).read_unaligned());
                let mut s0 = _mm512_set1_epi32(-T::BIAS * *a.sum.get_unchecked(at + i));
                let mut s1 = _mm512_setzero_si512();
                s0 = _mm512_dpbusd_epi32(s0, wv[0], bcast(0));
                s1 = _mm512_dpbusd_epi32(s1, wv[1], bcast(1));
                s0 = _mm512_dpbusd_epi32(s0, wv[2], bcast(2));
                s1 = _mm512_dpbusd_epi32(s1, wv[3], bcast(3));
                s0 = _mm512_dpbusd_epi32(s0, wv[4], bcast(4));
                s1 = _mm512_dpbusd_epi32(s1, wv[5], bcast(5));
                s0 = _mm512_dpbusd_epi32(s0, wv[6], bcast(6));
                s1 = _mm512_dpbusd_epi32(s1, wv[7], bcast(7));
                let s = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a.d.get_unchecked(at + i)));
                *acc = _mm512_fmadd_ps(s, scale, *acc);
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add((chunk.first + i) * n + strip * TILE_ROWS), *acc);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::*;

    pub(super) unsafe fn strip(_: &TiledMatrix, _: &Activations, _: Chunk, _: usize, _: *mut f32) {
        unreachable!("a TiledMatrix is built only where TiledMatrix::available() holds (x86_64)");
    }

    pub(super) unsafe fn quantize_block(_: &[f32; QK], _: &mut [i8; QK]) -> (f32, i32) {
        unreachable!("a TiledMatrix is built only where TiledMatrix::available() holds (x86_64)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: usize, cols: usize) -> Tensor {
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 7) as f32)).collect();
        Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap()
    }

    /// The product in f64 over the (Q8_0 or Q5_0) weights and the Q8_0 activations (each row
    /// quantized in blocks of 32), as candle dequantizes them.
    fn reference(q: &QTensor, x: &[f32], m: usize) -> Vec<f32> {
        let dequant = |t: &Tensor| -> Vec<f32> {
            let q = QTensor::quantize(t, GgmlDType::Q8_0).unwrap();
            q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap()
        };
        let w: Vec<f32> = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let (rows, cols) = q.shape().dims2().unwrap();
        let x = dequant(&Tensor::from_vec(x.to_vec(), (m, cols), &Device::Cpu).unwrap());
        let mut out = vec![0f32; m * rows];
        for i in 0..m {
            for r in 0..rows {
                let s: f64 = (0..cols).map(|c| x[i * cols + c] as f64 * w[r * cols + c] as f64).sum();
                out[i * rows + r] = s as f32;
            }
        }
        out
    }

    #[test]
    fn products_of_any_row_count_match_the_dequantized_weights() {
        if !TiledMatrix::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        let (rows, cols) = (48, 96);
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q5_0] {
            let q = QTensor::quantize(&matrix(rows, cols), dtype).unwrap();
            let tiles = TiledMatrix::from_qtensor(&q).unwrap().expect("a 48 × 96 matrix tiles");
            check_products(&q, &tiles, cols);
        }
    }

    fn check_products(q: &QTensor, tiles: &TiledMatrix, cols: usize) {
        // Every kernel width, and more rows than one chunk holds (9, 19).
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 19] {
            let x: Vec<f32> = (0..m * cols).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
            let xt = Tensor::from_vec(x.clone(), (1, m, cols), &Device::Cpu).unwrap();
            let got: Vec<f32> = tiles.matmul(&xt).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let want = reference(q, &x, m);
            let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            for (g, w) in got.iter().zip(&want) {
                // The same integers: only f32 rounding (and a tie rounded the other way).
                assert!((g - w).abs() <= 1e-3 * scale, "{:?}, m = {m}: {g} vs {w} (scale {scale})", q.dtype());
            }
        }
    }

    #[test]
    fn rows_and_dequantize_read_back_the_weights() {
        if !TiledMatrix::available() {
            return;
        }
        // Q5_0 bit for bit: every fifth bit and nibble lands back where candle reads it.
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q5_0] {
            let q = QTensor::quantize(&matrix(32, 64), dtype).unwrap();
            let tiles = TiledMatrix::from_qtensor(&q).unwrap().unwrap();
            let want: Vec<f32> = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let got: Vec<f32> = tiles.dequantize().unwrap().flatten_all().unwrap().to_vec1().unwrap();
            assert_eq!(got, want, "{dtype:?}");
            assert_eq!(tiles.rows_f32(&[17]).unwrap(), want[17 * 64..18 * 64]);
            assert!(tiles.rows_f32(&[32]).is_err());
        }
    }

    #[test]
    fn shapes_the_kernel_cannot_take_are_refused() {
        let q = QTensor::quantize(&matrix(24, 64), GgmlDType::Q8_0).unwrap();
        assert!(TiledMatrix::from_qtensor(&q).unwrap().is_none(), "24 rows are not whole tiles");
        let q = QTensor::quantize(&matrix(32, 64), GgmlDType::Q4_0).unwrap();
        assert!(TiledMatrix::from_qtensor(&q).unwrap().is_none(), "only Q8_0 and Q5_0 are tiled");
    }
}

//! The tiles' kernel for x86 CPUs with AVX-512 F, BW and VNNI (Zen 4, Intel since Ice Lake):
//! one `vpdpbusd` adds 4 columns × 16 rows of products into 16 row sums.

use std::arch::x86_64::*;

use half::f16;

use super::{Activations, Chunk, Tile, Tile5, TiledMatrix, Tiles, QK, TILE_ROWS};

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

strip_entry!();

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

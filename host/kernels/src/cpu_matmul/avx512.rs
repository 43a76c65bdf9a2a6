//! The tiles' kernel for x86 CPUs with AVX-512 F, BW and VNNI (Zen 4, Intel since Ice Lake):
//! one `vpdpbusd` adds 4 columns × 16 rows of products into 16 row sums.

use std::arch::x86_64::*;

use super::{Activations, Chunk, ChunkOut, Scales, Tile, Tile4, Tile5, Tile6, TiledMatrix, Tiles, QK, TILE_ROWS};

/// A tile format the kernel reads: its 512 unsigned weights as 8 vectors of 4 columns ×
/// 16 rows, and the offset stored in them.
pub(super) trait TileFormat: Scales {
    /// What was added to each signed weight to make it unsigned.
    const BIAS: i32;
    /// # Safety
    /// The CPU has AVX-512 F/BW.
    unsafe fn weights(&self) -> [__m512i; 8];
}

impl TileFormat for Tile {
    const BIAS: i32 = 128;
    #[inline(always)]
    unsafe fn weights(&self) -> [__m512i; 8] {
        let qs = self.qs.as_ptr() as *const __m512i;
        std::array::from_fn(|g| _mm512_load_si512(qs.add(g)))
    }
}

/// The low nibbles of [`Tile5`], [`Tile4`] and [`Tile6`]: each 64-byte line gives two
/// column groups.
#[inline(always)]
unsafe fn nibbles(lo: &[u8; QK * TILE_ROWS / 2]) -> [__m512i; 8] {
    let lo = lo.as_ptr() as *const __m512i;
    let nibble = _mm512_set1_epi8(0x0f);
    let lines: [__m512i; 4] = std::array::from_fn(|p| _mm512_loadu_si512(lo.add(p)));
    std::array::from_fn(|g| {
        let line = lines[g % 4];
        let low = if g < 4 { line } else { _mm512_srli_epi16::<4>(line) };
        _mm512_and_si512(low, nibble)
    })
}

impl TileFormat for Tile5 {
    const BIAS: i32 = 16;
    /// A group's fifth bits, one per byte, are a mask that adds 16 where set.
    #[inline(always)]
    unsafe fn weights(&self) -> [__m512i; 8] {
        let low = nibbles(&self.lo);
        let sixteen = _mm512_set1_epi8(16);
        std::array::from_fn(|g| _mm512_mask_add_epi8(low[g], self.hi[g], low[g], sixteen))
    }
}

impl TileFormat for Tile4 {
    const BIAS: i32 = 0;
    #[inline(always)]
    unsafe fn weights(&self) -> [__m512i; 8] {
        nibbles(&self.lo)
    }
}

impl TileFormat for Tile6 {
    const BIAS: i32 = 32;
    /// Group `g`'s top bits sit at bits `2 (g / 2)` of line `g % 2`: shifted to bits 4–5 and
    /// merged with the nibble in one `vpternlogd` (`low | (high & 0x30)`).
    #[inline(always)]
    unsafe fn weights(&self) -> [__m512i; 8] {
        let low = nibbles(&self.lo);
        let hi = self.hi.as_ptr() as *const __m512i;
        let lines: [__m512i; 2] = std::array::from_fn(|p| _mm512_loadu_si512(hi.add(p)));
        let top = _mm512_set1_epi8(0x30);
        std::array::from_fn(|g| {
            let line = lines[g % 2];
            // 16-bit shifts: what crosses between a lane's two bytes lands outside 0x30.
            let high = match g / 2 {
                0 => _mm512_slli_epi16::<4>(line),
                1 => _mm512_slli_epi16::<2>(line),
                2 => line,
                _ => _mm512_srli_epi16::<2>(line),
            };
            _mm512_ternarylogic_epi32::<0xf8>(low[g], high, top)
        })
    }
}

strip_entry!();

/// Quantizes one chunk of activation rows, [`quantize_block`] inlined.
///
/// # Safety
/// The CPU has AVX-512 F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn quantize_chunk(x: &[f32], cols: usize, out: ChunkOut<'_>) {
    out.fill(x, cols, quantize_block);
}

/// One block of activations in Q8_0: `q = round(x / d)` (ties to even), `d = max |x| / 127`.
/// Returns `d` and `Σ q` over the first and the last 16 values.
///
/// # Safety
/// The CPU has AVX-512 F.
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) unsafe fn quantize_block(x: &[f32; QK], q: &mut [i8; QK]) -> (f32, [i32; 2]) {
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
    (d, [_mm512_reduce_add_epi32(qlo), _mm512_reduce_add_epi32(qhi)])
}

/// The kernel: for each block, the tile's 8 vectors of 4 columns × 16 rows, then per
/// activation row 8 `vpdpbusd` into two independent sums, columns 0–15 and 16–31 (which
/// halves the dependency chain at one row, and gives Q6_K its two halves), converted and
/// scaled into one f32 accumulator per row. `tiles` is one strip's, `n` the matrix's row
/// count (the stride of `out`).
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
        let mins = tile.mins().map(|m| _mm512_cvtph_ps(_mm256_loadu_si256(m.as_ptr() as *const __m256i)));
        let halves = tile.half_scales().map(|sc| sc.map(|h| _mm512_cvtepi8_epi32(_mm_loadu_si128(h.as_ptr() as *const __m128i))));
        let at = base + b * R;
        for (i, acc) in acc.iter_mut().enumerate() {
            let x = a.q.as_ptr().add((at + i) * QK) as *const i32;
            let bcast = |g: usize| _mm512_set1_epi32(x.add(g).read_unaligned());
            let sum = *a.sum.get_unchecked(at + i);
            // The offset comes out of the whole block's sum, or per half where each has its
            // own scale.
            let (bias0, bias1) = match halves {
                Some(_) => {
                    let low = *a.low_sum.get_unchecked(at + i);
                    (T::BIAS * low, T::BIAS * (sum - low))
                }
                None => (T::BIAS * sum, 0),
            };
            let mut s0 = _mm512_set1_epi32(-bias0);
            let mut s1 = _mm512_set1_epi32(-bias1);
            s0 = _mm512_dpbusd_epi32(s0, wv[0], bcast(0));
            s1 = _mm512_dpbusd_epi32(s1, wv[4], bcast(4));
            s0 = _mm512_dpbusd_epi32(s0, wv[1], bcast(1));
            s1 = _mm512_dpbusd_epi32(s1, wv[5], bcast(5));
            s0 = _mm512_dpbusd_epi32(s0, wv[2], bcast(2));
            s1 = _mm512_dpbusd_epi32(s1, wv[6], bcast(6));
            s0 = _mm512_dpbusd_epi32(s0, wv[3], bcast(3));
            s1 = _mm512_dpbusd_epi32(s1, wv[7], bcast(7));
            // Q6_K's |s| ≤ 2 · 128 · 16 · 32 · 127 < 2²⁴: exact in i32 and in f32.
            let s = match halves {
                Some([sc0, sc1]) => _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1)),
                None => _mm512_add_epi32(s0, s1),
            };
            let da = *a.d.get_unchecked(at + i);
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(da));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, *acc);
            if let Some(mins) = mins {
                *acc = _mm512_fnmadd_ps(mins, _mm512_set1_ps(*a.d_sum.get_unchecked(at + i)), *acc);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        _mm512_storeu_ps(out.add((chunk.first + i) * n + strip * TILE_ROWS), *acc);
    }
}

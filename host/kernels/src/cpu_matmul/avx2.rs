//! The tiles' kernel for x86 CPUs with AVX2 but no AVX-512 VNNI (Zen 2 and 3, Intel client
//! parts before Ice Lake): the same tiles and activations as [`super::avx512`], each 64-byte
//! column group read as two halves of 8 rows.
//!
//! AVX2's only byte product is `vpmaddubsw` (unsigned × signed bytes, pairs added into a
//! saturating i16), so the products are arranged never to saturate:
//! - Q8_0 weights are made signed again (the stored +128 flipped back) and the sign moved
//!   onto the activation: `|w| · (a · sign w)`, at most 2 · 128 · 127 = 32,512 per pair;
//! - Q5_0, Q4_K and Q6_K weights are already small and unsigned (at most 63): `q · a`
//!   directly, at most 16,002 per pair, with the offset (+16, +32) taken back out through
//!   `Σ a` as the AVX-512 kernel does.
//!
//! `vpmaddwd` against ones then adds the pairs into i32. Where the weights are small, the
//! i16 pair sums of several column groups are added first (a chain: 8 groups for Q4_K, 4 for
//! Q5_0, 2 for Q6_K) and one `vpmaddwd` serves the chain, so Q4_K's 8 groups take 9 integer
//! multiplies where they took 16, for the same integer. Every block's sum is therefore the
//! same integer the AVX-512 kernel computes, converted and scaled by the same f32 operations
//! in the same order: the two kernels agree bit for bit, so a run's numbers do not depend on
//! which of the two machines it ran on.

use std::arch::x86_64::*;

use super::{Activations, Chunk, ChunkOut, Scales, Tile, Tile4, Tile5, Tile6, TiledMatrix, Tiles, QK, TILE_ROWS};

/// A tile format this kernel reads, one half (8 rows) of one column group at a time.
trait TileFormat: Scales {
    /// What is taken back out per block, times the activations' sum (0: nothing).
    const BIAS: i32;
    /// Whether `weights` gives |w| and the activations must take w's sign.
    const SIGNED: bool;
    /// Column groups whose `vpmaddubsw` pair sums add up in i16 without overflow: a pair is
    /// at most 2 · max q · 127, so Q4_K's 15 allows 8 groups (30,480), Q5_0's 31 four
    /// (31,496), Q6_K's 63 two (32,004) and Q8_0's 128 one. A chain costs one `vpmaddwd`
    /// instead of one per group, and the integer it gives is the same.
    const CHAIN: usize;
    /// Column group `g`, rows `8 h .. 8 h + 8`: the unsigned operand of `vpmaddubsw`, and
    /// where [`TileFormat::SIGNED`] the signed weights whose signs the activations take.
    ///
    /// # Safety
    /// The CPU has AVX2.
    unsafe fn weights(&self, g: usize, h: usize) -> (__m256i, __m256i);
}

impl TileFormat for Tile {
    const BIAS: i32 = 0;
    const SIGNED: bool = true;
    const CHAIN: usize = 1;
    #[inline(always)]
    unsafe fn weights(&self, g: usize, h: usize) -> (__m256i, __m256i) {
        let stored = _mm256_load_si256(self.qs.as_ptr().add(64 * g + 32 * h) as *const __m256i);
        let signed = _mm256_xor_si256(stored, _mm256_set1_epi8(-128));
        (_mm256_abs_epi8(signed), signed)
    }
}

/// The low nibbles of group `g`, rows `8 h ..`, of [`Tile5`], [`Tile4`] and [`Tile6`]: line
/// `g % 4`, high nibbles for `g ≥ 4`.
#[inline(always)]
unsafe fn nibbles(lo: &[u8; QK * TILE_ROWS / 2], g: usize, h: usize) -> __m256i {
    let line = _mm256_loadu_si256(lo.as_ptr().add(64 * (g % 4) + 32 * h) as *const __m256i);
    let line = if g < 4 {
        line
    } else {
        _mm256_srli_epi16::<4>(line)
    };
    _mm256_and_si256(line, _mm256_set1_epi8(0x0f))
}

impl TileFormat for Tile5 {
    const BIAS: i32 = 16;
    const SIGNED: bool = false;
    const CHAIN: usize = 4;
    /// The fifth bits of the group's 32 bytes, one bit per byte, are spread into bytes and
    /// add 16 where set.
    #[inline(always)]
    unsafe fn weights(&self, g: usize, h: usize) -> (__m256i, __m256i) {
        let low = nibbles(&self.lo, g, h);
        let bits = (self.hi[g] >> (32 * h)) as u32;
        // Byte j of the vector looks at byte j / 8 of `bits` (the shuffle stays within each
        // 128-bit lane, and the broadcast puts the 4 bytes in every lane) and tests bit j % 8.
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            ),
        );
        let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
        let q = _mm256_add_epi8(low, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        (q, q)
    }
}

impl TileFormat for Tile4 {
    const BIAS: i32 = 0;
    const SIGNED: bool = false;
    const CHAIN: usize = 8;
    #[inline(always)]
    unsafe fn weights(&self, g: usize, h: usize) -> (__m256i, __m256i) {
        let q = nibbles(&self.lo, g, h);
        (q, q)
    }
}

impl TileFormat for Tile6 {
    const BIAS: i32 = 32;
    const SIGNED: bool = false;
    const CHAIN: usize = 2;
    /// Group `g`'s top bits sit at bits `2 (g / 2)` of line `g % 2`, shifted to bits 4–5.
    #[inline(always)]
    unsafe fn weights(&self, g: usize, h: usize) -> (__m256i, __m256i) {
        let line = _mm256_loadu_si256(self.hi.as_ptr().add(64 * (g % 2) + 32 * h) as *const __m256i);
        // 16-bit shifts: what crosses between a lane's two bytes lands outside 0x30.
        let high = match g / 2 {
            0 => _mm256_slli_epi16::<4>(line),
            1 => _mm256_slli_epi16::<2>(line),
            2 => line,
            _ => _mm256_srli_epi16::<2>(line),
        };
        let q = _mm256_or_si256(nibbles(&self.lo, g, h), _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
        (q, q)
    }
}

strip_entry!();

/// Quantizes one chunk of activation rows, [`quantize_block`] inlined.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quantize_chunk(x: &[f32], cols: usize, out: ChunkOut<'_>) {
    out.fill(x, cols, quantize_block);
}

/// One block of activations in Q8_0, exactly as [`super::avx512::quantize_block`] rounds it.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn quantize_block(x: &[f32; QK], q: &mut [i8; QK]) -> (f32, [i32; 2]) {
    let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(x.as_ptr().add(8 * i)));
    let sign = _mm256_set1_ps(-0.0);
    let abs = |v: __m256| _mm256_andnot_ps(sign, v);
    let m = _mm256_max_ps(
        _mm256_max_ps(abs(v[0]), abs(v[1])),
        _mm256_max_ps(abs(v[2]), abs(v[3])),
    );
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    let d = amax / 127.0;
    let inv = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
    // The default MXCSR rounding is to nearest, ties to even; |q| ≤ 127, so the packs'
    // saturation never applies.
    let qi: [__m256i; 4] = std::array::from_fn(|i| _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv)));
    let packed = _mm256_packs_epi16(
        _mm256_packs_epi32(qi[0], qi[1]),
        _mm256_packs_epi32(qi[2], qi[3]),
    );
    // The packs interleave 128-bit lanes: put the 4-value groups back in order.
    let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, ordered);
    let sum = |s: __m256i| {
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    };
    (
        d,
        [
            sum(_mm256_add_epi32(qi[0], qi[1])),
            sum(_mm256_add_epi32(qi[2], qi[3])),
        ],
    )
}

/// The kernel: per block, the tile's two halves (8 rows of the strip each) against the chunk's
/// activation rows, together for Q4_K ([`both_halves`]), in turn for Q5_0 and Q6_K
/// ([`row_by_row`]) and Q8_0 ([`group_by_group`]). The i32 sums are converted and scaled into
/// one f32 accumulator per row and half, as the AVX-512 kernel does for the whole tile.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows<T: TileFormat, const R: usize>(
    tiles: &[T],
    n: usize,
    a: &Activations,
    chunk: Chunk,
    strip: usize,
    out: *mut f32,
) {
    let base = chunk.first * a.blocks;
    let mut acc = [[_mm256_setzero_ps(); R]; 2];
    for (b, tile) in tiles.iter().enumerate() {
        if T::CHAIN == 8 {
            both_halves::<T, R>(tile, a, base + b * R, &mut acc);
        } else {
            let [low, high] = &mut acc;
            if T::CHAIN == 1 {
                group_by_group::<T, R>(tile, 0, a, base + b * R, low);
                group_by_group::<T, R>(tile, 1, a, base + b * R, high);
            } else {
                row_by_row::<T, R>(tile, 0, a, base + b * R, low);
                row_by_row::<T, R>(tile, 1, a, base + b * R, high);
            }
        }
    }
    for (h, acc) in acc.iter().enumerate() {
        for (i, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add((chunk.first + i) * n + strip * TILE_ROWS + 8 * h), *acc);
        }
    }
}

/// One Q4_K tile, both halves at once, in two passes over its column halves (groups 0–3,
/// then 4–7). A pass holds its 4 groups' weights for both halves (8 of the 16 vector
/// registers), so each activation broadcast serves 16 rows where [`row_by_row`]'s served 8,
/// and a row's block scales are read once for both halves. Between the passes each row keeps
/// its i16 pair sums: Q4_K's chain of 8 groups spans both passes and still takes one
/// `vpmaddwd`. The integers are the same sums and the scaling the same f32 operations per row
/// and half in the same order, so the bits are [`row_by_row`]'s. On a 2-core Zen 3 it took
/// Q4_K's products at 256 rows from 1.23–1.47× to 1.53–1.76× their Q8_0 tiles' speed; Q6_K
/// (top bits and two scales) ran out of registers this way and got slower, and Q5_0 could not
/// be told apart from noise (`results/bench-training/zen3-1.5b-avx2-q4k-9173c2e`). The
/// activation rows of the block start at index `at`.
#[inline(always)]
unsafe fn both_halves<T: TileFormat, const R: usize>(tile: &T, a: &Activations, at: usize, acc: &mut [[__m256; R]; 2]) {
    debug_assert!(T::CHAIN == 8 && !T::SIGNED && tile.half_scales().is_none(), "a Q4_K-like format: one chain a half");
    let ones = _mm256_set1_epi16(1);
    let zero = _mm256_setzero_si256();
    // Group `g`'s products of one activation row into each half's pair sums, which group 0
    // starts.
    let group = |g: usize, w: &[__m256i; 2], x: __m256i, pairs: &mut [__m256i; 2]| {
        for h in 0..2 {
            let p = _mm256_maddubs_epi16(w[h], x);
            pairs[h] = if g == 0 { p } else { _mm256_add_epi16(pairs[h], p) };
        }
    };
    let mut first = [[zero; 2]; R];
    let weights: [[__m256i; 2]; 4] = std::array::from_fn(|g| std::array::from_fn(|h| tile.weights(g, h).0));
    for (i, pairs) in first.iter_mut().enumerate() {
        for g in 0..4 {
            group(g, &weights[g], activations::<T>(a, at + i, g, zero), pairs);
        }
    }
    let weights: [[__m256i; 2]; 4] = std::array::from_fn(|g| std::array::from_fn(|h| tile.weights(4 + g, h).0));
    let scales = [HalfScales::of(tile, 0), HalfScales::of(tile, 1)];
    for (i, mut pairs) in first.into_iter().enumerate() {
        for g in 4..8 {
            group(g, &weights[g - 4], activations::<T>(a, at + i, g, zero), &mut pairs);
        }
        for h in 0..2 {
            let sum = _mm256_madd_epi16(pairs[h], ones);
            scales[h].add_row::<T>(&mut acc[h][i], [sum, zero], a, at + i);
        }
    }
}

/// Rows `8 h ..` of one tile for chained formats: the 8 groups' weights once, then per
/// activation row the `vpmaddubsw` products added in i16 over chains of
/// [`TileFormat::CHAIN`] groups, one `vpmaddwd` per chain into the i32 sums of columns 0–15
/// and 16–31. The weights take 8 of the 16 vector registers; a row needs its chain and sums.
/// The activation rows of the block start at index `at`.
#[inline(always)]
unsafe fn row_by_row<T: TileFormat, const R: usize>(tile: &T, h: usize, a: &Activations, at: usize, acc: &mut [__m256; R]) {
    // A chain must end where a half does when the halves have their own scales.
    debug_assert!(8 % T::CHAIN == 0 && (T::CHAIN <= 4 || tile.half_scales().is_none()), "a chain straddles the halves");
    let ones = _mm256_set1_epi16(1);
    let scales = HalfScales::of(tile, h);
    let weights: [(__m256i, __m256i); 8] = std::array::from_fn(|g| tile.weights(g, h));
    for (i, acc) in acc.iter_mut().enumerate() {
        // Plain index loops over constants, so that they unroll and every index is known:
        // the weights and sums then stay in registers.
        let mut halves_sum = [_mm256_setzero_si256(); 2];
        let mut pairs = _mm256_setzero_si256();
        for g in 0..8 {
            let (u, w) = weights[g];
            let p = _mm256_maddubs_epi16(u, activations::<T>(a, at + i, g, w));
            pairs = if g % T::CHAIN == 0 { p } else { _mm256_add_epi16(pairs, p) };
            if g % T::CHAIN == T::CHAIN - 1 {
                halves_sum[g / 4] = _mm256_add_epi32(halves_sum[g / 4], _mm256_madd_epi16(pairs, ones));
            }
        }
        scales.add_row::<T>(acc, halves_sum, a, at + i);
    }
}

/// Rows `8 h ..` of one tile for unchained formats (Q8_0, whose weights need their signs
/// too): each group's weights once, then every row's product of it, one `vpmaddwd` per
/// group and row. Holding all 8 groups (16 registers with their signs) would not fit.
#[inline(always)]
unsafe fn group_by_group<T: TileFormat, const R: usize>(tile: &T, h: usize, a: &Activations, at: usize, acc: &mut [__m256; R]) {
    debug_assert!(tile.half_scales().is_none(), "one sum per row: the halves share a scale");
    let ones = _mm256_set1_epi16(1);
    let scales = HalfScales::of(tile, h);
    let mut sums = [_mm256_setzero_si256(); R];
    for g in 0..8 {
        let (u, w) = tile.weights(g, h);
        for (i, sum) in sums.iter_mut().enumerate() {
            let x = activations::<T>(a, at + i, g, w);
            *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), ones));
        }
    }
    for (i, (acc, sum)) in acc.iter_mut().zip(sums).enumerate() {
        scales.add_row::<T>(acc, [sum, _mm256_setzero_si256()], a, at + i);
    }
}

/// Column group `g`'s 4 activation bytes of the block at index `at`, in every lane, with the
/// weights' signs where [`TileFormat::SIGNED`]: the signed operand of `vpmaddubsw`.
#[inline(always)]
unsafe fn activations<T: TileFormat>(a: &Activations, at: usize, g: usize, w: __m256i) -> __m256i {
    let x = _mm256_set1_epi32((a.q.as_ptr().add(at * QK) as *const i32).add(g).read_unaligned());
    if T::SIGNED {
        _mm256_sign_epi8(x, w)
    } else {
        x
    }
}

/// What scales one half tile's integer sums: its rows' f32 scales, Q4_K's minimums and
/// Q6_K's two i8 scales.
struct HalfScales {
    dw: __m256,
    mins: Option<__m256>,
    halves: Option<[__m256i; 2]>,
}

impl HalfScales {
    #[inline(always)]
    unsafe fn of<T: TileFormat>(tile: &T, h: usize) -> Self {
        HalfScales {
            dw: _mm256_cvtph_ps(_mm_loadu_si128((tile.scales().as_ptr() as *const __m128i).add(h))),
            mins: tile.mins().map(|m| _mm256_cvtph_ps(_mm_loadu_si128((m.as_ptr() as *const __m128i).add(h)))),
            halves: tile
                .half_scales()
                .map(|sc| sc.map(|c| _mm256_cvtepi8_epi32(_mm_loadl_epi64(c.as_ptr().add(8 * h) as *const __m128i)))),
        }
    }

    /// Adds one activation row's product into `acc`, from its i32 sums of columns 0–15 and
    /// 16–31 and its block (`at`): the offset comes out, each half takes its own scale where
    /// Q6_K has them, and the integer total is converted and scaled.
    #[inline(always)]
    unsafe fn add_row<T: TileFormat>(&self, acc: &mut __m256, [low_sum, high_sum]: [__m256i; 2], a: &Activations, at: usize) {
        let block_sum = *a.sum.get_unchecked(at);
        let s = match self.halves {
            Some([sc0, sc1]) => {
                let low = *a.low_sum.get_unchecked(at);
                let s0 = _mm256_sub_epi32(low_sum, _mm256_set1_epi32(T::BIAS * low));
                let s1 = _mm256_sub_epi32(high_sum, _mm256_set1_epi32(T::BIAS * (block_sum - low)));
                _mm256_add_epi32(_mm256_mullo_epi32(s0, sc0), _mm256_mullo_epi32(s1, sc1))
            }
            None => _mm256_sub_epi32(_mm256_add_epi32(low_sum, high_sum), _mm256_set1_epi32(T::BIAS * block_sum)),
        };
        let da = *a.d.get_unchecked(at);
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(self.dw, _mm256_set1_ps(da)), *acc);
        if let Some(mins) = self.mins {
            *acc = _mm256_fnmadd_ps(mins, _mm256_set1_ps(*a.d_sum.get_unchecked(at)), *acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    use super::super::{Activations, Kernel, MAX_ROWS};
    use super::*;

    /// One full chunk of activation rows against a strip of tiles, the tile's halves taken by
    /// `per_tile`, into `[half][row]` accumulators.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_sums<T: TileFormat>(tiles: &[T], per_tile: impl Fn(&T, usize, &mut [[__m256; MAX_ROWS]; 2])) -> Vec<[f32; 8]> {
        let mut acc = [[_mm256_setzero_ps(); MAX_ROWS]; 2];
        for (b, tile) in tiles.iter().enumerate() {
            per_tile(tile, b * MAX_ROWS, &mut acc);
        }
        acc.iter()
            .flatten()
            .map(|v| {
                let mut out = [0f32; 8];
                _mm256_storeu_ps(out.as_mut_ptr(), *v);
                out
            })
            .collect()
    }

    /// Q4_K's two-pass product ([`both_halves`]) gives [`row_by_row`]'s bits, with spikes in
    /// the weights and activations at ±127, near where a chain of 8 groups meets i16's limit.
    /// On a machine with both kernels `products_of_any_row_count_match_the_dequantized_weights`
    /// also checks it against the AVX-512 kernel; a machine with AVX2 alone cannot.
    #[test]
    fn both_halves_give_the_bits_of_one_half_at_a_time() {
        if !Kernel::supported().contains(&Kernel::Avx2) {
            eprintln!("SKIPPED: this CPU has no AVX2");
            return;
        }
        let (rows, cols) = (16, 512);
        let w: Vec<f32> = (0..rows * cols).map(|i| if i % 5 == 0 { 3.0 } else { (i as f32 * 0.37).sin() }).collect();
        let q = QTensor::quantize(&Tensor::from_vec(w, (rows, cols), &Device::Cpu).unwrap(), GgmlDType::Q4K).unwrap();
        let m = TiledMatrix::from_qtensor_on(&q, Kernel::Avx2).unwrap().expect("a 16-row Q4_K matrix tiles");
        let Tiles::Q4K(tiles) = &m.tiles else { panic!("Q4_K tiles") };
        let x: Vec<f32> = (0..MAX_ROWS * cols).map(|i| if i % 3 == 0 { -1.0 } else { ((i * 7 % 13) as f32 - 6.0) / 6.0 }).collect();
        let a = Activations::quantize(&x, MAX_ROWS, cols, Kernel::Avx2);
        // SAFETY: the CPU has AVX2 (checked above, with FMA and F16C, which `supported` requires).
        let (two_pass, one_half) = unsafe {
            (
                chunk_sums(tiles, |t, at, acc| both_halves::<Tile4, MAX_ROWS>(t, &a, at, acc)),
                chunk_sums(tiles, |t, at, acc| {
                    let [low, high] = acc;
                    row_by_row::<Tile4, MAX_ROWS>(t, 0, &a, at, low);
                    row_by_row::<Tile4, MAX_ROWS>(t, 1, &a, at, high);
                }),
            )
        };
        let bits = |v: &[[f32; 8]]| v.iter().flatten().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&two_pass), bits(&one_half));
        assert!(two_pass.iter().flatten().any(|&f| f != 0.0), "the products are not all zero");
    }
}

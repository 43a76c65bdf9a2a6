//! The tile formats of [`super::TiledMatrix`], one per block type it keeps (Q8_0, Q5_0, Q4_K,
//! Q6_K), and how a GGUF buffer of those blocks becomes them.

use half::f16;

use super::{Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0_BYTES, QK, QK_K, TILE_ROWS};

/// One 16 × 32 tile: 512 weights (+128, `[column group of 4][row][4]`) and 16 scales. 576
/// bytes, cache-line aligned so that each of the 8 weight loads is one line.
#[repr(C, align(64))]
#[derive(Clone)]
pub(super) struct Tile {
    pub(super) qs: [u8; QK * TILE_ROWS],
    pub(super) d: [f16; TILE_ROWS],
}

impl Tile {
    pub(super) const EMPTY: Tile = Tile { qs: [0; QK * TILE_ROWS], d: [f16::ZERO; TILE_ROWS] };

    /// Sets row `r` to one Q8_0 block: its scale and its 32 weights, stored +128 in the
    /// tile's interleaved order.
    pub(super) fn set_row(&mut self, r: usize, d: f16, qs: impl IntoIterator<Item = i8>) {
        self.d[r] = d;
        for (c, q) in qs.into_iter().enumerate() {
            self.qs[((c / 4) * TILE_ROWS + r) * 4 + c % 4] = (q as i16 + 128) as u8;
        }
    }
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
pub(super) struct Tile5 {
    pub(super) lo: [u8; QK * TILE_ROWS / 2],
    pub(super) hi: [u64; 8],
    pub(super) d: [f16; TILE_ROWS],
}

/// One 16 × 32 tile of a Q4_K matrix, row `r` one sub-block of 32 weights `d[r] · q − m[r]`:
/// the 4-bit `q` as [`Tile5`]'s low nibbles, and `d`, `m` the file's `d · sc` and `dmin · m`
/// (an f16 times a 6-bit integer) rounded to f16, by at most 2⁻¹¹ of each. Re-quantizing to
/// Q8_0, as before, rounded every weight by up to half of 1/127 of its block's largest,
/// about 30 times that. 320 bytes against [`Tile`]'s 576: 5 bits a weight.
#[repr(C, align(32))]
#[derive(Clone)]
pub(super) struct Tile4 {
    pub(super) lo: [u8; QK * TILE_ROWS / 2],
    pub(super) d: [f16; TILE_ROWS],
    pub(super) m: [f16; TILE_ROWS],
}

/// One 16 × 32 tile of a Q6_K matrix, bit for bit: weight `d[r] · sc[h][r] · (q − 32)` for
/// row `r` and columns `16 h .. 16 h + 16`. The low 4 bits of the 6-bit `q` sit as
/// [`Tile4`]'s; the top two in `hi`, four groups to a byte (`hi[64 (g % 2) + k]`, bits
/// `2 (g / 2) ..`). 448 bytes: 7 bits a weight.
#[repr(C, align(32))]
#[derive(Clone)]
pub(super) struct Tile6 {
    pub(super) lo: [u8; QK * TILE_ROWS / 2],
    pub(super) hi: [u8; QK * TILE_ROWS / 4],
    pub(super) d: [f16; TILE_ROWS],
    pub(super) sc: [[i8; TILE_ROWS]; 2],
}

/// What both kernels read of a tile besides its weights.
pub(super) trait Scales {
    /// The 16 rows' scales, as stored.
    fn scales(&self) -> &[f16; TILE_ROWS];
    /// Q4_K's minimums, one per row, taken out as `m · d_a · Σ q_a`.
    #[inline(always)]
    fn mins(&self) -> Option<&[f16; TILE_ROWS]> {
        None
    }
    /// Q6_K's i8 scales of columns 0–15 and 16–31 (`[half][row]`): they multiply each half's
    /// integer sum, which [`Scales::scales`] then scales.
    #[inline(always)]
    fn half_scales(&self) -> Option<&[[i8; TILE_ROWS]; 2]> {
        None
    }
}

impl Scales for Tile {
    #[inline(always)]
    fn scales(&self) -> &[f16; TILE_ROWS] {
        &self.d
    }
}

impl Scales for Tile5 {
    #[inline(always)]
    fn scales(&self) -> &[f16; TILE_ROWS] {
        &self.d
    }
}

impl Scales for Tile4 {
    #[inline(always)]
    fn scales(&self) -> &[f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    fn mins(&self) -> Option<&[f16; TILE_ROWS]> {
        Some(&self.m)
    }
}

impl Scales for Tile6 {
    #[inline(always)]
    fn scales(&self) -> &[f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    fn half_scales(&self) -> Option<&[[i8; TILE_ROWS]; 2]> {
        Some(&self.sc)
    }
}

/// A matrix's tiles, in the format its file's blocks fit without loss.
pub(super) enum Tiles {
    /// Q8_0, and every other block type re-quantized to it.
    Q8(Vec<Tile>),
    /// Q5_0, kept as it is in the file.
    Q5(Vec<Tile5>),
    /// Q4_K, its scales and minimums rounded to f16.
    Q4K(Vec<Tile4>),
    /// Q6_K, kept as it is in the file.
    Q6K(Vec<Tile6>),
}


/// One block of 32 weights as Q8_0, as candle's `BlockQ8_0::from_float` computes it: the
/// scale `d = max |x| / 127` (kept in f16) and `round(x / d)`, taken as `x · (1 / d)` in f32.
pub(super) fn q8_0_block(xs: &[f32; QK]) -> (f16, [i8; QK]) {
    let amax = xs.iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (f16::from_f32(d), xs.map(|x| f32::round(x * id) as i8))
}

/// Q8_0 blocks `(rows, blocks)` as tiles, the weights offset by +128.
pub(super) fn q8_tiles(raw: &[u8], rows: usize, blocks: usize) -> Vec<Tile> {
    let mut tiles = Vec::with_capacity(rows / TILE_ROWS * blocks);
    for strip in 0..rows / TILE_ROWS {
        for b in 0..blocks {
            let mut tile = Tile::EMPTY;
            for r in 0..TILE_ROWS {
                let block = &raw[((strip * TILE_ROWS + r) * blocks + b) * Q8_0_BYTES..][..Q8_0_BYTES];
                tile.set_row(r, f16::from_le_bytes([block[0], block[1]]), block[2..].iter().map(|&w| w as i8));
            }
            tiles.push(tile);
        }
    }
    tiles
}

/// The 4 low bits of weight `k` (row `k / 4`, column `4 g + k % 4`) of column group `g`:
/// groups `g` and `g + 4` share the bytes of line `g % 4`, low and high nibble.
#[inline]
pub(super) fn nibble(lo: &[u8; QK * TILE_ROWS / 2], g: usize, k: usize) -> u8 {
    (lo[(g % 4) * 64 + k] >> (4 * (g / 4))) & 0x0f
}

/// Stores `q < 16` as [`nibble`] reads it back, for row `r` and column `c` of a tile.
pub(super) fn put_nibble(lo: &mut [u8; QK * TILE_ROWS / 2], r: usize, c: usize, q: u8) {
    let (g, k) = (c / 4, r * 4 + c % 4);
    lo[(g % 4) * 64 + k] |= q << (4 * (g / 4));
}

/// Q5_0 blocks `(rows, blocks)` as tiles, bit for bit.
pub(super) fn q5_tiles(raw: &[u8], rows: usize, blocks: usize) -> Vec<Tile5> {
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
                    put_nibble(&mut tile.lo, r, c, low);
                    tile.hi[c / 4] |= u64::from((fifth >> c) & 1) << (r * 4 + c % 4);
                }
            }
            tiles.push(tile);
        }
    }
    tiles
}

/// Q4_K superblocks `(rows, blocks / 8)` as tiles, one per 32-column sub-block; `None` where
/// a `d · sc` or `dmin · m` is past f16's range (no real weights come near it).
pub(super) fn q4k_tiles(raw: &[u8], rows: usize, blocks: usize) -> Option<Vec<Tile4>> {
    let supers = blocks / (QK_K / QK);
    let mut tiles = Vec::with_capacity(rows / TILE_ROWS * blocks);
    for strip in 0..rows / TILE_ROWS {
        for b in 0..blocks {
            let mut tile = Tile4 { lo: [0; QK * TILE_ROWS / 2], d: [f16::ZERO; TILE_ROWS], m: [f16::ZERO; TILE_ROWS] };
            let j = b % (QK_K / QK);
            for r in 0..TILE_ROWS {
                let sb = &raw[((strip * TILE_ROWS + r) * supers + b / (QK_K / QK)) * Q4_K_BYTES..][..Q4_K_BYTES];
                let d = f16::from_le_bytes([sb[0], sb[1]]).to_f32();
                let dmin = f16::from_le_bytes([sb[2], sb[3]]).to_f32();
                let (sc, m) = scale_min_k4(j, &sb[4..16]);
                tile.d[r] = f16::from_f32(d * sc as f32);
                tile.m[r] = f16::from_f32(dmin * m as f32);
                if !tile.d[r].is_finite() || !tile.m[r].is_finite() {
                    return None;
                }
                // Sub-blocks 2 p and 2 p + 1 share bytes 32 p .., low and high nibble.
                let qs = &sb[16 + 32 * (j / 2)..][..QK];
                for (c, &byte) in qs.iter().enumerate() {
                    put_nibble(&mut tile.lo, r, c, (byte >> (4 * (j % 2))) & 0x0f);
                }
            }
            tiles.push(tile);
        }
    }
    Some(tiles)
}

/// Sub-block `j`'s 6-bit scale and minimum in a Q4_K superblock's 12 packed bytes: ggml's
/// `get_scale_min_k4`. Bytes 0–3 and 4–7 hold sub-blocks 0–3's in their low 6 bits; sub-blocks
/// 4–7 take their low 4 bits from the nibbles of bytes 8–11 and their top 2 from the spare
/// bits of bytes 0–3 (scales) and 4–7 (minimums).
pub(super) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Q6_K superblocks `(rows, blocks / 8)` as tiles, bit for bit. A superblock holds two halves
/// of 128 columns; in half `n`, sub-block `4 n + s` takes column `l` from the low (`s < 2`)
/// or high nibble of `ql[64 n + 32 (s % 2) + l]`, bits `2 s ..` of `qh[32 n + l]`, and scale
/// `8 n + 2 s + l / 16`.
pub(super) fn q6k_tiles(raw: &[u8], rows: usize, blocks: usize) -> Vec<Tile6> {
    let supers = blocks / (QK_K / QK);
    let mut tiles = Vec::with_capacity(rows / TILE_ROWS * blocks);
    for strip in 0..rows / TILE_ROWS {
        for b in 0..blocks {
            let mut tile = Tile6 {
                lo: [0; QK * TILE_ROWS / 2],
                hi: [0; QK * TILE_ROWS / 4],
                d: [f16::ZERO; TILE_ROWS],
                sc: [[0; TILE_ROWS]; 2],
            };
            let (n, s) = (b % (QK_K / QK) / 4, b % 4);
            for r in 0..TILE_ROWS {
                let sb = &raw[((strip * TILE_ROWS + r) * supers + b / (QK_K / QK)) * Q6_K_BYTES..][..Q6_K_BYTES];
                let (ql, qh, scales) = (&sb[..128], &sb[128..192], &sb[192..208]);
                tile.d[r] = f16::from_le_bytes([sb[208], sb[209]]);
                for h in 0..2 {
                    tile.sc[h][r] = scales[8 * n + 2 * s + h] as i8;
                }
                for c in 0..QK {
                    put_nibble(&mut tile.lo, r, c, (ql[64 * n + 32 * (s % 2) + c] >> (4 * (s / 2))) & 0x0f);
                    let (g, k) = (c / 4, r * 4 + c % 4);
                    tile.hi[(g % 2) * 64 + k] |= ((qh[32 * n + c] >> (2 * s)) & 3) << (2 * (g / 2));
                }
            }
            tiles.push(tile);
        }
    }
    tiles
}

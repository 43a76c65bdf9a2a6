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
//! **One row (single-sequence decode).** The tiles would read the padding too, and decode
//! reads every weight once per token: 14 % slower on SmolLM2 (33 % padding). So the matrix is
//! also kept compact, in the Q8_0 blocks candle's one-row path reads, at the cost of that
//! copy's memory. (Reading only the real blocks of the padded rows kept Qwen 0.5B's decode
//! but not SmolLM2's. An AVX-512 VNNI one-row kernel, and one reading the file's Q5_0 blocks,
//! 35 % fewer bytes, were tried too: perf shows decode here bound by the dot product's
//! arithmetic, not by memory, and neither gained anything measurable in the model.)

/// candle's activation block for the tiled kernels (QK_K).
const BLOCK: usize = 256;
/// Rows per repacked tile.
const TILE_ROWS: usize = 16;
/// Values per Q8_0 block.
const QK: usize = 32;

/// The column count to store a Q8_0 `(rows, cols)` matrix with, when padding it lets the
/// tiled kernels take it; `None` where they would not run (no VNNI: plain AVX2 keeps the
/// compact layout) or are not needed. Costs memory: the padded copy (+14 % at 896 columns,
/// +33 % at 576) and candle's tiles of it, beside the compact copy decode reads.
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

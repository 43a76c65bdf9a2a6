//! Fuzzing the GGUF reader, as campaigns with counts (`tests/fuzz/campaign.rs`;
//! `ONEBRAIN_FUZZ_CASES` for a long one).
//!
//! A model file is input like any other. Mutations are structure-aware: a field of the header
//! (version, counts, a string's or an array's length, a value's or an array's type, a
//! dimension count, a dimension, a block type, an offset) set to a boundary value or nudged;
//! a metadata value replaced or an entry added (`general.alignment` 0, an array of arrays, a
//! NaN RoPE base, a negative count); bytes flipped, cut, inserted or removed; the file's
//! length changed. Seeds: the real SmolLM2 file's header, and a tiny Llama written here.
//!
//! * `model/gguf-header`: the header check never panics; what it refuses is one line naming
//!   the part at fault; what it accepts, candle's own reader reads to the same tensor table,
//!   and when the mutation touched the tokenizer's metadata the tokenizer builds or is refused.
//! * `model/gguf-load`: the tiny model mutated and loaded whole (tensor data, the tiles the
//!   2⁶⁰-row file crashed), then run for two tokens when it loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use onebrain_model::{check_gguf, Brain, ModelConfig, Role, SamplingConfig, Tokenizer};
use proptest::prelude::*;

#[path = "../../../tests/fuzz/campaign.rs"]
mod campaign;
mod common;
mod gguf_layout;
use gguf_layout::{add_entry, layout, put, replace_value, Kind, Layout, Value};

/// A seed: a header's bytes (up to the end of its tensor table, or the whole tiny file), the
/// whole file's length, and its layout.
struct Seed {
    name: &'static str,
    bytes: Vec<u8>,
    len: u64,
    layout: Layout,
}

fn seeds() -> &'static [Seed] {
    static SEEDS: OnceLock<Vec<Seed>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut seeds = Vec::new();
        if let Some(path) = gguf_layout::smollm_file() {
            use std::io::Read;
            let mut f = std::fs::File::open(&path).unwrap();
            let len = f.metadata().unwrap().len();
            let mut bytes = vec![0u8; 4 << 20];
            f.read_exact(&mut bytes).unwrap();
            let layout = layout(&bytes);
            bytes.truncate(layout.end);
            seeds.push(Seed { name: "smollm2", bytes, len, layout });
        }
        let bytes = tiny_model();
        let layout = layout(&bytes);
        seeds.push(Seed { name: "tiny", len: bytes.len() as u64, bytes, layout });
        seeds
    })
}


/// A Llama of one layer, hidden size 32, two heads of 16 sharing one key/value head, an MLP
/// of 64 and a byte-level vocabulary (256 bytes and 3 control tokens, 288 rows): a whole
/// GGUF file of 40 KB, in the block types the tiles take (Q8_0) and those they do not (Q4_1).
fn tiny_model() -> Vec<u8> {
    let dev = Device::Cpu;
    let mut seed = 0u32;
    let mut matrix = |rows: usize, cols: usize, dtype: GgmlDType| {
        let v: Vec<f32> = (0..rows * cols)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect();
        QTensor::quantize(&Tensor::from_vec(v, (rows, cols), &dev).unwrap(), dtype).unwrap()
    };
    let norm = || QTensor::quantize(&Tensor::ones(32, candle_core::DType::F32, &dev).unwrap(), GgmlDType::F32).unwrap();
    let tensors = vec![
        ("token_embd.weight", matrix(288, 32, GgmlDType::Q8_0)),
        ("blk.0.attn_norm.weight", norm()),
        ("blk.0.ffn_norm.weight", norm()),
        ("blk.0.attn_q.weight", matrix(32, 32, GgmlDType::Q8_0)),
        ("blk.0.attn_k.weight", matrix(16, 32, GgmlDType::Q8_0)),
        ("blk.0.attn_v.weight", matrix(16, 32, GgmlDType::Q4_1)),
        ("blk.0.attn_output.weight", matrix(32, 32, GgmlDType::Q8_0)),
        ("blk.0.ffn_gate.weight", matrix(64, 32, GgmlDType::Q8_0)),
        ("blk.0.ffn_up.weight", matrix(64, 32, GgmlDType::Q4_1)),
        ("blk.0.ffn_down.weight", matrix(32, 64, GgmlDType::Q8_0)),
        ("output_norm.weight", norm()),
    ];
    let chars = common::bytes_to_unicode();
    let mut tokens: Vec<gguf_file::Value> = chars.iter().map(|c| gguf_file::Value::String(c.to_string())).collect();
    let mut types = vec![gguf_file::Value::I32(1); 256];
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(gguf_file::Value::String(special.into()));
        types.push(gguf_file::Value::I32(3));
    }
    use gguf_file::Value as V;
    let metadata: Vec<(&str, V)> = vec![
        ("general.architecture", V::String("llama".into())),
        ("llama.block_count", V::U32(1)),
        ("llama.context_length", V::U32(64)),
        ("llama.embedding_length", V::U32(32)),
        ("llama.feed_forward_length", V::U32(64)),
        ("llama.attention.head_count", V::U32(2)),
        ("llama.attention.head_count_kv", V::U32(1)),
        ("llama.rope.dimension_count", V::U32(16)),
        ("llama.rope.freq_base", V::F32(10_000.0)),
        ("llama.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
        ("tokenizer.ggml.model", V::String("gpt2".into())),
        ("tokenizer.ggml.pre", V::String("default".into())),
        ("tokenizer.ggml.tokens", V::Array(tokens)),
        ("tokenizer.ggml.token_type", V::Array(types)),
        ("tokenizer.ggml.merges", V::Array(vec![])),
        ("tokenizer.ggml.eos_token_id", V::U32(258)),
    ];
    let metadata: Vec<(&str, &V)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (*k, t)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
    out.into_inner()
}

/// Values a field is set to: the edges of 8, 16, 32 and 64 bits, the seeds' own sizes, and
/// ggml's block types.
const BOUNDARIES: &[u64] = &[
    0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 30, 31, 32, 33, 63, 64, 255, 256, 576, 1536, 49_152,
    0x7fff, 0x8000, 0xffff, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 1 << 32, 1 << 40, 1 << 60, 1 << 62,
    i64::MAX as u64, i64::MIN as u64, u64::MAX - 1, u64::MAX,
];

const KINDS: &[Kind] = &[
    Kind::Version,
    Kind::TensorCount,
    Kind::MetadataCount,
    Kind::StringLength,
    Kind::ValueType,
    Kind::ArrayType,
    Kind::ArrayLength,
    Kind::Scalar,
    Kind::DimensionCount,
    Kind::Dimension,
    Kind::BlockType,
    Kind::Offset,
];

/// Keys an added entry takes: the ones the reader and the loader look up, one duplicate.
const KEYS: &[&str] = &[
    "general.alignment",
    "general.architecture",
    "llama.rope.dimension_count",
    "llama.context_length",
    "llama.attention.head_count_kv",
    "llama.rope.freq_base",
    "llama.block_count",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.bos_token_id",
    "x",
];

/// A change in place: the bytes keep their positions.
#[derive(Clone, Debug)]
enum InPlace {
    /// The `index`-th field of `kind` set to a boundary value.
    Set(usize, usize, u64),
    /// The `index`-th field of `kind` nudged by a small amount.
    Nudge(usize, usize, i8),
    /// One byte XORed.
    Flip(usize, u8),
}

/// A change that moves bytes.
#[derive(Clone, Debug)]
enum Splice {
    /// The `index`-th metadata entry's value replaced.
    Replace(usize, Value),
    /// One more entry.
    Add(&'static str, Value),
    /// Bytes removed.
    Delete(usize, usize),
    /// Bytes inserted.
    Insert(usize, Vec<u8>),
    /// The header cut.
    Cut(usize),
}

/// The file's length against the header's claims.
#[derive(Clone, Copy, Debug)]
enum FileLen {
    Real,
    HeaderOnly,
    OneShort,
    Longer,
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        prop::sample::select(BOUNDARIES).prop_map(|v| Value::U32(v as u32)),
        prop::sample::select(BOUNDARIES).prop_map(|v| Value::I32(v as i32)),
        prop::sample::select(BOUNDARIES).prop_map(Value::U64),
        prop::sample::select(BOUNDARIES).prop_map(|v| Value::I64(v as i64)),
        prop::sample::select(&[0.0f32, -1.0, 1e-6, 1e4, 1e38, f32::NAN, f32::INFINITY, f32::NEG_INFINITY][..]).prop_map(Value::F32),
        prop::sample::select(&[0.0f64, -1.0, 1e300, f64::NAN, f64::INFINITY][..]).prop_map(Value::F64),
        (0u8..4).prop_map(Value::Bool),
        prop::sample::select(&["", "llama", "qwen2", "gpt2", "smollm", "martian", "Ġ t", "a b", "<|im_end|>", "\u{1b}[2J\n"][..])
            .prop_map(|s| Value::Str(s.to_string())),
        "[a-z\u{80}-\u{10ffff}]{0,40}".prop_map(Value::Str),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| (inner, prop::sample::select(BOUNDARIES)).prop_map(|(v, n)| Value::Array(Box::new(v), n)))
}

fn in_place() -> impl Strategy<Value = InPlace> {
    prop_oneof![
        3 => (0..KINDS.len(), any::<usize>(), prop::sample::select(BOUNDARIES)).prop_map(|(k, i, v)| InPlace::Set(k, i, v)),
        2 => (0..KINDS.len(), any::<usize>(), any::<i8>()).prop_map(|(k, i, d)| InPlace::Nudge(k, i, d)),
        1 => (any::<usize>(), 1u8..=255).prop_map(|(at, x)| InPlace::Flip(at, x)),
    ]
}

fn splice() -> impl Strategy<Value = Splice> {
    prop_oneof![
        3 => (any::<usize>(), value()).prop_map(|(i, v)| Splice::Replace(i, v)),
        2 => (prop::sample::select(KEYS), value()).prop_map(|(k, v)| Splice::Add(k, v)),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, n)| Splice::Delete(at, n)),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Splice::Insert(at, b)),
        1 => any::<usize>().prop_map(Splice::Cut),
    ]
}

fn file_len() -> impl Strategy<Value = FileLen> {
    prop_oneof![8 => Just(FileLen::Real), 1 => Just(FileLen::HeaderOnly), 1 => Just(FileLen::OneShort), 1 => Just(FileLen::Longer)]
}

/// A mutated seed: its bytes, the file length to check them against, and whether the
/// change touched the tokenizer's metadata.
fn mutate(seed: &Seed, edits: &[InPlace], splice: &Option<Splice>, len: FileLen) -> (Vec<u8>, u64, bool) {
    let l = &seed.layout;
    let mut b = seed.bytes.clone();
    let mut touched = Vec::new();
    let of_kind = |k: usize| -> Vec<gguf_layout::Field> { l.fields.iter().filter(|f| f.kind == KINDS[k]).copied().collect() };
    for e in edits {
        match *e {
            InPlace::Set(k, i, v) => {
                let fields = of_kind(k);
                let Some(&f) = fields.get(i % fields.len().max(1)) else { continue };
                put(&mut b, f.at, f.width, v);
                touched.push(f.at);
            }
            InPlace::Nudge(k, i, d) => {
                let fields = of_kind(k);
                let Some(&f) = fields.get(i % fields.len().max(1)) else { continue };
                let mut old = [0u8; 8];
                old[..f.width].copy_from_slice(&b[f.at..f.at + f.width]);
                put(&mut b, f.at, f.width, u64::from_le_bytes(old).wrapping_add(d as i64 as u64));
                touched.push(f.at);
            }
            InPlace::Flip(at, x) => {
                let at = at % b.len();
                b[at] ^= x;
                touched.push(at);
            }
        }
    }
    let tokenizer_entry = |at: usize| l.entries.iter().any(|e| e.key.starts_with("tokenizer.") && (e.type_at..e.end).contains(&at));
    let mut tokenizer = touched.iter().any(|&at| tokenizer_entry(at));
    match splice {
        None => {}
        Some(Splice::Replace(i, v)) => {
            let e = &l.entries[i % l.entries.len()];
            tokenizer |= e.key.starts_with("tokenizer.");
            b = replace_value(&b, e, v);
        }
        Some(Splice::Add(k, v)) => {
            tokenizer |= k.starts_with("tokenizer.");
            b = add_entry(&b, l, k, v);
        }
        Some(Splice::Delete(at, n)) => {
            let at = at % b.len();
            tokenizer |= tokenizer_entry(at);
            b.drain(at..(at + n).min(b.len()));
        }
        Some(Splice::Insert(at, bytes)) => {
            let at = at % b.len();
            tokenizer |= tokenizer_entry(at);
            b.splice(at..at, bytes.iter().copied());
        }
        Some(Splice::Cut(at)) => b.truncate(at % b.len()),
    }
    // A header that grew or shrank moves the tensor data with it, as a rewritten file would.
    let data = (seed.len as i64 + b.len() as i64 - seed.bytes.len() as i64).max(0) as u64;
    let len = match len {
        FileLen::Real => data,
        FileLen::HeaderOnly => b.len() as u64,
        FileLen::OneShort => data.saturating_sub(1),
        FileLen::Longer => data + 4096,
    };
    (b, len, tokenizer)
}

thread_local! {
    /// How the campaign on this thread ended its inputs, to show the mutations reach past
    /// the first check.
    static OUTCOMES: std::cell::RefCell<BTreeMap<String, usize>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

fn count(outcome: impl Into<String>) {
    OUTCOMES.with(|o| *o.borrow_mut().entry(outcome.into()).or_default() += 1);
}

/// The outcome of a refusal: the part of the file at fault, or the error's kind.
fn refusal(e: &onebrain_model::Error) -> String {
    match e {
        onebrain_model::Error::MalformedGguf { what, .. } => {
            let part = what.split(' ').find(|w| *w != "the").unwrap_or("");
            format!("refused: {}", part.trim_end_matches(|c: char| c.is_ascii_digit()))
        }
        other => format!("refused: {}", format!("{other:?}").split([' ', '(', '{']).next().unwrap_or("")),
    }
}

fn print_outcomes(name: &str) {
    let outcomes = OUTCOMES.with(|o| std::mem::take(&mut *o.borrow_mut()));
    let line: Vec<String> = outcomes.iter().map(|(k, n)| format!("{n} {k}")).collect();
    eprintln!("fuzz {name} outcomes: {}", line.join(", "));
}

/// A refusal of the GGUF check is one line of bounded length (no vocabulary printed whole,
/// no raw control character from a mutated name).
fn check_refusal(e: &onebrain_model::Error) -> Result<(), TestCaseError> {
    if !matches!(e, onebrain_model::Error::MalformedGguf { .. }) {
        return Ok(());
    }
    let text = e.to_string();
    prop_assert!(!text.contains('\n') && !text.contains('\u{1b}'), "not one clean line: {text:?}");
    prop_assert!(text.len() < 2_000, "{} bytes: {}", text.len(), &text[..200]);
    Ok(())
}

fn header_case(seed: &Seed, bytes: &[u8], len: u64, tokenizer: bool) -> Result<(), TestCaseError> {
    let path = Path::new(seed.name);
    let header = match check_gguf(bytes, len, path) {
        Ok(h) => h,
        Err(e) => {
            count(refusal(&e));
            return check_refusal(&e);
        }
    };
    count("accepted");
    // What the check accepts, candle's reader reads to the same table.
    let candle = gguf_file::Content::read(&mut std::io::Cursor::new(bytes))
        .map_err(|e| TestCaseError::fail(format!("accepted, but candle refuses it: {e}")))?;
    prop_assert_eq!(candle.tensor_infos.len(), header.tensors);
    prop_assert_eq!(candle.metadata.len(), header.metadata.len());
    let arch = &header.arch;
    prop_assert!(arch.hidden_size > 0 && arch.num_hidden_layers > 0 && arch.vocab_size > 0);
    prop_assert!(header.tensors >= 9 * arch.num_hidden_layers);
    if tokenizer {
        if let Err(e) = Tokenizer::from_gguf_metadata(&header.metadata) {
            check_refusal(&e)?;
        }
    }
    Ok(())
}

#[test]
fn every_seed_passes_as_it_is() {
    for seed in seeds() {
        let h = check_gguf(seed.bytes.as_slice(), seed.len, Path::new(seed.name)).unwrap();
        header_case(seed, &seed.bytes, seed.len, true).unwrap();
        assert!(h.tensors == 11 || h.tensors == 272, "{}", seed.name);
    }
    let tiny = seeds().last().unwrap();
    let dir = tempfile::tempdir().unwrap();
    load_case(&dir.path().join("tiny.gguf"), &tiny.bytes).unwrap();
}

type Case = (usize, Vec<InPlace>, Option<Splice>, FileLen);

fn case() -> impl Strategy<Value = Case> {
    (any::<usize>(), prop::collection::vec(in_place(), 0..4), prop::option::of(splice()), file_len())
        .prop_filter("a change", |(_, edits, splice, _)| !edits.is_empty() || splice.is_some())
}

#[test]
fn fuzz_gguf_header() {
    campaign::run("model/gguf-header", 512, case(), |(s, edits, splice, len)| {
        let seeds = seeds();
        let seed = &seeds[s % seeds.len()];
        let (bytes, len, tokenizer) = mutate(seed, &edits, &splice, len);
        header_case(seed, &bytes, len, tokenizer)
    });
    print_outcomes("model/gguf-header");
}

/// Writes `bytes` as the model file at `path` and loads it whole; a model that loads runs
/// two tokens.
fn load_case(path: &PathBuf, bytes: &[u8]) -> Result<(), TestCaseError> {
    std::fs::write(path, bytes).unwrap();
    let cfg = ModelConfig { path: path.clone(), lora_rank: Some(2), ..Default::default() };
    match Brain::load(&cfg) {
        Err(e) => {
            count(refusal(&e));
            check_refusal(&e)
        }
        Ok(mut brain) => {
            count("loaded");
            let prompt = brain.chat_prompt("s", "hi");
            if let Err(e) = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(2)) {
                check_refusal(&e)?;
            }
            Ok(())
        }
    }
}

#[test]
fn fuzz_gguf_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutated.gguf");
    campaign::run("model/gguf-load", 256, case(), |(_, edits, splice, _)| {
        let tiny = seeds().last().unwrap();
        // The whole file is the seed here: the length follows the bytes.
        let (bytes, _, _) = mutate(tiny, &edits, &splice, FileLen::Real);
        load_case(&path, &bytes)
    });
    print_outcomes("model/gguf-load");
}

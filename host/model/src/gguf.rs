//! Reading a GGUF file's header (metadata and tensor table), checked before any tensor is
//! used.
//!
//! A model file is input like any other, and candle's reader takes parts of it on trust: a
//! `general.alignment` of 0 divides by zero, a tensor's element count is a product that wraps
//! (2⁶⁰ × 576 is 0 bytes, and the 0 bytes then reached the tile builders), an array may hold
//! arrays. [`read_header`] reads the same format with every count, length, offset and size
//! checked, in checked arithmetic, against the file's size, and returns candle's [`Content`],
//! from which candle then reads tensor data it can no longer be lied to about.
//! [`architecture`] reads the shape the metadata declares and holds every tensor the model
//! needs to it, so that a mismatch is refused with the tensor's name.

use std::{collections::HashMap, io::Read, path::Path};

use candle_core::quantized::{
    gguf_file::{Content, TensorInfo, Value, VersionedMagic},
    GgmlDType,
};

use crate::{
    transformer::{Arch, ArchConfig},
    Error, Result,
};

/// The longest metadata string read. Real values are token pieces and chat templates of a
/// few KiB; candle's own cap (1 GiB) would let one string take the memory of the model.
const MAX_STRING_BYTES: u64 = 1 << 24;

/// Metadata values in all, array elements included: Qwen2's vocabulary (151,936 tokens,
/// their types and 151,387 merges) is under 500,000; a parsed value takes 32 bytes or more,
/// so this caps metadata at about 128 MiB whatever the file claims.
const MAX_METADATA_VALUES: u64 = 1 << 22;

/// ggml's `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;

/// candle's (and the format's) alignment when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;

/// Tensors one decoder layer needs at least (two norms, four attention and three MLP
/// matrices): bounds the layer count by the table before any loop runs over it.
const TENSORS_PER_LAYER: usize = 9;

fn fault(path: &Path, what: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::MalformedGguf { path: path.to_path_buf(), what: what.into(), reason: reason.into() }
}

/// The file as a stream of little-endian fields, each read only when the file holds it.
struct Fields<'a, R> {
    reader: R,
    /// Bytes consumed so far.
    pos: u64,
    /// The whole file's size.
    len: u64,
    /// GGUF v1 writes lengths, counts and dimensions in 32 bits, later versions in 64.
    v1: bool,
    /// The file, for errors.
    path: &'a Path,
    /// Metadata values parsed so far, against [`MAX_METADATA_VALUES`].
    values: u64,
}

impl<R: Read> Fields<'_, R> {
    fn bad(&self, what: impl Into<String>, reason: impl Into<String>) -> Error {
        fault(self.path, what, reason)
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.remaining() {
            return Err(self.bad(what, format!("needs {n} bytes at offset {}, past the end of the file", self.pos)));
        }
        let mut buf = vec![0u8; n as usize];
        self.reader
            .read_exact(&mut buf)
            .map_err(|e| self.bad(what, format!("cannot read {n} bytes at offset {}: {e}", self.pos)))?;
        self.pos += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.bytes(N as u64, what)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A length, a count or a dimension: 32 bits in v1, 64 after.
    fn size(&mut self, what: &str) -> Result<u64> {
        if self.v1 {
            self.u32(what).map(u64::from)
        } else {
            self.u64(what)
        }
    }

    fn size_bytes(&self) -> u64 {
        if self.v1 {
            4
        } else {
            8
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.size(what)?;
        if n > MAX_STRING_BYTES {
            return Err(self.bad(what, format!("a string of {n} bytes, past the {MAX_STRING_BYTES} read")));
        }
        let mut v = self.bytes(n, what)?;
        // As candle: some writers end strings with NULs, and invalid UTF-8 is kept lossily.
        while v.last() == Some(&0) {
            v.pop();
        }
        Ok(String::from_utf8_lossy(&v).into_owned())
    }

    /// Counts one more parsed value against [`MAX_METADATA_VALUES`].
    fn count_values(&mut self, n: u64, what: &str) -> Result<()> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_METADATA_VALUES {
            return Err(self.bad(what, format!("more than {MAX_METADATA_VALUES} metadata values in all")));
        }
        Ok(())
    }

    fn value(&mut self, kind: u32, what: &str, in_array: bool) -> Result<Value> {
        Ok(match kind {
            0 => Value::U8(self.u8(what)?),
            1 => Value::I8(self.u8(what)? as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(self.u32(what)? as i32),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.u8(what)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.bad(what, format!("a bool of value {b}"))),
            },
            8 => Value::String(self.string(what)?),
            // ggml reads no array of arrays either; refusing them bounds the recursion.
            9 if in_array => return Err(self.bad(what, "an array of arrays")),
            9 => {
                let element = self.u32(what)?;
                let n = self.size(what)?;
                let least = match element {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    10..=12 => 8,
                    8 => self.size_bytes(),
                    9 => return Err(self.bad(what, "an array of arrays")),
                    t => return Err(self.bad(what, format!("an array of unknown value type {t}"))),
                };
                if n.saturating_mul(least) > self.remaining() {
                    return Err(self.bad(what, format!("an array of {n} elements, more than the file's remaining {} bytes hold", self.remaining())));
                }
                self.count_values(n, what)?;
                let mut values = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    values.push(self.value(element, what, true)?);
                }
                Value::Array(values)
            }
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(self.u64(what)? as i64),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            t => return Err(self.bad(what, format!("unknown value type {t}"))),
        })
    }
}

/// A GGUF file's header, read and checked: see [`check_gguf`].
#[derive(Debug)]
pub struct GgufHeader {
    /// The architecture its metadata declares and its tensors have.
    pub arch: ArchConfig,
    /// Its metadata, as candle reads it (the tokenizer is built from it:
    /// [`crate::Tokenizer::from_gguf_metadata`]).
    pub metadata: HashMap<String, Value>,
    /// How many tensors its table lists.
    pub tensors: usize,
}

/// Reads and checks a GGUF file's header as [`crate::Brain::load`] does before it reads any
/// tensor: magic, version, every metadata value, every tensor's dimensions, block type and
/// byte range, then the architecture against the tensors' shapes. `reader` starts at the
/// file's first byte and need hold no more than the header; `file_len` is the whole file's
/// size; `path` names the file in errors. A file it refuses, `Brain::load` refuses with the
/// same error.
///
/// ```no_run
/// # fn main() -> onebrain_model::Result<()> {
/// let path = std::path::Path::new(".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf");
/// let file = std::fs::File::open(path).unwrap();
/// let len = file.metadata().unwrap().len();
/// let header = onebrain_model::check_gguf(std::io::BufReader::new(file), len, path)?;
/// assert_eq!(header.arch.hidden_size, 576);
/// # Ok(())
/// # }
/// ```
pub fn check_gguf(reader: impl Read, file_len: u64, path: &Path) -> Result<GgufHeader> {
    let content = read_header(reader, file_len, path)?;
    let arch = architecture(&content, path)?;
    Ok(GgufHeader { arch, tensors: content.tensor_infos.len(), metadata: content.metadata })
}

/// The block types candle reads from a GGUF file, by their ggml number.
fn dtype(n: u32) -> Option<GgmlDType> {
    Some(match n {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        30 => GgmlDType::BF16,
        // 9 (Q8_1) and 15 (Q8_K) exist in ggml, but candle reads no tensor of them.
        _ => return None,
    })
}

/// Reads a GGUF file's header from its first byte: magic, version, metadata and tensor
/// table. `file_len` is the whole file's size; every tensor's bytes must lie inside it, at
/// an offset of the file's alignment. Nothing past the table is read.
pub(crate) fn read_header(reader: impl Read, file_len: u64, path: &Path) -> Result<Content> {
    let mut f = Fields { reader, pos: 0, len: file_len, v1: false, path, values: 0 };
    let magic = f.array::<4>("the header")?;
    if &magic != b"GGUF" {
        return Err(f.bad("the header", format!("magic {magic:?} is not `GGUF`")));
    }
    let version = f.u32("the header")?;
    let magic = match version {
        1 => VersionedMagic::GgufV1,
        2 => VersionedMagic::GgufV2,
        3 => VersionedMagic::GgufV3,
        v => return Err(f.bad("the header", format!("version {v} (this reader knows 1, 2 and 3)"))),
    };
    f.v1 = version == 1;
    let tensor_count = f.size("the tensor count")?;
    let kv_count = f.size("the metadata count")?;
    // Each entry takes some bytes at least: a key's length, a type and one byte of value; a
    // tensor's name length, dimension count, type and offset.
    let least = kv_count
        .saturating_mul(f.size_bytes() + 5)
        .saturating_add(tensor_count.saturating_mul(f.size_bytes() + 16));
    if least > f.remaining() {
        return Err(f.bad(
            "the header",
            format!("{tensor_count} tensors and {kv_count} metadata entries cannot fit in the {} bytes left", f.remaining()),
        ));
    }

    let mut metadata = HashMap::new();
    for i in 0..kv_count {
        let key = f.string(&format!("metadata entry {i}"))?;
        let what = format!("metadata `{}`", shown(&key));
        let kind = f.u32(&what)?;
        f.count_values(1, &what)?;
        let value = f.value(kind, &what, false)?;
        if metadata.insert(key, value).is_some() {
            return Err(f.bad(what, "given twice"));
        }
    }

    let mut tensor_infos = HashMap::new();
    let mut order = Vec::new();
    for i in 0..tensor_count {
        let name = f.string(&format!("tensor {i}"))?;
        let what = format!("tensor `{}`", shown(&name));
        let n_dims = f.u32(&what)?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(f.bad(what, format!("{n_dims} dimensions (1 to {MAX_DIMS})")));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let d = f.size(&what)?;
            dims.push(usize::try_from(d).map_err(|_| f.bad(&what, format!("dimension {d} past this machine's sizes")))?);
        }
        // GGUF lists the fastest-varying dimension first; candle's shapes list it last.
        dims.reverse();
        let kind = f.u32(&what)?;
        let ggml_dtype = dtype(kind).ok_or_else(|| f.bad(&what, format!("block type {kind}, which candle cannot read")))?;
        let offset = f.u64(&what)?;
        if tensor_infos.contains_key(&name) {
            return Err(f.bad(what, "listed twice"));
        }
        order.push(name.clone());
        tensor_infos.insert(name, TensorInfo { ggml_dtype, shape: dims.into(), offset });
    }

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => match unsigned(v) {
            Some(a) if a > 0 && a.is_power_of_two() => a,
            _ => return Err(f.bad("metadata `general.alignment`", format!("{} is not a power of two", describe(v)))),
        },
    };
    let tensor_data_offset = f.pos.div_ceil(alignment).checked_mul(alignment).filter(|&o| o <= file_len).ok_or_else(|| {
        f.bad("the header", format!("the tensor data would start past the end of the file ({file_len} bytes)"))
    })?;
    for name in &order {
        check_bytes(name, &tensor_infos[name], tensor_data_offset, alignment, file_len, path)?;
    }
    Ok(Content { magic, metadata, tensor_infos, tensor_data_offset })
}

/// A tensor's dimensions, block type and byte range against each other and the file.
fn check_bytes(name: &str, t: &TensorInfo, data_offset: u64, alignment: u64, file_len: u64, path: &Path) -> Result<()> {
    let bad = |reason: String| fault(path, format!("tensor `{}`", shown(name)), reason);
    let dims = t.shape.dims();
    let elements = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("dimensions {dims:?} hold more elements than a 64-bit count")))?;
    let block = t.ggml_dtype.block_size();
    // ggml quantizes along rows: each row is whole blocks.
    let row = *dims.last().expect("at least one dimension");
    if row % block != 0 {
        return Err(bad(format!("rows of {row} values are not whole {:?} blocks of {block}", t.ggml_dtype)));
    }
    let bytes = (elements / block)
        .checked_mul(t.ggml_dtype.type_size())
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| bad(format!("dimensions {dims:?} of {:?} take more bytes than a 64-bit count", t.ggml_dtype)))?;
    if t.offset % alignment != 0 {
        return Err(bad(format!("offset {} is not a multiple of the file's alignment {alignment}", t.offset)));
    }
    let end = data_offset.checked_add(t.offset).and_then(|start| start.checked_add(bytes));
    match end {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(bad(format!(
            "{dims:?} of {:?} take {bytes} bytes from offset {} of the data at {data_offset}, past the end of the file ({file_len} bytes)",
            t.ggml_dtype, t.offset
        ))),
    }
}

/// A key or a tensor's name as an error shows it: control characters escaped (a hostile
/// name could move a terminal's cursor), and cut to 80 characters.
fn shown(name: &str) -> String {
    let mut out: String = name.chars().take(80).flat_map(char::escape_debug).collect();
    if name.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

/// A metadata integer that is not negative.
fn unsigned(v: &Value) -> Option<u64> {
    match *v {
        Value::U8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::U64(x) => Some(x),
        Value::I8(x) => u64::try_from(x).ok(),
        Value::I16(x) => u64::try_from(x).ok(),
        Value::I32(x) => u64::try_from(x).ok(),
        Value::I64(x) => u64::try_from(x).ok(),
        _ => None,
    }
}

/// A value named by its type, never printed whole (an array may hold the vocabulary).
fn describe(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("an array of {} values", a.len()),
        Value::String(s) if s.len() > 64 => format!("a string of {} bytes", s.len()),
        other => format!("{other:?}"),
    }
}

fn md_usize(content: &Content, key: &str, path: &Path) -> Result<Option<usize>> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(v) => unsigned(v)
            .and_then(|x| usize::try_from(x).ok())
            .map(Some)
            .ok_or_else(|| fault(path, format!("metadata `{key}`"), format!("{} is not a count", describe(v)))),
    }
}

fn md_f64(content: &Content, key: &str, path: &Path) -> Result<Option<f64>> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(Value::F32(x)) => Ok(Some(f64::from(*x))),
        Some(Value::F64(x)) => Ok(Some(*x)),
        Some(v) => Err(fault(path, format!("metadata `{key}`"), format!("{} is not a float", describe(v)))),
    }
}

/// The architecture the metadata declares, checked against every tensor the model reads:
/// the embedding gives the vocabulary, and each matrix, bias and norm must have the shape
/// that hidden size, heads, key/value heads, head width, MLP width and layer count say.
pub(crate) fn architecture(content: &Content, path: &Path) -> Result<ArchConfig> {
    let md = &content.metadata;
    let arch_name = match md.get("general.architecture") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(fault(path, "metadata `general.architecture`", format!("{} is not a name", describe(v)))),
        None => return Err(Error::meta("general.architecture", "missing")),
    };
    let arch = match arch_name.as_str() {
        "llama" => Arch::Llama,
        "qwen2" => Arch::Qwen2,
        other => return Err(Error::UnsupportedArchitecture(shown(other))),
    };
    let key = |k: &str| format!("{arch_name}.{k}");
    let need = |k: &str| -> Result<usize> {
        md_usize(content, &key(k), path)?.ok_or_else(|| Error::meta(key(k), "missing from the GGUF metadata"))
    };
    let hidden_size = need("embedding_length")?;
    let num_attention_heads = need("attention.head_count")?;
    let head_dim = match md_usize(content, &key("rope.dimension_count"), path)? {
        Some(d) => d,
        None => hidden_size / num_attention_heads.max(1),
    };
    let embed = content
        .tensor_infos
        .get("token_embd.weight")
        .ok_or_else(|| Error::meta("token_embd.weight", "tensor missing from the GGUF file"))?;
    let cfg = ArchConfig {
        arch,
        vocab_size: embed.shape.dims()[0],
        hidden_size,
        intermediate_size: need("feed_forward_length")?,
        num_hidden_layers: need("block_count")?,
        num_attention_heads,
        num_key_value_heads: md_usize(content, &key("attention.head_count_kv"), path)?.unwrap_or(num_attention_heads),
        head_dim,
        rms_norm_eps: md_f64(content, &key("attention.layer_norm_rms_epsilon"), path)?.unwrap_or(1e-6),
        rope_theta: md_f64(content, &key("rope.freq_base"), path)?.unwrap_or(10_000.0),
        max_position_embeddings: md_usize(content, &key("context_length"), path)?.unwrap_or(4096),
        // convert_hf_to_gguf.py permutes Llama q/k rows for ggml's interleaved RoPE.
        rope_interleaved: arch == Arch::Llama,
    };
    cfg.validate()?;
    check_shapes(content, &cfg, path)?;
    Ok(cfg)
}

/// Every tensor the model reads, present and of the shape `cfg` says.
fn check_shapes(content: &Content, cfg: &ArchConfig, path: &Path) -> Result<()> {
    let layers = cfg.num_hidden_layers;
    if layers > content.tensor_infos.len() / TENSORS_PER_LAYER {
        return Err(fault(
            path,
            format!("metadata `{}.block_count`", arch_key(cfg)),
            format!("{layers} layers, but the file lists {} tensors in all", content.tensor_infos.len()),
        ));
    }
    let width = |heads: usize, what: &str| {
        heads.checked_mul(cfg.head_dim).ok_or_else(|| {
            fault(path, "metadata", format!("{heads} {what} of width {} overflow", cfg.head_dim))
        })
    };
    let q_out = width(cfg.num_attention_heads, "heads")?;
    let kv_out = width(cfg.num_key_value_heads, "key/value heads")?;
    let (h, ffn, vocab) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
    let expect = |name: &str, want: &[usize], from: &str| -> Result<()> {
        let t = content
            .tensor_infos
            .get(name)
            .ok_or_else(|| fault(path, format!("tensor `{name}`"), "missing"))?;
        if t.shape.dims() != want {
            return Err(fault(
                path,
                format!("tensor `{name}`"),
                format!("shape {:?}, expected {want:?} ({from})", t.shape.dims()),
            ));
        }
        Ok(())
    };
    expect("token_embd.weight", &[vocab, h], "vocabulary × hidden size")?;
    if content.tensor_infos.contains_key("output.weight") {
        expect("output.weight", &[vocab, h], "vocabulary × hidden size")?;
    }
    expect("output_norm.weight", &[h], "hidden size")?;
    let bias = content.tensor_infos.contains_key("blk.0.attn_q.bias");
    for i in 0..layers {
        let blk = |n: &str| format!("blk.{i}.{n}");
        expect(&blk("attn_norm.weight"), &[h], "hidden size")?;
        expect(&blk("ffn_norm.weight"), &[h], "hidden size")?;
        expect(&blk("attn_q.weight"), &[q_out, h], "heads × head width, hidden size")?;
        expect(&blk("attn_k.weight"), &[kv_out, h], "key/value heads × head width, hidden size")?;
        expect(&blk("attn_v.weight"), &[kv_out, h], "key/value heads × head width, hidden size")?;
        expect(&blk("attn_output.weight"), &[h, q_out], "hidden size, heads × head width")?;
        expect(&blk("ffn_gate.weight"), &[ffn, h], "feed-forward width, hidden size")?;
        expect(&blk("ffn_up.weight"), &[ffn, h], "feed-forward width, hidden size")?;
        expect(&blk("ffn_down.weight"), &[h, ffn], "hidden size, feed-forward width")?;
        if bias {
            expect(&blk("attn_q.bias"), &[q_out], "heads × head width")?;
            expect(&blk("attn_k.bias"), &[kv_out], "key/value heads × head width")?;
            expect(&blk("attn_v.bias"), &[kv_out], "key/value heads × head width")?;
        }
    }
    Ok(())
}

fn arch_key(cfg: &ArchConfig) -> &'static str {
    match cfg.arch {
        Arch::Llama => "llama",
        Arch::Qwen2 => "qwen2",
    }
}

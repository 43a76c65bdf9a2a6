//! Where each field of a GGUF v2/v3 header lies, so that tests can craft hostile files from
//! a real one: a dimension, a count, a type or a value changed in place, or an entry's value
//! replaced. A walker of its own, apart from the reader it tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The test model's file, or `None` (with a message) when `scripts/setup.sh` has not
/// fetched it.
pub fn smollm_file() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("SKIPPED: {} is absent (scripts/setup.sh --models test)", path.display());
        None
    }
}

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Version,
    TensorCount,
    MetadataCount,
    /// The length of a key, a tensor's name or a string value.
    StringLength,
    ValueType,
    ArrayType,
    ArrayLength,
    /// A number in a metadata value.
    Scalar,
    DimensionCount,
    Dimension,
    BlockType,
    Offset,
}

/// One little-endian field: its offset, width in bytes and kind.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub at: usize,
    pub width: usize,
    pub kind: Kind,
}

/// One metadata entry: its key, where its type field starts and where its value ends.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: String,
    pub type_at: usize,
    pub end: usize,
}

/// One tensor of the table.
#[derive(Clone, Debug)]
pub struct TensorAt {
    pub name: String,
    /// Offsets of its dimensions, GGUF order (fastest first).
    pub dims_at: Vec<usize>,
    pub dims: Vec<u64>,
    pub type_at: usize,
    pub offset_at: usize,
}

/// A header's layout.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub fields: Vec<Field>,
    pub entries: Vec<Entry>,
    pub tensors: Vec<TensorAt>,
    /// Where the metadata ends (the first tensor's name).
    pub metadata_end: usize,
    /// Where the tensor table ends.
    pub end: usize,
}

struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
    out: Layout,
    recording: bool,
}

impl Walk<'_> {
    fn field(&mut self, width: usize, kind: Kind) -> u64 {
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(&self.b[self.pos..self.pos + width]);
        if self.recording {
            self.out.fields.push(Field { at: self.pos, width, kind });
        }
        self.pos += width;
        u64::from_le_bytes(v)
    }

    fn string(&mut self) -> String {
        let n = self.field(8, Kind::StringLength) as usize;
        let s = String::from_utf8_lossy(&self.b[self.pos..self.pos + n]).into_owned();
        self.pos += n;
        s
    }

    fn value(&mut self, t: u64) {
        match t {
            0 | 1 | 7 => _ = self.field(1, Kind::Scalar),
            2 | 3 => _ = self.field(2, Kind::Scalar),
            4..=6 => _ = self.field(4, Kind::Scalar),
            10..=12 => _ = self.field(8, Kind::Scalar),
            8 => _ = self.string(),
            9 => {
                let element = self.field(4, Kind::ArrayType);
                let n = self.field(8, Kind::ArrayLength);
                // Long arrays (the vocabulary) record their first elements' fields only, so
                // that a mutation picks a count or a type as often as one of 49,152 strings.
                let recording = self.recording;
                for i in 0..n {
                    self.recording = recording && i < 16;
                    self.value(element);
                }
                self.recording = recording;
            }
            t => panic!("value type {t} in the seed"),
        }
    }
}

/// The layout of a well-formed GGUF v2/v3 header at the start of `bytes`.
pub fn layout(bytes: &[u8]) -> Layout {
    assert_eq!(&bytes[..4], b"GGUF");
    let mut w = Walk { b: bytes, pos: 4, out: Layout::default(), recording: true };
    let version = w.field(4, Kind::Version);
    assert!(version >= 2, "v1 seeds are not walked");
    let tensors = w.field(8, Kind::TensorCount);
    let kvs = w.field(8, Kind::MetadataCount);
    for _ in 0..kvs {
        let key = w.string();
        let type_at = w.pos;
        let t = w.field(4, Kind::ValueType);
        w.value(t);
        w.out.entries.push(Entry { key, type_at, end: w.pos });
    }
    w.out.metadata_end = w.pos;
    for _ in 0..tensors {
        let name = w.string();
        let n = w.field(4, Kind::DimensionCount);
        let mut dims_at = Vec::new();
        let mut dims = Vec::new();
        for _ in 0..n {
            dims_at.push(w.pos);
            dims.push(w.field(8, Kind::Dimension));
        }
        let type_at = w.pos;
        w.field(4, Kind::BlockType);
        let offset_at = w.pos;
        w.field(8, Kind::Offset);
        w.out.tensors.push(TensorAt { name, dims_at, dims, type_at, offset_at });
    }
    w.out.end = w.pos;
    w.out
}

/// Writes `value`'s low `width` bytes at `at`.
pub fn put(bytes: &mut [u8], at: usize, width: usize, value: u64) {
    bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

/// A metadata value as GGUF writes it: its type, then its bytes.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = value.type_code().to_le_bytes().to_vec();
    value.write(&mut out);
    out
}

/// A metadata value to write.
#[derive(Clone, Debug)]
pub enum Value {
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(u8),
    Str(String),
    /// An array of `n` copies of the value (of arrays too, which the format forbids).
    Array(Box<Value>, u64),
}

impl Value {
    fn type_code(&self) -> u32 {
        match self {
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array(..) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::U32(x) => out.extend(x.to_le_bytes()),
            Value::I32(x) => out.extend(x.to_le_bytes()),
            Value::U64(x) => out.extend(x.to_le_bytes()),
            Value::I64(x) => out.extend(x.to_le_bytes()),
            Value::F32(x) => out.extend(x.to_le_bytes()),
            Value::F64(x) => out.extend(x.to_le_bytes()),
            Value::Bool(x) => out.push(*x),
            Value::Str(s) => {
                out.extend((s.len() as u64).to_le_bytes());
                out.extend(s.as_bytes());
            }
            Value::Array(v, n) => {
                out.extend(v.type_code().to_le_bytes());
                out.extend(n.to_le_bytes());
                // A claimed length past what follows is a mutation of its own: write at most 64.
                for _ in 0..(*n).min(64) {
                    v.write(out);
                }
            }
        }
    }
}

/// `bytes` with metadata entry `entry`'s value replaced by `value`.
pub fn replace_value(bytes: &[u8], entry: &Entry, value: &Value) -> Vec<u8> {
    let mut out = bytes[..entry.type_at].to_vec();
    out.extend(encode(value));
    out.extend(&bytes[entry.end..]);
    out
}

/// `bytes` with one more metadata entry `key` = `value`, after the others.
pub fn add_entry(bytes: &[u8], layout: &Layout, key: &str, value: &Value) -> Vec<u8> {
    let mut out = bytes[..layout.metadata_end].to_vec();
    out.extend((key.len() as u64).to_le_bytes());
    out.extend(key.as_bytes());
    out.extend(encode(value));
    out.extend(&bytes[layout.metadata_end..]);
    let count = u64::from_le_bytes(out[16..24].try_into().unwrap());
    put(&mut out, 16, 8, count + 1);
    out
}

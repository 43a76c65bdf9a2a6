//! The tokenizer, rebuilt from GGUF metadata (neither model package ships a
//! `tokenizer.json`), and the ChatML template both models use.
//!
//! GGUF stores the vocabulary (`tokenizer.ggml.tokens`), the BPE merges, each token's
//! type and the name of the pre-tokenizer (`tokenizer.ggml.pre`). The pre-tokenizer is
//! only a name, so the split each name stands for is written down here; the patterns
//! are the ones llama.cpp and the models' `tokenizer.json` files use.

use std::{collections::HashMap, path::Path};

use candle_core::quantized::gguf_file::Value;
use tokenizers::{
    decoders::byte_level::ByteLevel as ByteLevelDecoder,
    models::bpe::BPE,
    normalizers::unicode::NFC,
    pre_tokenizers::{
        byte_level::ByteLevel, digits::Digits, sequence::Sequence, split::Split,
        PreTokenizerWrapper,
    },
    AddedToken, SplitDelimiterBehavior,
};

use crate::{Error, Result};

/// Qwen2's split (its `tokenizer.json`, llama.cpp `LLAMA_VOCAB_PRE_TYPE_QWEN2`): single
/// digits, letters with at most one leading non-letter, punctuation runs, newlines.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split: like Qwen2's but digits in groups of up to three.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token types (llama.cpp `llama_token_type`).
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// A byte-level BPE tokenizer plus the ids that end a turn.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    eos_ids: Vec<u32>,
    vocab_size: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size)
            .field("eos_ids", &self.eos_ids)
            .finish()
    }
}

fn tk_err(e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(e.to_string())
}

fn md<'a>(metadata: &'a HashMap<String, Value>, key: &str) -> Result<&'a Value> {
    metadata.get(key).ok_or_else(|| Error::meta(key, "missing from the GGUF metadata"))
}

fn md_strings(metadata: &HashMap<String, Value>, key: &str) -> Result<Vec<String>> {
    let values = md(metadata, key)?.to_vec().map_err(|e| Error::meta(key, e.to_string()))?;
    values
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| Error::meta(key, e.to_string())))
        .collect()
}

fn md_u32(metadata: &HashMap<String, Value>, key: &str) -> Option<u32> {
    metadata.get(key).and_then(|v| v.to_u32().ok().or_else(|| v.to_i32().ok().map(|x| x as u32)))
}

fn value_as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::I32(x) => Some(*x as i64),
        Value::U32(x) => Some(*x as i64),
        Value::I64(x) => Some(*x),
        Value::U64(x) => Some(*x as i64),
        Value::I8(x) => Some(*x as i64),
        Value::U8(x) => Some(*x as i64),
        Value::I16(x) => Some(*x as i64),
        Value::U16(x) => Some(*x as i64),
        _ => None,
    }
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub fn from_gguf_metadata(metadata: &HashMap<String, Value>) -> Result<Self> {
        let model = md(metadata, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| Error::meta("tokenizer.ggml.model", e.to_string()))?;
        if model != "gpt2" {
            return Err(Error::meta(
                "tokenizer.ggml.model",
                format!("`{model}` is not a byte-level BPE (`gpt2`) tokenizer"),
            ));
        }
        let pre = match metadata.get("tokenizer.ggml.pre") {
            Some(v) => v.to_string().map_err(|e| Error::meta("tokenizer.ggml.pre", e.to_string()))?.clone(),
            None => "default".to_string(),
        };
        let tokens = md_strings(metadata, "tokenizer.ggml.tokens")?;
        let merges_raw = md_strings(metadata, "tokenizer.ggml.merges")?;
        let types: Vec<i64> = match metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| Error::meta("tokenizer.ggml.token_type", e.to_string()))?
                .iter()
                .map(|t| value_as_i64(t).unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(Error::meta(
                "tokenizer.ggml.token_type",
                format!("{} types for {} tokens", types.len(), tokens.len()),
            ));
        }

        let mut vocab = ahash::AHashMap::with_capacity(tokens.len());
        for (id, tok) in tokens.iter().enumerate() {
            // The first occurrence wins, as in llama.cpp's token-to-id map.
            vocab.entry(tok.clone()).or_insert(id as u32);
        }
        let mut merges = Vec::with_capacity(merges_raw.len());
        for (i, m) in merges_raw.iter().enumerate() {
            // Byte-level tokens never contain a plain space (it is mapped to `Ġ`), so the
            // first space separates the pair.
            let (a, b) = m.split_once(' ').ok_or_else(|| {
                Error::meta("tokenizer.ggml.merges", format!("merge {i} `{m}` has no space"))
            })?;
            merges.push((a.to_string(), b.to_string()));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            // Llama 3 tokenizers look whole words up before merging; Qwen2 and SmolLM do not.
            .ignore_merges(pre == "llama-bpe" || pre == "llama3")
            .build()
            .map_err(tk_err)?;
        let mut inner = tokenizers::Tokenizer::new(bpe);

        let pre_tokenizer: PreTokenizerWrapper = match pre.as_str() {
            "qwen2" | "llama-bpe" | "llama3" => {
                let pattern = if pre == "qwen2" { QWEN2_SPLIT } else { LLAMA3_SPLIT };
                let split = Split::new(
                    tokenizers::pre_tokenizers::split::SplitPattern::Regex(pattern.into()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .map_err(tk_err)?;
                Sequence::new(vec![
                    PreTokenizerWrapper::Split(split),
                    PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
                ])
                .into()
            }
            // SmolLM's tokenizer.json: each digit alone, then GPT-2's split.
            "smollm" => Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
            ])
            .into(),
            "default" | "gpt2" | "gpt-2" => ByteLevel::new(false, true, true).into(),
            other => return Err(Error::UnsupportedPreTokenizer(other.to_string())),
        };
        if pre == "qwen2" {
            inner.with_normalizer(Some(NFC)).map_err(tk_err)?;
        }
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevelDecoder::default()));

        let control: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == TOKEN_TYPE_CONTROL)
            .map(|(tok, _)| AddedToken::from(tok.clone(), true))
            .collect();
        let user: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == TOKEN_TYPE_USER_DEFINED)
            .map(|(tok, _)| AddedToken::from(tok.clone(), false))
            .collect();
        inner.add_special_tokens(control).map_err(tk_err)?;
        inner.add_tokens(user).map_err(tk_err)?;

        let mut eos_ids = Vec::new();
        if let Some(eos) = md_u32(metadata, "tokenizer.ggml.eos_token_id") {
            eos_ids.push(eos);
        }
        Self::finish(inner, eos_ids, tokens.len())
    }

    /// Loads a Hugging Face `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
        let vocab_size = inner.get_vocab_size(true);
        Self::finish(inner, Vec::new(), vocab_size)
    }

    fn finish(inner: tokenizers::Tokenizer, mut eos_ids: Vec<u32>, vocab_size: usize) -> Result<Self> {
        // A ChatML turn ends with <|im_end|>; base-model text ends with <|endoftext|>.
        for end in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>"] {
            if let Some(id) = inner.token_to_id(end) {
                if !eos_ids.contains(&id) {
                    eos_ids.push(id);
                }
            }
        }
        if eos_ids.is_empty() {
            return Err(Error::Tokenizer("the tokenizer has no end-of-sequence token".into()));
        }
        Ok(Tokenizer { inner, eos_ids, vocab_size })
    }

    /// Token ids of `text`; special tokens written in the text (`<|im_start|>`) map to
    /// their single ids. No BOS is added: neither model's template uses one.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(tk_err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(tk_err)
    }

    /// The id of one token string (`"<|im_end|>"`, `"Ġworld"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The string of one token id.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Ids that end generation (`<|im_end|>`, `<|endoftext|>`, the GGUF's eos).
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos_ids
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The bytes each of `rows` logit rows stands for, as a token trie wants them: byte-level
    /// BPE strings mapped back through GPT-2's byte table, a special token as `0xFF` and its
    /// name (so no text can spell it), and rows past the vocabulary (padding in the embedding)
    /// as no bytes, which no grammar allows.
    pub fn token_bytes(&self, rows: usize) -> Vec<Vec<u8>> {
        let to_byte = byte_level_decoder();
        let added = self.inner.get_added_tokens_decoder();
        (0..rows as u32)
            .map(|id| {
                if let Some(t) = added.get(&id) {
                    return if t.special {
                        [&[0xFFu8][..], t.content.as_bytes()].concat()
                    } else {
                        t.content.as_bytes().to_vec()
                    };
                }
                match self.inner.id_to_token(id) {
                    Some(s) => {
                        let mut out = Vec::with_capacity(s.len());
                        for c in s.chars() {
                            match to_byte.get(&c) {
                                Some(&b) => out.push(b),
                                None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                            }
                        }
                        out
                    }
                    None => Vec::new(),
                }
            })
            .collect()
    }

    /// The underlying `tokenizers` object (e.g. to save it as `tokenizer.json`).
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// GPT-2's byte-level alphabet reversed: printable bytes stand for themselves, the other 68
/// bytes (controls, space, 127-160, 173) for the characters from U+0100 on, in byte order.
fn byte_level_decoder() -> HashMap<char, u8> {
    let mut map = HashMap::with_capacity(256);
    let mut next = 256u32;
    for b in 0u32..=255 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            char::from_u32(b)
        } else {
            next += 1;
            char::from_u32(next - 1)
        };
        map.insert(c.expect("valid code point"), b as u8);
    }
    map
}

/// The ChatML prompt for one system and one user message, ending where the assistant's
/// answer starts. Both models were instruction-tuned on this template.
pub fn chat_prompt(system: &str, user: &str) -> String {
    format!(
        "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::gguf_metadata;

    const SAMPLES: &[&str] = &[
        "Hello world",
        "(define (domain blocksworld)\n  (:requirements :strips)\n  (:predicates (on ?x ?y)))",
        "  leading spaces, tabs\tand\r\nCRLF lines\n\n\nend ",
        "numbers 12345 and 3.14159; unicode: café, naïve, 日本語, emoji 🚀🧠",
        "<|im_start|>user\nstack b on a<|im_end|>\n",
        "don't won't it's WE'LL",
    ];

    fn round_trip(tok: &Tokenizer) {
        for s in SAMPLES {
            let ids = tok.encode(s).unwrap();
            assert!(!ids.is_empty());
            assert_eq!(&tok.decode(&ids).unwrap(), s, "round trip of {s:?}");
        }
    }

    /// Ids llama.cpp (built from the llama-cpp-python 0.3.36 sdist) gives for the same
    /// GGUF files, `tokenize(text, add_bos=False, special=True)`.
    const LLAMA_CPP_SMOLLM2: &[(&str, &[u32])] = &[
        ("Hello world", &[19556, 905]),
        ("<|im_start|>user\n", &[1, 4093, 198]),
        ("12345", &[33, 34, 35, 36, 37]),
        ("don't won't it's WE'LL", &[12420, 982, 3763, 982, 357, 506, 26587, 23, 16421]),
        ("  leading spaces\n\n", &[216, 2899, 5600, 1116]),
        (
            "numbers 3.14159; café 日本語 🚀",
            &[28707, 216, 35, 30, 33, 36, 33, 37, 41, 43, 37366, 17097, 241, 115, 40993, 179, 120, 248, 15107, 244, 218],
        ),
        (
            "(define (domain bw)\n  (:predicates (on ?x ?y)))",
            &[24, 23405, 365, 14587, 278, 103, 25, 3805, 40565, 5426, 25661, 365, 258, 9148, 104, 9148, 105, 7754],
        ),
    ];
    const LLAMA_CPP_QWEN2: &[(&str, &[u32])] = &[
        ("Hello world", &[9707, 1879]),
        ("<|im_start|>user\n", &[151644, 872, 198]),
        ("12345", &[16, 17, 18, 19, 20]),
        ("don't won't it's WE'LL", &[15007, 944, 2765, 944, 432, 594, 19677, 6, 4086]),
        ("  leading spaces\n\n", &[220, 6388, 12621, 271]),
        (
            "numbers 3.14159; café 日本語 🚀",
            &[37378, 220, 18, 13, 16, 19, 16, 20, 24, 26, 51950, 75402, 21894, 102819, 11162, 248, 222],
        ),
        (
            "(define (domain bw)\n  (:predicates (on ?x ?y)))",
            &[68547, 320, 12204, 34375, 340, 220, 29254, 23464, 24821, 320, 263, 937, 87, 937, 88, 7705],
        ),
    ];

    fn known_ids(tok: &Tokenizer, table: &[(&str, &[u32])]) {
        for (text, ids) in table {
            assert_eq!(&tok.encode(text).unwrap(), ids, "ids of {text:?}");
        }
    }

    fn digits_split(tok: &Tokenizer) {
        let ids = tok.encode("12345").unwrap();
        let want: Vec<u32> =
            "12345".chars().map(|c| tok.token_to_id(&c.to_string()).unwrap()).collect();
        assert_eq!(ids, want, "each digit is its own token");
    }

    #[test]
    fn smollm2_tokenizer_known_ids_and_round_trip() {
        let Some(md) = gguf_metadata(crate::config::TEST_MODEL_FILE) else { return };
        let tok = Tokenizer::from_gguf_metadata(&md).unwrap();
        assert_eq!(tok.vocab_size(), 49152);
        assert_eq!(tok.encode("<|endoftext|><|im_start|><|im_end|>").unwrap(), vec![0, 1, 2]);
        assert_eq!(tok.eos_ids(), &[2, 0]);
        let hello = [tok.token_to_id("Hello").unwrap(), tok.token_to_id("Ġworld").unwrap()];
        assert_eq!(tok.encode("Hello world").unwrap(), hello);
        known_ids(&tok, LLAMA_CPP_SMOLLM2);
        digits_split(&tok);
        round_trip(&tok);
    }

    #[test]
    fn qwen2_tokenizer_known_ids_and_round_trip() {
        let Some(md) = gguf_metadata(crate::config::DEFAULT_MODEL_FILE) else { return };
        let tok = Tokenizer::from_gguf_metadata(&md).unwrap();
        // Ids as Qwen2.5's own tokenizer gives them.
        assert_eq!(tok.encode("Hello world").unwrap(), vec![9707, 1879]);
        assert_eq!(tok.encode("<|im_start|>user\n").unwrap(), vec![151644, 872, 198]);
        assert_eq!(tok.eos_ids(), &[151645, 151643]);
        known_ids(&tok, LLAMA_CPP_QWEN2);
        digits_split(&tok);
        round_trip(&tok);
    }

    #[test]
    fn token_bytes_spell_the_text_and_mark_special_tokens() {
        let Some(md) = gguf_metadata(crate::config::TEST_MODEL_FILE) else { return };
        let tok = Tokenizer::from_gguf_metadata(&md).unwrap();
        let bytes = tok.token_bytes(tok.vocab_size() + 3);
        assert_eq!(bytes.len(), tok.vocab_size() + 3);
        assert!(bytes[tok.vocab_size()].is_empty(), "padding rows spell nothing");
        for s in SAMPLES {
            let ids = tok.encode(s).unwrap();
            let spelled: Vec<u8> = ids.iter().flat_map(|&i| bytes[i as usize].clone()).collect();
            let text = s.replace("<|im_start|>", "\u{FF}<|im_start|>").replace("<|im_end|>", "\u{FF}<|im_end|>");
            let want: Vec<u8> = text.chars().flat_map(|c| if c == '\u{FF}' { vec![0xFF] } else { c.to_string().into_bytes() }).collect();
            assert_eq!(spelled, want, "{s:?}");
        }
    }

    #[test]
    fn chat_prompt_is_chatml() {
        assert_eq!(
            chat_prompt("S", "U"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn unknown_pre_tokenizer_is_a_typed_error() {
        let mut md = HashMap::new();
        md.insert("tokenizer.ggml.model".to_string(), Value::String("gpt2".into()));
        md.insert("tokenizer.ggml.pre".to_string(), Value::String("martian".into()));
        md.insert(
            "tokenizer.ggml.tokens".to_string(),
            Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
        );
        md.insert("tokenizer.ggml.merges".to_string(), Value::Array(vec![]));
        assert!(matches!(
            Tokenizer::from_gguf_metadata(&md),
            Err(Error::UnsupportedPreTokenizer(p)) if p == "martian"
        ));
        md.remove("tokenizer.ggml.tokens");
        assert!(matches!(Tokenizer::from_gguf_metadata(&md), Err(Error::Metadata { .. })));
    }
}

//! Helpers shared by the model's integration tests. Each test file compiles its own copy and
//! uses some of them.
#![allow(dead_code)]

use std::{collections::HashMap, path::Path};

use candle_core::{DType, Device, Tensor};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Normal samples from a seeded generator. candle's CPU `randn` cannot be seeded, and
/// with unseeded weights one run in a hundred or so put the end-of-turn token first, so
/// the greedy generation came back empty (found in CI); brain.rs's
/// argmax comparisons near a tie had the same exposure.
pub fn seeded_normal(rng: &mut StdRng, std: f32, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            // Box–Muller; 1 − u keeps the logarithm's argument in (0, 1].
            let (u, w): (f32, f32) = (rng.gen(), rng.gen());
            std * (-2.0 * (1.0 - u).ln()).sqrt() * (std::f32::consts::TAU * w).cos()
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// A small BlocksWorld domain for grammar-constrained generation.
pub const DOMAIN: &str = "(define (domain blocksworld)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?x)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (clear ?x)) (not (ontable ?x)) (not (handempty))))
  (:action stack :parameters (?x ?y)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y))))";

/// What a constrained problem answer starts with (the prompt ends with it).
pub const PRIMER: &str = "```pddl\n(define (problem task)\n  (:domain blocksworld)\n  (:objects ";

/// The tiny checkpoints' shape ([`write_model`]): 260 tokens (256 bytes and 3 ChatML specials,
/// one unused).
pub const HIDDEN: usize = 32;
pub const FFN: usize = 64;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const HEAD_DIM: usize = HIDDEN / HEADS;
pub const VOCAB: usize = 260;

/// GPT-2's byte → printable character table (every byte-level BPE uses it).
pub fn bytes_to_unicode() -> Vec<char> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32).chain(0xA1..=0xAC).chain(0xAE..=0xFF).collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut table = vec![' '; 256];
    for (b, c) in bs.iter().zip(cs) {
        table[*b as usize] = char::from_u32(c).unwrap();
    }
    table
}

/// A byte-level BPE with no merges: one token per byte, plus the ChatML specials.
pub fn write_tokenizer(dir: &Path) {
    let mut vocab = serde_json::Map::new();
    for (i, c) in bytes_to_unicode().into_iter().enumerate() {
        vocab.insert(c.to_string(), i.into());
    }
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    for (i, s) in specials.iter().enumerate() {
        vocab.insert(s.to_string(), (256 + i).into());
    }
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| serde_json::json!({"id": 256 + i, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
        .collect();
    let tok = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": []}
    });
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
}

/// A tiny random Qwen2 (`arch = "qwen2"`) or Llama (`"llama"`) checkpoint in `dir`, as Hugging
/// Face writes one (config.json, model.safetensors, tokenizer.json), its weights stored as
/// `dtype`. Seeded: the same weights on every run.
pub fn write_model(dir: &Path, arch: &str, dtype: DType) {
    let qwen = arch == "qwen2";
    let config = serde_json::json!({
        "architectures": [if qwen { "Qwen2ForCausalLM" } else { "LlamaForCausalLM" }],
        "model_type": arch, "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048,
        "tie_word_embeddings": !qwen
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut t = HashMap::new();
    let mut rng = StdRng::seed_from_u64(if qwen { 2 } else { 3 });
    // Weights around 1/√fan_in so activations stay O(1) through the layers.
    let mut put = |name: String, shape: &[usize], std: f32| {
        let mut v = seeded_normal(&mut rng, std, shape);
        if name.ends_with("norm.weight") {
            v = (v + 1.0).unwrap();
        }
        let v = v.to_dtype(dtype).unwrap();
        t.insert(name, v);
    };
    let s = 1.0 / (HIDDEN as f32).sqrt();
    put("model.embed_tokens.weight".into(), &[VOCAB, HIDDEN], 1.0);
    if qwen {
        put("lm_head.weight".into(), &[VOCAB, HIDDEN], s);
    }
    for i in 0..LAYERS {
        let p = format!("model.layers.{i}");
        put(format!("{p}.self_attn.q_proj.weight"), &[HIDDEN, HIDDEN], s);
        put(format!("{p}.self_attn.k_proj.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], s);
        put(format!("{p}.self_attn.v_proj.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], s);
        put(format!("{p}.self_attn.o_proj.weight"), &[HIDDEN, HIDDEN], s);
        if qwen {
            put(format!("{p}.self_attn.q_proj.bias"), &[HIDDEN], 0.1);
            put(format!("{p}.self_attn.k_proj.bias"), &[KV_HEADS * HEAD_DIM], 0.1);
            put(format!("{p}.self_attn.v_proj.bias"), &[KV_HEADS * HEAD_DIM], 0.1);
        }
        put(format!("{p}.mlp.gate_proj.weight"), &[FFN, HIDDEN], s);
        put(format!("{p}.mlp.up_proj.weight"), &[FFN, HIDDEN], s);
        put(format!("{p}.mlp.down_proj.weight"), &[HIDDEN, FFN], 1.0 / (FFN as f32).sqrt());
        put(format!("{p}.input_layernorm.weight"), &[HIDDEN], 0.1);
        put(format!("{p}.post_attention_layernorm.weight"), &[HIDDEN], 0.1);
    }
    put("model.norm.weight".into(), &[HIDDEN], 0.1);
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    write_tokenizer(dir);
}

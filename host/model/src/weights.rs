//! Reading checkpoints: GGUF files (quantized) and Hugging Face safetensors directories
//! (dense), into a [`Backbone`], plus making a dense trainable copy of a backbone.

use std::{collections::HashMap, fs::File, io::BufReader, path::Path, sync::Arc};

use candle_core::{
    quantized::{gguf_file, GgmlDType, QMatMul, QTensor},
    DType, Device, Tensor, Var,
};
use candle_nn::VarMap;
use onebrain_kernels::TiledMatrix;
use serde::Deserialize;

use crate::{
    gguf,
    paths::ModelSource,
    transformer::{Arch, ArchConfig, Backbone, Block, Linear, Weight},
    Error, Result, Tokenizer,
};

/// Rotary tables are built up front; 32k positions of a 64-wide head are 8 MB.
const MAX_ROPE_POSITIONS: usize = 32_768;

/// A loaded GGUF: quantized backbone and tokenizer.
pub(crate) struct GgufModel {
    pub(crate) backbone: Backbone,
    pub(crate) tokenizer: Tokenizer,
}

/// Reads a GGUF file: metadata, tokenizer and quantized weights. The header is read and
/// checked whole first ([`crate::gguf`]): no tensor is read before every tensor's bytes are
/// known to lie in the file and every tensor the model needs has the shape its metadata says.
pub(crate) fn load_gguf(path: &Path, max_context: Option<usize>, tiled: bool, dev: &Device) -> Result<GgufModel> {
    let (mut file, content) = read_gguf_header(path)?;
    let cfg = gguf::architecture(&content, path)?;
    let tokenizer = Tokenizer::from_gguf_metadata(&content.metadata)?;

    let mut get = |name: &str| -> Result<Arc<QTensor>> {
        if !content.tensor_infos.contains_key(name) {
            return Err(Error::meta(name, "tensor missing from the GGUF file"));
        }
        Ok(Arc::new(content.tensor(&mut file, name, dev)?))
    };
    let embed = get("token_embd.weight")?;
    let (embed, lm_head) = if content.tensor_infos.contains_key("output.weight") {
        (Weight::Quant(QMatMul::from_arc(embed)?), transcode(get("output.weight")?, tiled)?)
    } else {
        // Tied: the embedding is also the output matrix, so it needs the fast kernels.
        let t = transcode(embed, tiled)?;
        (t.clone(), t)
    };
    let norm = get("output_norm.weight")?.dequantize(dev)?;
    let mut blocks = Vec::with_capacity(cfg.num_hidden_layers);
    let has_bias = content.tensor_infos.contains_key("blk.0.attn_q.bias");
    for i in 0..cfg.num_hidden_layers {
        let mut lin = |n: &str, bias: bool| -> Result<Linear> {
            let q = get(&format!("blk.{i}.{n}.weight"))?;
            let (out, inp) = q.shape().dims2()?;
            let b = if bias { Some(get(&format!("blk.{i}.{n}.bias"))?.dequantize(dev)?) } else { None };
            Ok(Linear { w: transcode(q, tiled)?, b, shape: (out, inp) })
        };
        let q = lin("attn_q", has_bias)?;
        let k = lin("attn_k", has_bias)?;
        let v = lin("attn_v", has_bias)?;
        let o = lin("attn_output", false)?;
        let gate = lin("ffn_gate", false)?;
        let up = lin("ffn_up", false)?;
        let down = lin("ffn_down", false)?;
        blocks.push(Block {
            attn_norm: get(&format!("blk.{i}.attn_norm.weight"))?.dequantize(dev)?,
            ffn_norm: get(&format!("blk.{i}.ffn_norm.weight"))?.dequantize(dev)?,
            q,
            k,
            v,
            o,
            gate,
            up,
            down,
        });
    }
    let positions = max_positions(&cfg, max_context);
    let backbone = Backbone::new(
        cfg.clone(),
        embed,
        blocks,
        norm,
        lm_head,
        positions,
    )?;
    Ok(GgufModel { backbone, tokenizer })
}

/// How a GGUF matrix is kept for generation on this device.
///
/// **With `tiled`, on CPUs with AVX-512 VNNI or AVX2:** every matrix our kernel can take
/// becomes tiles ([`onebrain_kernels::TiledMatrix`]): decode there is 1.9× faster per matrix than
/// candle's, and four rows cost little more than one. Q8_0, Q5_0 (most of Qwen 0.5B's file)
/// and Q6_K are tiled bit for bit, Q4_K (most of Qwen 1.5B's) with its sub-block scales and
/// minimums rounded to f16, by at most 2⁻¹¹ of each. Decode reads every weight once a token,
/// and these take 5.5 (Q5_0), 7 (Q6_K) and 5 (Q4_K) bits a weight against Q8_0's 8.5. The
/// file's other blocks (Q4_1), and k-quant matrices their tiles cannot take (rows not a
/// multiple of 16), are re-quantized to Q8_0 at load: 8 bits hold each of their values up
/// to the rounding of a block scale.
///
/// `ONEBRAIN_KQUANT_TILES=q8`, for benchmarks only, re-quantizes Q4_K and Q6_K to Q8_0 as
/// before their own tiles, so that the two can be timed on one machine in one session.
///
/// **Otherwise** (CUDA, other CPUs, `tiled` off): candle's kernels. candle 0.11 has SIMD dot
/// products for Q4_0, Q8_0 and the k-quants but runs Q4_1, Q5_0 and Q5_1 through scalar
/// code, 2–3× slower here, so those are re-quantized to Q8_0 too.
fn transcode(q: Arc<QTensor>, tiled: bool) -> Result<Weight> {
    if !q.device().is_cpu() {
        return Ok(Weight::Quant(QMatMul::from_arc(q)?));
    }
    let (_, cols) = q.shape().dims2()?;
    let q8_fits = cols % GgmlDType::Q8_0.block_size() == 0;
    if tiled && q8_fits && TiledMatrix::available() {
        let as_q8 = |q: &QTensor| -> Result<Option<TiledMatrix>> {
            Ok(TiledMatrix::from_qtensor(&QTensor::quantize(&q.dequantize(&q.device())?, GgmlDType::Q8_0)?)?)
        };
        let tiles = match q.dtype() {
            // As they are or not at all: re-quantized, their shape would not tile either.
            GgmlDType::Q8_0 | GgmlDType::Q5_0 => TiledMatrix::from_qtensor(&q)?,
            GgmlDType::Q4K | GgmlDType::Q6K if !kquants_as_q8() => match TiledMatrix::from_qtensor(&q)? {
                Some(tiles) => Some(tiles),
                None => as_q8(&q)?,
            },
            _ => as_q8(&q)?,
        };
        if let Some(tiles) = tiles {
            return Ok(Weight::Tiled(Arc::new(tiles)));
        }
    }
    let slow = matches!(q.dtype(), GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1);
    if slow && q8_fits {
        let dense = q.dequantize(&q.device())?;
        return Ok(Weight::Quant(QMatMul::from_arc(Arc::new(QTensor::quantize(&dense, GgmlDType::Q8_0)?))?));
    }
    Ok(Weight::Quant(QMatMul::from_arc(q)?))
}

/// Whether `ONEBRAIN_KQUANT_TILES=q8` asks for Q4_K and Q6_K as Q8_0 tiles (benchmarks only),
/// read once.
fn kquants_as_q8() -> bool {
    static AS_Q8: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AS_Q8.get_or_init(|| std::env::var("ONEBRAIN_KQUANT_TILES").is_ok_and(|v| v == "q8"))
}

fn max_positions(cfg: &ArchConfig, max_context: Option<usize>) -> usize {
    let n = cfg.max_position_embeddings.min(MAX_ROPE_POSITIONS);
    max_context.map_or(n, |m| m.min(n).max(1))
}

/// Opens a GGUF file and reads its header, checked ([`gguf::read_header`]).
fn read_gguf_header(path: &Path) -> Result<(File, gguf_file::Content)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let content = gguf::read_header(BufReader::new(&file), len, path)?;
    Ok((file, content))
}

/// The architecture of the model `source` names, from its header or `config.json` alone
/// (no tensor read), checked as loading it checks it: what a checkpoint is held to before
/// the model and its role parameters are built.
pub(crate) fn model_arch(source: &ModelSource) -> Result<ArchConfig> {
    match source {
        ModelSource::Gguf(path) => gguf::architecture(&read_gguf_header(path)?.1, path),
        ModelSource::HfDir(dir) => Ok(hf_config(dir)?.1),
    }
}

/// The fields of a Hugging Face `config.json` this crate reads.
#[derive(Debug, Deserialize)]
struct HfConfig {
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    rms_norm_eps: f64,
    #[serde(default = "default_theta")]
    rope_theta: f64,
    #[serde(default = "default_positions")]
    max_position_embeddings: usize,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default)]
    attention_bias: Option<bool>,
}

fn default_eps() -> f64 {
    1e-6
}
fn default_theta() -> f64 {
    10_000.0
}
fn default_positions() -> usize {
    4096
}

/// A Hugging Face checkpoint directory, loaded dense.
pub(crate) struct HfModel {
    pub(crate) cfg: ArchConfig,
    pub(crate) tensors: HashMap<String, Tensor>,
    pub(crate) tie_word_embeddings: bool,
    pub(crate) attention_bias: bool,
    pub(crate) tokenizer: Tokenizer,
}

/// Reads `config.json`: the fields this crate reads, and the architecture they give.
fn hf_config(dir: &Path) -> Result<(HfConfig, ArchConfig)> {
    let cfg_path = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg_path).map_err(|e| Error::io(&cfg_path, e))?;
    let hf: HfConfig =
        serde_json::from_str(&text).map_err(|e| Error::Json { path: cfg_path.clone(), error: e })?;
    let kind = hf
        .model_type
        .clone()
        .or_else(|| hf.architectures.first().cloned())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let arch = if kind.starts_with("qwen2") {
        Arch::Qwen2
    } else if kind.starts_with("llama") {
        Arch::Llama
    } else {
        return Err(Error::UnsupportedArchitecture(kind));
    };
    let cfg = ArchConfig {
        arch,
        vocab_size: hf.vocab_size,
        hidden_size: hf.hidden_size,
        intermediate_size: hf.intermediate_size,
        num_hidden_layers: hf.num_hidden_layers,
        num_attention_heads: hf.num_attention_heads,
        num_key_value_heads: hf.num_key_value_heads.unwrap_or(hf.num_attention_heads),
        head_dim: hf.head_dim.unwrap_or(hf.hidden_size / hf.num_attention_heads.max(1)),
        rms_norm_eps: hf.rms_norm_eps,
        rope_theta: hf.rope_theta,
        max_position_embeddings: hf.max_position_embeddings,
        rope_interleaved: false,
    };
    cfg.validate()?;
    Ok((hf, cfg))
}

/// Reads `config.json`, every `*.safetensors` file (as f32) and `tokenizer.json`.
pub(crate) fn load_hf_dir(dir: &Path, dev: &Device) -> Result<HfModel> {
    let (hf, cfg) = hf_config(dir)?;
    let arch = cfg.arch;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::WrongModelFile {
            path: dir.to_path_buf(),
            reason: "no *.safetensors file".into(),
            setup: "all",
        });
    }
    let mut tensors = HashMap::new();
    for f in files {
        let loaded = candle_core::safetensors::load(&f, dev)
            .map_err(|e| Error::Safetensors { path: f.clone(), reason: e.to_string() })?;
        for (k, t) in loaded {
            tensors.insert(k, t.to_dtype(DType::F32)?);
        }
    }
    let tok_path = dir.join("tokenizer.json");
    if !tok_path.is_file() {
        return Err(Error::WrongModelFile {
            path: dir.to_path_buf(),
            reason: "no tokenizer.json".into(),
            setup: "all",
        });
    }
    let tokenizer = Tokenizer::from_file(&tok_path)?;
    let attention_bias = hf.attention_bias.unwrap_or(arch == Arch::Qwen2);
    // Tied checkpoints usually omit lm_head.weight even when the flag is missing.
    let tie_word_embeddings = hf.tie_word_embeddings || !tensors.contains_key("lm_head.weight");
    Ok(HfModel { cfg, tensors, tie_word_embeddings, attention_bias, tokenizer })
}

/// Hugging Face names of the seven projections of layer `i`.
pub(crate) fn hf_linear_name(i: usize, target: &str) -> String {
    match target {
        "q_proj" | "k_proj" | "v_proj" | "o_proj" => format!("model.layers.{i}.self_attn.{target}"),
        _ => format!("model.layers.{i}.mlp.{target}"),
    }
}

/// Where dense tensors come from, and whether they become trainable `Var`s.
pub(crate) enum DenseSource<'a> {
    /// Dequantize a GGUF backbone.
    Dequantize(&'a Backbone),
    /// Take tensors from a Hugging Face checkpoint.
    Hf(&'a HfModel),
}

/// Builds a dense f32 backbone. With `vars`, every tensor becomes a fresh `Var` registered
/// under `prefix` + its Hugging Face name (a copy, so separate-model copies train apart).
pub(crate) fn dense_backbone(
    src: &DenseSource<'_>,
    vars: Option<(&VarMap, &str)>,
    max_context: Option<usize>,
    matrices: DType,
) -> Result<Backbone> {
    let cfg = match src {
        DenseSource::Dequantize(b) => b.cfg.clone(),
        DenseSource::Hf(m) => m.cfg.clone(),
    };
    let take = |name: &str, t: Tensor| -> Result<Tensor> {
        match vars {
            Some((map, prefix)) => {
                let var = Var::from_tensor(&t.to_dtype(DType::F32)?.contiguous()?)?;
                let out = var.as_tensor().clone();
                map.data().lock().expect("varmap lock").insert(format!("{prefix}{name}"), var);
                Ok(out)
            }
            // Frozen matrices in `matrices` (bf16 on CUDA when asked); vectors in f32.
            None if t.rank() == 2 => Ok(t.to_dtype(matrices)?.contiguous()?),
            None => Ok(t.to_dtype(DType::F32)?.contiguous()?),
        }
    };
    let hf_get = |m: &HfModel, name: &str| -> Result<Tensor> {
        m.tensors
            .get(name)
            .cloned()
            .ok_or_else(|| Error::meta(name, "tensor missing from the safetensors files"))
    };
    let embed = match src {
        DenseSource::Dequantize(b) => take("model.embed_tokens.weight", b.embed.dequantize()?)?,
        DenseSource::Hf(m) => take("model.embed_tokens.weight", hf_get(m, "model.embed_tokens.weight")?)?,
    };
    let lm_head = match src {
        DenseSource::Dequantize(b) => {
            if b.is_tied() {
                embed.clone()
            } else {
                take("lm_head.weight", b.lm_head.dequantize()?)?
            }
        }
        DenseSource::Hf(m) => {
            if m.tie_word_embeddings {
                embed.clone()
            } else {
                take("lm_head.weight", hf_get(m, "lm_head.weight")?)?
            }
        }
    };
    let norm = match src {
        DenseSource::Dequantize(b) => take("model.norm.weight", b.norm.clone())?,
        DenseSource::Hf(m) => take("model.norm.weight", hf_get(m, "model.norm.weight")?)?,
    };
    let mut blocks = Vec::with_capacity(cfg.num_hidden_layers);
    for i in 0..cfg.num_hidden_layers {
        let names = [
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
        ];
        let mut lins = Vec::with_capacity(7);
        for (t, target) in names.iter().enumerate() {
            let base = hf_linear_name(i, target);
            let (w, b) = match src {
                DenseSource::Dequantize(bb) => {
                    let l = bb.blocks[i].linears()[t];
                    (l.w.dequantize()?, l.b.clone())
                }
                DenseSource::Hf(m) => {
                    let w = hf_get(m, &format!("{base}.weight"))?;
                    let b = if m.attention_bias && t < 3 {
                        Some(hf_get(m, &format!("{base}.bias"))?)
                    } else {
                        None
                    };
                    (w, b)
                }
            };
            let (out, inp) = w.dims2()?;
            let w = take(&format!("{base}.weight"), w)?;
            let b = match b {
                Some(b) => Some(take(&format!("{base}.bias"), b)?),
                None => None,
            };
            lins.push(Linear { w: Weight::Dense(w), b, shape: (out, inp) });
        }
        let (attn_norm, ffn_norm) = match src {
            DenseSource::Dequantize(bb) => {
                (bb.blocks[i].attn_norm.clone(), bb.blocks[i].ffn_norm.clone())
            }
            DenseSource::Hf(m) => (
                hf_get(m, &format!("model.layers.{i}.input_layernorm.weight"))?,
                hf_get(m, &format!("model.layers.{i}.post_attention_layernorm.weight"))?,
            ),
        };
        let attn_norm = take(&format!("model.layers.{i}.input_layernorm.weight"), attn_norm)?;
        let ffn_norm = take(&format!("model.layers.{i}.post_attention_layernorm.weight"), ffn_norm)?;
        let mut it = lins.into_iter();
        let mut next = || it.next().expect("seven projections");
        blocks.push(Block {
            attn_norm,
            q: next(),
            k: next(),
            v: next(),
            o: next(),
            gate: next(),
            up: next(),
            down: next(),
            ffn_norm,
        });
    }
    let positions = match src {
        DenseSource::Dequantize(b) => b.max_positions(),
        DenseSource::Hf(_) => max_positions(&cfg, max_context),
    };
    Backbone::new(cfg, Weight::Dense(embed), blocks, norm, Weight::Dense(lm_head), positions)
}

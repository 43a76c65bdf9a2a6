//! A role's trained parameters in the forms other runtimes load, and PEFT LoRA adapters
//! trained elsewhere (TRL, PEFT) loaded back into a role.
//!
//! [`Brain::export`] writes one role into a folder, in one of two [`ExportFormat`]s:
//!
//! * `peft`, for transformers + PEFT:
//!   - `adapter_config.json` and `adapter_model.safetensors`: a LoRA `CAUSAL_LM` adapter as
//!     PEFT's `save_pretrained` writes it. Keys
//!     `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight` `(r, in)` and
//!     `….lora_B.weight` `(out, r)`, likewise `k_proj`, `v_proj`, `o_proj` and
//!     `mlp.{gate,up,down}_proj`; PEFT's scale `lora_alpha / r` is onebrain's. Rows are in
//!     the Hugging Face order: a GGUF Llama's q/k permutation is undone.
//!   - `role_tokens/`: a PEFT prompt-tuning adapter (`PROMPT_TUNING`, `num_virtual_tokens`
//!     = the role tokens) whose `prompt_embeddings` are the role's soft tokens. PEFT puts
//!     them before the prompt's embeddings, at positions 0..n, as onebrain does.
//! * `gguf`, for llama.cpp:
//!   - `adapter.gguf`: a llama.cpp LoRA adapter (`general.type = adapter`,
//!     `adapter.type = lora`, `adapter.lora.alpha`, the base's `general.architecture`),
//!     tensors named as llama.cpp's `convert_lora_to_gguf.py` names them,
//!     `blk.{i}.attn_q.weight.lora_a` (ggml `ne = [in, r]`) and `.lora_b` (`ne = [r, out]`),
//!     f32, in the GGUF's own row order;
//!   - `role_tokens.safetensors`: the soft tokens `(n, hidden)`, f32, which a llama.cpp
//!     caller feeds as embeddings (`llama_batch.embd`) before the prompt's tokens. An
//!     adapter GGUF cannot carry them: llama.cpp refuses any tensor but `lora_a`/`lora_b`.
//!
//! Both add, for the Judge, `judge_head.safetensors` (`weight (1, hidden)`, `bias (1,)`: a
//! `torch.nn.Linear(hidden, 1)` on the final, normed hidden state of the prompt's last
//! token, then a sigmoid), `onebrain.json` (where it came from) and a `README.md` with what
//! to type.
//!
//! [`Brain::import_peft`] reads a PEFT LoRA folder back into a role, checking it against
//! the model first: a file for another base model (hidden size, layer count), target
//! modules onebrain does not adapt, a rank that disagrees with `r`, or a truncated
//! safetensors file is an error that names the file and what is wrong.
//! [`with_checkpoint_or_peft_shape`] and [`Brain::load_checkpoint_or_peft`] let every
//! `--checkpoint` take either a onebrain checkpoint or a PEFT folder.

use std::{
    collections::{BTreeMap, HashMap},
    io::Read,
    path::{Path, PathBuf},
    str::FromStr,
};

use candle_core::{
    quantized::{gguf_file, GgmlDType, QTensor},
    DType, Device, Tensor,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    checkpoint::{resolve_checkpoint, with_checkpoint_shape},
    config::{ModelConfig, DEFAULT_MODEL_FILE, QUICK_MODEL_FILE, TEST_MODEL_FILE},
    paths::ModelSource,
    transformer::{Arch, LORA_TARGETS},
    weights::hf_linear_name,
    Brain, Error, Result, Role,
};

mod read;

use read::{checked_header, load_checked, read_lora_config, read_role_tokens};
pub use read::{checkpoint_model_file, is_peft_adapter, peft_adapter_role, with_checkpoint_or_peft_shape};

/// PEFT's adapter config file.
pub const PEFT_CONFIG_FILE: &str = "adapter_config.json";
/// PEFT's adapter weights file.
pub const PEFT_WEIGHTS_FILE: &str = "adapter_model.safetensors";
/// The prompt-tuning adapter of the role tokens, inside a PEFT export.
const ROLE_TOKENS_DIR: &str = "role_tokens";
/// The role tokens of a llama.cpp export.
const ROLE_TOKENS_FILE: &str = "role_tokens.safetensors";
/// The Judge head, in both exports.
const JUDGE_HEAD_FILE: &str = "judge_head.safetensors";
/// The llama.cpp LoRA adapter.
const GGUF_ADAPTER_FILE: &str = "adapter.gguf";
/// What an export came from.
const ORIGIN_FILE: &str = "onebrain.json";
/// PEFT's key prefix for a causal LM (`PeftModelForCausalLM.base_model.model`).
const PEFT_PREFIX: &str = "base_model.model.";

/// The runtime an export is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// transformers + PEFT: a LoRA adapter folder and a prompt-tuning adapter beside it.
    Peft,
    /// llama.cpp: a LoRA adapter GGUF and the role tokens as a safetensors file.
    Gguf,
}

impl FromStr for ExportFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "peft" => Ok(ExportFormat::Peft),
            "gguf" | "llama.cpp" | "llamacpp" => Ok(ExportFormat::Gguf),
            other => Err(Error::InvalidConfig(format!("unknown export format `{other}` (expected peft or gguf)"))),
        }
    }
}

/// `onebrain.json` of an export: which role of which model and checkpoint it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Origin {
    role: Role,
    format: ExportFormat,
    /// The base model's file (`SmolLM2-135M-Instruct.Q4_1.gguf`).
    model: String,
    /// Its Hugging Face name, where known.
    base_model: String,
    lora_rank: usize,
    lora_alpha: f32,
    lora_targets: Vec<String>,
    role_tokens: usize,
    onebrain_version: String,
}

/// llama.cpp's name of a projection (`blk.{i}.{name}.weight`).
fn gguf_linear_name(i: usize, target: &str) -> String {
    let name = match target {
        "q_proj" => "attn_q",
        "k_proj" => "attn_k",
        "v_proj" => "attn_v",
        "o_proj" => "attn_output",
        "gate_proj" => "ffn_gate",
        "up_proj" => "ffn_up",
        _ => "ffn_down",
    };
    format!("blk.{i}.{name}.weight")
}

/// GGUF Llama q/k rows are permuted for interleaved RoPE (convert_hf_to_gguf.py's `permute`:
/// rows `(heads, 2, d/2)` become `(heads, d/2, 2)`); PEFT adapters live in the Hugging Face
/// row order. `to_hf` undoes the permutation, otherwise applies it.
fn permute_rows(t: &Tensor, heads: usize, to_hf: bool) -> Result<Tensor> {
    let (out, cols) = t.dims2()?;
    let hd = out / heads;
    let split = if to_hf { (heads, hd / 2, 2, cols) } else { (heads, 2, hd / 2, cols) };
    Ok(t.reshape(split)?.transpose(1, 2)?.contiguous()?.reshape((out, cols))?)
}

fn mismatch(path: &Path, reason: impl Into<String>) -> Error {
    Error::CheckpointMismatch { path: path.to_path_buf(), reason: reason.into() }
}

/// Every file of an export is replaced whole ([`onebrain_durable`]): a full disk or a kill
/// leaves the previous export's file, never a part of the new one.
fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Json { path: path.into(), error: e })?;
    Ok(onebrain_durable::write_atomic(path, text + "\n")?)
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Json { path: path.into(), error: e })
}

fn save_tensors(path: &Path, tensors: &HashMap<String, Tensor>) -> Result<()> {
    onebrain_durable::replace_with(path, |tmp| {
        candle_core::safetensors::save(tensors, tmp)
            .map_err(|e| Error::Safetensors { path: path.into(), reason: e.to_string() })
    })
}

// ------------------------------------------------------------------ Brain

impl Brain {
    /// The base model's file name.
    fn model_file(&self) -> String {
        self.source().path().file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
    }

    /// The base model's Hugging Face name where known (PEFT's `base_model_name_or_path`).
    fn hf_base_name(&self) -> String {
        match self.model_file().as_str() {
            TEST_MODEL_FILE => "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
            DEFAULT_MODEL_FILE => "Qwen/Qwen2.5-Coder-1.5B-Instruct".into(),
            QUICK_MODEL_FILE => "Qwen/Qwen2.5-Coder-0.5B-Instruct".into(),
            _ => self.source().path().display().to_string(),
        }
    }

    /// Whether this model's weights are in the GGUF's row order (a GGUF Llama's q and k are
    /// permuted, see [`permute_rows`]) rather than Hugging Face's.
    fn rows_in_gguf_order(&self) -> bool {
        matches!(self.source(), ModelSource::Gguf(_))
    }

    /// `b` of `target` moved from one row order to another: the GGUF's (`gguf = true`) or
    /// Hugging Face's. Only a Llama's q and k differ between the two; this model keeps the
    /// order of its weights ([`Brain::rows_in_gguf_order`]).
    fn reorder_b(&self, target: &str, b: Tensor, from_gguf: bool, to_gguf: bool) -> Result<Tensor> {
        let arch = self.arch();
        if arch.arch != Arch::Llama || !(target == "q_proj" || target == "k_proj") || from_gguf == to_gguf {
            return Ok(b);
        }
        let heads = if target == "q_proj" { arch.num_attention_heads } else { arch.num_key_value_heads };
        permute_rows(&b, heads, !to_gguf)
    }

    /// `role`'s adapters as `(layer, target, A (r, in), B (out, r))`, B in the format's rows.
    fn role_adapters(&self, role: Role, to_gguf: bool) -> Result<Vec<(usize, &'static str, Tensor, Tensor)>> {
        let mut out = Vec::new();
        for (i, layer) in self.roles_params()[role.index()].lora.iter().enumerate() {
            for (t, pair) in layer.iter().enumerate() {
                let Some((a, b)) = pair else { continue };
                let target = LORA_TARGETS[t];
                let b = self.reorder_b(target, b.as_detached_tensor(), self.rows_in_gguf_order(), to_gguf)?;
                out.push((i, target, a.as_detached_tensor().contiguous()?, b.contiguous()?));
            }
        }
        Ok(out)
    }

    /// llama.cpp's name of the base architecture (`general.architecture`): the GGUF's own,
    /// or the family's for a safetensors model.
    fn gguf_architecture(&self) -> Result<String> {
        if let ModelSource::Gguf(p) = self.source() {
            let mut f = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
            let content = gguf_file::Content::read(&mut f)
                .map_err(|e| Error::WrongModelFile { path: p.clone(), reason: e.to_string(), setup: "test" })?;
            if let Some(Ok(a)) = content.metadata.get("general.architecture").map(|v| v.to_string()) {
                return Ok(a.clone());
            }
        }
        Ok(match self.arch().arch {
            Arch::Llama => "llama".into(),
            Arch::Qwen2 => "qwen2".into(),
        })
    }

    fn origin(&self, role: Role, format: ExportFormat) -> Origin {
        let cfg = self.config();
        Origin {
            role,
            format,
            model: self.model_file(),
            base_model: self.hf_base_name(),
            lora_rank: self.lora_rank(),
            lora_alpha: cfg.lora_alpha,
            lora_targets: cfg.lora_target_list().into_iter().map(String::from).collect(),
            role_tokens: cfg.role_tokens,
            onebrain_version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    /// Writes `role` into `dir` for the runtime `format` names (see the module docs for the
    /// layout); returns the files written.
    pub fn export(&self, role: Role, format: ExportFormat, dir: &Path) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut files = match format {
            ExportFormat::Peft => self.export_peft(role, dir)?,
            ExportFormat::Gguf => self.export_gguf(role, dir)?,
        };
        if role == Role::Judge {
            let head = self.judge_params();
            let hidden = self.arch().hidden_size;
            let tensors = HashMap::from([
                ("weight".to_string(), head.w.as_detached_tensor().reshape((1, hidden))?),
                ("bias".to_string(), head.b.as_detached_tensor()),
            ]);
            let path = dir.join(JUDGE_HEAD_FILE);
            save_tensors(&path, &tensors)?;
            files.push(path);
        }
        let origin = self.origin(role, format);
        let path = dir.join(ORIGIN_FILE);
        write_json(&path, &origin)?;
        files.push(path);
        let path = dir.join("README.md");
        onebrain_durable::write_atomic(&path, usage(&origin, self.arch().hidden_size))?;
        files.push(path);
        Ok(files)
    }

    /// The PEFT part of [`Brain::export`]: the LoRA adapter, and the role tokens as a
    /// prompt-tuning adapter in `role_tokens/`.
    fn export_peft(&self, role: Role, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut tensors = HashMap::new();
        for (i, target, a, b) in self.role_adapters(role, false)? {
            let key = format!("{PEFT_PREFIX}{}", hf_linear_name(i, target));
            tensors.insert(format!("{key}.lora_A.weight"), a);
            tensors.insert(format!("{key}.lora_B.weight"), b);
        }
        let weights = dir.join(PEFT_WEIGHTS_FILE);
        save_tensors(&weights, &tensors)?;
        let cfg = self.config();
        let config = serde_json::json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": self.hf_base_name(),
            "r": self.lora_rank(),
            "lora_alpha": cfg.lora_alpha,
            "lora_dropout": 0.0,
            "target_modules": cfg.lora_target_list(),
            "bias": "none",
            "fan_in_fan_out": false,
            "inference_mode": true,
            "use_rslora": false,
            "use_dora": false,
            "init_lora_weights": true,
            "modules_to_save": null,
            "layers_to_transform": null,
            "rank_pattern": {},
            "alpha_pattern": {},
        });
        let config_path = dir.join(PEFT_CONFIG_FILE);
        write_json(&config_path, &config)?;
        let mut files = vec![config_path, weights];
        if let Some(soft) = &self.roles_params()[role.index()].soft {
            let folder = dir.join(ROLE_TOKENS_DIR);
            std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
            let arch = self.arch();
            let prompt = serde_json::json!({
                "peft_type": "PROMPT_TUNING",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": self.hf_base_name(),
                "num_virtual_tokens": cfg.role_tokens,
                "token_dim": arch.hidden_size,
                "num_transformer_submodules": 1,
                "num_attention_heads": arch.num_attention_heads,
                "num_layers": arch.num_hidden_layers,
                "prompt_tuning_init": "RANDOM",
                "inference_mode": true,
            });
            let path = folder.join(PEFT_CONFIG_FILE);
            write_json(&path, &prompt)?;
            files.push(path);
            let path = folder.join(PEFT_WEIGHTS_FILE);
            save_tensors(&path, &HashMap::from([("prompt_embeddings".to_string(), soft.as_detached_tensor())]))?;
            files.push(path);
        }
        Ok(files)
    }

    /// The llama.cpp part of [`Brain::export`]: the LoRA adapter GGUF, and the role tokens
    /// as a safetensors file.
    fn export_gguf(&self, role: Role, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut tensors = Vec::new();
        for (i, target, a, b) in self.role_adapters(role, true)? {
            let name = gguf_linear_name(i, target);
            tensors.push((format!("{name}.lora_a"), QTensor::quantize(&a, GgmlDType::F32)?));
            tensors.push((format!("{name}.lora_b"), QTensor::quantize(&b, GgmlDType::F32)?));
        }
        let arch = self.gguf_architecture()?;
        let metadata = [
            ("general.architecture", gguf_file::Value::String(arch)),
            ("general.type", gguf_file::Value::String("adapter".into())),
            ("general.name", gguf_file::Value::String(format!("onebrain {role} adapter for {}", self.model_file()))),
            ("adapter.type", gguf_file::Value::String("lora".into())),
            ("adapter.lora.alpha", gguf_file::Value::F32(self.config().lora_alpha)),
        ];
        let path = dir.join(GGUF_ADAPTER_FILE);
        let meta: Vec<(&str, &gguf_file::Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        onebrain_durable::replace_with(&path, |tmp| -> Result<()> {
            let mut file = std::fs::File::create(tmp).map_err(|e| Error::io(&path, e))?;
            gguf_file::write(&mut file, &meta, &refs)?;
            Ok(())
        })?;
        let mut files = vec![path];
        if let Some(soft) = &self.roles_params()[role.index()].soft {
            let path = dir.join(ROLE_TOKENS_FILE);
            save_tensors(&path, &HashMap::from([("role_tokens".to_string(), soft.as_detached_tensor())]))?;
            files.push(path);
        }
        Ok(files)
    }

    /// Loads a PEFT LoRA folder into `role`: its adapters, its `role_tokens/` and, for the
    /// Judge, its `judge_head.safetensors` when present. Projections this model adapts and
    /// the folder does not are reset to no change (B = 0). Everything is checked before
    /// anything changes: a bad folder leaves the role as it was.
    pub fn import_peft(&mut self, role: Role, dir: &Path) -> Result<()> {
        let cfg_path = dir.join(PEFT_CONFIG_FILE);
        let lora = read_lora_config(&cfg_path)?;
        let arch = self.arch().clone();
        if lora.r != self.lora_rank() {
            return Err(mismatch(&cfg_path, format!("rank r = {}, this model's roles have rank {} (load it under with_checkpoint_or_peft_shape)", lora.r, self.lora_rank())));
        }
        let scale = |alpha: f32, r: usize| f64::from(alpha) / r as f64;
        if (scale(lora.alpha, lora.r) - scale(self.config().lora_alpha, self.lora_rank())).abs() > 1e-9 {
            return Err(mismatch(&cfg_path, format!("lora_alpha {} gives another scale than this model's {}", lora.alpha, self.config().lora_alpha)));
        }
        let mine = self.config().lora_target_list();
        if let Some(t) = lora.targets.iter().find(|t| !mine.contains(&t.as_str())) {
            return Err(mismatch(&cfg_path, format!("the adapter adapts `{t}`, which this model's roles leave without an adapter (targets {mine:?})")));
        }

        // The file's tensors, by name, against what this model has.
        let file = dir.join(PEFT_WEIGHTS_FILE);
        let header = checked_header(&file)?;
        let params = self.roles_params()[role.index()].clone();
        let n_layers = params.lora.len();
        let mut seen_layers = 0;
        for (name, entry) in &header {
            let parsed = parse_peft_key(name);
            let Some((layer, target, ab)) = parsed else {
                return Err(mismatch(&file, format!(
                    "unexpected tensor `{name}`: onebrain reads only `{PEFT_PREFIX}model.layers.N.{{self_attn,mlp}}.PROJ.lora_{{A,B}}.weight` of {}",
                    LORA_TARGETS.join(", ")
                )));
            };
            seen_layers = seen_layers.max(layer + 1);
            if !LORA_TARGETS.contains(&target) {
                return Err(mismatch(&file, format!("`{name}` adapts unknown target module `{target}`: onebrain adapts only {}", LORA_TARGETS.join(", "))));
            }
            if !lora.targets.iter().any(|t| t == target) {
                return Err(mismatch(&file, format!("`{name}` adapts `{target}`, which adapter_config.json's target_modules do not name")));
            }
            if layer >= n_layers {
                continue; // reported below, with the layer count
            }
            let t = LORA_TARGETS.iter().position(|x| *x == target).expect("checked");
            let (a, b) = params.lora[layer][t].as_ref().expect("targets checked above");
            let (want, rank_axis) = if ab == 'A' { (a.dims().to_vec(), 0) } else { (b.dims().to_vec(), 1) };
            if entry.shape.len() != 2 {
                return Err(mismatch(&file, format!("`{name}` has shape {:?}, expected a matrix {want:?}", entry.shape)));
            }
            if entry.shape[rank_axis] != lora.r {
                return Err(mismatch(&file, format!(
                    "`{name}` has rank {} (shape {:?}), but adapter_config.json says r = {}: a rank mismatch",
                    entry.shape[rank_axis], entry.shape, lora.r
                )));
            }
            if entry.shape != want {
                let (axis, what) = if ab == 'A' { (1, "inputs") } else { (0, "outputs") };
                return Err(mismatch(&file, format!(
                    "`{name}` is {:?} ({} {what}), this model's {target} has {} {what} (hidden size {}): an adapter for another base model",
                    entry.shape, entry.shape[axis], want[axis], arch.hidden_size
                )));
            }
            let _ = &entry.dtype;
        }
        if seen_layers != n_layers {
            return Err(mismatch(&file, format!(
                "the adapter covers {seen_layers} layers, this model has {n_layers}: an adapter for another base model"
            )));
        }
        let tensors = load_checked(&file, self.device())?;
        let mut updates = Vec::new();
        for (i, layer) in params.lora.iter().enumerate() {
            for (t, pair) in layer.iter().enumerate() {
                let Some((a, b)) = pair else { continue };
                let target = LORA_TARGETS[t];
                if !lora.targets.iter().any(|x| x == target) {
                    updates.push((b.clone(), Tensor::zeros(b.dims(), DType::F32, self.device())?));
                    continue;
                }
                let key = format!("{PEFT_PREFIX}{}", hf_linear_name(i, target));
                let get = |suffix: &str| {
                    let name = format!("{key}.{suffix}");
                    tensors.get(&name).cloned().ok_or_else(|| mismatch(&file, format!("missing `{name}`")))
                };
                let ta = get("lora_A.weight")?;
                let tb = self.reorder_b(target, get("lora_B.weight")?, false, self.rows_in_gguf_order())?;
                updates.push((a.clone(), ta));
                updates.push((b.clone(), tb));
            }
        }
        let tokens = read_role_tokens(dir, arch.hidden_size, self.device())?;
        match (&params.soft, tokens) {
            (Some(var), Some(t)) if t.dims() == var.dims() => updates.push((var.clone(), t)),
            (Some(var), Some(t)) => {
                return Err(mismatch(&dir.join(ROLE_TOKENS_DIR), format!("{} role tokens, this model's roles have {}", t.dims()[0], var.dims()[0])))
            }
            (Some(var), None) => {
                return Err(mismatch(dir, format!(
                    "no role_tokens/ folder, but this model's roles have {} role tokens (load it under with_checkpoint_or_peft_shape, which sets none)",
                    var.dims()[0]
                )))
            }
            (None, Some(t)) => {
                return Err(mismatch(&dir.join(ROLE_TOKENS_DIR), format!("{} role tokens, this model's roles have none", t.dims()[0])))
            }
            (None, None) => {}
        }
        let head_path = dir.join(JUDGE_HEAD_FILE);
        if role == Role::Judge && head_path.is_file() {
            let head = self.judge_params().clone();
            let t = load_checked(&head_path, self.device())?;
            let w = t.get("weight").ok_or_else(|| mismatch(&head_path, "no `weight` tensor"))?;
            let b = t.get("bias").ok_or_else(|| mismatch(&head_path, "no `bias` tensor"))?;
            if w.elem_count() != arch.hidden_size || b.elem_count() != 1 {
                return Err(mismatch(&head_path, format!("weight {:?} and bias {:?}, expected (1, {}) and (1,)", w.dims(), b.dims(), arch.hidden_size)));
            }
            updates.push((head.w.clone(), w.flatten_all()?));
            updates.push((head.b.clone(), b.flatten_all()?));
        }
        for (var, t) in updates {
            var.set(&t.contiguous()?)?;
        }
        self.clear_prefix_cache();
        Ok(())
    }

    /// Loads what a `--checkpoint` names: a onebrain checkpoint (or a run folder, see
    /// [`Brain::load_trainable`]) or a PEFT LoRA folder, into `peft_role` or else the role
    /// [`peft_adapter_role`] gives it. Load the brain under
    /// [`with_checkpoint_or_peft_shape`] first.
    pub fn load_checkpoint_or_peft(&mut self, dir: &Path, peft_role: Option<Role>) -> Result<()> {
        match is_peft_adapter(dir) {
            true => self.import_peft(peft_role.unwrap_or_else(|| peft_adapter_role(dir)), dir),
            false => self.load_trainable(&resolve_checkpoint(dir)),
        }
    }
}

/// `(layer, target, 'A' | 'B')` of a PEFT key
/// `base_model.model.model.layers.{i}.{self_attn|mlp}.{target}.lora_{A|B}.weight`.
fn parse_peft_key(name: &str) -> Option<(usize, &str, char)> {
    let rest = name.strip_prefix(PEFT_PREFIX)?.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer = layer.parse().ok()?;
    let rest = rest.strip_prefix("self_attn.").or_else(|| rest.strip_prefix("mlp."))?;
    let (target, ab) = rest.split_once(".lora_")?;
    let ab = match ab {
        "A.weight" => 'A',
        "B.weight" => 'B',
        _ => return None,
    };
    Some((layer, target, ab))
}

/// The export folder's README: what a user types to use it.
fn usage(o: &Origin, hidden: usize) -> String {
    let tokens = o.role_tokens;
    let mut s = format!(
        "# onebrain {role} of `{model}`, for {runtime}\n\n\
         LoRA rank {r}, alpha {alpha} on {targets}; {tokens} role tokens (soft embeddings of width {hidden} \
         put before the prompt). onebrain's prompts are ChatML with no BOS token: feed the prompt's \
         token ids as they are.\n\n",
        role = o.role,
        model = o.model,
        runtime = if o.format == ExportFormat::Peft { "transformers + PEFT" } else { "llama.cpp" },
        r = o.lora_rank,
        alpha = o.lora_alpha,
        targets = o.lora_targets.join(", "),
    );
    match o.format {
        ExportFormat::Peft => {
            s.push_str(&format!(
                "```python\nimport torch\nfrom transformers import AutoModelForCausalLM\nfrom peft import PeftModel\n\n\
                 # The same weights onebrain ran: transformers dequantizes the GGUF to f32.\n\
                 base = AutoModelForCausalLM.from_pretrained(\"/path/to/models\", gguf_file=\"{model}\", torch_dtype=torch.float32)\n\
                 # or: AutoModelForCausalLM.from_pretrained(\"{base}\")\n\
                 model = PeftModel.from_pretrained(base, \"THIS_FOLDER\")\n",
                model = o.model,
                base = o.base_model
            ));
            if tokens > 0 {
                s.push_str(
                    "# The role tokens are a prompt-tuning adapter: merge the LoRA first, then add them.\n\
                     model = PeftModel.from_pretrained(model.merge_and_unload(), \"THIS_FOLDER/role_tokens\")\n",
                );
            }
            s.push_str("logits = model(input_ids=ids).logits[:, -1]  # next-token logits after the prompt\n```\n");
        }
        ExportFormat::Gguf => {
            s.push_str(&format!(
                "`adapter.gguf` is a llama.cpp LoRA adapter for `{model}`:\n\n\
                 ```sh\nllama-server -m {model} --lora adapter.gguf\n```\n\n",
                model = o.model
            ));
            if tokens > 0 {
                s.push_str(
                    "That runs the adapters without the role tokens. They are `role_tokens` `(n, hidden)` in \
                     `role_tokens.safetensors`; through the C API (or llama-cpp-python's low-level one), decode \
                     them first as one batch of embeddings (`llama_batch_init(n, hidden, 1)`, `batch.embd`, \
                     positions 0..n), then the prompt's tokens at positions n, n+1, … in the same sequence. \
                     `scripts/verify-export.sh` in the onebrain repository does exactly this \
                     (`llama_logits` in `scripts/verify_export.py`).\n\n",
                );
            }
        }
    }
    if o.role == Role::Judge {
        s.push_str(
            "\n## Judge head\n\n`judge_head.safetensors` holds `weight` `(1, hidden)` and `bias` `(1,)`, a \
             `torch.nn.Linear(hidden, 1)`. The Judge's score is `sigmoid(head(h))`, with `h` the final hidden \
             state (after the last norm) of the prompt's last token:\n\n\
             ```python\nfrom safetensors.torch import load_file\nhead = torch.nn.Linear(HIDDEN, 1)\n\
             head.load_state_dict(load_file(\"THIS_FOLDER/judge_head.safetensors\"))\n\
             h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][:, -1]\n\
             score = torch.sigmoid(head(h))\n```\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_round_trips_and_matches_convert_hf_to_gguf() {
        // 2 heads of width 4, one column: HF rows [h0: 0 1 2 3, h1: 4 5 6 7] become
        // interleaved pairs (0 2 1 3 | 4 6 5 7) in GGUF.
        let hf = Tensor::arange(0f32, 8.0, &Device::Cpu).unwrap().reshape((8, 1)).unwrap();
        let gguf = permute_rows(&hf, 2, false).unwrap();
        let v: Vec<f32> = gguf.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(v, vec![0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
        let back = permute_rows(&gguf, 2, true).unwrap();
        assert_eq!(back.flatten_all().unwrap().to_vec1::<f32>().unwrap(), (0..8).map(|x| x as f32).collect::<Vec<_>>());
    }

    #[test]
    fn peft_keys_parse_and_others_do_not() {
        assert_eq!(parse_peft_key("base_model.model.model.layers.12.self_attn.q_proj.lora_A.weight"), Some((12, "q_proj", 'A')));
        assert_eq!(parse_peft_key("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"), Some((0, "down_proj", 'B')));
        assert_eq!(parse_peft_key("base_model.model.model.layers.0.self_attn.c_attn.lora_B.weight"), Some((0, "c_attn", 'B')));
        assert_eq!(parse_peft_key("base_model.model.lm_head.lora_A.weight"), None);
        assert_eq!(parse_peft_key("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"), None);
    }

    /// A disk that fills up while an export is written: the error names the file, and the
    /// previous export's file is whole (before, it was cut to what fit). Every file of an export
    /// goes through these two writers (and the GGUF adapter through the same replacement).
    #[test]
    fn a_full_disk_during_an_export_keeps_the_previous_files_and_names_the_new_one() {
        let disk = match onebrain_durable::SmallDisk::mount(1 << 20) {
            Ok(d) => d,
            Err(why) => return eprintln!("skipping: {why}"),
        };
        let config = disk.path().join(PEFT_CONFIG_FILE);
        let weights = disk.path().join(PEFT_WEIGHTS_FILE);
        let t = |n: usize| Tensor::ones((n, 64), candle_core::DType::F32, &candle_core::Device::Cpu).unwrap();
        write_json(&config, &serde_json::json!({"r": 8})).unwrap();
        save_tensors(&weights, &HashMap::from([("x".to_string(), t(4))])).unwrap();
        let (old_config, old_weights) = (std::fs::read(&config).unwrap(), std::fs::read(&weights).unwrap());
        disk.fill_to(4096).unwrap();
        let err = write_json(&config, &serde_json::json!({"r": 8, "pad": "p".repeat(64 << 10)})).unwrap_err().to_string();
        assert!(err.contains("adapter_config.json: the disk is full"), "{err}");
        let err = save_tensors(&weights, &HashMap::from([("x".to_string(), t(1024))])).unwrap_err().to_string();
        assert!(err.contains("adapter_model.safetensors"), "{err}");
        assert_eq!(std::fs::read(&config).unwrap(), old_config);
        assert_eq!(std::fs::read(&weights).unwrap(), old_weights);
        disk.unfill();
        save_tensors(&weights, &HashMap::from([("x".to_string(), t(1024))])).unwrap();
    }
}

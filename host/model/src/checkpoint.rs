//! Saving and restoring the trainable parameters, and exporting a role's adapters in
//! the PEFT layout that Hugging Face `peft` loads onto the base model.
//!
//! PEFT layout (peft `save_pretrained` for a LoRA `CAUSAL_LM` adapter):
//! `adapter_config.json` and `adapter_model.safetensors` with keys
//! `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight` (`(r, in)`) and
//! `….lora_B.weight` (`(out, r)`), likewise for `k_proj`, `v_proj`, `o_proj` and
//! `mlp.{gate,up,down}_proj`. The role tokens and the Judge head have no PEFT LoRA
//! equivalent; they go beside it in `onebrain_role.safetensors`.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::{
    config::{ModelConfig, DEFAULT_MODEL_FILE, QUICK_MODEL_FILE, TEST_MODEL_FILE},
    paths::ModelSource,
    transformer::{Arch, ArchConfig, LORA_TARGETS},
    weights::hf_linear_name,
    Brain, Error, Result, Role,
};

const TRAINABLE_FILE: &str = "trainable.safetensors";
const META_FILE: &str = "brain.json";
const PEFT_CONFIG: &str = "adapter_config.json";
const PEFT_WEIGHTS: &str = "adapter_model.safetensors";
const ROLE_EXTRAS: &str = "onebrain_role.safetensors";

/// What a checkpoint was trained on; checked before loading it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    format: u32,
    model: String,
    arch: ArchConfig,
    lora_rank: usize,
    lora_alpha: f32,
    role_tokens: usize,
    separate_models: bool,
    train_backbone: bool,
    parameters: usize,
    /// The adapted projections (PEFT names); absent in checkpoints written before it was
    /// recorded, whose parameter names say it instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lora_targets: Option<Vec<String>>,
}

/// The fields of PEFT's `adapter_config.json` that matter for loading (PEFT fills the
/// rest with defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PeftConfig {
    pub(crate) peft_type: String,
    pub(crate) task_type: String,
    pub(crate) base_model_name_or_path: String,
    pub(crate) r: usize,
    pub(crate) lora_alpha: f32,
    pub(crate) lora_dropout: f32,
    pub(crate) target_modules: Vec<String>,
    pub(crate) bias: String,
    pub(crate) fan_in_fan_out: bool,
    pub(crate) inference_mode: bool,
    pub(crate) use_rslora: bool,
    pub(crate) init_lora_weights: bool,
    #[serde(default)]
    pub(crate) modules_to_save: Option<Vec<String>>,
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Json { path: path.into(), source: e })?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Json { path: path.into(), source: e })
}

/// Reads a safetensors file onto `dev`, the model's device.
fn load_tensors(path: &Path, dev: &Device) -> Result<HashMap<String, Tensor>> {
    candle_core::safetensors::load(path, dev)
        .map_err(|e| Error::Safetensors { path: path.into(), reason: e.to_string() })
}

/// The tensor names of a safetensors file, read from its header alone: the shape
/// question needs no tensor data and no device.
fn tensor_names(path: &Path) -> Result<Vec<String>> {
    use std::io::Read;
    let bad = |reason: String| Error::Safetensors { path: path.into(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| Error::io(path, e))?;
    let len = u64::from_le_bytes(len);
    // The format caps its header at 100 MB; a larger length is a corrupt file.
    if len > 100_000_000 {
        return Err(bad(format!("header length {len} exceeds the format's 100 MB")));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(format!("header: {e}")))?;
    Ok(header.into_iter().map(|(k, _)| k).filter(|k| k != "__metadata__").collect())
}

fn save_tensors(path: &Path, tensors: &HashMap<String, Tensor>) -> Result<()> {
    candle_core::safetensors::save(tensors, path)
        .map_err(|e| Error::Safetensors { path: path.into(), reason: e.to_string() })
}

/// The file in a training run's `checkpoints/` folder that names its newest checkpoint.
pub const LATEST_FILE: &str = "LATEST";

/// The checkpoint folder `path` stands for: itself when it holds a checkpoint, else the one
/// named by `LATEST` in it or in its `checkpoints/` folder (a training run's layout).
pub fn resolve_checkpoint(path: &Path) -> PathBuf {
    if path.join(META_FILE).is_file() {
        return path.to_path_buf();
    }
    for folder in [path.to_path_buf(), path.join("checkpoints")] {
        if let Ok(name) = std::fs::read_to_string(folder.join(LATEST_FILE)) {
            return folder.join(name.trim());
        }
    }
    path.to_path_buf()
}

/// `cfg` with the role parameters' shape of the checkpoint at `dir` (its LoRA rank, alpha
/// and targets, role tokens and modes): a run's parameters then load under any config that
/// names the same model, such as the demo's, written for the base model. The backbone and
/// everything else stay as `cfg` says; [`Brain::load_trainable`] still checks the rest.
pub fn with_checkpoint_shape(cfg: &ModelConfig, dir: &Path) -> Result<ModelConfig> {
    let dir = resolve_checkpoint(dir);
    let meta: Meta = read_json(&dir.join(META_FILE))?;
    let lora_targets = match meta.lora_targets {
        Some(targets) => Some(targets),
        None => adapted_targets(&dir.join(TRAINABLE_FILE))?.or_else(|| cfg.lora_targets.clone()),
    };
    Ok(ModelConfig {
        lora_rank: Some(meta.lora_rank),
        lora_alpha: meta.lora_alpha,
        role_tokens: meta.role_tokens,
        separate_models: meta.separate_models,
        train_backbone: meta.train_backbone,
        lora_targets,
        ..cfg.clone()
    })
}

/// The projections a checkpoint's LoRA parameters adapt, read off their names
/// (`actor.lora.0.q_proj.a`), in [`LORA_TARGETS`] order; `None` when it has no LoRA
/// parameter to read.
fn adapted_targets(file: &Path) -> Result<Option<Vec<String>>> {
    let names = tensor_names(file)?;
    let adapted: Vec<String> = LORA_TARGETS
        .iter()
        .filter(|t| names.iter().any(|name| name.contains(".lora.") && name.contains(&format!(".{t}."))))
        .map(|t| t.to_string())
        .collect();
    Ok((!adapted.is_empty()).then_some(adapted))
}

fn mismatch(path: &Path, reason: impl Into<String>) -> Error {
    Error::CheckpointMismatch { path: path.to_path_buf(), reason: reason.into() }
}

/// GGUF Llama q/k rows are permuted for interleaved RoPE (convert_hf_to_gguf.py
/// `permute`: `w.reshape(h, 2, d/2, ..).swapaxes(1, 2)`); PEFT adapters live in the
/// Hugging Face row order. `to_hf` undoes the permutation, otherwise applies it.
fn permute_rows(t: &Tensor, heads: usize, to_hf: bool) -> Result<Tensor> {
    let (out, cols) = t.dims2()?;
    let hd = out / heads;
    let split = if to_hf { (heads, hd / 2, 2, cols) } else { (heads, 2, hd / 2, cols) };
    Ok(t.reshape(split)?.transpose(1, 2)?.contiguous()?.reshape((out, cols))?)
}

impl Brain {
    fn model_name(&self) -> String {
        self.source()
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    }

    fn meta(&self) -> Meta {
        let cfg = self.config();
        Meta {
            format: 1,
            model: self.model_name(),
            arch: self.arch().clone(),
            lora_rank: self.lora_rank(),
            lora_alpha: cfg.lora_alpha,
            role_tokens: cfg.role_tokens,
            separate_models: cfg.separate_models,
            train_backbone: cfg.train_backbone,
            parameters: self.trainable().all_vars().iter().map(|v| v.elem_count()).sum(),
            lora_targets: Some(cfg.lora_target_list().into_iter().map(String::from).collect()),
        }
    }

    /// Writes every trainable parameter to `dir/trainable.safetensors` and what they
    /// belong to in `dir/brain.json`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let file = dir.join(TRAINABLE_FILE);
        self.trainable()
            .save(&file)
            .map_err(|e| Error::Safetensors { path: file.clone(), reason: e.to_string() })?;
        write_json(&dir.join(META_FILE), &self.meta())
    }

    /// Restores parameters written by [`Brain::save`]; the checkpoint must match this
    /// model, rank, role-token count and mode exactly. `dir` may also be a training run's
    /// folder or its `checkpoints/` folder: the checkpoint their `LATEST` file names is used.
    pub fn load_trainable(&mut self, dir: &Path) -> Result<()> {
        let dir = &resolve_checkpoint(dir);
        let meta_path = dir.join(META_FILE);
        let meta: Meta = read_json(&meta_path)?;
        let mine = self.meta();
        let checks = [
            (meta.arch != mine.arch, format!("architecture {:?} vs {:?}", meta.arch, mine.arch)),
            (meta.lora_rank != mine.lora_rank, format!("LoRA rank {} vs {}", meta.lora_rank, mine.lora_rank)),
            (meta.role_tokens != mine.role_tokens, format!("role tokens {} vs {}", meta.role_tokens, mine.role_tokens)),
            (meta.separate_models != mine.separate_models, "separate_models differs".to_string()),
            (meta.train_backbone != mine.train_backbone, "train_backbone differs".to_string()),
            (meta.lora_alpha != mine.lora_alpha, format!("lora_alpha {} vs {}", meta.lora_alpha, mine.lora_alpha)),
            (
                meta.lora_targets.is_some() && meta.lora_targets != mine.lora_targets,
                format!("LoRA targets {:?} vs {:?}", meta.lora_targets.unwrap_or_default(), mine.lora_targets.unwrap_or_default()),
            ),
        ];
        if let Some((_, why)) = checks.into_iter().find(|(bad, _)| *bad) {
            return Err(mismatch(&meta_path, why));
        }
        let file = dir.join(TRAINABLE_FILE);
        let tensors = load_tensors(&file, self.device())?;
        let data = self.trainable().data().lock().expect("varmap lock");
        for name in tensors.keys() {
            if !data.contains_key(name) {
                return Err(mismatch(&file, format!("unexpected parameter `{name}`")));
            }
        }
        // Check everything before changing anything, so a bad file leaves no half state.
        for (name, var) in data.iter() {
            let t = tensors.get(name).ok_or_else(|| mismatch(&file, format!("missing parameter `{name}`")))?;
            if t.dims() != var.dims() {
                return Err(mismatch(&file, format!("`{name}` has shape {:?}, expected {:?}", t.dims(), var.dims())));
            }
        }
        for (name, var) in data.iter() {
            var.set(&tensors[name].to_dtype(var.dtype())?)?;
        }
        drop(data);
        self.clear_prefix_cache();
        Ok(())
    }

    fn qk_permuted(&self) -> bool {
        matches!(self.source(), ModelSource::Gguf(_)) && self.arch().arch == Arch::Llama
    }

    fn base_model_name(&self) -> String {
        match self.model_name().as_str() {
            TEST_MODEL_FILE => "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
            DEFAULT_MODEL_FILE => "Qwen/Qwen2.5-Coder-1.5B-Instruct".into(),
            QUICK_MODEL_FILE => "Qwen/Qwen2.5-Coder-0.5B-Instruct".into(),
            _ => self.source().path().display().to_string(),
        }
    }

    /// Writes `role`'s adapters as a PEFT LoRA adapter directory, plus its soft tokens
    /// (and the Judge head) in `onebrain_role.safetensors`.
    pub fn export_peft(&self, role: Role, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let cfg = self.arch();
        let params = &self.roles_params()[role.index()];
        let mut tensors = HashMap::new();
        for (i, layer) in params.lora.iter().enumerate() {
            for (t, (a, b)) in layer.iter().enumerate().filter_map(|(t, p)| p.as_ref().map(|p| (t, p))) {
                let target = LORA_TARGETS[t];
                let mut b = b.as_detached_tensor();
                if self.qk_permuted() && (target == "q_proj" || target == "k_proj") {
                    let heads = if target == "q_proj" { cfg.num_attention_heads } else { cfg.num_key_value_heads };
                    b = permute_rows(&b, heads, true)?;
                }
                let key = format!("base_model.model.{}", hf_linear_name(i, target));
                tensors.insert(format!("{key}.lora_A.weight"), a.as_detached_tensor().contiguous()?);
                tensors.insert(format!("{key}.lora_B.weight"), b.contiguous()?);
            }
        }
        save_tensors(&dir.join(PEFT_WEIGHTS), &tensors)?;
        let peft = PeftConfig {
            peft_type: "LORA".into(),
            task_type: "CAUSAL_LM".into(),
            base_model_name_or_path: self.base_model_name(),
            r: self.lora_rank(),
            lora_alpha: self.config().lora_alpha,
            lora_dropout: 0.0,
            target_modules: self.config().lora_target_list().into_iter().map(str::to_string).collect(),
            bias: "none".into(),
            fan_in_fan_out: false,
            inference_mode: true,
            use_rslora: false,
            init_lora_weights: true,
            modules_to_save: None,
        };
        write_json(&dir.join(PEFT_CONFIG), &peft)?;
        let mut extras = HashMap::new();
        if let Some(s) = &params.soft {
            extras.insert("role_tokens".to_string(), s.as_detached_tensor());
        }
        if role == Role::Judge {
            let head = self.judge_params();
            extras.insert("judge_head.weight".to_string(), head.w.as_detached_tensor());
            extras.insert("judge_head.bias".to_string(), head.b.as_detached_tensor());
        }
        if !extras.is_empty() {
            save_tensors(&dir.join(ROLE_EXTRAS), &extras)?;
        }
        Ok(())
    }

    /// Loads a PEFT LoRA adapter directory (ours or any with the same rank and targets)
    /// into `role`, and its `onebrain_role.safetensors` when present.
    pub fn import_peft(&mut self, role: Role, dir: &Path) -> Result<()> {
        let cfg_path = dir.join(PEFT_CONFIG);
        let peft: PeftConfig = read_json(&cfg_path)?;
        if peft.peft_type != "LORA" {
            return Err(mismatch(&cfg_path, format!("peft_type {} is not LORA", peft.peft_type)));
        }
        if peft.r != self.lora_rank() {
            return Err(mismatch(&cfg_path, format!("rank {} vs this model's {}", peft.r, self.lora_rank())));
        }
        if (peft.lora_alpha - self.config().lora_alpha).abs() > 1e-6 {
            return Err(mismatch(&cfg_path, format!("lora_alpha {} vs {}", peft.lora_alpha, self.config().lora_alpha)));
        }
        let file: PathBuf = dir.join(PEFT_WEIGHTS);
        let tensors = load_tensors(&file, self.device())?;
        let arch = self.arch().clone();
        let permuted = self.qk_permuted();
        let params = self.roles_params()[role.index()].clone();
        let mut updates = Vec::new();
        for (i, layer) in params.lora.iter().enumerate() {
            for (t, (a, b)) in layer.iter().enumerate().filter_map(|(t, p)| p.as_ref().map(|p| (t, p))) {
                let target = LORA_TARGETS[t];
                let key = format!("base_model.model.{}", hf_linear_name(i, target));
                let get = |suffix: &str, want: &[usize]| -> Result<Tensor> {
                    let name = format!("{key}.{suffix}");
                    let t = tensors.get(&name).ok_or_else(|| mismatch(&file, format!("missing `{name}`")))?;
                    if t.dims() != want {
                        return Err(mismatch(&file, format!("`{name}` has shape {:?}, expected {want:?}", t.dims())));
                    }
                    Ok(t.to_dtype(candle_core::DType::F32)?)
                };
                let ta = get("lora_A.weight", a.dims())?;
                let mut tb = get("lora_B.weight", b.dims())?;
                if permuted && (target == "q_proj" || target == "k_proj") {
                    let heads = if target == "q_proj" { arch.num_attention_heads } else { arch.num_key_value_heads };
                    tb = permute_rows(&tb, heads, false)?;
                }
                updates.push((a.clone(), ta));
                updates.push((b.clone(), tb));
            }
        }
        let extras_path = dir.join(ROLE_EXTRAS);
        if extras_path.is_file() {
            let extras = load_tensors(&extras_path, self.device())?;
            if let (Some(var), Some(t)) = (&params.soft, extras.get("role_tokens")) {
                if t.dims() != var.dims() {
                    return Err(mismatch(&extras_path, "role_tokens shape differs"));
                }
                updates.push((var.clone(), t.clone()));
            }
            if role == Role::Judge {
                let head = self.judge_params();
                for (var, name) in [(&head.w, "judge_head.weight"), (&head.b, "judge_head.bias")] {
                    if let Some(t) = extras.get(name) {
                        if t.dims() != var.dims() {
                            return Err(mismatch(&extras_path, format!("{name} shape differs")));
                        }
                        updates.push((var.clone(), t.clone()));
                    }
                }
            }
        }
        for (var, t) in updates {
            var.set(&t.contiguous()?)?;
        }
        self.clear_prefix_cache();
        Ok(())
    }
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
    fn tensor_names_come_from_the_header_and_a_corrupt_length_is_refused() {
        let dir = std::env::temp_dir().join(format!("onebrain-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.safetensors");
        let t = Tensor::zeros((2, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
        let tensors = HashMap::from([("actor.lora.0.q_proj.a".to_string(), t.clone()), ("judge.w".to_string(), t)]);
        save_tensors(&good, &tensors).unwrap();
        let mut names = tensor_names(&good).unwrap();
        names.sort();
        assert_eq!(names, ["actor.lora.0.q_proj.a", "judge.w"]);
        assert_eq!(adapted_targets(&good).unwrap(), Some(vec!["q_proj".to_string()]));

        let corrupt = dir.join("corrupt.safetensors");
        std::fs::write(&corrupt, u64::MAX.to_le_bytes()).unwrap();
        let err = tensor_names(&corrupt).unwrap_err().to_string();
        assert!(err.contains("exceeds"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

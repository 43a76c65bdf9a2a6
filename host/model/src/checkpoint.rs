//! Saving and restoring the trainable parameters. Exporting a role for PEFT or llama.cpp,
//! and importing a PEFT adapter, live in `export.rs`.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::{
    config::ModelConfig,
    paths::resolve_model,
    transformer::{ArchConfig, LORA_TARGETS},
    weights::model_arch,
    Brain, Error, Result, Role,
};

const TRAINABLE_FILE: &str = "trainable.safetensors";
const META_FILE: &str = "brain.json";

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

/// Replaced whole ([`onebrain_durable::write_atomic`]): a kill or a full disk leaves the old
/// file, never a part of the new one.
fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Json { path: path.into(), error: e })?;
    Ok(onebrain_durable::write_atomic(path, text)?)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Json { path: path.into(), error: e })
}

/// Reads a safetensors file onto `dev`, the model's device.
fn load_tensors(path: &Path, dev: &Device) -> Result<HashMap<String, Tensor>> {
    candle_core::safetensors::load(path, dev)
        .map_err(|e| Error::Safetensors { path: path.into(), reason: e.to_string() })
}

/// One tensor as a safetensors header lists it.
#[derive(Debug, Clone, PartialEq)]
struct HeaderEntry {
    name: String,
    dtype: String,
    shape: Vec<usize>,
}

/// The tensors of a safetensors file, read from its header alone and checked against the
/// file: each one's shape and type must take exactly its byte range, inside the file. The
/// shape question needs no tensor data and no device, and a brain.json that claims more
/// parameters than this holds is refused before they are allocated.
fn read_header(path: &Path) -> Result<Vec<HeaderEntry>> {
    use std::io::Read;
    let bad = |reason: String| Error::Safetensors { path: path.into(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| Error::io(path, e))?;
    let len = u64::from_le_bytes(len);
    // The format caps its header at 100 MB; a larger length is a corrupt file.
    if len > 100_000_000 {
        return Err(bad(format!("header length {len} exceeds the format's 100 MB")));
    }
    let data_len = file_len
        .checked_sub(8 + len)
        .ok_or_else(|| bad(format!("header length {len} is past the end of the file ({file_len} bytes)")))?;
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(format!("header: {e}")))?;
    #[derive(Deserialize)]
    struct Info {
        dtype: String,
        shape: Vec<usize>,
        data_offsets: (u64, u64),
    }
    let mut entries = Vec::with_capacity(header.len());
    for (name, value) in header {
        if name == "__metadata__" {
            continue;
        }
        let info: Info = serde_json::from_value(value).map_err(|e| bad(format!("`{name}`: {e}")))?;
        let width: u64 = match info.dtype.as_str() {
            "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" => 1,
            "U16" | "I16" | "F16" | "BF16" => 2,
            "U32" | "I32" | "F32" => 4,
            "U64" | "I64" | "F64" => 8,
            other => return Err(bad(format!("`{name}` has the unknown type {other}"))),
        };
        let (start, end) = info.data_offsets;
        let bytes = info
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .and_then(|n| n.checked_mul(width));
        if start > end || end > data_len || bytes != Some(end - start) {
            return Err(bad(format!(
                "`{name}`: {} of shape {:?} does not fill bytes {start}..{end} of the {data_len} after the header",
                info.dtype, info.shape
            )));
        }
        entries.push(HeaderEntry { name, dtype: info.dtype, shape: info.shape });
    }
    Ok(entries)
}

#[cfg(test)]
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

/// Reads `brain.json` and checks it on its own: a known format, a rank of 1 or more, a
/// finite positive alpha, known LoRA targets, a sound architecture. What it must match in
/// the model is checked against the model ([`with_checkpoint_shape`], [`Brain::load_trainable`]).
fn read_meta(dir: &Path) -> Result<Meta> {
    let path = dir.join(META_FILE);
    let meta: Meta = read_json(&path)?;
    let bad = |why: String| Err(mismatch(&path, why));
    if meta.format != 1 {
        return bad(format!("format {} (this build reads format 1)", meta.format));
    }
    if meta.lora_rank == 0 {
        return bad("LoRA rank 0".into());
    }
    if !(meta.lora_alpha.is_finite() && meta.lora_alpha > 0.0) {
        return bad(format!("lora_alpha {} is not a positive number", meta.lora_alpha));
    }
    if let Some(targets) = &meta.lora_targets {
        if targets.is_empty() {
            return bad("no LoRA target".into());
        }
        if let Some(t) = targets.iter().find(|t| !LORA_TARGETS.contains(&t.as_str())) {
            return bad(format!("unknown LoRA target `{t}` (expected some of {})", LORA_TARGETS.join(", ")));
        }
    }
    meta.arch.validate().map_err(|e| mismatch(&path, format!("its architecture: {e}")))?;
    Ok(meta)
}

/// The fields where a checkpoint's architecture differs from the model's, as
/// `hidden_size 896 vs the model's 576`.
fn arch_difference(checkpoint: &ArchConfig, model: &ArchConfig) -> String {
    let (a, b) = (serde_json::to_value(checkpoint), serde_json::to_value(model));
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) = (a, b) else {
        return format!("{checkpoint:?} vs the model's {model:?}");
    };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k} {v} vs the model's {}", b.get(k).unwrap_or(&serde_json::Value::Null)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parameters the role parameters of `cfg` take on a backbone of shape `arch`: per role its
/// tokens and a rank-r pair of every adapted projection in every layer, then the Judge's head.
/// Saturating: it is a bound to check a brain.json against, not a size to allocate.
fn role_parameters(arch: &ArchConfig, cfg: &ModelConfig, rank: usize) -> u64 {
    let (h, ffn) = (arch.hidden_size as u64, arch.intermediate_size as u64);
    let q = (arch.num_attention_heads as u64).saturating_mul(arch.head_dim as u64);
    let kv = (arch.num_key_value_heads as u64).saturating_mul(arch.head_dim as u64);
    // in + out of each projection, in LORA_TARGETS order (q, k, v, o, gate, up, down).
    let sides = [h + q, h + kv, h + kv, q + h, h + ffn, h + ffn, ffn + h];
    let per_layer: u64 = sides.iter().zip(cfg.lora_target_mask()).filter(|(_, on)| *on).map(|(s, _)| *s).sum();
    let lora = per_layer.saturating_mul(rank as u64).saturating_mul(arch.num_hidden_layers as u64);
    let per_role = lora.saturating_add((cfg.role_tokens as u64).saturating_mul(h));
    per_role.saturating_mul(Role::ALL.len() as u64).saturating_add(h + 1)
}

/// `cfg` with the role parameters' shape of the checkpoint at `dir` (its LoRA rank, alpha
/// and targets, role tokens and modes): a run's parameters then load under any config that
/// names the same model, such as the demo's, written for the base model. The backbone and
/// everything else stay as `cfg` says; [`Brain::load_trainable`] still checks the rest.
///
/// Before anything is allocated, the checkpoint is held to the model `cfg` names (its
/// architecture, from the model's header alone) and to its own parameter file: the rank and
/// role tokens its brain.json gives must not need more parameters than the file holds.
pub fn with_checkpoint_shape(cfg: &ModelConfig, dir: &Path) -> Result<ModelConfig> {
    let dir = resolve_checkpoint(dir);
    let meta = read_meta(&dir)?;
    let arch = model_arch(&resolve_model(&cfg.path)?)?;
    if meta.arch != arch {
        return Err(mismatch(&dir.join(META_FILE), format!("architecture: {}", arch_difference(&meta.arch, &arch))));
    }
    let file = dir.join(TRAINABLE_FILE);
    let header = read_header(&file)?;
    let lora_targets = match meta.lora_targets {
        Some(targets) => Some(targets),
        None => adapted_targets(&header).or_else(|| cfg.lora_targets.clone()),
    };
    let shaped = ModelConfig {
        lora_rank: Some(meta.lora_rank),
        lora_alpha: meta.lora_alpha,
        role_tokens: meta.role_tokens,
        separate_models: meta.separate_models,
        train_backbone: meta.train_backbone,
        lora_targets,
        ..cfg.clone()
    };
    let held: u64 = header.iter().map(|e| e.shape.iter().map(|&d| d as u64).product::<u64>()).sum();
    let needed = role_parameters(&arch, &shaped, meta.lora_rank);
    if needed > held {
        return Err(mismatch(
            &dir.join(META_FILE),
            format!(
                "rank {} and {} role tokens take {needed} parameters, but {} holds {held}",
                meta.lora_rank,
                meta.role_tokens,
                file.display()
            ),
        ));
    }
    Ok(shaped)
}

/// The projections a checkpoint's LoRA parameters adapt, read off their names
/// (`actor.lora.0.q_proj.a`), in [`LORA_TARGETS`] order; `None` when it has no LoRA
/// parameter to read.
fn adapted_targets(header: &[HeaderEntry]) -> Option<Vec<String>> {
    let adapted: Vec<String> = LORA_TARGETS
        .iter()
        .filter(|t| header.iter().any(|e| e.name.contains(".lora.") && e.name.contains(&format!(".{t}."))))
        .map(|t| t.to_string())
        .collect();
    (!adapted.is_empty()).then_some(adapted)
}

/// How many of `t`'s values are NaN or infinite. `x - x` is 0 for every finite `x` and NaN
/// otherwise, so one sum on the tensor's device answers the common case (none).
pub(crate) fn non_finite(t: &Tensor) -> Result<usize> {
    let t = t.to_dtype(DType::F32)?;
    if (&t - &t)?.sum_all()?.to_scalar::<f32>()? == 0.0 {
        return Ok(0);
    }
    Ok(t.flatten_all()?.to_vec1::<f32>()?.iter().filter(|x| !x.is_finite()).count())
}

fn mismatch(path: &Path, reason: impl Into<String>) -> Error {
    Error::CheckpointMismatch { path: path.to_path_buf(), reason: reason.into() }
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

    /// The trainable parameters holding a NaN or an infinity, by name, sorted.
    pub fn non_finite_parameters(&self) -> Result<Vec<String>> {
        let data = self.trainable().data().lock().expect("varmap lock");
        let mut names = Vec::new();
        for (name, var) in data.iter() {
            if non_finite(var.as_tensor())? > 0 {
                names.push(name.clone());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Writes every trainable parameter to `dir/trainable.safetensors` and what they
    /// belong to in `dir/brain.json`. Parameters holding a NaN or an infinity are refused,
    /// as loading them back would be: nothing is written.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let bad = self.non_finite_parameters()?;
        if !bad.is_empty() {
            return Err(Error::NonFinite { path: dir.to_path_buf(), names: bad });
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let file = dir.join(TRAINABLE_FILE);
        onebrain_durable::replace_with(&file, |tmp| {
            self.trainable()
                .save(tmp)
                .map_err(|e| Error::Safetensors { path: file.clone(), reason: e.to_string() })
        })?;
        write_json(&dir.join(META_FILE), &self.meta())
    }

    /// Restores parameters written by [`Brain::save`]; the checkpoint must match this
    /// model, rank, role-token count and mode exactly. `dir` may also be a training run's
    /// folder or its `checkpoints/` folder: the checkpoint their `LATEST` file names is used.
    pub fn load_trainable(&mut self, dir: &Path) -> Result<()> {
        let dir = &resolve_checkpoint(dir);
        let meta_path = dir.join(META_FILE);
        let meta = read_meta(dir)?;
        let mine = self.meta();
        let checks = [
            (meta.arch != mine.arch, format!("architecture: {}", arch_difference(&meta.arch, &mine.arch))),
            (meta.lora_rank != mine.lora_rank, format!("LoRA rank {} vs {}", meta.lora_rank, mine.lora_rank)),
            (meta.role_tokens != mine.role_tokens, format!("role tokens {} vs {}", meta.role_tokens, mine.role_tokens)),
            (meta.separate_models != mine.separate_models, "separate_models differs".to_string()),
            (meta.train_backbone != mine.train_backbone, "train_backbone differs".to_string()),
            (meta.lora_alpha != mine.lora_alpha, format!("lora_alpha {} vs {}", meta.lora_alpha, mine.lora_alpha)),
            (meta.parameters != mine.parameters, format!("{} parameters vs {}", meta.parameters, mine.parameters)),
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
        let mut not_finite = Vec::new();
        for (name, var) in data.iter() {
            let t = tensors.get(name).ok_or_else(|| mismatch(&file, format!("missing parameter `{name}`")))?;
            if t.dims() != var.dims() {
                return Err(mismatch(&file, format!("`{name}` has shape {:?}, expected {:?}", t.dims(), var.dims())));
            }
            if !matches!(t.dtype(), DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
                return Err(mismatch(&file, format!("`{name}` holds {:?}, not floating-point numbers", t.dtype())));
            }
            // A NaN role parameter once loaded silently, and every episode then ran on it.
            if non_finite(t)? > 0 {
                not_finite.push(name.clone());
            }
        }
        if !not_finite.is_empty() {
            not_finite.sort();
            return Err(Error::NonFinite { path: file, names: not_finite });
        }
        for (name, var) in data.iter() {
            var.set(&tensors[name].to_dtype(var.dtype())?)?;
        }
        drop(data);
        self.clear_prefix_cache();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_names_come_from_the_header_and_a_corrupt_length_is_refused() {
        let dir = std::env::temp_dir().join(format!("onebrain-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.safetensors");
        let t = Tensor::zeros((2, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
        let tensors = HashMap::from([("actor.lora.0.q_proj.a".to_string(), t.clone()), ("judge.w".to_string(), t)]);
        save_tensors(&good, &tensors).unwrap();
        let header = read_header(&good).unwrap();
        let mut names: Vec<&str> = header.iter().map(|e| e.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["actor.lora.0.q_proj.a", "judge.w"]);
        assert!(header.iter().all(|e| e.dtype == "F32" && e.shape == [2, 3]));
        assert_eq!(adapted_targets(&header), Some(vec!["q_proj".to_string()]));

        let corrupt = dir.join("corrupt.safetensors");
        std::fs::write(&corrupt, u64::MAX.to_le_bytes()).unwrap();
        let err = read_header(&corrupt).unwrap_err().to_string();
        assert!(err.contains("exceeds"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! Reading an adapter folder back, checked: safetensors headers against the file's length,
//! PEFT's LoRA and prompt-tuning configs, and whether a folder is a onebrain checkpoint or a
//! PEFT adapter.

use super::*;

/// One tensor of a safetensors header.
#[derive(Debug, Clone)]
pub(super) struct HeaderEntry {
    pub(super) dtype: String,
    pub(super) shape: Vec<usize>,
}

/// Reads and checks a safetensors file's header against the file: the header must parse,
/// every tensor's byte range must match its shape and dtype, and the data they address
/// must all be there. A download or copy cut short fails here with the byte counts, not
/// later inside a memory map.
pub(super) fn checked_header(path: &Path) -> Result<BTreeMap<String, HeaderEntry>> {
    let bad = |reason: String| Error::Safetensors { path: path.into(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size < 8 {
        return Err(bad(format!("truncated: {size} bytes, not even the 8-byte header length")));
    }
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| Error::io(path, e))?;
    let len = u64::from_le_bytes(len);
    // The format caps its header at 100 MB; a larger length is a corrupt file.
    if len > 100_000_000 {
        return Err(bad(format!("header length {len} exceeds the format's 100 MB: not a safetensors file")));
    }
    if 8 + len > size {
        return Err(bad(format!("truncated: the header alone needs {} bytes, the file has {size}", 8 + len)));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(&header).map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let data_len = size - 8 - len;
    let mut needed = 0u64;
    let mut out = BTreeMap::new();
    for (name, v) in header {
        if name == "__metadata__" {
            continue;
        }
        let dtype = v["dtype"].as_str().unwrap_or_default().to_string();
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .map(|a| a.iter().filter_map(|d| d.as_u64().map(|d| d as usize)).collect())
            .unwrap_or_default();
        let offsets: Vec<u64> =
            v["data_offsets"].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
        let [begin, end] = offsets[..] else {
            return Err(bad(format!("tensor `{name}` has no data_offsets")));
        };
        let width = match dtype.as_str() {
            "F32" => 4,
            "F16" | "BF16" => 2,
            other => return Err(bad(format!("tensor `{name}` has dtype {other}; an adapter holds F32, F16 or BF16"))),
        };
        let bytes = shape.iter().product::<usize>() as u64 * width;
        if end < begin || end - begin != bytes {
            return Err(bad(format!("tensor `{name}` {dtype} {shape:?} needs {bytes} bytes, its offsets span {}", end.saturating_sub(begin))));
        }
        needed = needed.max(end);
        out.insert(name, HeaderEntry { dtype, shape });
    }
    if needed > data_len {
        return Err(bad(format!(
            "truncated: the header addresses {needed} bytes of tensor data, the file holds {data_len} \
             (an interrupted download or copy?)"
        )));
    }
    Ok(out)
}

/// The tensors of a checked safetensors file, as f32 on `dev`.
pub(super) fn load_checked(path: &Path, dev: &Device) -> Result<HashMap<String, Tensor>> {
    checked_header(path)?;
    let tensors = candle_core::safetensors::load(path, dev)
        .map_err(|e| Error::Safetensors { path: path.into(), reason: e.to_string() })?;
    tensors.into_iter().map(|(k, t)| Ok((k, t.to_dtype(DType::F32)?))).collect()
}

// ------------------------------------------------------------------ PEFT configs

/// What onebrain needs of a PEFT LoRA `adapter_config.json`, checked.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LoraConfig {
    pub(super) r: usize,
    /// The alpha that gives onebrain's scale `alpha / r` the adapter's scale (rsLoRA's
    /// `lora_alpha / √r` becomes `lora_alpha · √r`).
    pub(super) alpha: f32,
    /// Adapted projections, in [`LORA_TARGETS`] order.
    pub(super) targets: Vec<String>,
}

/// Reads and checks a PEFT LoRA config. PEFT fills the fields a file leaves out with
/// defaults; onebrain reads what changes the forward and refuses what it cannot apply.
pub(super) fn read_lora_config(path: &Path) -> Result<LoraConfig> {
    let v = read_json(path)?;
    let bad = |reason: String| mismatch(path, reason);
    let peft_type = v["peft_type"].as_str().unwrap_or("");
    if !peft_type.eq_ignore_ascii_case("LORA") {
        return Err(bad(format!("peft_type is `{peft_type}`; onebrain loads LORA adapters")));
    }
    let r = v["r"].as_u64().filter(|&r| r > 0).ok_or_else(|| bad("`r` is missing or not a positive integer".into()))? as usize;
    let lora_alpha = v["lora_alpha"].as_f64().unwrap_or(8.0) as f32;
    let alpha = if v["use_rslora"].as_bool() == Some(true) { lora_alpha * (r as f32).sqrt() } else { lora_alpha };
    let named: Vec<String> = match &v["target_modules"] {
        // PEFT's default for Llama and Qwen2 (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
        Value::Null => vec!["q_proj".into(), "v_proj".into()],
        Value::String(s) if s == "all-linear" => LORA_TARGETS.iter().map(|t| t.to_string()).collect(),
        Value::String(s) => {
            return Err(bad(format!(
                "target_modules is the pattern `{s}`; onebrain needs the list of modules (some of {})",
                LORA_TARGETS.join(", ")
            )))
        }
        Value::Array(a) => a.iter().map(|m| m.as_str().unwrap_or("").to_string()).collect(),
        other => return Err(bad(format!("target_modules is {other}, expected a list of module names"))),
    };
    // PEFT matches a list entry against a module name's last part, or its whole dotted name.
    let leaf = |m: &str| m.rsplit('.').next().unwrap_or(m).to_string();
    if let Some(unknown) = named.iter().find(|m| !LORA_TARGETS.contains(&leaf(m).as_str())) {
        return Err(bad(format!(
            "unknown target module `{unknown}`: onebrain adapts only {}",
            LORA_TARGETS.join(", ")
        )));
    }
    let targets = LORA_TARGETS.iter().filter(|t| named.iter().any(|m| leaf(m) == **t)).map(|t| t.to_string()).collect();
    let unsupported = [
        (v["fan_in_fan_out"].as_bool() == Some(true), "fan_in_fan_out = true (GPT-2's Conv1D layout)"),
        (v["use_dora"].as_bool() == Some(true), "use_dora = true (DoRA's magnitude vectors)"),
        (v["lora_bias"].as_bool() == Some(true), "lora_bias = true"),
        (v["bias"].as_str().is_some_and(|b| b != "none"), "bias other than \"none\""),
        (v["modules_to_save"].as_array().is_some_and(|a| !a.is_empty()), "modules_to_save (full copies of other modules)"),
        (v["rank_pattern"].as_object().is_some_and(|o| !o.is_empty()), "rank_pattern (per-module ranks)"),
        (v["alpha_pattern"].as_object().is_some_and(|o| !o.is_empty()), "alpha_pattern (per-module alphas)"),
        (!v["layers_to_transform"].is_null(), "layers_to_transform (a subset of layers)"),
    ];
    if let Some((_, what)) = unsupported.iter().find(|(on, _)| *on) {
        return Err(bad(format!("the adapter uses {what}, which onebrain's LoRA cannot express")));
    }
    Ok(LoraConfig { r, alpha, targets })
}

/// The role tokens of a PEFT export's `role_tokens/` prompt-tuning adapter, checked
/// against `hidden`; `None` when the folder has none (an adapter trained elsewhere).
pub(super) fn read_role_tokens(dir: &Path, hidden: usize, dev: &Device) -> Result<Option<Tensor>> {
    let folder = dir.join(ROLE_TOKENS_DIR);
    let cfg_path = folder.join(PEFT_CONFIG_FILE);
    if !cfg_path.is_file() {
        return Ok(None);
    }
    let v = read_json(&cfg_path)?;
    let peft_type = v["peft_type"].as_str().unwrap_or("");
    if peft_type != "PROMPT_TUNING" {
        return Err(mismatch(&cfg_path, format!("peft_type is `{peft_type}`, expected PROMPT_TUNING")));
    }
    let n = v["num_virtual_tokens"].as_u64().unwrap_or(0) as usize;
    let dim = v["token_dim"].as_u64().unwrap_or(0) as usize;
    if dim != hidden {
        return Err(mismatch(&cfg_path, format!("token_dim {dim}, but this model's hidden size is {hidden}: prompt tokens of another base model")));
    }
    let file = folder.join(PEFT_WEIGHTS_FILE);
    let t = load_checked(&file, dev)?
        .remove("prompt_embeddings")
        .ok_or_else(|| mismatch(&file, "no `prompt_embeddings` tensor"))?;
    if t.dims() != [n, hidden] {
        return Err(mismatch(&file, format!("prompt_embeddings is {:?}, adapter_config.json says ({n}, {hidden})", t.dims())));
    }
    Ok(Some(t))
}

/// Whether `dir` is a PEFT adapter folder (and not a onebrain checkpoint).
pub fn is_peft_adapter(dir: &Path) -> bool {
    dir.join(PEFT_CONFIG_FILE).is_file()
}

/// The role a PEFT folder is loaded into by [`Brain::load_checkpoint_or_peft`]: the one its
/// `onebrain.json` names (a onebrain export), else the Actor (an adapter trained elsewhere
/// is a policy: it writes the answers).
pub fn peft_adapter_role(dir: &Path) -> Role {
    std::fs::read_to_string(dir.join(ORIGIN_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<Origin>(&t).ok())
        .map_or(Role::Actor, |o| o.role)
}

/// The base model file a checkpoint (its `brain.json`) or a onebrain export (its
/// `onebrain.json`) was made with; `None` for a PEFT folder from elsewhere.
pub fn checkpoint_model_file(dir: &Path) -> Option<PathBuf> {
    let meta = match is_peft_adapter(dir) {
        true => dir.join(ORIGIN_FILE),
        false => resolve_checkpoint(dir).join("brain.json"),
    };
    let v: Value = serde_json::from_str(&std::fs::read_to_string(meta).ok()?).ok()?;
    v["model"].as_str().map(PathBuf::from)
}

/// [`with_checkpoint_shape`] that also takes a PEFT LoRA folder: `cfg` with the adapter's
/// rank, alpha and targets, and its role-token count (0 when it has no `role_tokens/`,
/// as an adapter trained by TRL), shared backbone, frozen.
pub fn with_checkpoint_or_peft_shape(cfg: &ModelConfig, dir: &Path) -> Result<ModelConfig> {
    if !is_peft_adapter(dir) {
        return with_checkpoint_shape(cfg, dir);
    }
    let lora = read_lora_config(&dir.join(PEFT_CONFIG_FILE))?;
    let tokens_cfg = dir.join(ROLE_TOKENS_DIR).join(PEFT_CONFIG_FILE);
    let role_tokens = match tokens_cfg.is_file() {
        true => read_json(&tokens_cfg)?["num_virtual_tokens"].as_u64().unwrap_or(0) as usize,
        false => 0,
    };
    Ok(ModelConfig {
        lora_rank: Some(lora.r),
        lora_alpha: lora.alpha,
        lora_targets: Some(lora.targets),
        role_tokens,
        separate_models: false,
        train_backbone: false,
        ..cfg.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_file(dir: &Path, v: Value) -> PathBuf {
        let p = dir.join("adapter_config.json");
        std::fs::write(&p, v.to_string()).unwrap();
        p
    }

    #[test]
    fn lora_configs_are_read_as_peft_means_them() {
        let dir = tempfile_dir("cfg");
        let p = config_file(&dir, serde_json::json!({"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": ["v_proj", "q_proj"]}));
        assert_eq!(read_lora_config(&p).unwrap(), LoraConfig { r: 16, alpha: 32.0, targets: vec!["q_proj".into(), "v_proj".into()] });
        // rsLoRA's scale alpha/√r is onebrain's alpha'/r with alpha' = alpha·√r.
        let p = config_file(&dir, serde_json::json!({"peft_type": "LORA", "r": 16, "lora_alpha": 8, "use_rslora": true, "target_modules": "all-linear"}));
        let c = read_lora_config(&p).unwrap();
        assert_eq!((c.alpha, c.targets.len()), (32.0, 7));
        let p = config_file(&dir, serde_json::json!({"peft_type": "LORA", "r": 8, "target_modules": ["c_attn"]}));
        let e = read_lora_config(&p).unwrap_err().to_string();
        assert!(e.contains("unknown target module `c_attn`") && e.contains("adapter_config.json"), "{e}");
        let p = config_file(&dir, serde_json::json!({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "use_dora": true}));
        assert!(read_lora_config(&p).unwrap_err().to_string().contains("use_dora"));
        let p = config_file(&dir, serde_json::json!({"peft_type": "IA3"}));
        assert!(read_lora_config(&p).unwrap_err().to_string().contains("IA3"));
        std::fs::remove_dir_all(&dir).ok();
    }

    fn tempfile_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("onebrain-export-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_truncated_safetensors_file_is_named_with_its_byte_counts() {
        let dir = tempfile_dir("trunc");
        let good = dir.join("adapter_model.safetensors");
        let t = Tensor::ones((4, 8), DType::F32, &Device::Cpu).unwrap();
        save_tensors(&good, &HashMap::from([("x".to_string(), t)])).unwrap();
        assert_eq!(checked_header(&good).unwrap()["x"].shape, vec![4, 8]);
        let bytes = std::fs::read(&good).unwrap();
        std::fs::write(&good, &bytes[..bytes.len() - 10]).unwrap();
        let e = checked_header(&good).unwrap_err().to_string();
        assert!(e.contains("truncated") && e.contains("adapter_model.safetensors") && e.contains("118"), "{e}");
        std::fs::write(&good, &bytes[..20]).unwrap();
        let e = checked_header(&good).unwrap_err().to_string();
        assert!(e.contains("truncated: the header alone"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

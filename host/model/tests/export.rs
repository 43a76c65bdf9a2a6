//! A role exported for transformers + PEFT and for llama.cpp, and PEFT adapters
//! loaded back. Round trips on SmolLM2-135M with onebrain's own code (the real consumers are
//! checked by `scripts/verify-export.sh`, results in `results/export/`); every bad input is
//! an error that names the file and what is wrong. Skips with a message when
//! `scripts/setup.sh --models test` has not been run.

use std::{collections::HashMap, path::Path};

use candle_core::{quantized::gguf_file, Device};
use rand::{rngs::StdRng, SeedableRng};

mod common;
use common::seeded_normal;

use onebrain_model::{
    is_peft_adapter, resolve_model, with_checkpoint_or_peft_shape, Brain, ExportFormat, ModelConfig, Role,
    SamplingConfig, Tensor, TEST_MODEL_FILE,
};

const PROMPT: &str = "<|im_start|>system\nYou write PDDL.<|im_end|>\n<|im_start|>user\nStack a on b.<|im_end|>\n<|im_start|>assistant\n```pddl\n(define (problem ";

/// SmolLM2 with rank-4 adapters on all seven projections and 4 role tokens, every
/// parameter moved off its initial value (seeded), as after training.
fn trained() -> Option<Brain> {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    let brain = Brain::load(&base_config()).expect("load SmolLM2");
    let mut rng = StdRng::seed_from_u64(49);
    let data = brain.trainable().data().lock().unwrap();
    let mut names: Vec<_> = data.keys().cloned().collect();
    names.sort();
    for name in names {
        let var = &data[&name];
        let std = if name.contains("role_tokens") { 0.1 } else { 0.02 };
        let noise = seeded_normal(&mut rng, std, var.dims());
        var.set(&(var.as_tensor() + noise).unwrap()).unwrap();
    }
    drop(data);
    Some(brain)
}

fn base_config() -> ModelConfig {
    ModelConfig { path: TEST_MODEL_FILE.into(), lora_rank: Some(4), role_tokens: 4, ..Default::default() }
}

/// A brain in the shape of the PEFT folder (or checkpoint) `dir`, with it loaded.
fn load_adapter(dir: &Path, role: Option<Role>) -> onebrain_model::Result<Brain> {
    let cfg = with_checkpoint_or_peft_shape(&ModelConfig { path: TEST_MODEL_FILE.into(), ..Default::default() }, dir)?;
    let mut brain = Brain::load(&cfg)?;
    brain.load_checkpoint_or_peft(dir, role)?;
    Ok(brain)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn logits(brain: &mut Brain, role: Role) -> Vec<f32> {
    let ids = brain.encode(PROMPT).unwrap();
    brain.next_token_logits(role, &[ids]).unwrap().remove(0)
}

#[test]
fn export_then_import_reproduces_the_logits() {
    let Some(mut brain) = trained() else { return };
    let dir = tempfile::tempdir().unwrap();
    let actor = dir.path().join("actor");
    let files = brain.export(Role::Actor, ExportFormat::Peft, &actor).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.strip_prefix(&actor).unwrap().display().to_string()).collect();
    assert_eq!(
        names,
        [
            "adapter_config.json",
            "adapter_model.safetensors",
            "role_tokens/adapter_config.json",
            "role_tokens/adapter_model.safetensors",
            "onebrain.json",
            "README.md"
        ]
    );
    assert!(is_peft_adapter(&actor));
    let want = logits(&mut brain, Role::Actor);
    let want_answer = brain.generate(Role::Actor, PROMPT, &SamplingConfig::greedy(12)).unwrap();

    // A brain of another init seed takes the exported shape and values: the same logits,
    // bit for bit (the q/k permutation is exact), and the same answer.
    let mut back = load_adapter(&actor, None).unwrap();
    assert_eq!((back.lora_rank(), back.config().role_tokens), (4, 4));
    let got = logits(&mut back, Role::Actor);
    assert_eq!(max_abs_diff(&want, &got), 0.0);
    let answer = back.generate(Role::Actor, PROMPT, &SamplingConfig::greedy(12)).unwrap();
    assert_eq!(answer.tokens, want_answer.tokens);

    // The adapters changed the answer's distribution: the match is not the base model's.
    let mut plain = Brain::load(&ModelConfig { init_seed: 3, ..base_config() }).unwrap();
    assert!(max_abs_diff(&want, &logits(&mut plain, Role::Actor)) > 0.5);

    // The Judge: its head travels in judge_head.safetensors, the score comes back.
    let judge = dir.path().join("judge");
    brain.export(Role::Judge, ExportFormat::Peft, &judge).unwrap();
    assert!(judge.join("judge_head.safetensors").is_file());
    let mut back = load_adapter(&judge, None).unwrap();
    let (a, b) = (brain.judge(PROMPT).unwrap(), back.judge(PROMPT).unwrap());
    assert_eq!(a, b);
}

/// An adapter trained elsewhere (TRL) has no role tokens and no onebrain.json: it loads as
/// the Actor, with no role tokens, and any `--role` can be asked for.
#[test]
fn a_peft_adapter_from_elsewhere_loads_as_the_actor() {
    let Some(brain) = trained() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trl = dir.path().join("trl");
    brain.export(Role::Editor, ExportFormat::Peft, &trl).unwrap();
    std::fs::remove_dir_all(trl.join("role_tokens")).unwrap();
    std::fs::remove_file(trl.join("onebrain.json")).unwrap();
    let mut back = load_adapter(&trl, None).unwrap();
    assert_eq!(back.config().role_tokens, 0);
    let editor_adapters = logits(&mut back, Role::Actor);
    let mut base = load_adapter(&trl, Some(Role::Judge)).unwrap();
    assert!(max_abs_diff(&editor_adapters, &logits(&mut base, Role::Actor)) > 0.1, "the Actor of the second is the base model");
}

#[test]
fn gguf_export_is_a_llama_cpp_lora_adapter() {
    let Some(brain) = trained() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (gguf, peft) = (dir.path().join("gguf"), dir.path().join("peft"));
    brain.export(Role::Actor, ExportFormat::Gguf, &gguf).unwrap();
    brain.export(Role::Actor, ExportFormat::Peft, &peft).unwrap();
    let mut f = std::fs::File::open(gguf.join("adapter.gguf")).unwrap();
    let content = gguf_file::Content::read(&mut f).unwrap();
    let meta = |k: &str| content.metadata[k].clone();
    assert_eq!(meta("general.type").to_string().unwrap(), "adapter");
    assert_eq!(meta("adapter.type").to_string().unwrap(), "lora");
    assert_eq!(meta("general.architecture").to_string().unwrap(), "llama");
    assert_eq!(meta("adapter.lora.alpha").to_f32().unwrap(), 16.0);
    assert_eq!(content.tensor_infos.len(), 30 * 7 * 2);
    // candle lists dims row-major: ggml's ne = [in, r] for A and [r, out] for B.
    let dims = |n: &str| content.tensor_infos[n].shape.dims().to_vec();
    assert_eq!(dims("blk.0.attn_q.weight.lora_a"), [4, 576]);
    assert_eq!(dims("blk.0.attn_k.weight.lora_b"), [192, 4]);
    assert_eq!(dims("blk.29.ffn_down.weight.lora_a"), [4, 1536]);
    assert_eq!(dims("blk.29.attn_output.weight.lora_b"), [576, 4]);
    let mut read = |n: &str| content.tensor(&mut f, n, &Device::Cpu).unwrap().dequantize(&Device::Cpu).unwrap();
    let peft_w = candle_core::safetensors::load(peft.join("adapter_model.safetensors"), &Device::Cpu).unwrap();
    let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    // v's rows are the same in both; q's are the GGUF Llama permutation of PEFT's.
    let (gv, pv) = (read("blk.3.attn_v.weight.lora_b"), &peft_w["base_model.model.model.layers.3.self_attn.v_proj.lora_B.weight"]);
    assert_eq!(flat(&gv), flat(pv));
    let (gq, pq) = (read("blk.3.attn_q.weight.lora_b"), &peft_w["base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight"]);
    assert_ne!(flat(&gq), flat(pq));
    let (heads, hd) = (9, 64);
    let permuted = pq.reshape((heads, 2, hd / 2, 4)).unwrap().transpose(1, 2).unwrap().reshape((576, 4)).unwrap();
    assert_eq!(flat(&gq), flat(&permuted));
    let tokens = candle_core::safetensors::load(gguf.join("role_tokens.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(tokens["role_tokens"].dims(), [4, 576]);
}

// ------------------------------------------------------------------ bad input

/// A good export of the trained Actor, to spoil.
fn good_export() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let brain = trained()?;
    let dir = tempfile::tempdir().unwrap();
    let peft = dir.path().join("peft");
    brain.export(Role::Actor, ExportFormat::Peft, &peft).unwrap();
    Some((dir, peft))
}

fn rewrite_weights(peft: &Path, edit: impl FnOnce(&mut HashMap<String, Tensor>)) {
    let file = peft.join("adapter_model.safetensors");
    let mut w = candle_core::safetensors::load(&file, &Device::Cpu).unwrap();
    edit(&mut w);
    candle_core::safetensors::save(&w, &file).unwrap();
}

fn rewrite_config(peft: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let file = peft.join("adapter_config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&file, v.to_string()).unwrap();
}

fn load_error(peft: &Path) -> String {
    format!("{:#}", load_adapter(peft, None).err().expect("a bad adapter must not load"))
}

#[test]
fn an_adapter_for_another_hidden_size_is_refused() {
    let Some((_dir, peft)) = good_export() else { return };
    // Qwen2.5-0.5B's width: 896 inputs where SmolLM2 has 576.
    rewrite_weights(&peft, |w| {
        let mut rng = StdRng::seed_from_u64(1);
        w.insert("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".into(), seeded_normal(&mut rng, 0.01, &[4, 896]));
    });
    let e = load_error(&peft);
    assert!(e.contains("adapter_model.safetensors") && e.contains("another base model") && e.contains("896 inputs"), "{e}");
}

#[test]
fn an_adapter_for_another_layer_count_is_refused() {
    let Some((_dir, peft)) = good_export() else { return };
    // Qwen2.5-0.5B has 24 layers; SmolLM2 has 30.
    rewrite_weights(&peft, |w| w.retain(|k, _| !(24..30).any(|i| k.contains(&format!(".layers.{i}.")))));
    let e = load_error(&peft);
    assert!(e.contains("adapter_model.safetensors") && e.contains("covers 24 layers, this model has 30"), "{e}");
}

#[test]
fn unknown_target_modules_are_refused() {
    let Some((_dir, peft)) = good_export() else { return };
    rewrite_config(&peft, |v| v["target_modules"] = serde_json::json!(["q_proj", "c_attn"]));
    let e = load_error(&peft);
    assert!(e.contains("adapter_config.json") && e.contains("unknown target module `c_attn`"), "{e}");

    // A config that names only known modules, and a file with a tensor of another one.
    rewrite_config(&peft, |v| v["target_modules"] = serde_json::json!(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]));
    rewrite_weights(&peft, |w| {
        w.insert("base_model.model.lm_head.lora_A.weight".into(), Tensor::zeros((4, 576), candle_core::DType::F32, &Device::Cpu).unwrap());
    });
    let e = load_error(&peft);
    assert!(e.contains("adapter_model.safetensors") && e.contains("unexpected tensor `base_model.model.lm_head.lora_A.weight`"), "{e}");
}

#[test]
fn a_rank_mismatch_is_refused() {
    let Some((_dir, peft)) = good_export() else { return };
    // The file's rank (4) against the config's r.
    rewrite_config(&peft, |v| v["r"] = serde_json::json!(8));
    let e = load_error(&peft);
    assert!(e.contains("adapter_model.safetensors") && e.contains("rank 4") && e.contains("r = 8") && e.contains("rank mismatch"), "{e}");

    // The config's r against a model loaded with another rank.
    rewrite_config(&peft, |v| v["r"] = serde_json::json!(4));
    let mut other = Brain::load(&ModelConfig { lora_rank: Some(8), ..base_config() }).unwrap();
    let e = format!("{:#}", other.import_peft(Role::Actor, &peft).unwrap_err());
    assert!(e.contains("adapter_config.json") && e.contains("rank r = 4, this model's roles have rank 8"), "{e}");
}

#[test]
fn a_truncated_safetensors_file_is_refused() {
    let Some((_dir, peft)) = good_export() else { return };
    let file = peft.join("adapter_model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_error(&peft);
    assert!(e.contains("adapter_model.safetensors") && e.contains("truncated"), "{e}");
}

//! Hostile model files and checkpoints through the commands: refused with one
//! clear message, never a crash; `--checkpoint` takes the checkpoint's shape in every command.

use std::path::{Path, PathBuf};

use onebrain_model::{Brain, ModelConfig, TEST_MODEL_FILE};

use crate::harness::{build_plugins, fixture, model_ready, repo, TestCommand};

fn smollm() -> Option<PathBuf> {
    let path = repo().join(".cache/models").join(TEST_MODEL_FILE);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipping: {} is absent (scripts/setup.sh --models test)", path.display());
        None
    }
}

/// The test model with its first tensor's row count (`token_embd.weight`, the vocabulary)
/// set to 2⁶⁰, the rest of the file left sparse: the host panicked on it in the tile builders.
fn huge_dimension_gguf(src: &Path, dst: &Path) {
    use std::io::Read;
    let mut head = vec![0u8; 4 << 20];
    std::fs::File::open(src).unwrap().read_exact(&mut head).unwrap();
    let name = b"token_embd.weight";
    let at = head.windows(name.len()).position(|w| w == name).expect("the first tensor's name");
    // Then: dimension count (u32), the row width, the row count (u64 each).
    let rows = at + name.len() + 4 + 8;
    head[rows..rows + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(dst, &head).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(dst).unwrap();
    f.set_len(std::fs::metadata(src).unwrap().len()).unwrap();
}

#[test]
fn generate_refuses_a_gguf_with_a_huge_dimension_saying_why_once() {
    let Some(src) = smollm() else { return };
    let dir = tempfile::tempdir().unwrap();
    let crafted = dir.path().join("crafted.gguf");
    huge_dimension_gguf(&src, &crafted);
    let err = TestCommand::new(&["generate", "--model"]).arg(&crafted).args(&["--prompt", "hi"]).fails_with(1);
    assert!(err.contains("tensor `token_embd.weight`"), "{err}");
    assert_eq!(err.matches("hold more elements than a 64-bit count").count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A checkpoint of the test model in a shape no config names: rank 5, 2 role tokens, q and v.
fn rank5_checkpoint(dir: &Path) {
    let cfg = ModelConfig {
        path: TEST_MODEL_FILE.into(),
        lora_rank: Some(5),
        role_tokens: 2,
        lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]),
        ..Default::default()
    };
    Brain::load(&cfg).unwrap().save(dir).unwrap();
}

/// The same checkpoint with a NaN in the actor's role tokens.
fn nan_checkpoint(good: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for f in ["brain.json", "trainable.safetensors"] {
        std::fs::copy(good.join(f), dir.join(f)).unwrap();
    }
    // NaN bits over the tensor's bytes, found through the file's JSON header.
    let file = dir.join("trainable.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let range = &header["actor.role_tokens"]["data_offsets"];
    let (start, end) = (range[0].as_u64().unwrap() as usize, range[1].as_u64().unwrap() as usize);
    for value in bytes[8 + len + start..8 + len + end].chunks_mut(4) {
        value.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&file, bytes).unwrap();
}

/// `generate --checkpoint` refused the project's own checkpoints ("LoRA rank 8 vs 19"); it
/// now takes the adapter shape from brain.json as `solve` does, and a NaN checkpoint is
/// refused by `generate`, `solve` and `eval` alike, naming the tensor.
#[test]
fn every_command_takes_the_checkpoint_shape_and_refuses_a_nan_checkpoint() {
    let Some(model) = smollm() else { return };
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("rank5");
    rank5_checkpoint(&good);
    let nan = dir.path().join("nan");
    nan_checkpoint(&good, &nan);

    let generate = |ckpt: &Path| {
        TestCommand::new(&["generate", "--max-tokens", "4", "--model"]).arg(&model).arg("--checkpoint").arg(ckpt).args(&["--prompt", "hi"])
    };
    let (_, stderr) = generate(&good).output_text();
    assert!(stderr.contains("new tokens"), "{stderr}");
    let err = generate(&nan).fails_with(1);
    assert!(err.contains("`actor.role_tokens`") && err.contains("not finite"), "{err}");

    if let Some(why) = model_ready() {
        eprintln!("skipping solve and eval: {why}");
        return;
    }
    build_plugins();
    let solve = |ckpt: &Path| {
        TestCommand::new(&["solve", "--config"])
            .arg(fixture("configs/solve-smollm.toml"))
            .args(&["--domain", "blocksworld", "--seed", "3", "--size", "3", "--strategy", "direct", "--checkpoint"])
            .arg(ckpt)
    };
    let rec = solve(&good).json();
    assert!(rec["steps"].as_array().is_some_and(|s| !s.is_empty()), "{rec}");
    let err = solve(&nan).fails_with(1);
    assert!(err.contains("`actor.role_tokens`") && err.contains("not finite"), "{err}");

    let cfg = eval_config(dir.path());
    let err = TestCommand::new(&["eval", "--config"]).arg(&cfg).arg("--checkpoint").arg(&nan).fails_with(1);
    assert!(err.contains("`actor.role_tokens`") && err.contains("not finite"), "{err}");
}

/// An eval of one generated BlocksWorld task with SmolLM2.
fn eval_config(dir: &Path) -> PathBuf {
    let plugins = repo().join("plugins");
    let cache = repo().join(".cache/components");
    let text = format!(
        r#"name = "r51"
out-dir = "run"
strategies = ["direct"]
checker = "native"

[[benchmarks]]
domain = "blocksworld"
source = "generated"
first-seed = 7
size = 3
sample = 1

[model]
path = "SmolLM2-135M-Instruct.Q4_1.gguf"

[episode]
mode = "problem"
budget = 1
max-tokens = 16

[plugins]
plugin-dirs = [{plugins:?}]
cache-dir = {cache:?}
reward = "paper-rewards"
domains = ["blocksworld"]
"#
    );
    let path = dir.join("eval.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The committed 0.5B checkpoints through `generate --checkpoint` under the default config
/// (rank 19 there): they load in their own shape. Skips without the 0.5B model (CI).
#[test]
fn generate_loads_the_committed_checkpoints() {
    let model = repo().join(".cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !model.is_file() {
        eprintln!("skipping: {} is absent (scripts/setup.sh --models all)", model.display());
        return;
    }
    let ckpt = repo().join("results/train-cpu-full/checkpoints/update-000030");
    let (_, stderr) = TestCommand::new(&["generate", "--max-tokens", "2", "--model"])
        .arg(&model)
        .arg("--checkpoint")
        .arg(&ckpt)
        .args(&["--prompt", "hi"])
        .output_text();
    assert!(stderr.contains("new tokens"), "{stderr}");
}

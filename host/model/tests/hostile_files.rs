//! Hostile model files and checkpoints are refused with a clear error, never a crash.
//! Each GGUF case is crafted from the real SmolLM2 file in a temporary folder
//! (its header changed, the rest of the file left sparse), each checkpoint case from one
//! saved by the same model. The tests skip with a message when the model is absent.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use onebrain_model::{check_gguf, with_checkpoint_shape, Brain, Error, ModelConfig, Role, SamplingConfig, TEST_MODEL_FILE};

mod gguf_layout;
use gguf_layout::{add_entry, layout, put, replace_value, smollm_file, Value};

/// The first `n` bytes of `path`, and its length.
fn head(path: &Path, n: usize) -> (Vec<u8>, u64) {
    let mut f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let mut buf = vec![0u8; n.min(len as usize)];
    f.read_exact(&mut buf).unwrap();
    (buf, len)
}

/// The test model's header: its bytes up to the end of the tensor table, and the file's length.
fn smollm_header() -> Option<(Vec<u8>, u64, PathBuf)> {
    let path = smollm_file()?;
    let (bytes, len) = head(&path, 4 << 20);
    let end = layout(&bytes).end;
    Some((bytes[..end].to_vec(), len, path))
}

/// Writes `header` then the source file's bytes from `from` on (the tensor data), as a new
/// file at `dst` of length `len` (sparse where the source's data is not copied).
fn write_crafted(dst: &Path, header: &[u8], src: &Path, from: u64, copy_data: bool, len: u64) {
    let mut out = std::fs::File::create(dst).unwrap();
    out.write_all(header).unwrap();
    if copy_data {
        let mut f = std::fs::File::open(src).unwrap();
        f.seek(SeekFrom::Start(from)).unwrap();
        std::io::copy(&mut f, &mut out).unwrap();
    }
    out.set_len(len).unwrap();
}

/// One crafted GGUF: what was changed and the words its refusal must contain.
struct Case {
    what: &'static str,
    header: Vec<u8>,
    /// The crafted file's length (the real one's, unless the case cuts it).
    len: u64,
    expect: &'static [&'static str],
}

fn crafted_cases(header: &[u8], len: u64) -> Vec<Case> {
    let l = layout(header);
    let tensor = |name: &str| l.tensors.iter().find(|t| t.name == name).unwrap().clone();
    let entry = |key: &str| l.entries.iter().find(|e| e.key == key).unwrap().clone();
    let patched = |at: usize, width: usize, value: u64| {
        let mut h = header.to_vec();
        put(&mut h, at, width, value);
        h
    };
    let embd = tensor("token_embd.weight");
    let norm = tensor("blk.0.attn_norm.weight");
    vec![
        Case {
            what: "the first tensor claims 2⁶⁰ rows",
            header: patched(embd.dims_at[1], 8, 1 << 60),
            len,
            expect: &["tensor `token_embd.weight`", "64-bit"],
        },
        Case {
            what: "a tensor's offset past the end of the file",
            header: patched(norm.offset_at, 8, len),
            len,
            expect: &["tensor `blk.0.attn_norm.weight`", "past the end of the file"],
        },
        Case {
            what: "a tensor's offset off the alignment",
            header: patched(norm.offset_at, 8, norm_offset(header, &norm) + 1),
            len,
            expect: &["tensor `blk.0.attn_norm.weight`", "alignment"],
        },
        Case {
            what: "a block type candle cannot read (Q8_1)",
            header: patched(embd.type_at, 4, 9),
            len,
            expect: &["tensor `token_embd.weight`", "block type 9"],
        },
        Case {
            what: "five dimensions",
            header: patched(embd.dims_at[0] - 4, 4, 5),
            len,
            expect: &["tensor `token_embd.weight`", "5 dimensions"],
        },
        Case {
            what: "a tensor count of 2⁶²",
            header: patched(8, 8, 1 << 62),
            len,
            expect: &["the header", "tensors"],
        },
        Case {
            what: "general.alignment 0",
            header: add_entry(header, &l, "general.alignment", &Value::U32(0)),
            len,
            expect: &["metadata `general.alignment`", "power of two"],
        },
        Case {
            what: "a hidden size the tensors do not have",
            header: replace_value(header, &entry("llama.embedding_length"), &Value::U32(577)),
            len,
            expect: &["tensor `token_embd.weight`", "expected [49152, 577]"],
        },
        Case {
            what: "one layer more than the tensors make",
            header: replace_value(header, &entry("llama.block_count"), &Value::U32(31)),
            len,
            expect: &["metadata `llama.block_count`", "31 layers"],
        },
        Case {
            what: "a tensor the model needs renamed",
            header: renamed(header, &tensor("blk.5.ffn_up.weight"), "blk.5.ffn_uq.weight"),
            len,
            expect: &["tensor `blk.5.ffn_up.weight`", "missing"],
        },
        Case {
            what: "twelve heads for nine heads' matrices",
            header: replace_value(header, &entry("llama.attention.head_count"), &Value::U32(12)),
            len,
            expect: &["tensor `blk.0.attn_q.weight`", "expected [768, 576]"],
        },
        Case {
            what: "a layer count of 2³⁰",
            header: replace_value(header, &entry("llama.block_count"), &Value::U32(1 << 30)),
            len,
            expect: &["metadata `llama.block_count`", "1073741824 layers"],
        },
        Case {
            what: "a RoPE base of NaN",
            header: replace_value(header, &entry("llama.rope.freq_base"), &Value::F32(f32::NAN)),
            len,
            expect: &["RoPE base frequency"],
        },
        Case {
            what: "a negative feed-forward width",
            header: replace_value(header, &entry("llama.feed_forward_length"), &Value::I32(-1536)),
            len,
            expect: &["metadata `llama.feed_forward_length`", "not a count"],
        },
        Case {
            what: "the vocabulary as an array of arrays",
            header: replace_value(header, &entry("tokenizer.ggml.tokens"), &Value::Array(Box::new(Value::Array(Box::new(Value::U32(1)), 1)), 2)),
            len,
            expect: &["metadata `tokenizer.ggml.tokens`", "array of arrays"],
        },
        Case {
            what: "the file cut after its header",
            header: header.to_vec(),
            len: header.len() as u64 + 64,
            expect: &["tensor `token_embd.weight`", "past the end of the file"],
        },
    ]
}

/// `header` with tensor `t` named `name` (of the same length).
fn renamed(header: &[u8], t: &gguf_layout::TensorAt, name: &str) -> Vec<u8> {
    assert_eq!(name.len(), t.name.len());
    let mut h = header.to_vec();
    let at = t.dims_at[0] - 4 - name.len();
    h[at..at + name.len()].copy_from_slice(name.as_bytes());
    h
}

/// Where a tensor's data starts relative to the data section, read back from the header.
fn norm_offset(header: &[u8], t: &gguf_layout::TensorAt) -> u64 {
    u64::from_le_bytes(header[t.offset_at..t.offset_at + 8].try_into().unwrap())
}

/// Every crafted GGUF is refused by the header check and by `Brain::load` alike, naming the
/// tensor or the metadata at fault (the first one panicked the host in the tile builders).
#[test]
fn crafted_gguf_files_are_refused_naming_what_is_wrong() {
    let Some((header, len, src)) = smollm_header() else { return };
    let good = check_gguf(header.as_slice(), len, &src).expect("the real file passes");
    assert_eq!((good.arch.hidden_size, good.arch.num_hidden_layers, good.tensors), (576, 30, 272));
    let dir = tempfile::tempdir().unwrap();
    for (i, case) in crafted_cases(&header, len).into_iter().enumerate() {
        let path = dir.path().join(format!("crafted-{i}.gguf"));
        write_crafted(&path, &case.header, &src, header.len() as u64, false, case.len);
        let err = check_gguf(case.header.as_slice(), case.len, &path).expect_err(case.what).to_string();
        for want in case.expect {
            assert!(err.contains(want), "{}: {err}", case.what);
        }
        let loaded = Brain::load(&ModelConfig { path: path.clone(), ..Default::default() });
        let load_err = loaded.expect_err(case.what).to_string();
        for want in case.expect {
            assert!(load_err.contains(want), "{}: {load_err}", case.what);
        }
        eprintln!("{}: {load_err}", case.what);
    }
}

/// The crafted header with the real tensor data behind it still loads and generates: the
/// checks refuse nothing the real file has.
#[test]
fn the_real_header_rewritten_loads_and_generates() {
    let Some((header, len, src)) = smollm_header() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copy.gguf");
    write_crafted(&path, &header, &src, header.len() as u64, true, len);
    let mut brain = Brain::load(&ModelConfig { path, ..Default::default() }).unwrap();
    let prompt = brain.chat_prompt("You are a helpful assistant.", "What is the capital of France?");
    let out = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();
    assert!(out.text.contains("Paris"), "{}", out.text);
}

/// The model `cfg` names with a checkpoint's parameters, in the checkpoint's shape: what
/// `--checkpoint` does in every command (through `with_checkpoint_or_peft_shape` and
/// `load_checkpoint_or_peft`, which take these two for a checkpoint of ours).
fn load_trained(cfg: &ModelConfig, dir: &Path) -> onebrain_model::Result<Brain> {
    let mut brain = Brain::load(&with_checkpoint_shape(cfg, dir)?)?;
    brain.load_trainable(dir)?;
    Ok(brain)
}

fn smol(cfg: ModelConfig) -> Option<Brain> {
    smollm_file()?;
    Some(Brain::load(&ModelConfig { path: TEST_MODEL_FILE.into(), ..cfg }).expect("load SmolLM2"))
}

/// A small trained-looking checkpoint of the test model in `dir`: rank 5, 2 role tokens,
/// adapters on q and v only (none of them the defaults), every B nudged from 0.
fn small_checkpoint(dir: &Path) -> Option<Brain> {
    let cfg = ModelConfig {
        lora_rank: Some(5),
        role_tokens: 2,
        lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]),
        ..Default::default()
    };
    let brain = smol(cfg)?;
    for (name, var) in brain.trainable().data().lock().unwrap().iter() {
        if name.ends_with(".b") {
            var.set(&(var.ones_like().unwrap() * 1e-3).unwrap()).unwrap();
        }
    }
    brain.save(dir).unwrap();
    Some(brain)
}

/// Rewrites one tensor of the checkpoint's parameter file through `edit`.
fn edit_tensor(dir: &Path, name: &str, edit: impl FnOnce(Tensor) -> Tensor) {
    let file = dir.join("trainable.safetensors");
    let mut tensors = candle_core::safetensors::load(&file, &Device::Cpu).unwrap();
    let t = tensors.remove(name).unwrap_or_else(|| panic!("no `{name}`"));
    tensors.insert(name.to_string(), edit(t));
    candle_core::safetensors::save(&tensors, &file).unwrap();
}

fn edit_meta(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("brain.json");
    let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut meta);
    std::fs::write(&path, meta.to_string()).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn base() -> ModelConfig {
    ModelConfig { path: TEST_MODEL_FILE.into(), ..Default::default() }
}

/// A checkpoint whose role parameters hold a NaN once loaded without a word; now it is
/// refused naming the tensor, and so are the other crafted checkpoints, each before anything
/// runs. A model refuses to save parameters it would refuse to load.
#[test]
fn crafted_checkpoints_are_refused_naming_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    let Some(brain) = small_checkpoint(&good) else { return };
    assert!(load_trained(&base(), &good).is_ok());

    type Craft = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Craft, &[&str])> = vec![
        (
            "a NaN in the actor's role tokens",
            Box::new(|d| edit_tensor(d, "actor.role_tokens", |t| (t * f64::NAN).unwrap())),
            &["not finite", "`actor.role_tokens`"],
        ),
        (
            "an infinity in a LoRA matrix",
            Box::new(|d| edit_tensor(d, "judge.lora.3.v_proj.b", |t| (t + f64::INFINITY).unwrap())),
            &["not finite", "`judge.lora.3.v_proj.b`"],
        ),
        (
            "integers for a LoRA matrix",
            Box::new(|d| edit_tensor(d, "editor.lora.0.q_proj.a", |t| t.to_dtype(DType::I64).unwrap())),
            &["`editor.lora.0.q_proj.a`", "not floating-point"],
        ),
        (
            "a LoRA matrix of another shape",
            Box::new(|d| edit_tensor(d, "actor.lora.0.q_proj.a", |t| Tensor::cat(&[&t, &t.narrow(0, 0, 1).unwrap()], 0).unwrap())),
            &["`actor.lora.0.q_proj.a` has shape [6, 576], expected [5, 576]"],
        ),
        (
            "a rank of 2⁴⁰ in brain.json",
            Box::new(|d| edit_meta(d, |m| m["lora_rank"] = (1u64 << 40).into())),
            &["brain.json", "rank 1099511627776", "parameters, but"],
        ),
        (
            "a million role tokens in brain.json",
            Box::new(|d| edit_meta(d, |m| m["role_tokens"] = 1_000_000.into())),
            &["brain.json", "1000000 role tokens", "parameters, but"],
        ),
        (
            "another architecture in brain.json",
            Box::new(|d| edit_meta(d, |m| m["arch"]["hidden_size"] = 896.into())),
            &["brain.json", "the model's"],
        ),
        (
            "a negative alpha in brain.json",
            Box::new(|d| edit_meta(d, |m| m["lora_alpha"] = (-16.0).into())),
            &["brain.json", "lora_alpha -16"],
        ),
        (
            "an unknown LoRA target in brain.json",
            Box::new(|d| edit_meta(d, |m| m["lora_targets"] = serde_json::json!(["q_proj", "x_proj"]))),
            &["brain.json", "unknown LoRA target `x_proj`"],
        ),
        (
            "format 2 in brain.json",
            Box::new(|d| edit_meta(d, |m| m["format"] = 2.into())),
            &["brain.json", "format 2"],
        ),
        (
            "a parameter count brain.json does not hold",
            Box::new(|d| edit_meta(d, |m| m["parameters"] = 7.into())),
            &["brain.json", "7 parameters vs"],
        ),
        (
            "a parameter file cut short",
            Box::new(|d| {
                let f = std::fs::OpenOptions::new().write(true).open(d.join("trainable.safetensors")).unwrap();
                let len = f.metadata().unwrap().len();
                f.set_len(len - 100).unwrap();
            }),
            &["trainable.safetensors", "does not fill bytes"],
        ),
    ];
    for (i, (what, craft, expect)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case-{i}"));
        copy_dir(&good, &dir);
        craft(&dir);
        let err = load_trained(&base(), &dir).expect_err(what).to_string();
        for want in expect.iter() {
            assert!(err.contains(want), "{what}: {err}");
        }
        eprintln!("{what}: {err}");
    }

    // A NaN parameter is never written.
    let var = brain.trainable().data().lock().unwrap()["actor.role_tokens"].clone();
    var.set(&(var.as_tensor() * f64::NAN).unwrap()).unwrap();
    let err = brain.save(&tmp.path().join("never")).expect_err("refused").to_string();
    assert!(err.contains("`actor.role_tokens`") && err.contains("not finite"), "{err}");
    assert!(!tmp.path().join("never").exists(), "nothing written");
}

/// `--checkpoint` takes the adapter shape from the checkpoint's brain.json: a rank-5,
/// q/v-only model loads under a config that names neither, and generates what the saved
/// model generates (`tests/cli/hostile.rs` runs it through `generate`, `solve` and `eval`).
#[test]
fn a_checkpoint_loads_in_its_own_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    let Some(mut saved) = small_checkpoint(&dir) else { return };
    let mut loaded = load_trained(&base(), &dir).unwrap();
    assert_eq!(loaded.lora_rank(), 5);
    assert_eq!(loaded.config().role_tokens, 2);
    assert_eq!(loaded.config().lora_target_list(), ["q_proj", "v_proj"]);
    let prompt = saved.chat_prompt("You are a helpful assistant.", "Name a colour.");
    let want = saved.generate(Role::Actor, &prompt, &SamplingConfig::greedy(6)).unwrap();
    let got = loaded.generate(Role::Actor, &prompt, &SamplingConfig::greedy(6)).unwrap();
    assert_eq!(got.tokens, want.tokens);
}

/// The project's committed checkpoints (0.5B) load in their own shape under the default
/// config, which names another rank ("LoRA rank 8 vs 19" before). Skips without
/// the 0.5B model, which CI does not fetch.
#[test]
fn the_committed_checkpoints_load_under_the_default_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let model = root.join(".cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !model.is_file() {
        eprintln!("SKIPPED: {} is absent (scripts/setup.sh --models all)", model.display());
        return;
    }
    let cfg = ModelConfig { path: model, ..Default::default() };
    for run in ["train-cpu-full", "train-cpu-grounded"] {
        let dir = root.join("results").join(run).join("checkpoints/update-000030");
        let brain = load_trained(&cfg, &dir).unwrap_or_else(|e| panic!("{run}: {e}"));
        assert_eq!(brain.lora_rank(), 8, "{run}");
    }
}

/// Every message of an error and its sources, as anyhow's `{:#}` prints them.
fn chain(e: Error) -> String {
    format!("{:#}", anyhow::Error::from(e))
}

/// A load error says each cause once (not "tensor needs … remaining in file: tensor
/// needs …"): a wrapped candle, I/O or JSON error is in the message and not also the source.
#[test]
fn a_load_error_says_its_cause_once() {
    let candle = Error::from(candle_core::Error::Msg("tensor needs 30081024 bytes".into()));
    assert_eq!(chain(candle), "tensor error: tensor needs 30081024 bytes");
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("absent");
    let io = Brain::load(&ModelConfig { path: tmp.path().join("x.gguf"), ..Default::default() }).unwrap_err();
    let text = chain(io);
    assert!(text.contains("not found"), "{text}");
    std::fs::create_dir_all(&missing).unwrap();
    std::fs::write(missing.join("brain.json"), "{ not json").unwrap();
    let Some(_) = smollm_file() else { return };
    let json = load_trained(&base(), &missing).unwrap_err();
    let text = chain(json);
    assert_eq!(text.matches("key must be a string").count(), 1, "{text}");
    let gone = load_trained(&base(), &tmp.path().join("nowhere")).unwrap_err();
    let text = chain(gone);
    assert_eq!(text.matches("No such file or directory").count(), 1, "{text}");
}

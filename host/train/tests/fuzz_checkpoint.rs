//! Fuzzing the checkpoint reader, as campaigns with counts
//! (`tests/fuzz/campaign.rs`; `ONEBRAIN_FUZZ_CASES` for a long one).
//!
//! Checkpoints are traded like model files. Each case mutates one file of a checkpoint
//! folder, structure-aware: in `brain.json` and `state.json` a field set to a boundary
//! number, a float, a string, `null`, an array or an object, removed, or a field added, or
//! the text cut or spliced; in `trainable.safetensors` a tensor's type, shape or byte range
//! changed, a tensor removed or renamed, a NaN or an infinity written into its data, the
//! header's length changed, the file cut. Seeds: a small checkpoint of the test model saved
//! here (rank 2, q and v adapted, 2 role tokens), and the committed 0.5B checkpoint
//! `results/train-cpu-full/checkpoints/update-000030` when the 0.5B model is present.
//!
//! The reader never panics; a checkpoint it loads leaves every parameter finite; the
//! checkpoint's shape it reads takes no more parameters than its file holds; a `state.json`
//! it resumes from passes the trainer's own checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use onebrain_model::{with_checkpoint_shape, Brain, ModelConfig, TEST_MODEL_FILE};
use proptest::prelude::*;
use serde_json::{json, Value};

#[path = "../../../tests/fuzz/campaign.rs"]
mod campaign;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A seed checkpoint: its files, the config that names its model, and that model loaded in
/// the checkpoint's shape (the cases load parameters into it).
struct Seed {
    name: &'static str,
    brain_json: Value,
    state_json: Value,
    trainable: Vec<u8>,
    cfg: ModelConfig,
    brain: Mutex<Brain>,
}

fn seeds() -> &'static [Seed] {
    static SEEDS: OnceLock<Vec<Seed>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut seeds = Vec::new();
        let smol = root().join(".cache/models").join(TEST_MODEL_FILE);
        if !smol.is_file() {
            eprintln!("SKIPPED: {} is absent (scripts/setup.sh --models test)", smol.display());
            return seeds;
        }
        let shape = ModelConfig {
            path: smol.clone(),
            lora_rank: Some(2),
            role_tokens: 2,
            lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]),
            ..Default::default()
        };
        let brain = Brain::load(&shape).unwrap();
        let dir = tempfile::tempdir().unwrap();
        brain.save(dir.path()).unwrap();
        let state = json!({"format": 1, "updates": 3, "optimizer_steps": 3, "tasks_consumed": 12, "episodes": 48,
            "config_sha256": "b1ae0bb2f4cbdc7675deb0271df018d29c6586a83a8ebe378aed17c9c89bf4ca"});
        seeds.push(Seed {
            name: "smollm2",
            brain_json: serde_json::from_str(&std::fs::read_to_string(dir.path().join("brain.json")).unwrap()).unwrap(),
            state_json: state,
            trainable: std::fs::read(dir.path().join("trainable.safetensors")).unwrap(),
            cfg: ModelConfig { path: smol, ..Default::default() },
            brain: Mutex::new(brain),
        });
        let qwen = root().join(".cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        let committed = root().join("results/train-cpu-full/checkpoints/update-000030");
        if qwen.is_file() {
            let cfg = ModelConfig { path: qwen, ..Default::default() };
            let mut brain = Brain::load(&with_checkpoint_shape(&cfg, &committed).unwrap()).unwrap();
            brain.load_trainable(&committed).unwrap();
            let read = |f: &str| std::fs::read_to_string(committed.join(f)).unwrap();
            seeds.push(Seed {
                name: "qwen0.5b",
                brain_json: serde_json::from_str(&read("brain.json")).unwrap(),
                state_json: serde_json::from_str(&read("state.json")).unwrap(),
                trainable: std::fs::read(committed.join("trainable.safetensors")).unwrap(),
                cfg,
                brain: Mutex::new(brain),
            });
        } else {
            eprintln!("the 0.5B model is absent: the committed checkpoint is not a seed");
        }
        seeds
    })
}

/// Numbers a field is set to: 0, the edges of 32 and 64 bits and of f64's integers.
const NUMBERS: &[i128] = &[
    0, 1, 2, 3, 7, 8, 30, 576, 896, -1, -8, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 1 << 32, 1 << 40, 1 << 53, 1 << 60,
    i64::MAX as i128, u64::MAX as i128, i64::MIN as i128,
];

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(NUMBERS).prop_map(|n| serde_json::from_str::<Value>(&n.to_string()).unwrap()),
        1 => prop::sample::select(&[0.5f64, -16.0, 1e-30, 1e300, -0.0][..]).prop_map(|x| json!(x)),
        1 => prop::sample::select(&["", "qwen2", "llama", "q_proj", "x_proj", "\u{1b}[2J", "F32"][..]).prop_map(|s| json!(s)),
        1 => Just(Value::Null),
        1 => Just(json!(true)),
        1 => prop::collection::vec(prop::sample::select(&["q_proj", "k_proj", "v_proj", "down_proj", "nope", ""][..]), 0..4)
            .prop_map(|v| json!(v)),
        1 => Just(json!({})),
    ]
}

/// A change to a JSON file.
#[derive(Clone, Debug)]
enum JsonEdit {
    /// The `index`-th field (depth first, nested ones included) set.
    Set(usize, Value),
    /// The `index`-th field removed.
    Remove(usize),
    /// A field added at the top.
    Add(String, Value),
    /// The text with bytes removed at a position.
    Cut(usize, usize),
    /// The text with a piece inserted.
    Insert(usize, &'static str),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        6 => (any::<usize>(), json_value()).prop_map(|(i, v)| JsonEdit::Set(i, v)),
        1 => any::<usize>().prop_map(JsonEdit::Remove),
        1 => (prop::sample::select(&["extra", "lora_rank", "format"][..]), json_value()).prop_map(|(k, v)| JsonEdit::Add(k.into(), v)),
        1 => (any::<usize>(), 1usize..8).prop_map(|(at, n)| JsonEdit::Cut(at, n)),
        1 => (any::<usize>(), prop::sample::select(&["{", "}", "\"", ",", "[", "0", "NaN", "1e999", "\\u0000"][..]))
            .prop_map(|(at, s)| JsonEdit::Insert(at, s)),
    ]
}

/// The paths of every field, nested ones included, depth first.
fn paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Value::Object(map) = v {
        for (k, child) in map {
            prefix.push(k.clone());
            out.push(prefix.clone());
            paths(child, prefix, out);
            prefix.pop();
        }
    }
}

fn edit_json(v: &Value, edit: &JsonEdit) -> String {
    let mut v = v.clone();
    let mut all = Vec::new();
    paths(&v, &mut Vec::new(), &mut all);
    let field = |i: usize| {
        let path = &all[i % all.len()];
        let parent: String = path[..path.len() - 1].iter().map(|k| format!("/{k}")).collect();
        (parent, path.last().unwrap().clone())
    };
    match edit {
        JsonEdit::Set(i, new) => {
            let (parent, key) = field(*i);
            if let Some(map) = v.pointer_mut(&parent).and_then(Value::as_object_mut) {
                map.insert(key, new.clone());
            }
        }
        JsonEdit::Remove(i) => {
            let (parent, key) = field(*i);
            if let Some(map) = v.pointer_mut(&parent).and_then(Value::as_object_mut) {
                map.remove(&key);
            }
        }
        JsonEdit::Add(k, new) => _ = v.as_object_mut().unwrap().insert(k.clone(), new.clone()),
        JsonEdit::Cut(at, n) => {
            let mut t = v.to_string().into_bytes();
            let at = at % t.len();
            t.drain(at..(at + n).min(t.len()));
            return String::from_utf8_lossy(&t).into_owned();
        }
        JsonEdit::Insert(at, piece) => {
            let mut t = v.to_string().into_bytes();
            let at = at % (t.len() + 1);
            t.splice(at..at, piece.bytes());
            return String::from_utf8_lossy(&t).into_owned();
        }
    }
    v.to_string()
}

/// A change to the parameter file.
#[derive(Clone, Debug)]
enum TensorEdit {
    /// The `index`-th tensor's type.
    Dtype(usize, &'static str),
    /// The `index`-th tensor's shape.
    Shape(usize, Vec<u64>),
    /// The `index`-th tensor's byte range: start and end nudged or set.
    Offsets(usize, i64, i64),
    /// The `index`-th tensor removed from the header.
    Remove(usize),
    /// The `index`-th tensor renamed.
    Rename(usize, &'static str),
    /// A NaN or an infinity written over the `index`-th tensor's `k`-th value.
    Poison(usize, usize, u32),
    /// The header's length field.
    HeaderLength(u64),
    /// The file cut.
    Cut(usize),
}

fn tensor_edit() -> impl Strategy<Value = TensorEdit> {
    let dims = prop::collection::vec(prop::sample::select(&[0u64, 1, 2, 4, 5, 576, 1 << 20, 1 << 32, 1 << 62, u64::MAX][..]), 0..4);
    prop_oneof![
        1 => (any::<usize>(), prop::sample::select(&["F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "Q4"][..])).prop_map(|(i, d)| TensorEdit::Dtype(i, d)),
        2 => (any::<usize>(), dims).prop_map(|(i, d)| TensorEdit::Shape(i, d)),
        2 => (any::<usize>(), -8i64..8, prop::sample::select(&[-4i64, -1, 0, 1, 4, 1 << 40][..])).prop_map(|(i, a, b)| TensorEdit::Offsets(i, a, b)),
        1 => any::<usize>().prop_map(TensorEdit::Remove),
        1 => (any::<usize>(), prop::sample::select(&["actor.lora.0.q_proj.a", "judge.head.weight", "actor.lora.99.q_proj.a", "", "__metadata__"][..]))
            .prop_map(|(i, n)| TensorEdit::Rename(i, n)),
        3 => (any::<usize>(), any::<usize>(), prop::sample::select(&[0x7fc0_0000u32, 0x7f80_0000, 0xff80_0000, 0x7f7f_ffff][..]))
            .prop_map(|(i, k, bits)| TensorEdit::Poison(i, k, bits)),
        1 => prop::sample::select(&[0u64, 1, 7, 100_000_001, u64::MAX][..]).prop_map(TensorEdit::HeaderLength),
        1 => any::<usize>().prop_map(TensorEdit::Cut),
    ]
}

fn edit_safetensors(file: &[u8], edit: &TensorEdit) -> Vec<u8> {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, Value> = serde_json::from_slice(&file[8..8 + n]).unwrap();
    let mut data = file[8 + n..].to_vec();
    let names: Vec<String> = header.keys().filter(|k| *k != "__metadata__").cloned().collect();
    if names.is_empty() {
        return file.to_vec();
    }
    let name = |i: usize| names[i % names.len()].clone();
    match edit {
        TensorEdit::Dtype(i, d) => header[&name(*i)]["dtype"] = json!(d),
        TensorEdit::Shape(i, dims) => header[&name(*i)]["shape"] = json!(dims),
        TensorEdit::Offsets(i, a, b) => {
            let offsets = &mut header[&name(*i)]["data_offsets"];
            let (s, e) = (offsets[0].as_i64().unwrap_or(0), offsets[1].as_i64().unwrap_or(0));
            *offsets = json!([s.saturating_add(*a).max(0), e.saturating_add(*b).max(0)]);
        }
        TensorEdit::Remove(i) => _ = header.remove(&name(*i)),
        TensorEdit::Rename(i, to) => {
            let v = header.remove(&name(*i)).unwrap();
            header.insert(to.to_string(), v);
        }
        TensorEdit::Poison(i, k, bits) => {
            let entry = &header[&name(*i)];
            let offset = |j: usize| entry["data_offsets"][j].as_u64().unwrap_or(0) as usize;
            let (s, e) = (offset(0), offset(1).min(data.len()));
            let values = e.saturating_sub(s) / 4;
            if values > 0 {
                let at = s + (k % values) * 4;
                data[at..at + 4].copy_from_slice(&bits.to_le_bytes());
            }
        }
        TensorEdit::HeaderLength(_) | TensorEdit::Cut(_) => {}
    }
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(data);
    match edit {
        TensorEdit::HeaderLength(len) => out[..8].copy_from_slice(&len.to_le_bytes()),
        TensorEdit::Cut(at) => out.truncate(at % out.len()),
        _ => {}
    }
    out
}

/// Whether a safetensors file's header can be read for another edit.
fn parsable(file: &[u8]) -> bool {
    let Some(len) = file.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize) else { return false };
    file.len() >= 8 && len <= file.len() - 8 && serde_json::from_slice::<serde_json::Map<String, Value>>(&file[8..8 + len]).is_ok()
}

/// Which file a case changes.
#[derive(Clone, Debug)]
enum Target {
    Brain(JsonEdit),
    State(JsonEdit),
    Trainable(Vec<TensorEdit>),
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        2 => json_edit().prop_map(Target::Brain),
        1 => json_edit().prop_map(Target::State),
        3 => prop::collection::vec(tensor_edit(), 1..3).prop_map(Target::Trainable),
    ]
}

/// Writes the seed with `target` changed as `checkpoints/update-000003` of `run`, named by
/// `checkpoints/LATEST`; returns the checkpoint's folder.
fn write_case(run: &Path, seed: &Seed, target: &Target) -> PathBuf {
    let ckpts = run.join("checkpoints");
    let dir = ckpts.join("update-000003");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(ckpts.join("LATEST"), "update-000003\n").unwrap();
    let brain = match target {
        Target::Brain(e) => edit_json(&seed.brain_json, e),
        _ => seed.brain_json.to_string(),
    };
    let state = match target {
        Target::State(e) => edit_json(&seed.state_json, e),
        _ => seed.state_json.to_string(),
    };
    let mut trainable = seed.trainable.clone();
    if let Target::Trainable(edits) = target {
        for e in edits {
            // A cut or a bad length leaves nothing to parse for the next edit.
            if parsable(&trainable) {
                trainable = edit_safetensors(&trainable, e);
            }
        }
    }
    std::fs::write(dir.join("brain.json"), brain).unwrap();
    std::fs::write(dir.join("state.json"), state).unwrap();
    std::fs::write(dir.join("trainable.safetensors"), trainable).unwrap();
    dir
}

thread_local! {
    /// How the campaign's inputs ended, to show the mutations reach past the first check.
    static OUTCOMES: std::cell::RefCell<BTreeMap<&'static str, usize>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

fn count(outcome: &'static str) {
    OUTCOMES.with(|o| *o.borrow_mut().entry(outcome).or_default() += 1);
}

fn checkpoint_case(run: &Path, seed: &Seed, target: &Target) -> Result<(), TestCaseError> {
    let dir = write_case(run, seed, target);
    match target {
        Target::State(_) => {
            // What resuming reads first: the pointer and the counters.
            let resumed = onebrain_train::latest(&run.join("checkpoints"));
            count(if matches!(resumed, Ok(Some(_))) { "state.json accepted" } else { "state.json refused" });
            if let Ok(Some((found, state))) = resumed {
                prop_assert_eq!(found, dir);
                prop_assert_eq!(state.format, 1);
                prop_assert!(state.optimizer_steps <= i32::MAX as u64);
            }
        }
        _ => {
            // The shape every `--checkpoint` takes: it never needs more than the file holds.
            if matches!(target, Target::Brain(_)) {
                let shaped = with_checkpoint_shape(&seed.cfg, &dir);
                count(if shaped.is_ok() { "brain.json shape accepted" } else { "brain.json shape refused" });
                if let Ok(shaped) = shaped {
                    let rank = shaped.lora_rank.unwrap_or(1) as u64;
                    prop_assert!(rank <= (seed.trainable.len() as u64), "rank {rank} from a file of {} bytes", seed.trainable.len());
                }
            }
            let mut brain = seed.brain.lock().unwrap_or_else(|e| e.into_inner());
            let loaded = brain.load_trainable(&dir);
            count(if loaded.is_ok() { "parameters loaded" } else { "parameters refused" });
            if loaded.is_ok() {
                let bad = brain.non_finite_parameters().map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(bad.is_empty(), "loaded, with parameters not finite: {bad:?}");
            }
        }
    }
    Ok(())
}

#[test]
fn every_seed_loads_as_it_is() {
    let run = tempfile::tempdir().unwrap();
    for seed in seeds() {
        let dir = write_case(run.path(), seed, &Target::Trainable(vec![]));
        seed.brain.lock().unwrap().load_trainable(&dir).unwrap_or_else(|e| panic!("{}: {e}", seed.name));
        with_checkpoint_shape(&seed.cfg, &dir).unwrap();
        onebrain_train::latest(&run.path().join("checkpoints")).unwrap().unwrap();
    }
}

#[test]
fn fuzz_checkpoint() {
    if seeds().is_empty() {
        return;
    }
    let run = tempfile::tempdir().unwrap();
    campaign::run("train/checkpoint", 256, (any::<usize>(), target()), |(s, target)| {
        let seeds = seeds();
        // The small seed three times in four: the 0.5B one's file is 40 times larger.
        let seed = if s % 4 == 0 { &seeds[seeds.len() - 1] } else { &seeds[0] };
        checkpoint_case(run.path(), seed, &target)
    });
    let outcomes = OUTCOMES.with(|o| std::mem::take(&mut *o.borrow_mut()));
    let line: Vec<String> = outcomes.iter().map(|(k, n)| format!("{n} {k}")).collect();
    eprintln!("fuzz train/checkpoint outcomes: {}", line.join(", "));
}

//! The shipped training streams never yield an evaluation task. For every
//! `configs/train-*.toml` whose `[tasks]` are generated and that names held-out sets
//! (`eval-config`, `[tasks] held-out`), the first `updates × tasks-per-update` tasks of its
//! stream are compared one by one, up to a renaming of objects, with every task of those
//! sets: none may match.
//!
//! The check can fail: with the skip turned off, the stream of
//! `configs/train-1.5b-text-agreement.toml` (BlocksWorld, Mystery BlocksWorld, Logistics and
//! Gripper in turn, sizes 3 and 4, first seed 1) yields `mystery-blocksworld` seed 158 of
//! size 4, which is PlanBench `mystery_blocksworld/102` of its held-out slice with the
//! blocks renamed.
//!
//! Skips, saying why, when the domain plugins are not built (`scripts/build-plugins.sh`) or
//! the shared data is absent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::{DomainAdapter, Task};
use onebrain_eval::{EvalConfig, SourceKind};
use onebrain_pddl::{parse_problem, ProblemShape, Renaming, RENAMING_NODE_BUDGET};
use onebrain_roles::config_base;
use onebrain_runtime::RuntimeConfig;
use onebrain_train::{
    held_out_sets, HeldOutIndex, SkippedTwin, StreamCursor, TaskSource, TrainConfig,
};

const DOMAINS: [&str; 4] = ["blocksworld", "mystery-blocksworld", "logistics", "gripper"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn configs() -> PathBuf {
    root().join("configs")
}

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if let Some(d) = DOMAINS.iter().find(|d| {
        !root()
            .join("plugins")
            .join(d)
            .join(format!("{d}.wasm"))
            .is_file()
    }) {
        return Some(format!(
            "the `{d}` plugin is not built (scripts/build-plugins.sh)"
        ));
    }
    let data = configs().join("../../shared/data/planbench");
    if !data.is_dir() {
        return Some(format!("the shared data is absent ({})", data.display()));
    }
    None
}

/// The domain plugins a config names, loaded once per plugin set: nothing else (no reward
/// plugin, no verifier), since only the stream is drawn.
struct Plugins(HashMap<String, Vec<Arc<dyn DomainAdapter>>>);

impl Plugins {
    fn domains(&mut self, cfg: &RuntimeConfig, base: &Path) -> Vec<Arc<dyn DomainAdapter>> {
        let only_domains = RuntimeConfig {
            reward: None,
            checker: None,
            diagnostic_parser: None,
            diagnostic_reviewers: Vec::new(),
            ..cfg.clone()
        };
        let key = format!("{} {only_domains:?}", base.display());
        self.0
            .entry(key)
            .or_insert_with(|| {
                let loaded = only_domains
                    .load(base)
                    .unwrap_or_else(|e| panic!("plugins: {e}"));
                loaded
                    .domains
                    .into_iter()
                    .map(|d| d as Arc<dyn DomainAdapter>)
                    .collect()
            })
            .clone()
    }
}

fn shape(task: &Task) -> ProblemShape {
    let spec = task
        .reference
        .as_ref()
        .unwrap_or_else(|| panic!("{} has no reference", task.id));
    ProblemShape::new(&parse_problem(&spec.problem).unwrap_or_else(|e| panic!("{}: {e}", task.id)))
}

/// Every task of the eval configs at `paths` that the run's plugins can state, with its
/// shape: read here with the eval crate alone, not through the stream's index.
fn eval_tasks(paths: &[PathBuf], adapters: &[Arc<dyn DomainAdapter>]) -> Vec<(Task, ProblemShape)> {
    let mut out = Vec::new();
    for path in paths {
        let cfg = EvalConfig::from_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let data = config_base(path).join(&cfg.data);
        for b in cfg
            .benchmarks
            .iter()
            .filter(|b| b.source != SourceKind::TextFolder)
        {
            let Some(adapter) = adapters.iter().find(|a| a.name() == b.domain) else {
                continue;
            };
            for t in b
                .tasks(&data, adapter.as_ref())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            {
                let s = shape(&t);
                out.push((t, s));
            }
        }
    }
    out
}

/// The first `updates × tasks-per-update` tasks of `source`, update by update, and the
/// candidates it skipped.
fn first_tasks(
    source: &TaskSource,
    cfg: &TrainConfig,
    adapters: &[Arc<dyn DomainAdapter>],
) -> (Vec<Task>, Vec<SkippedTwin>) {
    let (mut tasks, mut skipped) = (Vec::new(), Vec::new());
    let mut cursor = StreamCursor::default();
    for update in 0..cfg.updates {
        let draw = source
            .draw(adapters, cursor, update, cfg.tasks_per_update())
            .unwrap();
        tasks.extend(draw.tasks);
        skipped.extend(draw.skipped);
        cursor = draw.cursor;
    }
    (tasks, skipped)
}

#[test]
fn shipped_training_streams_never_yield_a_held_out_task() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut plugins = Plugins(HashMap::new());
    let mut checked = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(configs())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("train-") && name.ends_with(".toml")) {
            continue;
        }
        let cfg = TrainConfig::from_file(&path).unwrap();
        let base = config_base(&path);
        let sets = held_out_sets(&cfg, &base);
        if !cfg.tasks.benchmarks.is_empty() || sets.is_empty() {
            continue;
        }
        let adapters = plugins.domains(&cfg.plugins, &base);
        let held = eval_tasks(&sets, &adapters);
        assert!(
            !held.is_empty(),
            "{name}: its held-out sets hold no task its plugins state"
        );
        let mut notes = Vec::new();
        let source = TaskSource::load(&cfg, &base, &adapters, &mut notes).unwrap();
        assert_eq!(
            source.index().len(),
            held.len(),
            "{name}: every held-out task is indexed ({notes:?})"
        );
        let (tasks, skipped) = first_tasks(&source, &cfg, &adapters);
        assert_eq!(
            tasks.len() as u64,
            cfg.updates * cfg.tasks_per_update() as u64
        );
        for t in &tasks {
            let s = shape(t);
            for (h, hs) in &held {
                let r = s.compare(hs, RENAMING_NODE_BUDGET);
                assert_eq!(
                    r,
                    Renaming::Different,
                    "{name}: training task {} against held-out {}",
                    t.id,
                    h.id
                );
            }
        }
        eprintln!(
            "{name}: {} tasks clear of {} held-out tasks, {} candidates skipped",
            tasks.len(),
            held.len(),
            skipped.len()
        );
        checked += 1;
    }
    assert!(
        checked >= 2,
        "configs/train-*.toml with generated tasks and held-out sets"
    );
}

#[test]
fn without_the_skip_the_known_twin_is_yielded() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let path = configs().join("train-1.5b-text-agreement.toml");
    let cfg = TrainConfig::from_file(&path).unwrap();
    let base = config_base(&path);
    let adapters = Plugins(HashMap::new()).domains(&cfg.plugins, &base);
    let held = eval_tasks(&held_out_sets(&cfg, &base), &adapters);
    let (twin_id, eval_id) = (
        "mystery-blocksworld/seed-158-size-4",
        "planbench/mystery_blocksworld/102",
    );
    let (_, eval_shape) = held
        .iter()
        .find(|(t, _)| t.id == eval_id)
        .expect("the held-out slice holds the PlanBench row");

    let mut notes = Vec::new();
    let source = TaskSource::load(&cfg, &base, &adapters, &mut notes).unwrap();
    let open = source.clone().with_index(HeldOutIndex::default());
    let (yielded, none) = first_tasks(&open, &cfg, &adapters);
    assert!(none.is_empty());
    let twin = yielded
        .iter()
        .find(|t| t.id == twin_id)
        .expect("the open stream yields the twin");
    assert_eq!(
        shape(twin).compare(eval_shape, RENAMING_NODE_BUDGET),
        Renaming::Same
    );
    // Its text is not the PlanBench row's: only the renaming-aware check finds it.
    assert_ne!(
        twin.reference.as_ref().unwrap().problem,
        held.iter()
            .find(|(t, _)| t.id == eval_id)
            .unwrap()
            .0
            .reference
            .as_ref()
            .unwrap()
            .problem
    );

    let (kept, skipped) = first_tasks(&source, &cfg, &adapters);
    assert!(kept.iter().all(|t| t.id != twin_id));
    assert!(
        skipped
            .iter()
            .any(|s| s.task == twin_id && s.twin_of == eval_id),
        "{skipped:?}"
    );
    // Up to the first skip the two streams are one; from there on, each skip moves the
    // rest by one candidate.
    let first = skipped.iter().map(|s| s.candidate as usize).min().unwrap();
    let ids = |tasks: &[Task]| tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&kept[..first]), ids(&yielded[..first]));
    assert_eq!(
        ids(&kept[first..first + 1]),
        ids(&yielded[first + 1..first + 2])
    );
}

//! Shared by the runtime's integration tests: builds the guests once per
//! test binary (scripts/build-plugins.sh, quick when nothing changed) and
//! finds the bundled and test-only components.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use onebrain_core::{FinishedEpisode, Outcome, Step, StepRole, Verdict};
use onebrain_runtime::{HostOptions, Limits, LoadedPlugin, PluginHost, PluginManifest, PluginRegistry, World};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Builds every guest. Runs the same script `scripts/setup.sh` runs, so a
/// clean clone's `cargo test` works with or without the setup.
pub fn build() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // A parent test that re-runs this binary in a child has built them already.
        if std::env::var_os("ONEBRAIN_PLUGINS_BUILT").is_some() {
            return;
        }
        let status = std::process::Command::new(root().join("scripts/build-plugins.sh"))
            .status()
            .expect("run scripts/build-plugins.sh");
        assert!(status.success(), "scripts/build-plugins.sh failed");
    });
}

/// A test-only guest built into guests/target.
pub fn test_guest(crate_name: &str) -> PathBuf {
    build();
    root().join("guests/target/wasm32-wasip2/release").join(format!("{}.wasm", crate_name.replace('-', "_")))
}

pub fn registry() -> PluginRegistry {
    build();
    PluginRegistry::discover(&[root().join("plugins")]).unwrap()
}

pub fn host(limits: Limits) -> PluginHost {
    PluginHost::new(HostOptions { limits, ..Default::default() }).unwrap()
}

pub fn bundled(host: &PluginHost, name: &str) -> LoadedPlugin {
    host.load(registry().get(name).unwrap()).unwrap()
}

pub fn guest(host: &PluginHost, crate_name: &str, world: World) -> LoadedPlugin {
    host.load(&PluginManifest::for_component(&test_guest(crate_name), world)).unwrap()
}

/// `../shared/data`, or `None` (tests then skip with a message).
pub fn data_dir() -> Option<PathBuf> {
    let d = root().join("../shared/data");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping: benchmark data not found at {}", d.display());
        None
    }
}

/// An episode of the paper's numbers: the Actor's step solved as `b0`, then `repairs`
/// Editor steps of which only the last may be solved (as `solved_final`), s_J = `judge_score`.
pub fn episode(b0: bool, judge_score: f32, solved_final: bool, repairs: u32) -> FinishedEpisode {
    let step = |role, solved: bool| {
        let outcome = if solved { Outcome::Solved } else { Outcome::Unsolvable };
        Step::new(role, None, Verdict::new(outcome, vec![], vec![]))
    };
    let mut steps = vec![step(StepRole::Actor, b0)];
    for t in 1..=repairs {
        steps.push(step(StepRole::Editor, t == repairs && solved_final));
    }
    FinishedEpisode { steps, judge_score, ..FinishedEpisode::default() }
}

/// Every PlanBench row of `folder` (files in name order), read in place from `data`:
/// (statement, reference spec, ground-truth plan).
pub fn planbench_rows(data: &Path, folder: &str) -> Vec<(String, onebrain_core::Spec, Vec<String>)> {
    let dir = data.join("planbench").join(folder);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut rows = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("nl_tasks") && name.ends_with(".jsonl")) {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let read = |k: &str| std::fs::read_to_string(dir.join(row[k].as_str().unwrap())).unwrap();
            let spec = onebrain_core::Spec { domain: read("domain_pddl"), problem: read("problem_pddl") };
            let plan = row["ground_truth_plan"].as_str().unwrap().lines().map(str::to_string).collect();
            rows.push((row["nl_statement"].as_str().unwrap().to_string(), spec, plan));
        }
    }
    rows
}

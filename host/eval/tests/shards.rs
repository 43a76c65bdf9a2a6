//! A run split into shards, merged back to the report of one unsharded run.

mod common;

use std::path::Path;

use onebrain_core::Spec;
use onebrain_eval::{
    merge_eval, read_trace, read_trace_rows, EvalConfig, EvalError, Shard, ShardError,
};
use onebrain_roles::Strategy;

use common::*;

/// Five tasks (seed 4 fails every time) under two strategies: ten episodes.
const SHARD_CONFIG: &str = "name = \"toy\"\nout-dir = \"out\"\nstrategies = [\"multi-role\", \"llm+p\"]\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 5\n[episode]\nmode = \"problem\"";

/// A report's JSON without its timings, which no two runs share.
fn untimed(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for s in v["strategies"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("timing").expect("a timing block");
    }
    v
}

/// What an episode decided, without its timings.
fn outcomes(trace: &Path) -> Vec<(String, Strategy, bool, bool, u32, Option<Spec>)> {
    let mut v: Vec<_> = read_trace(trace)
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.task_id, r.strategy, r.solved, r.b0, r.solver_calls, r.final_spec))
        .collect();
    v.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    v
}

#[test]
fn two_shards_merge_to_the_report_of_one_unsharded_run() {
    let cfg = EvalConfig::from_toml(SHARD_CONFIG).unwrap();
    let whole = tempfile::tempdir().unwrap();
    let (_, _, one) = run(&cfg, whole.path());
    assert_eq!(one.ran, 10);
    assert!(one.summary.contains("80.0 (4/5)"), "seed 4 fails: {}", one.summary);

    let split = tempfile::tempdir().unwrap();
    let shard = |s: &str| Some(s.parse::<Shard>().unwrap());
    match merge_eval(&cfg, split.path()) {
        Err(EvalError::Shard(ShardError::NoShards { .. })) => {}
        other => panic!("a merge before any shard ran: {other:?}"),
    }
    let (_, planned, first) = run_shard(&cfg, split.path(), shard("0/2"));
    assert_eq!((planned, first.ran), (vec![(5, 0, false)], 5));
    assert!(first.trace_path.ends_with("out/shards/0-of-2/trace.jsonl"), "{}", first.trace_path.display());
    match merge_eval(&cfg, split.path()) {
        Err(EvalError::Shard(ShardError::Incomplete { missing: 5, total: 10, which })) => {
            assert!(which.contains("shard 1/2 never ran"), "{which}")
        }
        other => panic!("a merge with a shard missing: {other:?}"),
    }
    let (_, _, second) = run_shard(&cfg, split.path(), shard("1/2"));
    assert_eq!(second.ran, 5);
    let (merged, out) = merge_eval(&cfg, split.path()).unwrap();
    assert_eq!((merged.shards, merged.total, merged.appended), (2, 10, 10));
    assert_eq!(out.trace_path, split.path().join("out/trace.jsonl"));
    assert_eq!(untimed(&out.report_paths.json), untimed(&one.report_paths.json));
    assert_eq!(outcomes(&out.trace_path), outcomes(&one.trace_path));
    // The merge keeps each row's size, so the merged report has its table by size too.
    assert!(read_trace_rows(&out.trace_path).unwrap().records.iter().all(|r| r.reference_objects == Some(2)));
    assert!(untimed(&out.report_paths.json)["strategies"][0]["by_size"].is_array());

    // Merging again adds nothing; a shard run again finds its work done, in the run's trace.
    assert_eq!(merge_eval(&cfg, split.path()).unwrap().0.appended, 0);
    assert_eq!(read_trace(&out.trace_path).unwrap().records.len(), 10);
    let (calls, _, again) = run_shard(&cfg, split.path(), shard("0/2"));
    assert_eq!((calls, again.ran, again.skipped), (0, 0, 5));

    // Another config's shards are refused: by the merge, and by a shard run in their folder.
    let mut other = cfg.clone();
    other.episode.max_tokens += 1;
    match merge_eval(&other, split.path()) {
        Err(EvalError::Shard(ShardError::Foreign { why, .. })) => assert!(why.contains("config digest"), "{why}"),
        other => panic!("a merge under another config: {other:?}"),
    }
    match try_run(&other, split.path(), shard("1/2")) {
        Err(EvalError::Shard(ShardError::Foreign { path, .. })) => assert!(path.ends_with("shards/1-of-2/shard.json")),
        other => panic!("a shard under another config: {:?}", other.map(|o| o.2)),
    }
    // Parallelism is not the config's meaning: a shard may run with its own.
    let mut wider = cfg.clone();
    wider.in_flight = 4;
    wider.solver.workers = 3;
    assert!(try_run(&wider, split.path(), shard("1/2")).is_ok());
}

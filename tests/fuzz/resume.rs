//! Fuzzing the readers that resume runs, as campaigns with counts
//! (`tests/fuzz/campaign.rs`; `ONEBRAIN_FUZZ_CASES` for a long one): an eval trace
//! (`read_trace`, `TraceWriter::open`), a training run's `metrics.jsonl` (`MetricsLog::open`)
//! and held-out log (`read_heldout`), and its checkpoint pointer (`latest`).
//!
//! A run killed at any byte of a write must resume: the lines written before the kill are
//! read back, the torn one is dropped and reported, and the next record starts on a line of
//! its own. A line spoiled anywhere else is an error naming it, never a panic. Seeds: an eval
//! record and three metrics rows (`tests/fuzz/corpus/traces`); their text fields take random
//! Unicode, since model output is any text.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use onebrain_eval::{read_jsonl, read_trace, TraceError, TraceWriter};
use onebrain_roles::EpisodeRecord;
use onebrain_train::{latest, MetricsLog, MetricsRow};
use proptest::prelude::*;

#[path = "campaign.rs"]
mod campaign;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/traces")
}

fn seed_record() -> &'static EpisodeRecord {
    static R: OnceLock<EpisodeRecord> = OnceLock::new();
    R.get_or_init(|| serde_json::from_str(std::fs::read_to_string(corpus().join("episode.jsonl")).unwrap().trim()).unwrap())
}

fn seed_rows() -> &'static [MetricsRow] {
    static R: OnceLock<Vec<MetricsRow>> = OnceLock::new();
    R.get_or_init(|| {
        let text = std::fs::read_to_string(corpus().join("metrics.jsonl")).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    })
}

/// Episode records whose task ids carry `texts` (any Unicode), serialised as the writer does.
fn episode_lines(texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut r = seed_record().clone();
            r.task_id = format!("task-{i}/{t}");
            serde_json::to_string(&r).unwrap()
        })
        .collect()
}

/// What is done to a log of complete lines.
#[derive(Clone, Debug)]
enum Damage {
    /// Killed mid-write: the file ends `cut` bytes into the last line (0: between lines).
    Torn { cut: usize },
    /// A byte of an earlier line overwritten.
    Spoiled { line: usize, at: usize, byte: u8 },
    /// Random bytes appended, no newline.
    Garbage(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => any::<usize>().prop_map(|cut| Damage::Torn { cut }),
        1 => (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(line, at, byte)| Damage::Spoiled { line, at, byte }),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Damage::Garbage),
    ]
}

/// The file's bytes and, for a torn write, the records a reader must return and whether it
/// must report a torn tail (`None`: any outcome but a panic, an error naming a line).
fn damaged(lines: &[String], d: &Damage) -> (Vec<u8>, Option<(usize, bool)>) {
    let mut bytes: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
    match d {
        Damage::Torn { cut } => {
            // The last line is the one being written: the others stay, and `k` bytes of it.
            let last = lines.last().expect("a line").len();
            let k = cut % (last + 1);
            bytes.truncate(bytes.len() - (last + 1) + k);
            // All of it but its newline parses; any shorter prefix of a JSON object does not.
            (bytes, Some((lines.len() - 1 + usize::from(k == last), k > 0 && k < last)))
        }
        Damage::Spoiled { line, at, byte } => {
            let i = line % lines.len();
            let start: usize = lines[..i].iter().map(|l| l.len() + 1).sum();
            bytes[start + at % lines[i].len()] = *byte;
            (bytes, None)
        }
        Damage::Garbage(g) => {
            bytes.extend_from_slice(g);
            (bytes, None)
        }
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn trace_case(texts: Vec<String>, d: Damage) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let lines = episode_lines(&texts);
    let (bytes, expect) = damaged(&lines, &d);
    let path = write(tmp.path(), "trace.jsonl", &bytes);
    let read = read_trace(&path);
    match (expect, &read) {
        (Some((n, torn)), Ok(c)) => {
            // A torn write: every line before it comes back, the torn one is reported.
            prop_assert_eq!(c.records.len(), n);
            prop_assert_eq!(c.torn_tail, torn);
            for (r, t) in c.records.iter().zip(&texts) {
                prop_assert!(r.task_id.ends_with(t.as_str()));
            }
        }
        (Some(_), Err(e)) => return Err(TestCaseError::fail(format!("a torn write must resume: {e}"))),
        (None, Err(TraceError::BadLine { line, .. })) => prop_assert!(*line >= 1),
        (None, Err(e)) => return Err(TestCaseError::fail(format!("a spoiled line is an error naming it: {e}"))),
        (None, Ok(_)) => {}
    }
    // Reopening for the next record cuts a torn tail and appends on a line of its own.
    if let Ok(before) = read {
        let mut w = TraceWriter::open(&path).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let next = episode_lines(&["next".to_string()]).remove(0);
        w.append(&serde_json::from_str::<EpisodeRecord>(&next).unwrap()).unwrap();
        let after = read_trace(&path).map_err(|e| TestCaseError::fail(format!("after reopening: {e}")))?;
        prop_assert!(!after.torn_tail);
        prop_assert_eq!(after.records.len(), before.records.len() + 1);
        prop_assert!(after.records.last().unwrap().task_id.ends_with("next"));
    }
    Ok(())
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(any::<String>(), 1..5)
}

#[test]
fn fuzz_eval_trace_resume() {
    campaign::run("resume/eval-trace", 256, (texts(), damage()), |(t, d)| trace_case(t, d));
}

fn metrics_case(updates: u64, d: Damage) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let lines: Vec<String> = seed_rows().iter().map(|r| serde_json::to_string(r).unwrap()).collect();
    let (bytes, expect) = damaged(&lines, &d);
    let path = write(tmp.path(), "metrics.jsonl", &bytes);
    let _ = write(tmp.path(), "heldout.jsonl", &bytes);
    let read = read_jsonl::<MetricsRow>(&path);
    if let Some((n, torn)) = expect {
        let c = read.as_ref().map_err(|e| TestCaseError::fail(format!("a torn write must resume: {e}")))?;
        prop_assert_eq!(c.records.len(), n);
        prop_assert_eq!(c.torn_tail, torn);
    }
    let _ = onebrain_train::read_heldout(&tmp.path().join("heldout.jsonl"));
    // Resuming at `updates` keeps the rows up to it, whatever the tail held.
    match MetricsLog::open(tmp.path(), updates) {
        Ok(log) => {
            let rows = log.rows().map_err(|e| TestCaseError::fail(format!("rows after opening: {e}")))?;
            prop_assert!(rows.iter().all(|r| r.update <= updates));
            if let Ok(c) = read {
                prop_assert_eq!(rows.len(), c.records.iter().filter(|r| r.update <= updates).count());
            }
        }
        Err(e) => prop_assert!(read.is_err(), "opening failed where reading did not: {e}"),
    }
    Ok(())
}

#[test]
fn fuzz_metrics_resume() {
    campaign::run("resume/metrics", 256, (0u64..5, damage()), |(u, d)| metrics_case(u, d));
}

#[test]
fn fuzz_checkpoint_pointer() {
    let case = (any::<String>(), prop::collection::vec(any::<u8>(), 0..200), any::<bool>());
    campaign::run("resume/checkpoint-pointer", 256, case, |(pointer, state, valid_dir)| {
        let tmp = tempfile::tempdir().unwrap();
        let ck = tmp.path().join("checkpoints");
        std::fs::create_dir_all(ck.join("update-000001")).unwrap();
        let name = if valid_dir { "update-000001".to_string() } else { pointer };
        // A name the file system refuses is not a case.
        if std::fs::write(ck.join("LATEST"), &name).is_err() {
            return Ok(());
        }
        let _ = std::fs::write(ck.join("update-000001/state.json"), &state);
        // Whatever the pointer and the state hold: a state or an error, never a panic.
        if let Ok(Some((dir, _))) = latest(&ck) {
            prop_assert!(dir.starts_with(&ck));
        }
        Ok(())
    });
}

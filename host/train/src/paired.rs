//! Two evaluations of the same tasks, compared task by task: an arm before and after
//! training, or two arms on one held-out set. Newcombe's interval (in `arms`) treats the two
//! rows as independent samples; they are not, since every task is answered in both, so the
//! paired view counts the tasks each side won that the other lost and asks McNemar's exact
//! question: how likely is a split at least this uneven if neither side were better?
//!
//! The outcomes come from each evaluation's trace (`trace.jsonl`, or `trace.jsonl.gz` as
//! `scripts/arms-sync.sh` commits it), read for three fields only, so traces of older
//! formats read too.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::error::TrainError;

/// What one episode of an evaluation came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The verifier solved the final spec.
    pub solved: bool,
    /// Solved and the same task as the reference, by the reference checker.
    pub faithful: bool,
}

/// An evaluation's outcomes, by task and strategy (`task-id strategy`).
pub type Outcomes = BTreeMap<String, Outcome>;

/// The fields of a trace record the paired view reads.
#[derive(Deserialize)]
struct TraceLine {
    task_id: String,
    strategy: serde_json::Value,
    solved: bool,
    #[serde(default)]
    faithfulness: Option<Faithfulness>,
}

#[derive(Deserialize)]
struct Faithfulness {
    #[serde(default)]
    faithful: bool,
}

/// The outcomes in the evaluation folder `dir` (its `trace.jsonl`, else `trace.jsonl.gz`);
/// `None` when it has neither. Read by the trace's rules (`onebrain_eval::parse_jsonl`): a
/// torn last line is dropped, any other line that does not parse is an error naming it.
pub fn read_outcomes(dir: &Path) -> Result<Option<Outcomes>, TrainError> {
    let plain = dir.join("trace.jsonl");
    let gzipped = dir.join("trace.jsonl.gz");
    let (path, bytes) = if plain.is_file() {
        (plain.clone(), std::fs::read(&plain))
    } else if gzipped.is_file() {
        let read = std::fs::File::open(&gzipped).and_then(|f| {
            let mut bytes = Vec::new();
            flate2::read::GzDecoder::new(f).read_to_end(&mut bytes).map(|_| bytes)
        });
        (gzipped.clone(), read)
    } else {
        return Ok(None);
    };
    let bytes = bytes.map_err(|e| TrainError::Config(format!("{}: {e}", path.display())))?;
    let lines = onebrain_eval::parse_jsonl::<TraceLine>(&path, &bytes)?.records;
    let mut out = Outcomes::new();
    for r in lines {
        let strategy = r.strategy.as_str().map_or_else(|| r.strategy.to_string(), str::to_string);
        let faithful = r.solved && r.faithfulness.is_some_and(|f| f.faithful);
        out.insert(format!("{} {strategy}", r.task_id), Outcome { solved: r.solved, faithful });
    }
    Ok(Some(out))
}

/// Two evaluations of the same tasks on one measure, task by task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    /// Tasks in both evaluations.
    pub tasks: usize,
    /// Tasks the second evaluation has and the first has not.
    pub gained: usize,
    /// Tasks the first has and the second has not.
    pub lost: usize,
    /// McNemar's exact two-sided p-value for `gained` against `lost`.
    pub p: f64,
}

/// `after` against `before` on `measure`, over the tasks both evaluated.
pub fn paired(before: &Outcomes, after: &Outcomes, measure: fn(&Outcome) -> bool) -> Paired {
    let (mut tasks, mut gained, mut lost) = (0, 0, 0);
    for (task, a) in before {
        let Some(b) = after.get(task) else { continue };
        tasks += 1;
        match (measure(a), measure(b)) {
            (false, true) => gained += 1,
            (true, false) => lost += 1,
            _ => {}
        }
    }
    Paired { tasks, gained, lost, p: mcnemar_exact(gained, lost) }
}

/// McNemar's exact test: the two-sided p-value of `b` discordant pairs one way and `c` the
/// other, twice the binomial tail of the smaller count at one half (capped at 1).
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    // The tail in logs: n is a task count, but C(n, k) / 2^n overflows f64 past n ≈ 1,000.
    let ln_choose = |k: usize| ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k);
    let tail: f64 = (0..=b.min(c)).map(|k| (ln_choose(k) - n as f64 * std::f64::consts::LN_2).exp()).sum();
    (2.0 * tail).min(1.0)
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|k| (k as f64).ln()).sum()
}

/// One table cell: `6 gained, 0 lost of 40 (p = 0.031)`; `*` where p < 0.05.
pub fn paired_cell(p: &Paired) -> String {
    let mark = if p.p < 0.05 { " *" } else { "" };
    format!("{} gained, {} lost of {} (p = {:.3}){mark}", p.gained, p.lost, p.tasks, p.p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn mcnemar_exact_matches_the_binomial_tail() {
        // 6 to 0: 2 · 2^-6.
        assert!((mcnemar_exact(6, 0) - 0.03125).abs() < 1e-12);
        assert!((mcnemar_exact(0, 6) - 0.03125).abs() < 1e-12);
        // 11 to 2: 2 · (1 + 13 + 78) / 2^13 = 0.022460...
        assert!((mcnemar_exact(11, 2) - 184.0 / 8192.0).abs() < 1e-12);
        // An even split, or no discordant task, is no evidence.
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // Large counts stay finite.
        let p = mcnemar_exact(600, 500);
        assert!(p > 0.0 && p < 0.01, "{p}");
    }

    fn line(task: &str, solved: bool, faithful: Option<bool>) -> String {
        let f = faithful.map_or("null".to_string(), |f| format!("{{\"faithful\":{f},\"decision\":\"exact\"}}"));
        format!("{{\"task_id\":\"{task}\",\"strategy\":\"multi-role\",\"solved\":{solved},\"faithfulness\":{f},\"steps\":[]}}\n")
    }

    #[test]
    fn outcomes_read_from_a_trace_or_its_gzip_and_pair_by_task() {
        let dir = tempfile::tempdir().unwrap();
        let (before, after) = (dir.path().join("before"), dir.path().join("after"));
        std::fs::create_dir_all(&before).unwrap();
        std::fs::create_dir_all(&after).unwrap();
        assert_eq!(read_outcomes(&before).unwrap(), None);
        let text = [line("t1", true, Some(false)), line("t2", false, None), line("t3", true, Some(true)), line("t4", true, Some(true))]
            .concat()
            + "{\"task_id\":\"t5\",\"stra"; // a torn last line
        std::fs::write(before.join("trace.jsonl"), text).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let text = [line("t1", true, Some(true)), line("t2", true, Some(true)), line("t3", true, Some(false)), line("t9", true, Some(true))].concat();
        gz.write_all(text.as_bytes()).unwrap();
        std::fs::write(after.join("trace.jsonl.gz"), gz.finish().unwrap()).unwrap();
        let (a, b) = (read_outcomes(&before).unwrap().unwrap(), read_outcomes(&after).unwrap().unwrap());
        assert_eq!(a.len(), 4, "the torn line is dropped");
        // t4 and t9 are in one evaluation only: three tasks pair.
        let f = paired(&a, &b, |o| o.faithful);
        assert_eq!((f.tasks, f.gained, f.lost), (3, 2, 1));
        let s = paired(&a, &b, |o| o.solved);
        assert_eq!((s.tasks, s.gained, s.lost, s.p), (3, 1, 0, 1.0));
        assert_eq!(paired_cell(&f), "2 gained, 1 lost of 3 (p = 1.000)");
        // A bad line that is not the last is an error naming the file.
        std::fs::write(before.join("trace.jsonl"), "{\"x\":1}\n".to_string() + &line("t1", true, None)).unwrap();
        let e = read_outcomes(&before).unwrap_err().to_string();
        assert!(e.contains("trace.jsonl, line 1"), "{e}");
    }

    #[test]
    fn a_faithful_flag_on_an_unsolved_answer_does_not_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("trace.jsonl"), line("t", false, Some(true))).unwrap();
        let o = read_outcomes(dir.path()).unwrap().unwrap();
        assert_eq!(o["t multi-role"], Outcome { solved: false, faithful: false });
    }
}

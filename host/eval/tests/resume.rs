//! A run that is killed mid-write and resumed from its trace.

mod common;


use onebrain_eval::{read_trace, read_trace_rows, EvalConfig};

use common::*;

#[test]
fn a_killed_run_resumes_from_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EvalConfig::from_toml(
        "name = \"toy\"\nout-dir = \"out\"\nstrategies = [\"multi-role\", \"llm+p\"]\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 3\n[episode]\nmode = \"problem\"",
    )
    .unwrap();
    let (calls, planned, out) = run(&cfg, dir.path());
    assert_eq!((calls, out.ran, out.skipped), (6, 6, 0));
    assert_eq!(planned, [(6, 0, false)]);
    let full = std::fs::read_to_string(&out.trace_path).unwrap();
    assert_eq!(full.lines().count(), 6);
    assert!(
        out.summary.contains("| multi-role | 100.0 (3/3) |"),
        "{}",
        out.summary
    );
    assert!(out.report_paths.markdown.is_file() && out.report_paths.plots.len() >= 3);
    // Each row carries its task's size, from the reference problem (`a b`: 2 objects), and
    // the report has them by size.
    let rows = read_trace_rows(&out.trace_path).unwrap().records;
    assert!(rows.iter().all(|r| r.reference_objects == Some(2)), "{:?}", rows.iter().map(|r| r.reference_objects).collect::<Vec<_>>());
    let md = std::fs::read_to_string(&out.report_paths.markdown).unwrap();
    assert!(md.contains("| multi-role | toy | 3–5 | 3 | 100.0 (3/3) [43.8, 100.0] | 100.0 (3/3) [43.8, 100.0] |"), "{md}");

    // Kill it in the middle of the fourth line: three records and a torn tail remain.
    let lines: Vec<&str> = full.lines().collect();
    let torn = format!(
        "{}\n{}",
        lines[..3].join("\n"),
        &lines[3][..lines[3].len() / 2]
    );
    std::fs::write(&out.trace_path, torn).unwrap();
    let (calls, planned, out2) = run(&cfg, dir.path());
    assert_eq!(planned, [(6, 3, true)]);
    assert_eq!((calls, out2.ran, out2.skipped), (3, 3, 3));
    let contents = read_trace(&out2.trace_path).unwrap();
    assert!(
        !contents.torn_tail,
        "the torn line was cut before appending"
    );
    assert_eq!(contents.records.len(), 6);
    assert_eq!(contents.done().len(), 6, "every (task, strategy) pair once");
    let faithful = contents
        .records
        .iter()
        .filter(|r| r.faithfulness.as_ref().is_some_and(|f| f.faithful))
        .count();
    assert_eq!(faithful, 6, "the checker ran on every episode");

    // Nothing left: no model load, the report is rewritten from the trace.
    let (calls, planned, out3) = run(&cfg, dir.path());
    assert_eq!((calls, out3.ran, planned[0].1), (0, 0, 6));
}

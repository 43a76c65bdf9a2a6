//! The report from a prepared trace (numbers checked by hand), and solved and Faithful per
//! domain and size bucket.

mod common;


use onebrain_core::{Category, Drift, FaithfulnessReport};
use onebrain_eval::{read_trace, read_trace_rows, Report, SizeBucket, TraceRow, TraceWriter};
use onebrain_roles::{EpisodeRecord, Strategy};

use common::*;

#[test]
fn report_from_a_prepared_trace_matches_hand_computed_numbers() {
    use Category::*;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let weakened = FaithfulnessReport {
        solvable: true,
        drift: Some(Drift::GoalWeakening),
        schema_f1: 1.0,
        ..Default::default()
    };
    let records = vec![
        record(
            "a/1",
            "A",
            Strategy::MultiRole,
            &[None],
            Some(0.9),
            faithful(),
        ),
        record(
            "a/2",
            "A",
            Strategy::MultiRole,
            &[Some(Syntax), Some(GoalConstraint), None],
            Some(0.3),
            Some(weakened),
        ),
        record(
            "b/1",
            "B",
            Strategy::MultiRole,
            &[
                Some(Syntax),
                Some(Syntax),
                Some(ObjectType),
                Some(ObjectType),
                Some(Unreachable),
                Some(Unreachable),
            ],
            Some(0.6),
            Some(FaithfulnessReport::default()),
        ),
        record(
            "b/2",
            "B",
            Strategy::MultiRole,
            &[Some(PreconditionEffect), None],
            Some(0.2),
            faithful(),
        ),
        record("a/1", "A", Strategy::Direct, &[None], None, None),
    ];
    let mut w = TraceWriter::open(&trace).unwrap();
    for r in &records {
        w.append(r).unwrap();
    }
    drop(w);
    // A killed writer's torn line is dropped on reading.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"task_id\": \"a/3\", \"dom"))
        .unwrap();
    let contents = read_trace(&trace).unwrap();
    assert!(contents.torn_tail);
    assert_eq!(contents.records, records);

    let report = Report::from_records("prepared", &contents.records, 0.05, 1);
    assert_eq!(report.domains, ["A", "B"]);
    assert_eq!(
        report
            .strategies
            .iter()
            .map(|s| s.strategy)
            .collect::<Vec<_>>(),
        [Strategy::Direct, Strategy::MultiRole]
    );
    let mr = &report.strategies[1];
    assert_eq!(mr.n, 4);
    assert_eq!(
        (mr.success["A"].k, mr.success["A"].n, mr.success["B"].k),
        (2, 2, 1)
    );
    assert!((mr.average_success - 0.75).abs() < 1e-12, "(1.0 + 0.5) / 2");
    assert_eq!(mr.csr, [0.25, 0.5, 0.75, 0.75, 0.75, 0.75]);
    assert_eq!(mr.delta, [0.25, 0.25, 0.25, 0.0, 0.0, 0.0]);
    let at = |h: usize, c: &str| mr.dominant[h].get(c).copied().unwrap_or(0);
    assert_eq!((at(0, "syntax"), at(0, "precondition-effect")), (2, 1));
    assert_eq!((at(1, "goal-constraint"), at(1, "syntax")), (1, 1));
    assert_eq!(
        (
            at(2, "object-type"),
            at(3, "object-type"),
            at(4, "unreachable"),
            at(5, "unreachable")
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(
        mr.dominant[2].values().sum::<usize>(),
        1,
        "only b/1 is still unsolved at h = 2"
    );
    assert_eq!((mr.avg_solver_calls, mr.avg_repairs), (3.0, 2.0));
    let j = mr.judge.as_ref().unwrap();
    assert_eq!(
        (
            j.unsolved.clone(),
            j.solved_faithful.clone(),
            j.solved_unfaithful.len()
        ),
        (
            vec![0.30000001192092896, 0.6000000238418579, 0.20000000298023224],
            vec![0.8999999761581421],
            0
        )
    );
    assert_eq!(j.auc, Some(1.0));
    let f = mr.faithfulness.as_ref().unwrap();
    assert_eq!(
        (f.solvability, f.faithful_success, f.gap),
        (0.75, 0.5, 0.25)
    );
    assert!((f.drift.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(f.drift_categories.goal_weakening, 1);
    assert_eq!((mr.faithful["A"].k, mr.faithful["B"].k), (1, 1));
    let d = mr.disagreement.unwrap();
    assert_eq!(d.eps_hat, 0.25);
    // 0.25 + sqrt(ln(20) / 8) = 0.25 + 0.611940...
    assert!((d.bound - 0.861_940).abs() < 1e-5, "{}", d.bound);
    assert_eq!(
        (
            mr.timing.wall_ms,
            mr.timing.generation_ms,
            mr.timing.prefix_cache_share
        ),
        (1000.0, 800.0, 0.25)
    );
    assert_eq!(mr.timing.tokens_generated, 30.0, "(10 + 30 + 60 + 20) / 4");

    let direct = &report.strategies[0];
    assert_eq!((direct.average_success, direct.success.len()), (1.0, 1));
    assert!(direct.judge.is_none() && direct.faithfulness.is_none());

    let paths = report.write(dir.path()).unwrap();
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    assert!(
        md.contains("| multi-role | 100.0 (2/2) | 50.0 (1/2) | 75.0 | 3.00 | 3.00 |"),
        "{md}"
    );
    assert!(md.contains("| direct | 100.0 (1/1) | – | 100.0 |"), "{md}");
    assert!(
        md.contains("| multi-role | 25.0 (+25.0) | 50.0 (+25.0) | 75.0 (+25.0) | 75.0 (+0.0)"),
        "{md}"
    );
    assert!(
        md.contains("| multi-role | 4 | 75.0 | 50.0 | 33.3 | 25.0 |"),
        "{md}"
    );
    let names: Vec<String> = paths
        .plots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["success.svg", "csr.svg", "diagnostics.svg", "judge.svg"]
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(json["strategies"][1]["csr"][2], 0.75);
}

/// A trace row of `record` with its task's size.
fn row(record: EpisodeRecord, objects: Option<u32>) -> TraceRow {
    TraceRow { record, reference_objects: objects }
}

#[test]
fn the_report_counts_solved_and_faithful_per_domain_and_size_bucket() {
    let solved = |task: &str, domain: &str| record(task, domain, Strategy::MultiRole, &[None], None, faithful());
    let unfaithful = |task: &str, domain: &str| {
        record(task, domain, Strategy::MultiRole, &[None], None, Some(FaithfulnessReport { solvable: true, ..Default::default() }))
    };
    let failed = |task: &str, domain: &str| record(task, domain, Strategy::MultiRole, &[Some(Category::Syntax)], None, None);
    let mut refused = failed("a/9", "A");
    refused.error = Some(format!("model error (actor): {REFUSAL}"));
    let rows = vec![
        row(solved("a/1", "A"), Some(2)),     // fewer than 3: the first bucket
        row(unfaithful("a/2", "A"), Some(5)), // solved, not faithful
        row(failed("a/3", "A"), Some(6)),
        row(solved("a/4", "A"), Some(9)),
        row(solved("b/1", "B"), Some(10)),
        row(failed("b/2", "B"), Some(24)),
        row(solved("b/3", "B"), None),        // the trace does not say
        row(refused, Some(4)),                // no answer: in no row
    ];
    let report = Report::from_rows("sizes", &rows, 0.05, 1);
    let cells: Vec<(String, SizeBucket, usize, usize, usize)> = report.strategies[0]
        .by_size
        .iter()
        .map(|r| (r.domain.clone(), r.bucket, r.solved.n, r.solved.k, r.faithful.k))
        .collect();
    let c = |d: &str, b, n, k, f| (d.to_string(), b, n, k, f);
    assert_eq!(
        cells,
        [
            c("A", SizeBucket::Small, 2, 2, 1),
            c("A", SizeBucket::Medium, 2, 1, 1),
            c("B", SizeBucket::Large, 2, 1, 1),
            c("B", SizeBucket::Unknown, 1, 1, 1),
            c("all", SizeBucket::Small, 2, 2, 1),
            c("all", SizeBucket::Medium, 2, 1, 1),
            c("all", SizeBucket::Large, 2, 1, 1),
            c("all", SizeBucket::Unknown, 1, 1, 1),
        ]
    );
    let small = &report.strategies[0].by_size[0];
    // 1 of 2: Wilson [9.5 %, 90.5 %].
    assert_eq!(
        ((small.faithful_interval.0 * 1000.0).round(), (small.faithful_interval.1 * 1000.0).round()),
        (95.0, 905.0)
    );
    let md = report.markdown(&[]);
    assert!(md.contains("| multi-role | A | 3–5 | 2 | 100.0 (2/2) [34.2, 100.0] | 50.0 (1/2) [9.5, 90.5] |"), "{md}");
    assert!(md.contains("| multi-role | all | 10+ | 2 | 50.0 (1/2) [9.5, 90.5] | 50.0 (1/2) [9.5, 90.5] |"), "{md}");
    // Every other section is the report of the bare records.
    let records: Vec<EpisodeRecord> = rows.iter().map(|r| r.record.clone()).collect();
    let mut plain = Report::from_records("sizes", &records, 0.05, 1);
    assert!(plain.strategies[0].by_size.is_empty());
    plain.strategies[0].by_size = report.strategies[0].by_size.clone();
    assert_eq!(plain, report);
    // Rows of a trace written before the sizes: no table.
    let old: Vec<TraceRow> = records.into_iter().map(|r| row(r, None)).collect();
    assert!(Report::from_rows("old", &old, 0.05, 1).strategies[0].by_size.is_empty());
}

#[test]
fn a_trace_row_is_the_record_with_its_size_beside_it_and_old_traces_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let old = record("a/1", "A", Strategy::MultiRole, &[None], Some(0.5), faithful());
    let new = row(record("a/2", "A", Strategy::MultiRole, &[None], None, None), Some(7));
    let mut w = TraceWriter::open(&trace).unwrap();
    w.append(&old).unwrap();
    w.append(&new).unwrap();
    drop(w);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The size is one more top-level field of the line; a row without one is the bare record.
    assert!(lines[1].ends_with(",\"reference_objects\":7}"), "{}", lines[1]);
    assert_eq!(serde_json::to_string(&row(old.clone(), None)).unwrap(), lines[0]);
    let rows = read_trace_rows(&trace).unwrap().records;
    assert_eq!(rows, [row(old.clone(), None), new.clone()]);
    // Readers of the bare record (training, `onebrain plugins`) read both lines.
    assert_eq!(read_trace(&trace).unwrap().records, [old, new.record]);
}

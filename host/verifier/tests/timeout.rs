//! A spec the planner cannot finish within 1 s is killed and reported as a
//! timeout, leaving no process and no directory behind. Alone in its test
//! binary because it points TMPDIR at a folder of its own.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use onebrain_core::{Category, Outcome, Verifier};
use onebrain_verifier::SolverLimits;

/// Processes whose working directory lies under `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
            if cwd.starts_with(dir) {
                found.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    found
}

#[test]
fn planner_is_killed_at_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("TMPDIR", tmp.path());
    let limits = SolverLimits {
        timeout: Duration::from_secs(1),
        ..SolverLimits::default()
    };
    let verifier = common::verifier(limits);
    let started = Instant::now();
    let v = verifier.verify(&common::spec(
        "blocks-domain.pddl",
        "blocks-problem-hard.pddl",
    ));
    let elapsed = started.elapsed();
    assert_eq!(v.outcome, Outcome::Timeout, "{v:?}");
    assert!(!v.solved);
    assert_eq!(v.dominant_category(), Some(Category::Unreachable));
    assert!(
        v.diagnostics[0].message.contains("time limit"),
        "{}",
        v.diagnostics[0].message
    );
    assert!(v.solver_output.as_ref().unwrap().timed_out);
    // Killed at the limit, not whenever the search would have given up.
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    // SIGKILL is delivered to the whole group at once, but a killed grandchild (the
    // search under the driver) can take a moment to finish exiting: give it up to 5 s,
    // which still fails a planner that really outlives its limit.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = processes_in(tmp.path());
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_in(tmp.path());
    }
    assert!(left.is_empty(), "planner processes left: {left:?}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temporary directories left: {left:?}");
}

//! The real Fast Downward on PlanBench instances read in place from
//! ../shared/data: every tested instance gets a plan that validates.

mod common;

use std::path::Path;
use std::sync::Arc;

use onebrain_core::{Outcome, Spec};
use onebrain_pddl as pddl;
use onebrain_verifier::{SolverLimits, VerifierPool};

/// Every `stride`-th instance of a folder: a spread over the whole set that
/// keeps the test to a few seconds.
fn sample(dir: &Path, stride: usize) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort_by_key(|p| {
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        stem.trim_start_matches("instance-")
            .parse::<u32>()
            .unwrap_or(0)
    });
    files.into_iter().step_by(stride).collect()
}

fn solve_all(domain_dir: &str, instances: &str, stride: usize) {
    let Some(data) = common::shared_data() else {
        return;
    };
    let dir = data.join("planbench").join(domain_dir);
    let domain = std::fs::read_to_string(dir.join("domain.pddl")).unwrap();
    let files = sample(&dir.join(instances), stride);
    assert!(files.len() >= 5, "too few instances in {}", dir.display());
    let specs: Vec<Spec> = files
        .iter()
        .map(|f| Spec {
            domain: domain.clone(),
            problem: std::fs::read_to_string(f).unwrap(),
        })
        .collect();
    let pool = VerifierPool::new(Arc::new(common::verifier(SolverLimits::default())), 2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let verdicts = rt.block_on(pool.verify_all(specs.clone()));
    let d = pddl::parse_domain(&domain).unwrap();
    for ((file, spec), v) in files.iter().zip(&specs).zip(&verdicts) {
        assert_eq!(
            v.outcome,
            Outcome::Solved,
            "{}: {:?}",
            file.display(),
            v.diagnostics
        );
        let p = pddl::parse_problem(&spec.problem).unwrap();
        let plan = pddl::parse_plan(&v.plan.join("\n")).unwrap();
        let report = pddl::validate(&d, &p, &plan);
        assert!(report.valid, "{}: {}", file.display(), report.reason);
    }
    eprintln!(
        "{domain_dir}: {} instances solved and validated",
        files.len()
    );
}

#[test]
fn blocksworld() {
    solve_all("blocksworld", "instances", 50);
    solve_all("blocksworld", "instances_3blocks", 25);
}

#[test]
fn mystery_blocksworld() {
    solve_all("mystery_blocksworld", "instances", 50);
}

#[test]
fn logistics() {
    solve_all("logistics", "instances", 30);
}

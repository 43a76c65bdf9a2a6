//! The verifier's figures: native rejection against one planner
//! call, plan validation, verifier overhead against the bare driver, and
//! throughput with 1 and 2 workers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onebrain_core::{Outcome, Spec, Verifier};
use onebrain_eval::{load_planbench, PlanBenchSet};
use onebrain_pddl as pddl;
use onebrain_verifier::{FastDownward, PlanningVerifier, SolverLimits, VerifierPool};
use serde::Serialize;

use crate::{mean, median, Table};

/// What `onebrain bench verifier` measured.
#[derive(Debug, Serialize)]
pub struct VerifierBench {
    /// Median time to reject a malformed or ill-typed spec natively, µs.
    pub native_reject_us: f64,
    /// Median time of one Fast Downward call on the same specs, µs.
    pub planner_on_rejects_us: f64,
    /// planner / native: the target is ≥ 100.
    pub reject_speedup: f64,
    /// Mean time to parse and validate one PlanBench ground-truth plan, µs.
    pub validate_plan_us: f64,
    /// How many plans were validated (all must be valid).
    pub plans_validated: usize,
    /// Median `verify` time on solvable PlanBench specs, ms.
    pub verify_ms: f64,
    /// Median time of the bare driver on the same specs, ms.
    pub driver_ms: f64,
    /// verify − driver: the target is ≤ 10 ms.
    pub overhead_ms: f64,
    /// Specs per second on the mixed corpus with 1 and 2 workers.
    pub throughput: Vec<(usize, f64)>,
    /// Size of the mixed corpus.
    pub corpus: usize,
}

/// Runs every verifier benchmark. `data` is `../shared/data`; `reps` scales the repetitions.
pub fn run(data: &Path, reps: usize) -> Result<VerifierBench, String> {
    let fd = FastDownward::discover().map_err(|e| e.to_string())?;
    let limits = SolverLimits::default();
    let verifier = PlanningVerifier::new(fd.clone(), limits.clone());
    let bw = data.join("planbench/blocksworld");
    let bw_domain = read(&bw.join("domain.pddl"))?;
    let solvable: Vec<Spec> = (2..2 + 2 * reps.max(3))
        .map(|i| {
            Ok(Spec {
                domain: bw_domain.clone(),
                problem: read(&bw.join(format!("instances/instance-{i}.pddl")))?,
            })
        })
        .collect::<Result<_, String>>()?;
    let rejects = malformed_corpus(&solvable[0]);

    // 1. Native rejection vs one planner call on the same spec.
    let mut native = Vec::new();
    for spec in &rejects {
        let t = Instant::now();
        for _ in 0..50 {
            let v = verifier.verify(spec);
            assert_eq!(
                v.outcome,
                Outcome::Rejected,
                "corpus spec not rejected: {:?}",
                v.diagnostics
            );
        }
        native.push(t.elapsed().as_secs_f64() * 1e6 / 50.0);
    }
    let mut planner = Vec::new();
    for spec in &rejects {
        let run = fd
            .run(&spec.domain, &spec.problem, &limits)
            .map_err(|e| e.to_string())?;
        planner.push(run.elapsed.as_secs_f64() * 1e6);
    }
    let (native_reject_us, planner_on_rejects_us) = (median(&native), median(&planner));

    // 2. Plan validation on PlanBench ground-truth plans.
    let (validate_plan_us, plans_validated) = validate_ground_truth(data)?;

    // 3. Overhead over the bare driver, interleaved so drift hits both alike.
    let (mut verify, mut driver) = (Vec::new(), Vec::new());
    for spec in &solvable {
        let t = Instant::now();
        let v = verifier.verify(spec);
        verify.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(v.solved, "{:?}", v.diagnostics);
        driver.push(bare_driver(&fd, spec)?.as_secs_f64() * 1e3);
    }
    let (verify_ms, driver_ms) = (median(&verify), median(&driver));

    // 4. Throughput on a mixed corpus: valid, malformed, unsolvable.
    let unsolvable = Spec {
        domain: bw_domain.clone(),
        problem: solvable[0]
            .problem
            .replace("(:goal\n(and\n", "(:goal\n(and\n(on a b) (on b a)\n"),
    };
    let mut corpus = Vec::new();
    for i in 0..reps.max(3) {
        corpus.push(solvable[i % solvable.len()].clone());
        corpus.push(rejects[i % rejects.len()].clone());
        corpus.push(unsolvable.clone());
    }
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let shared: Arc<dyn Verifier> = Arc::new(verifier);
    let mut throughput = Vec::new();
    for workers in [1, 2] {
        let pool = VerifierPool::new(Arc::clone(&shared), workers);
        let t = Instant::now();
        let verdicts = rt.block_on(pool.verify_all(corpus.clone()));
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(verdicts.iter().filter(|v| v.solved).count(), reps.max(3));
        throughput.push((workers, corpus.len() as f64 / secs));
    }

    Ok(VerifierBench {
        native_reject_us,
        planner_on_rejects_us,
        reject_speedup: planner_on_rejects_us / native_reject_us,
        validate_plan_us,
        plans_validated,
        verify_ms,
        driver_ms,
        overhead_ms: verify_ms - driver_ms,
        throughput,
        corpus: corpus.len(),
    })
}

impl VerifierBench {
    /// The figures as a table with the targets.
    pub fn table(&self) -> Table {
        let mut t = Table::new(["measure", "onebrain", "peer", "ratio / target"]);
        t.row([
            "reject malformed spec".into(),
            format!("{:.0} µs native", self.native_reject_us),
            format!("{:.0} µs Fast Downward", self.planner_on_rejects_us),
            format!("{:.0}× faster (target ≥ 100×)", self.reject_speedup),
        ]);
        t.row([
            format!("validate PlanBench plan (n={})", self.plans_validated),
            format!("{:.1} µs", self.validate_plan_us),
            "-".into(),
            "-".into(),
        ]);
        t.row([
            "verify solvable spec".into(),
            format!("{:.1} ms verifier", self.verify_ms),
            format!("{:.1} ms bare driver", self.driver_ms),
            format!("{:+.1} ms overhead (target ≤ 10 ms)", self.overhead_ms),
        ]);
        for (workers, rate) in &self.throughput {
            t.row([
                format!(
                    "throughput, {workers} worker(s), mixed corpus n={}",
                    self.corpus
                ),
                format!("{rate:.1} specs/s"),
                "-".into(),
                "-".into(),
            ]);
        }
        t
    }
}

/// Malformed, ill-typed and schema-broken variants of a valid spec.
fn malformed_corpus(valid: &Spec) -> Vec<Spec> {
    let mut out = Vec::new();
    let mut missing_paren = valid.clone();
    missing_paren.problem = valid.problem.replacen(')', "", 1);
    out.push(missing_paren);
    let mut bad_predicate = valid.clone();
    bad_predicate.problem = valid.problem.replace("(handempty)", "(hand-empty)");
    out.push(bad_predicate);
    let mut bad_object = valid.clone();
    bad_object.problem = valid.problem.replace("(clear a)", "(clear z)");
    out.push(bad_object);
    let mut bad_arity = valid.clone();
    bad_arity.domain = valid.domain.replace(
        "(holding ?ob) (not (clear ?ob))",
        "(holding ?ob ?ob) (not (clear ?ob))",
    );
    out.push(bad_arity);
    out
}

/// The peer for the overhead figure: the driver called directly, as a script would.
fn bare_driver(fd: &FastDownward, spec: &Spec) -> Result<Duration, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("domain.pddl"), &spec.domain).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("problem.pddl"), &spec.problem).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let status = Command::new(fd.python())
        .arg(fd.driver())
        .args([
            "--plan-file",
            "plan",
            "--alias",
            "lama-first",
            "domain.pddl",
            "problem.pddl",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| e.to_string())?;
    let elapsed = t.elapsed();
    if !status.success() {
        return Err(format!("bare driver failed: {status}"));
    }
    Ok(elapsed)
}

/// Parses and validates every PlanBench ground-truth plan against its task.
fn validate_ground_truth(data: &Path) -> Result<(f64, usize), String> {
    let mut times = Vec::new();
    for set in PlanBenchSet::ALL {
        let tasks = load_planbench(data, set).map_err(|e| e.to_string())?;
        let Some(first) = tasks.first() else { continue };
        let domain = pddl::parse_domain(&first.domain_pddl).map_err(|e| e.to_string())?;
        for task in &tasks {
            let problem = pddl::parse_problem(&task.problem_pddl).map_err(|e| e.to_string())?;
            let plan_text = task.ground_truth_plan.join("\n");
            let t = Instant::now();
            let plan = pddl::parse_plan(&plan_text).map_err(|e| e.to_string())?;
            let report = pddl::validate(&domain, &problem, &plan);
            times.push(t.elapsed().as_secs_f64() * 1e6);
            if !report.valid {
                return Err(format!(
                    "{}: ground-truth plan invalid: {}",
                    task.problem_path.display(),
                    report.reason
                ));
            }
        }
    }
    Ok((mean(&times), times.len()))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

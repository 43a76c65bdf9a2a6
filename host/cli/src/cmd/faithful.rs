use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use onebrain_core::{Checker, FaithfulnessReport, Spec, Verifier};
use onebrain_runtime::RuntimeConfig;
use onebrain_verifier::{PlanningVerifier, SolverLimits};
use serde::Serialize;

use crate::cmd::{print_json, read, Status};
use crate::flags::FaithfulArgs;
use crate::out::outln;

/// The report plus what the verifier said of the candidate.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    report: &'a FaithfulnessReport,
    plan: &'a [String],
    checker: &'a str,
}

pub fn run(args: FaithfulArgs) -> anyhow::Result<Status> {
    let reference = Spec {
        domain: read(&args.ref_domain)?,
        problem: read(&args.ref_problem)?,
    };
    let candidate = Spec {
        domain: read(&args.domain)?,
        problem: read(&args.problem)?,
    };
    let checker: Arc<dyn Checker> = if args.native {
        Arc::new(onebrain_faithful::ReferenceChecker::default())
    } else {
        let config = RuntimeConfig {
            plugin_dirs: args.plugin_dirs.clone(),
            cache_dir: Some(".cache/components".into()),
            checker: Some(args.checker.clone()),
            ..RuntimeConfig::default()
        };
        config
            .load(Path::new("."))?
            .checker
            .context("no checker loaded")?
    };
    let limits = SolverLimits {
        timeout: Duration::from_secs_f64(args.timeout),
        ..SolverLimits::default()
    };
    let verdict = PlanningVerifier::discover(limits)
        .context("cannot set up the verifier")?
        .verify(&candidate);
    let plan = verdict.solved.then_some(verdict.plan.as_slice());
    let report = checker
        .check(&reference, &candidate, plan)
        .map_err(|e| anyhow!("the checker failed: {e}"))?;
    let name = if args.native {
        "reference-checker (native)"
    } else {
        args.checker.as_str()
    };
    if args.json {
        print_json(&Output {
            report: &report,
            plan: &verdict.plan,
            checker: name,
        })?;
        return Ok(Status::of(report.faithful));
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    let drift = report
        .drift
        .map(|d| format!(" ({})", d.as_str()))
        .unwrap_or_default();
    // Undecided is a verdict of its own: the budget ran out with nothing refuted.
    let answer = if report.undecided { "undecided" } else { yes(report.faithful) };
    outln!("faithful: {answer}{drift}")?;
    outln!(
        "  solvable          {} ({} plan steps)",
        yes(report.solvable),
        verdict.plan.len()
    )?;
    outln!(
        "  goal preserved    {} (decided: {:?})",
        yes(report.goal_preserved),
        report.decision
    )?;
    outln!("  objects preserved {}", yes(report.objects_preserved))?;
    outln!("  initial state     {}", if report.init_preserved { "equal under renaming" } else { "not matched" })?;
    outln!(
        "  schema consistent {} (F1 {:.2})",
        yes(report.schema_consistent),
        report.schema_f1
    )?;
    outln!("  plan replay       {}", yes(report.plan_replay_ok))?;
    for line in &report.explanation {
        outln!("  - {line}")?;
    }
    // Undecided is not a yes: nothing refuted it, and nothing showed it faithful either.
    Ok(Status::of(report.faithful))
}

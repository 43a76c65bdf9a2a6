use std::time::Duration;

use anyhow::{bail, Context};
use onebrain_core::{Spec, Verifier};
use onebrain_verifier::{PlanningVerifier, Search, SolverLimits};

use crate::cmd::{print_json, read, Status};
use crate::flags::CheckArgs;
use crate::render;
use crate::out::out;

pub fn run(args: CheckArgs) -> anyhow::Result<Status> {
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        bail!(
            "--timeout must be a positive number of seconds, got {}",
            args.timeout
        );
    }
    let spec = Spec {
        domain: read(&args.domain)?,
        problem: read(&args.problem)?,
    };
    let limits = SolverLimits {
        timeout: Duration::from_secs_f64(args.timeout),
        memory_mb: args.memory_mb,
        search: Search::parse(&args.search),
    };
    let verifier = PlanningVerifier::discover(limits).context("cannot set up the verifier")?;
    let mut verdict = verifier.verify(&spec);
    if args.json {
        if !args.solver_output {
            verdict.solver_output = None;
        }
        print_json(&verdict)?;
        return Ok(Status::of(verdict.solved));
    }
    let files = render::Files {
        domain: &args.domain,
        problem: &args.problem,
        plan: None,
    };
    out!("{}", render::verdict(&verdict, &files))?;
    Ok(Status::of(verdict.solved))
}

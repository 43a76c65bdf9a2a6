use onebrain_pddl as pddl;
use onebrain_pddl::SpecFile;

use crate::cmd::{print_json, read, Status};
use crate::flags::ValidateArgs;
use crate::render;
use crate::out::out;

pub fn run(args: ValidateArgs) -> anyhow::Result<Status> {
    let report = validate_files(
        &read(&args.domain)?,
        &read(&args.problem)?,
        &read(&args.plan)?,
    );
    if args.json {
        print_json(&report)?;
    } else {
        out!("{}", render::validation(&report))?;
    }
    Ok(Status::of(report.valid))
}

/// Malformed input is a verdict (`valid: false` with the parse error as the
/// reason), not a failure of the command.
fn validate_files(domain: &str, problem: &str, plan: &str) -> pddl::ValidationReport {
    let parsed = (|| {
        let d = pddl::parse_domain(domain).map_err(|e| (SpecFile::Domain, e))?;
        let p = pddl::parse_problem(problem).map_err(|e| (SpecFile::Problem, e))?;
        let plan = pddl::parse_plan(plan).map_err(|e| (SpecFile::Plan, e))?;
        Ok::<_, (SpecFile, pddl::ParseError)>((d, p, plan))
    })();
    match parsed {
        Ok((d, p, plan)) => pddl::validate(&d, &p, &plan),
        Err((file, e)) => pddl::ValidationReport {
            valid: false,
            steps: 0,
            failed_step: None,
            reason: format!("{} does not parse: {e}", render::file_label(file)),
            unsatisfied: Vec::new(),
        },
    }
}

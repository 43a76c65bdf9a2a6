//! The human-readable forms of verdicts and reports.

use std::fmt::Write;
use std::path::Path;

use onebrain_core::{Diagnostic, Outcome, Severity, SpecFile, Verdict};
use onebrain_pddl::ValidationReport;

/// The files a verdict's diagnostics point into.
pub struct Files<'a> {
    pub domain: &'a Path,
    pub problem: &'a Path,
    pub plan: Option<&'a Path>,
}

pub fn file_label(file: SpecFile) -> &'static str {
    match file {
        SpecFile::Domain => "the domain",
        SpecFile::Problem => "the problem",
        SpecFile::Plan => "the plan",
    }
}

/// `error[predicate-schema] problem.pddl:7:3: undefined predicate onn`, as compilers print.
pub fn diagnostic(d: &Diagnostic, files: &Files) -> String {
    let severity = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let path = d.file.and_then(|f| match f {
        SpecFile::Domain => Some(files.domain),
        SpecFile::Problem => Some(files.problem),
        SpecFile::Plan => files.plan,
    });
    let mut at = String::new();
    if let Some(path) = path {
        at.push_str(&path.display().to_string());
        if let (Some(line), Some(col)) = (d.line, d.column) {
            let _ = write!(at, ":{line}:{col}");
        }
        at.push_str(": ");
    }
    format!("{severity}[{}] {at}{}", d.category.as_str(), d.message)
}

pub fn verdict(v: &Verdict, files: &Files) -> String {
    let mut s = String::new();
    let why = match v.outcome {
        Outcome::Solved => "solved",
        Outcome::Rejected => "not solved: rejected by the native checks (planner not called)",
        Outcome::Unsolvable => "not solved: unsolvable",
        Outcome::Timeout => "not solved: the planner timed out",
        Outcome::OutOfMemory => "not solved: the planner ran out of memory",
        Outcome::InputError => "not solved: the planner rejected the input",
        Outcome::SolverError => "not solved: the planner failed",
    };
    match v.time_ms {
        0 => {
            let _ = write!(s, "{why} in < 1 ms");
        }
        ms => {
            let _ = write!(s, "{why} in {ms} ms");
        }
    }
    if v.solver_time_ms > 0 {
        let _ = write!(s, " (planner {} ms)", v.solver_time_ms);
    }
    s.push('\n');
    if v.solved {
        let _ = writeln!(s, "plan ({} steps):", v.plan.len());
        for (i, step) in v.plan.iter().enumerate() {
            let _ = writeln!(s, "  {:>3}. {step}", i + 1);
        }
    }
    for d in &v.diagnostics {
        let _ = writeln!(s, "{}", diagnostic(d, files));
    }
    s
}

pub fn validation(r: &ValidationReport) -> String {
    let mut s = String::new();
    if r.valid {
        let _ = writeln!(s, "valid plan: {} steps reach the goal", r.steps);
    } else {
        match r.failed_step {
            Some(k) => {
                let _ = writeln!(s, "invalid plan: step {k} of {}: {}", r.steps, r.reason);
            }
            None => {
                let _ = writeln!(s, "invalid plan: {}", r.reason);
            }
        }
        for atom in &r.unsatisfied {
            let _ = writeln!(s, "  unsatisfied: {atom}");
        }
    }
    s
}

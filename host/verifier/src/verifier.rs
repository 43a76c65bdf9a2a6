//! E(y) → (b, d): native checks first, the planner only for specs that pass.

use std::sync::Arc;
use std::time::Instant;

use onebrain_core::{
    Category, Diagnostic, DiagnosticParser, Outcome, Severity, Spec, SpecFile, Verdict, Verifier,
};
use onebrain_pddl as pddl;

use crate::error::VerifierError;
use crate::fast_downward::{FastDownward, SolverLimits};
use crate::solver_diagnostics;

/// The verifier of the paper: parse, check and ground natively; then Fast
/// Downward; then re-validate its plan natively against the spec.
#[derive(Clone)]
pub struct PlanningVerifier {
    planner: FastDownward,
    limits: SolverLimits,
    parser: Option<Arc<dyn DiagnosticParser>>,
}

impl std::fmt::Debug for PlanningVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanningVerifier")
            .field("planner", &self.planner)
            .field("limits", &self.limits)
            .field("diagnostic_parser", &self.parser.is_some())
            .finish()
    }
}

impl PlanningVerifier {
    /// A verifier that runs `planner` under `limits`.
    pub fn new(planner: FastDownward, limits: SolverLimits) -> Self {
        PlanningVerifier {
            planner,
            limits,
            parser: None,
        }
    }

    /// A verifier with the Fast Downward that `scripts/setup.sh` installed.
    pub fn discover(limits: SolverLimits) -> Result<Self, VerifierError> {
        Ok(PlanningVerifier::new(FastDownward::discover()?, limits))
    }

    /// Lets a `diagnostic-parser` plugin read the planner's output. If the
    /// plugin fails, the built-in reading is used and its failure is recorded
    /// as a `solver-error` warning.
    pub fn with_diagnostic_parser(mut self, parser: Arc<dyn DiagnosticParser>) -> Self {
        self.parser = Some(parser);
        self
    }

    /// The limits each planner call runs under.
    pub fn limits(&self) -> &SolverLimits {
        &self.limits
    }

    fn verify_inner(&self, spec: &Spec) -> Verdict {
        let started = Instant::now();
        let mut verdict = Verdict {
            solved: false,
            outcome: Outcome::Rejected,
            plan: Vec::new(),
            diagnostics: Vec::new(),
            time_ms: 0,
            solver_time_ms: 0,
            solver_output: None,
        };

        // 1. Native checks: parse, semantics, relaxed reachability. An error
        //    here is found in microseconds; the planner would take ~140 ms to
        //    say less.
        let domain = pddl::parse_domain(&spec.domain);
        let problem = pddl::parse_problem(&spec.problem);
        let (domain, problem) = match (domain, problem) {
            (Ok(d), Ok(p)) => (d, p),
            (d, p) => {
                if let Err(e) = d {
                    verdict.diagnostics.push(e.to_diagnostic(SpecFile::Domain));
                }
                if let Err(e) = p {
                    verdict.diagnostics.push(e.to_diagnostic(SpecFile::Problem));
                }
                return finish(verdict, started);
            }
        };
        verdict.diagnostics = pddl::check(&domain, &problem);
        if pddl::has_errors(&verdict.diagnostics) {
            return finish(verdict, started);
        }

        // 2. The planner.
        let run = match self.planner.run(&spec.domain, &spec.problem, &self.limits) {
            Ok(run) => run,
            Err(e) => {
                verdict.outcome = Outcome::SolverError;
                verdict.diagnostics.push(error(
                    Category::SolverError,
                    format!("could not run the planner: {e}"),
                ));
                return finish(verdict, started);
            }
        };
        verdict.solver_time_ms = run.elapsed.as_millis() as u64;
        verdict.outcome = run.outcome;

        // 3. Its plan, re-validated against the spec it was found for.
        if run.outcome == Outcome::Solved {
            let text = run.plan.as_deref().unwrap_or_default();
            match pddl::parse_plan(text) {
                Ok(plan) => {
                    let report = pddl::validate(&domain, &problem, &plan);
                    if report.valid {
                        verdict.solved = true;
                        verdict.plan = plan.steps.iter().map(|s| s.to_string()).collect();
                    } else {
                        verdict.outcome = Outcome::SolverError;
                        verdict.diagnostics.push(error(
                            Category::SolverError,
                            format!("the planner's plan does not validate: {}", report.reason),
                        ));
                    }
                }
                Err(e) => {
                    verdict.outcome = Outcome::SolverError;
                    verdict.diagnostics.push(error(
                        Category::SolverError,
                        format!("unreadable plan file: {e}"),
                    ));
                }
            }
        } else {
            verdict.diagnostics.extend(self.read_solver_output(
                run.outcome,
                &run.output,
                &verdict.diagnostics,
            ));
        }
        verdict.solver_output = Some(run.output);
        finish(verdict, started)
    }

    fn read_solver_output(
        &self,
        outcome: Outcome,
        out: &onebrain_core::SolverOutput,
        native: &[Diagnostic],
    ) -> Vec<Diagnostic> {
        let builtin = || {
            solver_diagnostics::diagnose(outcome, out, self.limits.timeout, self.limits.memory_mb)
        };
        let Some(parser) = &self.parser else {
            return builtin();
        };
        match parser.parse(out, native) {
            Ok(diags) if !diags.is_empty() => diags,
            Ok(_) => builtin(),
            Err(e) => {
                let mut diags = builtin();
                diags.push(Diagnostic {
                    category: Category::SolverError,
                    severity: Severity::Warning,
                    message: format!("diagnostic parser plugin failed, built-in reading used: {e}"),
                    file: None,
                    line: None,
                    column: None,
                });
                diags
            }
        }
    }
}

impl Verifier for PlanningVerifier {
    fn verify(&self, spec: &Spec) -> Verdict {
        self.verify_inner(spec)
    }
}

fn error(category: Category, message: String) -> Diagnostic {
    Diagnostic {
        category,
        severity: Severity::Error,
        message,
        file: None,
        line: None,
        column: None,
    }
}

/// Errors before warnings (stable within each), and the total time.
fn finish(mut verdict: Verdict, started: Instant) -> Verdict {
    verdict
        .diagnostics
        .sort_by_key(|d| d.severity != Severity::Error);
    verdict.time_ms = started.elapsed().as_millis() as u64;
    verdict
}

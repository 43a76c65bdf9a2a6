//! What the task's text says against a spec: diagnostic reviewers (a config's
//! `diagnostic-reviewers`, e.g. the `text-diagnostics` plugin) read every unsolved spec
//! against the task text, and what they find joins the verdict's diagnostics, so the Editor
//! sees it beside the planner's. The planner's diagnostics say nothing about an invented
//! `table` block or an `(ontable a)` the text contradicts; these do.

use std::sync::Arc;
use std::time::Instant;

use onebrain_core::{Category, Diagnostic, DiagnosticParser, Severity, Spec, Verdict, Verifier};

/// A verifier whose verdicts also carry what its reviewers find. No verdict's b, outcome or
/// plan changes: a review only adds diagnostics. On a solved spec the findings are warnings:
/// the multi-role Editor never sees them, while `best-then-repair`'s Editor, which repairs a
/// solved spec that does not state the task, does. A reviewer that fails (traps, times out,
/// answers what the host refuses) leaves a `solver-error` warning naming it, and the
/// episode goes on.
pub struct ReviewedVerifier {
    inner: Arc<dyn Verifier>,
    reviewers: Vec<Arc<dyn DiagnosticParser>>,
}

impl std::fmt::Debug for ReviewedVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewedVerifier").field("reviewers", &self.reviewers.len()).finish()
    }
}

impl ReviewedVerifier {
    /// `inner`, with `reviewers` called in order on each unsolved verdict.
    pub fn new(inner: Arc<dyn Verifier>, reviewers: Vec<Arc<dyn DiagnosticParser>>) -> Self {
        ReviewedVerifier { inner, reviewers }
    }
}

impl Verifier for ReviewedVerifier {
    /// No task text, nothing to review: `inner`'s verdict.
    fn verify(&self, spec: &Spec) -> Verdict {
        self.inner.verify(spec)
    }

    fn verify_task(&self, task_text: &str, spec: &Spec) -> Verdict {
        let mut verdict = self.inner.verify_task(task_text, spec);
        if self.reviewers.is_empty() {
            return verdict;
        }
        let started = Instant::now();
        for reviewer in &self.reviewers {
            match reviewer.review(task_text, spec, &verdict.diagnostics) {
                Ok(mut found) => {
                    if verdict.solved {
                        found.iter_mut().for_each(|d| d.severity = Severity::Warning);
                    }
                    verdict.diagnostics.extend(found)
                }
                Err(e) => verdict.diagnostics.push(Diagnostic::warning(
                    Category::SolverError,
                    format!("diagnostic reviewer plugin failed, its review skipped: {e}"),
                )),
            }
        }
        // Errors before warnings, as the verifier orders them (stable within each).
        verdict.diagnostics.sort_by_key(|d| d.severity != Severity::Error);
        verdict.time_ms += started.elapsed().as_millis() as u64;
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::{BoxError, Outcome, SolverOutput};

    /// Unsolved, with one planner error; solved when the problem says "solved".
    struct Planner;

    impl Verifier for Planner {
        fn verify(&self, spec: &Spec) -> Verdict {
            if spec.problem == "solved" {
                return Verdict::new(Outcome::Solved, vec!["(noop)".into()], vec![]);
            }
            let warning = Diagnostic::warning(Category::PreconditionEffect, "an action never applies");
            let error = Diagnostic::error(Category::Unreachable, "the goal is unreachable");
            Verdict::new(Outcome::Unsolvable, vec![], vec![error, warning])
        }
    }

    /// Answers one warning naming the text and what it was shown, or fails.
    struct Reviewer {
        fail: bool,
    }

    impl DiagnosticParser for Reviewer {
        fn parse(&self, _: &SolverOutput, _: &[Diagnostic]) -> Result<Vec<Diagnostic>, BoxError> {
            Ok(Vec::new())
        }

        fn review(&self, task_text: &str, spec: &Spec, found: &[Diagnostic]) -> Result<Vec<Diagnostic>, BoxError> {
            if self.fail {
                return Err("plugin text-diagnostics@0.1.0 trapped: unreachable".into());
            }
            let message = format!("{task_text} / {} / {} found", spec.problem, found.len());
            Ok(vec![Diagnostic::warning(Category::ObjectType, message)])
        }
    }

    fn spec(problem: &str) -> Spec {
        Spec { domain: String::new(), problem: problem.into() }
    }

    #[test]
    fn reviews_join_an_unsolved_verdict_and_change_nothing_else() {
        let reviewers: Vec<Arc<dyn DiagnosticParser>> =
            vec![Arc::new(Reviewer { fail: false }), Arc::new(Reviewer { fail: false })];
        let v = ReviewedVerifier::new(Arc::new(Planner), reviewers);
        let got = v.verify_task("the text", &spec("p"));
        let plain = Planner.verify(&spec("p"));
        assert_eq!((got.solved, got.outcome, &got.plan), (plain.solved, plain.outcome, &plain.plan));
        let messages: Vec<&str> = got.diagnostics.iter().map(|d| d.message.as_str()).collect();
        // The second reviewer sees the first one's finding; errors stay first.
        assert_eq!(
            messages,
            ["the goal is unreachable", "an action never applies", "the text / p / 2 found", "the text / p / 3 found"]
        );
        // No text (`onebrain check`): nothing is reviewed.
        assert_eq!(v.verify(&spec("p")).diagnostics.len(), 2);
        // A solved spec is reviewed, its findings warnings, its verdict unchanged.
        let solved = v.verify_task("the text", &spec("solved"));
        assert!(solved.solved);
        assert_eq!(solved.diagnostics.len(), 2);
        assert!(solved.diagnostics.iter().all(|d| d.severity == Severity::Warning));
    }

    #[test]
    fn a_failed_review_is_a_warning_and_the_verdict_stands() {
        let reviewers: Vec<Arc<dyn DiagnosticParser>> =
            vec![Arc::new(Reviewer { fail: true }), Arc::new(Reviewer { fail: false })];
        let got = ReviewedVerifier::new(Arc::new(Planner), reviewers).verify_task("x", &spec("p"));
        assert_eq!(got.outcome, Outcome::Unsolvable);
        let failed = &got.diagnostics[2];
        assert_eq!((failed.category, failed.severity), (Category::SolverError, Severity::Warning));
        assert!(failed.message.contains("diagnostic reviewer plugin failed, its review skipped: plugin text-diagnostics@0.1.0 trapped"));
        assert_eq!(got.diagnostics[3].message, "x / p / 3 found", "the next reviewer still ran");
    }
}

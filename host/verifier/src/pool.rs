//! Many verifications at once, bounded by a worker count.

use std::sync::Arc;

use onebrain_core::{Category, Diagnostic, Outcome, Severity, Spec, Verdict, Verifier};
use tokio::sync::Semaphore;

/// Runs verifications concurrently on tokio's blocking pool, at most
/// `workers` at a time: each one is a planner process, so the bound is what
/// keeps 2 cores from thrashing.
#[derive(Clone)]
pub struct VerifierPool {
    verifier: Arc<dyn Verifier>,
    permits: Arc<Semaphore>,
    workers: usize,
}

impl VerifierPool {
    /// A pool over `verifier` with `workers` concurrent verifications (at least one).
    pub fn new(verifier: Arc<dyn Verifier>, workers: usize) -> Self {
        let workers = workers.max(1);
        VerifierPool {
            verifier,
            permits: Arc::new(Semaphore::new(workers)),
            workers,
        }
    }

    /// The concurrency bound.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Verifies one spec when a worker is free.
    pub async fn verify(&self, spec: Spec) -> Verdict {
        self.run(move |v| v.verify(&spec)).await
    }

    /// Verifies one spec written for the task stated by `task_text`
    /// ([`Verifier::verify_task`]) when a worker is free.
    pub async fn verify_task(&self, task_text: String, spec: Spec) -> Verdict {
        self.run(move |v| v.verify_task(&task_text, &spec)).await
    }

    async fn run(&self, verify: impl FnOnce(&dyn Verifier) -> Verdict + Send + 'static) -> Verdict {
        // The semaphore is never closed, so acquire cannot fail.
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("verifier pool semaphore closed");
        let verifier = Arc::clone(&self.verifier);
        match tokio::task::spawn_blocking(move || verify(verifier.as_ref())).await {
            Ok(verdict) => verdict,
            // A panic inside a verifier is a bug, but it must not take the run down.
            Err(e) => Verdict {
                solved: false,
                outcome: Outcome::SolverError,
                plan: Vec::new(),
                diagnostics: vec![Diagnostic {
                    category: Category::SolverError,
                    severity: Severity::Error,
                    message: format!("the verifier failed internally: {e}"),
                    file: None,
                    line: None,
                    column: None,
                }],
                time_ms: 0,
                solver_time_ms: 0,
                solver_output: None,
            },
        }
    }

    /// Verifies every spec, `workers` at a time; verdicts come back in input order.
    pub async fn verify_all(&self, specs: Vec<Spec>) -> Vec<Verdict> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let pool = self.clone();
            tasks.spawn(async move { (i, pool.verify(spec).await) });
        }
        let mut out: Vec<Option<Verdict>> = Vec::new();
        out.resize_with(tasks.len(), || None);
        while let Some(joined) = tasks.join_next().await {
            // `verify` never panics (it catches the blocking task's panic).
            let (i, verdict) = joined.expect("verify task panicked");
            out[i] = Some(verdict);
        }
        out.into_iter()
            .map(|v| v.expect("every spec verified"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts how many verifications overlap.
    struct Slow {
        running: AtomicUsize,
        peak: AtomicUsize,
    }

    impl Verifier for Slow {
        fn verify(&self, spec: &Spec) -> Verdict {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            self.running.fetch_sub(1, Ordering::SeqCst);
            if spec.domain == "panic" {
                panic!("boom");
            }
            Verdict {
                solved: spec.domain == "ok",
                outcome: Outcome::Solved,
                plan: vec![spec.problem.clone()],
                diagnostics: Vec::new(),
                time_ms: 0,
                solver_time_ms: 0,
                solver_output: None,
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bounded_ordered_and_panic_safe() {
        let slow = Arc::new(Slow {
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        let pool = VerifierPool::new(slow.clone(), 2);
        let specs: Vec<Spec> = (0..8)
            .map(|i| Spec {
                domain: if i == 3 { "panic".into() } else { "ok".into() },
                problem: i.to_string(),
            })
            .collect();
        let verdicts = pool.verify_all(specs).await;
        assert_eq!(verdicts.len(), 8);
        for (i, v) in verdicts.iter().enumerate() {
            if i == 3 {
                assert_eq!(v.outcome, Outcome::SolverError);
                assert!(v.diagnostics[0].message.contains("failed internally"));
            } else {
                assert_eq!(v.plan, vec![i.to_string()]);
            }
        }
        assert!(slow.peak.load(Ordering::SeqCst) <= 2);
        assert!(slow.peak.load(Ordering::SeqCst) >= 1);
    }
}

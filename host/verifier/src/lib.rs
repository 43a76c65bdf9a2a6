//! The verifier E(y) → (b, d) of the paper.
//!
//! [`PlanningVerifier`] checks a spec natively with `onebrain-pddl` (parse,
//! semantic checks, delete-relaxed reachability) and only hands specs that
//! pass to Fast Downward, which runs as a subprocess in its own temporary
//! directory and process group under a wall-clock and a memory limit. A plan
//! it finds is re-validated natively. Every way this can end — solved,
//! rejected, unsolvable, timed out, out of memory, input error, crash — is a
//! [`Verdict`](onebrain_core::Verdict) with categorised diagnostics, never an
//! error. [`VerifierPool`] runs many verifications concurrently.
//! [`ReviewedVerifier`] adds what diagnostic reviewers (plugins that read a spec
//! against the task's text) find to each unsolved verdict, for the Editor.
//!
//! ```no_run
//! use onebrain_core::{Spec, Verifier};
//! use onebrain_verifier::{PlanningVerifier, SolverLimits};
//!
//! let verifier = PlanningVerifier::discover(SolverLimits::default())?;
//! let verdict = verifier.verify(&Spec {
//!     domain: std::fs::read_to_string("domain.pddl")?,
//!     problem: std::fs::read_to_string("problem.pddl")?,
//! });
//! println!("solved: {}, plan: {:?}", verdict.solved, verdict.plan);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod error;
mod fast_downward;
mod pool;
mod review;
mod solver_diagnostics;
mod verifier;

pub use error::VerifierError;
pub use fast_downward::{FastDownward, Search, SolverLimits, SolverRun, DRIVER_ENV, PYTHON_ENV};
pub use pool::VerifierPool;
pub use review::ReviewedVerifier;
pub use solver_diagnostics::error_excerpt;
pub use verifier::PlanningVerifier;

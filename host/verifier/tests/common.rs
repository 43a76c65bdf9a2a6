//! Shared by the verifier's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use onebrain_core::Spec;
use onebrain_verifier::{PlanningVerifier, SolverLimits};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> String {
    let path = repo().join("tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn spec(domain: &str, problem: &str) -> Spec {
    Spec {
        domain: fixture(domain),
        problem: fixture(problem),
    }
}

/// `../shared/data` beside the repository, if this machine has it.
pub fn shared_data() -> Option<PathBuf> {
    let dir = repo().join("../shared/data");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} is absent", dir.display());
        None
    }
}

/// The verifier on the Fast Downward that `scripts/setup.sh` installed. Its
/// absence is a set-up error, not a reason to skip: `make test` installs it.
pub fn verifier(limits: SolverLimits) -> PlanningVerifier {
    PlanningVerifier::discover(limits).expect("Fast Downward missing: run scripts/setup.sh")
}

//! The verifier E(y) -> (b, d): native PDDL checks, then Fast Downward as a sandboxed subprocess.
#![deny(missing_docs)]

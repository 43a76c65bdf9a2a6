//! PDDL toolkit: parser with spans, semantic checks, grounding, relaxed reachability, simulation and plan validation. Pure Rust, no I/O; builds for wasm32.
#![deny(missing_docs)]

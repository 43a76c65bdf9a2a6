//! The binary loads and calls its plugins under `ulimit -v 8000000`, a limit shared
//! clusters often set. wasmtime reserved 4 GiB of address space per plugin memory, and
//! `solve` failed with "mmap failed to reserve 0x104000000 bytes". (`solve` itself runs under
//! the same limit in `solve.rs`.)

use crate::harness::{build_plugins, TestCommand};

#[test]
fn plugins_check_runs_under_ulimit_v_8000000() {
    build_plugins();
    let out = TestCommand::new(&["plugins", "check"]).address_limit_kb(8_000_000).stdout();
    assert!(out.matches("): ok").count() >= 8, "every bundled plugin loads and answers:\n{out}");
    assert!(out.contains("64 MiB memory (68 MiB of address space)"), "{out}");
}

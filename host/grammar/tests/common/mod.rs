//! Where the grammar tests find the repository's domains and the benchmark data.

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared/data`, or `None` (saying so) where the machine has no benchmark data.
pub fn data() -> Option<PathBuf> {
    let d = repo().join("../shared/data");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping the benchmark domains: {} is absent", d.display());
        None
    }
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

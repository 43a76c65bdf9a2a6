//! PlanBench read in place, for the native tests of the plugins that use this crate
//! (feature `planbench`, never in a plugin's build).

use std::path::{Path, PathBuf};

use onebrain_sdk::Spec;

/// `../shared/data` beside the repository, or `None` (the caller's test then skips, saying so).
pub fn data_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping: benchmark data not found at {}", d.display());
        None
    }
}

/// Every PlanBench row of `folder` (files in name order): (statement, reference spec).
pub fn rows(data: &Path, folder: &str) -> Vec<(String, Spec)> {
    let dir = data.join("planbench").join(folder);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut rows = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("nl_tasks") && name.ends_with(".jsonl")) {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let read = |k: &str| std::fs::read_to_string(dir.join(row[k].as_str().unwrap())).unwrap();
            let spec = Spec { domain: read("domain_pddl"), problem: read("problem_pddl") };
            rows.push((row["nl_statement"].as_str().unwrap().to_string(), spec));
        }
    }
    rows
}

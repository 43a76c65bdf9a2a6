//! Every config the repository ships parses and validates, and the eval config a training
//! config names exists: a key renamed in code must not strand a config nobody runs in CI.

use std::path::Path;

use onebrain_eval::EvalConfig;
use onebrain_roles::{config_base, SolveConfig};
use onebrain_train::TrainConfig;

#[test]
fn every_shipped_config_parses() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs"));
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".toml") {
            continue;
        }
        seen += 1;
        if name.starts_with("train-") {
            let cfg = TrainConfig::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            if let Some(eval) = &cfg.eval_config {
                let eval = config_base(&path).join(eval);
                EvalConfig::from_file(&eval).unwrap_or_else(|e| panic!("{name} names {}: {e}", eval.display()));
            }
        } else if name.starts_with("eval-") {
            EvalConfig::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if name.starts_with("solve") {
            SolveConfig::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            panic!("{name}: a config whose kind its name does not say (train-, eval-, solve-)");
        }
    }
    assert!(seen >= 10, "only {seen} configs found in {}", dir.display());
}

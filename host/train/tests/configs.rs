//! The shipped configs parse, and the learning run's four arms differ only where their
//! arm does: the same tasks in the same order, at the same budget.

use std::path::{Path, PathBuf};

use onebrain_eval::EvalConfig;
use onebrain_train::TrainConfig;

fn configs(prefix: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix) && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_train_and_eval_config_parses() {
    let train = configs("train-");
    assert!(train.len() >= 4, "{train:?}");
    for p in &train {
        TrainConfig::from_file(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
    for p in configs("eval-") {
        EvalConfig::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
}

#[test]
fn the_four_arms_differ_only_in_their_arm() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let load = |arm: &str| TrainConfig::from_file(&dir.join(format!("train-1.5b-{arm}.toml"))).unwrap();
    let full = load("full");
    for arm in ["solver-only", "grounded", "text-agreement"] {
        let mut other = load(arm);
        assert_ne!(other.out_dir, full.out_dir, "{arm} would share the run folder");
        // What an arm may change, set back to the full arm's.
        other.name = full.name.clone();
        other.out_dir = full.out_dir.clone();
        match arm {
            "solver-only" => {
                other.ablation = full.ablation;
                other.episode.lambda_judge = full.episode.lambda_judge;
            }
            _ => {
                assert_ne!(other.plugins.reward, full.plugins.reward, "{arm} keeps the paper's reward");
                other.plugins.reward = full.plugins.reward.clone();
            }
        }
        assert_eq!(other, full, "{arm} differs from the full arm in more than its arm");
    }
}

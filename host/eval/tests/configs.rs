//! The held-out slice's variants differ from it only where they say, so their runs compare
//! with it task for task. Issue 46: with the `text-diagnostics` reviewer it is the held-out
//! slice plus that one line; no other shipped config lists a reviewer, so every other run is
//! what it was. Issue 47: the first-answers variant (the in-flight check) only drops repairs.

use std::path::Path;

use onebrain_eval::EvalConfig;

fn load(name: &str) -> EvalConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs").join(name);
    EvalConfig::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_text_diagnostics_eval_is_the_heldout_eval_with_one_reviewer() {
    let plain = load("eval-heldout.toml");
    let mut reviewed = load("eval-heldout-text-diagnostics.toml");
    assert!(plain.plugins.diagnostic_reviewers.is_empty());
    assert_eq!(reviewed.plugins.diagnostic_reviewers, ["text-diagnostics"]);
    assert_ne!(reviewed.out_dir, plain.out_dir, "the two runs would share a folder");
    // What the variant may change, set back to the plain run's.
    reviewed.name = plain.name.clone();
    reviewed.out_dir = plain.out_dir.clone();
    reviewed.plugins.diagnostic_reviewers.clear();
    assert_eq!(reviewed, plain, "the variant differs in more than its reviewer");
}

#[test]
fn the_first_answers_eval_is_the_heldout_eval_without_repairs() {
    let plain = load("eval-heldout.toml");
    let mut first = load("eval-heldout-first-answers.toml");
    assert_eq!((first.episode.max_repairs, first.episode.budget), (0, 1));
    assert_ne!(first.out_dir, plain.out_dir, "the two runs would share a folder");
    first.name = plain.name.clone();
    first.out_dir = plain.out_dir.clone();
    first.episode.max_repairs = plain.episode.max_repairs;
    first.episode.budget = plain.episode.budget;
    assert_eq!(first, plain, "the variant differs in more than its repairs");
}

/// Issue 46: best-of-8 as a strategy samples what the pass@8 draws sample, 8 to an episode,
/// and picks by the default (reward) selector; nothing else differs.
#[test]
fn the_best_of_8_eval_is_the_pass8_eval_as_one_strategy() {
    let draws = load("eval-update0-pass8.toml");
    let mut best = load("eval-update0-best-of-8.toml");
    assert_eq!(best.strategies, [onebrain_roles::Strategy::BestOfK]);
    assert_eq!((best.episode.budget, best.episode.max_repairs, best.episode.select), (8, 0, onebrain_roles::Select::Reward));
    assert_eq!(best.plugins.reward.as_deref(), Some("text-agreement"), "the selector's Φ is text-agreement's");
    assert_ne!(best.out_dir, draws.out_dir);
    best.name = draws.name.clone();
    best.out_dir = draws.out_dir.clone();
    best.strategies = draws.strategies.clone();
    best.episode.budget = draws.episode.budget;
    assert_eq!(best, draws, "best-of-8 differs from the draws in more than its strategy and budget");
}

#[test]
fn no_other_shipped_config_has_a_reviewer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".toml") && name != "eval-heldout-text-diagnostics.toml" {
            assert!(!text.contains("diagnostic-reviewers"), "{name} lists a diagnostic reviewer");
            seen += 1;
        }
    }
    assert!(seen >= 10, "{seen}");
}

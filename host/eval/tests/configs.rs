//! The held-out slice's variants differ from it only where they say, so their runs compare
//! with it task for task. With the `text-diagnostics` reviewer it is the held-out slice plus
//! that one line; no other shipped config lists a reviewer, so every other run is what it
//! was. The first-answers variant (the in-flight check) only drops repairs.
//! The large held-out set shares the slice's model, solver and plugins, and its tasks are the
//! ones its header counts.

use std::path::Path;

use onebrain_core::DomainAdapter;
use onebrain_eval::{EvalConfig, SizeBucket};

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

/// Best-of-8 as a strategy samples what the pass@8 draws sample, 8 to an episode,
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
        // The combined method's configs list the reviewer as part of the method.
        let lists_one = ["eval-heldout-text-diagnostics.toml", "eval-heldout-combined.toml", "eval-large-combined.toml", "solve-combined.toml"];
        if name.ends_with(".toml") && !lists_one.contains(&name.as_str()) {
            assert!(!text.contains("diagnostic-reviewers"), "{name} lists a diagnostic reviewer");
            seen += 1;
        }
    }
    assert!(seen >= 10, "{seen}");
}

#[test]
fn the_large_set_is_the_heldout_shape_with_first_answers_and_longer_ones() {
    let plain = load("eval-heldout.toml");
    let large = load("eval-large.toml");
    assert_eq!((large.model.clone(), large.solver.clone(), large.plugins.clone()), (plain.model, plain.solver, plain.plugins));
    assert_eq!((large.strategies.as_slice(), large.checker, large.data.clone()), (plain.strategies.as_slice(), plain.checker, plain.data));
    assert_eq!((large.episode.max_repairs, large.episode.budget, large.episode.max_tokens), (0, 1, 768));
    let mut episode = large.episode.clone();
    (episode.max_repairs, episode.budget, episode.max_tokens) =
        (plain.episode.max_repairs, plain.episode.budget, plain.episode.max_tokens);
    assert_eq!(episode, plain.episode, "greedy, problem mode, the grammar: only the answers' number and length differ");
    assert_ne!(large.out_dir, plain.out_dir);
}

/// The large set's tasks, loaded as `onebrain eval` loads them (the data read in place, the
/// generated ones from the built plugins): 30 per domain, no id twice, every reference valid
/// against its plugin's domain, and the counts per size bucket its header and
/// docs/evaluation.md give. Skips where the data or the plugins are absent.
#[test]
fn the_large_set_loads_with_the_counts_it_documents() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/eval-large.toml");
    let cfg = EvalConfig::from_file(&path).unwrap();
    let base = path.parent().unwrap();
    let data = base.join(&cfg.data);
    if !data.is_dir() {
        eprintln!("skipping: {} is absent", data.display());
        return;
    }
    let plugins = match cfg.plugins.load(base) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skipping: the plugins do not load (scripts/build-plugins.sh): {e}");
            return;
        }
    };
    let mut tasks = Vec::new();
    for b in &cfg.benchmarks {
        let adapter = plugins.domains.iter().find(|d| d.name() == b.domain).expect("the config lists every domain's plugin");
        tasks.extend(b.tasks(&data, adapter.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", b.domain)));
    }
    let mut ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), tasks.len(), "a task id repeats");

    let domains = ["blocksworld", "mystery-blocksworld", "logistics", "gripper"];
    let mut counts = [[0usize; 3]; 4];
    for t in &tasks {
        let spec = t.reference.as_ref().unwrap_or_else(|| panic!("{} has no reference", t.id));
        let errors: Vec<_> =
            onebrain_pddl::check_sources(&spec.domain, &spec.problem).into_iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", t.id);
        let objects = onebrain_pddl::parse_problem(&spec.problem).unwrap().objects.len() as u32;
        let bucket = match SizeBucket::of(Some(objects)) {
            SizeBucket::Small => 0,
            SizeBucket::Medium => 1,
            SizeBucket::Large => 2,
            SizeBucket::Unknown => unreachable!(),
        };
        counts[domains.iter().position(|d| *d == t.domain).unwrap()][bucket] += 1;
    }
    // Per domain: 3–5, 6–9, 10+ objects.
    assert_eq!(counts, [[10, 10, 10], [10, 10, 10], [0, 0, 30], [0, 15, 15]], "{domains:?}");
    assert_eq!(tasks.len(), 120);
}

#[test]
fn the_combined_and_best_of_k_evals_take_their_sets_tasks_at_the_papers_budget() {
    use onebrain_roles::Strategy;
    for set in ["large", "heldout"] {
        let plain = load(&format!("eval-{set}.toml"));
        for (variant, strategy) in [("combined", Strategy::BestThenRepair), ("best-of-k", Strategy::BestOfK)] {
            let cfg = load(&format!("eval-{set}-{variant}.toml"));
            let what = format!("eval-{set}-{variant}");
            assert_eq!(cfg.strategies, [strategy], "{what}");
            assert_eq!(cfg.benchmarks, plain.benchmarks, "{what} must take its set's tasks, task for task");
            assert_eq!(cfg.episode.max_tokens, plain.episode.max_tokens, "{what}");
            assert_eq!(cfg.episode.budget, 6, "{what}: the paper's K");
            assert_eq!(cfg.plugins.reward.as_deref(), Some("text-agreement"), "{what}: Φ comes from text-agreement");
            assert_ne!(cfg.out_dir, plain.out_dir, "{what} would share its set's folder");
            let combined = strategy == Strategy::BestThenRepair;
            assert_eq!((cfg.episode.forbid_goal_at_init, cfg.episode.forbid_init_mutex), (combined, combined), "{what}: guards");
            assert_eq!(cfg.plugins.diagnostic_reviewers.is_empty(), !combined, "{what}: text diagnostics");
        }
    }
}

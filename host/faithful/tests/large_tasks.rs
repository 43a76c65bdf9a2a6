//! The checker on large tasks gives one verdict natively and in the sandbox, and a
//! budget that runs out is an explicit `undecided` with what was established. A few pairs of
//! the corpus (`tests/corpus/mod.rs`); `examples/large.rs` runs all of them.

mod common;
mod corpus;

use std::path::Path;

use onebrain_core::{Decision, Drift, FaithfulnessReport};
use onebrain_faithful::{check, task_size, Limits};
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, WasmChecker};

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds and installs the bundled plugins (quick when nothing changed) and loads the checker
/// with the host's default limits: the budget in its manifest is what must suffice.
fn plugin() -> WasmChecker {
    let status = std::process::Command::new(root().join("scripts/build-plugins.sh")).status().expect("run scripts/build-plugins.sh");
    assert!(status.success(), "scripts/build-plugins.sh failed");
    let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let plugin = host.load(registry.get("reference-checker").unwrap()).unwrap();
    WasmChecker::new(&plugin, InstancePolicy::Reuse).unwrap()
}

/// The same verdict, decision, drift and work count on both paths, and the native report.
fn both(wasm: &WasmChecker, reference: &onebrain_core::Spec, candidate: &onebrain_core::Spec, plan: Option<&[String]>) -> FaithfulnessReport {
    let native = check(reference, candidate, plan, plan.is_some(), &Limits::default()).unwrap();
    let sandboxed = wasm.try_check(reference, candidate, plan).unwrap_or_else(|e| panic!("the plugin failed where native gave {native:#?}: {e}"));
    let cost = wasm.last_call().unwrap();
    assert!(cost.fuel < cost.fuel_limit, "{cost:?}");
    let key = |r: &FaithfulnessReport| (r.verdict(), r.decision, r.drift, r.work, r.init_preserved, r.objects_preserved, r.schema_consistent);
    assert_eq!(key(&sandboxed), key(&native), "plugin and native disagree:\n{sandboxed:#?}\n{native:#?}");
    native
}

/// The case where the two disagreed: ten blocks on the table, a tower as the goal, and an
/// answer that states the initial state exactly and asks for every block to be held at once.
/// Natively it is not faithful, by closure; the plugin ran out of its fixed fuel on it and
/// now must say the same, within the fuel its manifest gives a task of this size.
#[test]
fn every_block_held_gets_the_native_verdict_in_the_sandbox() {
    let wasm = plugin();
    let (reference, candidate) = corpus::every_block_held(10);
    // Unsolvable: no plan, so not solved.
    let r = both(&wasm, &reference, &candidate, None);
    assert!(!r.faithful && !r.undecided && !r.solvable, "{r:#?}");
    assert_eq!(r.decision, Decision::Closure);
    assert!(r.init_preserved && r.objects_preserved, "{r:#?}");
    assert!(r.explanation.iter().any(|l| l.contains("(holding b0)") && l.contains("not implied")), "{r:#?}");
}

/// A solvable goal-weakening answer on the largest BlocksWorld and a large Logistics task,
/// the 12 of 12 that the plugin once lost to fuel: goal weakening on both paths.
#[test]
fn a_dropped_goal_fact_on_a_large_task_is_goal_weakening_on_both_paths() {
    let wasm = plugin();
    let pairs = corpus::pairs(&root(), |d, size, seed| seed == 1 && ((d == "blocksworld" && size == 20) || (d == "logistics" && size == 10)));
    let dropped: Vec<_> = pairs.iter().filter(|p| p.kind == corpus::Kind::DroppedGoalFact).collect();
    assert_eq!(dropped.len(), 2);
    for p in dropped {
        let r = both(&wasm, &p.reference, &p.candidate, p.plan.as_deref());
        assert!(r.solvable && !r.faithful && !r.undecided, "{}: {r:#?}", p.id);
        assert_eq!(r.drift, Some(Drift::GoalWeakening), "{}: {r:#?}", p.id);
    }
}

/// Every kind of candidate of one reference per domain: the renamed ones faithful both ways,
/// no mutation faithful, both paths alike on each.
#[test]
fn plugin_and_native_agree_on_a_sample_of_the_corpus() {
    let wasm = plugin();
    let pairs = corpus::pairs(&root(), |d, size, seed| {
        seed == 1 && matches!((d, size), ("blocksworld", 10) | ("logistics", 6) | ("gripper", 20))
    });
    assert_eq!(pairs.len(), 3 * corpus::Kind::ALL.len());
    for p in &pairs {
        let r = both(&wasm, &p.reference, &p.candidate, p.plan.as_deref());
        if p.kind.faithful() {
            assert!(r.faithful, "{}: a false rejection\n{r:#?}", p.id);
        } else {
            assert!(!r.faithful, "{}: an unsound faithful\n{r:#?}", p.id);
        }
    }
}

/// A work budget that runs out is `undecided`, not "not faithful", with what was established
/// (here everything but the goal), and the same on a second run: the count is deterministic.
#[test]
fn a_spent_work_budget_is_undecided_with_what_was_established() {
    let pairs = corpus::pairs(&root(), |d, size, seed| d == "blocksworld" && size == 10 && seed == 1);
    // A weaker goal solved by the reference's own plan, so that the replay establishes
    // something too: the corpus's plan for the weaker goal may leave the dropped fact
    // false, and a replay that misses the reference's goal refutes the candidate.
    let reference_plan = pairs.iter().find(|p| p.kind == corpus::Kind::RenamedBack).unwrap().plan.clone();
    let mut p = pairs.iter().find(|p| p.kind == corpus::Kind::DroppedGoalFact).unwrap().clone();
    p.plan = reference_plan;
    let size = task_size(&p.reference).unwrap();
    // Enough to match the initial states and the schemas, not to search for a witness.
    let tight = Limits { work_base: 200_000, work_per_size: 0, ..Limits::default() };
    assert!(tight.max_work(&size) < Limits::default().max_work(&size));
    let r = check(&p.reference, &p.candidate, p.plan.as_deref(), true, &tight).unwrap();
    assert!(r.undecided && !r.faithful && r.drift.is_none(), "{r:#?}");
    assert_eq!(r.decision, Decision::Undecided);
    assert!(r.objects_preserved && r.init_preserved && r.schema_consistent && r.plan_replay_ok, "{r:#?}");
    assert!(r.work > 200_000, "{r:#?}");
    assert!(r.explanation[0].starts_with("undecided: the work budget ran out"), "{r:#?}");
    assert!(r.explanation[0].contains("initial state equal under renaming yes"), "{r:#?}");
    assert_eq!(check(&p.reference, &p.candidate, p.plan.as_deref(), true, &tight).unwrap(), r);
    // Unsolved, the same candidate is decided: never faithful, whatever the goal.
    let r = check(&p.reference, &p.candidate, None, false, &tight).unwrap();
    assert!(!r.undecided && !r.faithful, "{r:#?}");
    // With the default budget it is decided: goal weakening.
    let r = check(&p.reference, &p.candidate, p.plan.as_deref(), true, &Limits::default()).unwrap();
    assert_eq!(r.drift, Some(Drift::GoalWeakening), "{r:#?}");
}

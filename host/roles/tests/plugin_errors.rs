//! An episode whose reward plugin answers a poisoned value (NaN)
//! is recorded with the plugin's error and without rewards, so the trainer,
//! which skips episodes with an error, never sees the NaN. A reward
//! and a checker that trap, answer NaN or hang at random, run by the pipelined
//! driver, leave every episode recorded.

use std::sync::Arc;

use onebrain_core::{BoxError, Checker, DomainAdapter, Reward, Spec};
use onebrain_roles::{
    episode_input, run_episode, run_pipelined, Episode, EpisodeConfig, EpisodeRecord, FailedPlugin, Finalizer,
    Mode, Strategy,
};
use onebrain_runtime::{
    FailureKind, HostOptions, InstancePolicy, Limits, PluginError, PluginErrorKind, PluginHost, PluginId,
    PluginManifest, PluginRegistry, WasmChecker, WasmDomainAdapter, WasmReward, World,
};
use onebrain_verifier::VerifierPool;

mod common;
use common::{build, root, AlwaysSolved, FixedAnswer};

/// Answers every prompt with the rest of a small problem, and the Judge with 0.8.
fn fixed() -> FixedAnswer {
    FixedAnswer {
        name: "fixed",
        text: "a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty))\n  (:goal (on a b)))\n```",
        judge: 0.8,
    }
}

#[test]
fn a_poisoned_reward_is_recorded_as_the_episode_error() {
    build();
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
    let blocksworld = host.load(registry.get("blocksworld").unwrap()).unwrap();
    let domain = WasmDomainAdapter::new(&blocksworld, InstancePolicy::Reuse).unwrap();
    // The hostile reward answers NaN for an episode without repairs.
    let wasm = root().join("guests/target/wasm32-wasip2/release/hostile_reward.wasm");
    let hostile = host
        .load(&PluginManifest::for_component(&wasm, World::Reward))
        .unwrap();
    let reward: Arc<dyn Reward> =
        Arc::new(WasmReward::new(&hostile, InstancePolicy::Reuse).unwrap());

    let cfg = EpisodeConfig {
        strategy: Strategy::MultiRole,
        mode: Mode::Problem,
        ..Default::default()
    };
    let task = domain.generate(1, 2).unwrap();
    let input = episode_input(&domain, task).unwrap();
    let finalizer = Finalizer {
        reward: Some(reward),
        checker: None,
    };
    let rec = run_episode(
        Episode::new(input, &cfg, "fixed"),
        &cfg,
        &mut fixed(),
        &AlwaysSolved,
        &finalizer,
        &mut |_| {},
    );
    assert!(rec.solved && rec.repairs == 0, "{rec:?}");
    assert!(
        rec.rewards.is_none(),
        "no poisoned rewards in the record: {:?}",
        rec.rewards
    );
    let error = rec.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("reward plugin: plugin hostile_reward@0.0.0 returned an invalid value")
            && error.contains("NaN"),
        "{error}"
    );
    // And the failure with its kind, read from the error's type.
    assert_eq!(rec.failures.len(), 1, "{:?}", rec.failures);
    let f = &rec.failures[0];
    assert_eq!((f.plugin, f.kind), (FailedPlugin::Reward, Some(FailureKind::NonFinite)), "{f:?}");
    assert!(error.ends_with(&f.message), "the text is the error's: {error} / {}", f.message);
    // What the trace stores: the error, and no rewards (before, `"actor": null`).
    let v = serde_json::to_value(&rec).unwrap();
    assert!(
        v.get("rewards").is_none_or(|r| r.is_null()),
        "{}",
        v["rewards"]
    );
    assert!(!v.to_string().contains("\"actor\":null"));
}

/// Regression: the soak's first run ended the process at its first trap. A panicking guest
/// writes its message to stderr; inside `run_pipelined` (eval's and training's driver) that
/// write made wasmtime-wasi block on the driver's own tokio runtime, which panics. Now the
/// plugins run outside the async context: 40 episodes with `chaos-reward` and
/// `chaos-checker` (each traps, answers NaN or hangs on 10 % of calls) are all recorded, each
/// with rewards and a report or the plugin's error.
#[test]
fn soak_plugins_that_trap_in_the_pipelined_driver_leave_every_episode_recorded() {
    build();
    // Short limits: a hang costs at most 300 ms. The honest check needs far less fuel.
    let limits = Limits { timeout_ms: 300, fuel: 1_000_000_000, ..Limits::default() };
    let host = PluginHost::new(HostOptions { limits, ..HostOptions::default() }).unwrap();
    let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
    let blocksworld = host.load(registry.get("blocksworld").unwrap()).unwrap();
    let domain = WasmDomainAdapter::new(&blocksworld, InstancePolicy::Reuse).unwrap();
    let guest = |name: &str, world| {
        let wasm = root().join(format!("guests/target/wasm32-wasip2/release/{name}.wasm"));
        host.load(&PluginManifest::for_component(&wasm, world)).unwrap()
    };
    let reward: Arc<dyn Reward> =
        Arc::new(WasmReward::new(&guest("chaos_reward", World::Reward), InstancePolicy::Reuse).unwrap());
    let checker: Arc<dyn Checker> = Arc::new(
        WasmChecker::new(&guest("chaos_checker", World::FaithfulnessChecker), InstancePolicy::Reuse).unwrap(),
    );
    let finalizer = Finalizer { reward: Some(reward), checker: Some(checker) };
    let cfg = EpisodeConfig { strategy: Strategy::MultiRole, mode: Mode::Problem, ..Default::default() };
    let n = 40;
    let episodes: Vec<Episode> = (1..=n)
        .map(|seed| {
            let input = episode_input(&domain, domain.generate(seed, 5).unwrap()).unwrap();
            assert!(input.task.reference.is_some(), "the checker needs a reference");
            Episode::new(input, &cfg, "fixed")
        })
        .collect();
    let pool = VerifierPool::new(Arc::new(AlwaysSolved), 1);
    let mut records: Vec<EpisodeRecord> = Vec::new();
    run_pipelined(episodes, &cfg, &mut fixed(), &pool, &finalizer, 4, &mut |_| {}, &mut |r| {
        records.push(r);
        Ok::<(), ()>(())
    })
    .unwrap();

    assert_eq!(records.len(), n as usize, "every episode is recorded");
    let error = |r: &EpisodeRecord| r.error.clone().unwrap_or_default();
    for r in &records {
        let failed = |p| r.failures.iter().filter(|f| f.plugin == p).count();
        assert!(r.rewards.is_some() != (failed(FailedPlugin::Reward) == 1), "{}: {:?}", r.task_id, r.failures);
        assert!(r.faithfulness.is_some() != (failed(FailedPlugin::Checker) == 1), "{}: {:?}", r.task_id, r.failures);
        // The text stays, for people: each failure's message is part of it.
        assert_eq!(r.error.is_some(), !r.failures.is_empty(), "{}: {}", r.task_id, error(r));
        for f in &r.failures {
            assert!(error(r).contains(&f.message), "{}: {} / {}", r.task_id, error(r), f.message);
        }
    }
    // The plugins inject only these kinds; the hang ends as a timeout or out of fuel.
    let kinds: Vec<(FailedPlugin, FailureKind)> =
        records.iter().flat_map(|r| &r.failures).map(|f| (f.plugin, f.kind.expect("a plugin's failure has a kind"))).collect();
    let injected = [FailureKind::Trap, FailureKind::NonFinite, FailureKind::Timeout, FailureKind::Fuel];
    assert!(kinds.iter().all(|(_, k)| injected.contains(k)), "{kinds:?}");
    // The draws are a hash of these fixed inputs, so these counts are the same on every run.
    let count = |want: &[FailureKind]| kinds.iter().filter(|(_, k)| want.contains(k)).count();
    let (traps, nans, hangs) =
        (count(&[FailureKind::Trap]), count(&[FailureKind::NonFinite]), count(&[FailureKind::Timeout, FailureKind::Fuel]));
    assert!(traps > 0 && nans > 0 && hangs > 0, "traps {traps}, NaNs {nans}, hangs {hangs}: {kinds:?}");
    assert!(records.iter().any(|r| r.error.is_none()), "most calls are answered honestly");
}

/// A reward whose error is the runtime's own, behind the core trait's `BoxError`.
struct FailingReward;

impl Reward for FailingReward {
    fn rewards(&self, _: &onebrain_core::FinishedEpisode) -> Result<onebrain_core::Rewards, BoxError> {
        let plugin = PluginId { name: "r".into(), version: "1.0.0".into() };
        // Words that name another kind: the kind comes from the variant.
        let kind = PluginErrorKind::Guest("ran out of fuel; trapped: NaN".into());
        Err(Box::new(PluginError { plugin, kind }))
    }
}

/// A checker that is not a plugin: its error is plain text.
struct FailingNativeChecker;

impl Checker for FailingNativeChecker {
    fn check(&self, _: &Spec, _: &Spec, _: Option<&[String]>) -> Result<onebrain_core::FaithfulnessReport, BoxError> {
        Err("plugin c@1.0.0 timed out after 2s".into())
    }
}

/// The Finalizer records each failed call with the kind of its error's type, keeps the text
/// in `error` as before, and a record without failures serializes without the new field.
#[test]
fn the_finalizer_records_each_plugin_failure_with_its_kind() {
    let line = serde_json::json!({
        "task_id": "t", "domain": "d", "strategy": "multi-role", "mode": "problem", "model": "m",
        "task_text": "x", "steps": [], "b0": false, "solved": false, "repairs": 0,
        "solver_calls": 1, "planner_calls": 1, "final_plan": [],
        "final_spec": { "domain": "(define (domain d))", "problem": "(define (problem p))" },
        "timings": { "wall_ms": 0.0, "generation_ms": 0.0, "verification_ms": 0.0,
                     "planner_ms": 0.0, "judge_ms": 0.0, "plugins_ms": 0.0 },
        "error": "model error (editor): out of memory",
    });
    let cfg = EpisodeConfig { strategy: Strategy::MultiRole, mode: Mode::Problem, ..Default::default() };
    let reference = Spec::default();
    let finalizer =
        Finalizer { reward: Some(Arc::new(FailingReward)), checker: Some(Arc::new(FailingNativeChecker)) };
    let mut rec: EpisodeRecord = serde_json::from_value(line.clone()).unwrap();
    finalizer.finalize(&mut rec, &cfg, Some(&reference));
    // A time is not what this test is about, and need not survive JSON to the last bit.
    rec.timings.plugins_ms = 0.0;
    let got: Vec<_> = rec.failures.iter().map(|f| (f.plugin, f.kind, f.message.as_str())).collect();
    assert_eq!(
        got,
        [
            (FailedPlugin::Reward, Some(FailureKind::Reported), "plugin r@1.0.0 reported an error: ran out of fuel; trapped: NaN"),
            (FailedPlugin::Checker, None, "plugin c@1.0.0 timed out after 2s"),
        ]
    );
    assert_eq!(
        rec.error.as_deref(),
        Some(
            "model error (editor): out of memory; reward plugin: plugin r@1.0.0 reported an error: ran out of fuel; \
             trapped: NaN; faithfulness checker: plugin c@1.0.0 timed out after 2s"
        )
    );
    let v = serde_json::to_value(&rec).unwrap();
    assert_eq!(v["failures"][0], serde_json::json!({"plugin": "reward", "kind": "reported", "message": got[0].2}));
    assert_eq!(v["failures"][1], serde_json::json!({"plugin": "checker", "message": got[1].2}));
    let back: EpisodeRecord = serde_json::from_value(v).unwrap();
    assert_eq!(back, rec);

    // Without failures, the line is what it was before the field existed.
    let mut quiet: EpisodeRecord = serde_json::from_value(line).unwrap();
    Finalizer::default().finalize(&mut quiet, &cfg, Some(&reference));
    quiet.timings.plugins_ms = 0.0;
    let text = serde_json::to_string(&quiet).unwrap();
    assert!(!text.contains("failures"), "{text}");
    assert_eq!(serde_json::from_str::<EpisodeRecord>(&text).unwrap(), quiet);
}

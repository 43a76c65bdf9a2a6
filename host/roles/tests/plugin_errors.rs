//! Issue 13: an episode whose reward plugin answers a poisoned value (NaN)
//! is recorded with the plugin's error and without rewards, so the trainer,
//! which skips episodes with an error, never sees the NaN. Issue 35: a reward
//! and a checker that trap, answer NaN or hang at random, run by the pipelined
//! driver, leave every episode recorded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::{BoxError, Checker, DomainAdapter, Outcome, Reward, Spec, Verdict, Verifier};
use onebrain_roles::{
    episode_input, run_episode, run_pipelined, Episode, EpisodeConfig, EpisodeRecord, Finalizer,
    Generation, LanguageModel, Mode, Role, SamplingConfig, StopReason, Strategy,
};
use onebrain_runtime::{
    HostOptions, InstancePolicy, Limits, PluginHost, PluginManifest, PluginRegistry, WasmChecker,
    WasmDomainAdapter, WasmReward, World,
};
use onebrain_verifier::VerifierPool;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the guests (the script `scripts/setup.sh` runs; quick when nothing changed).
fn build() {
    let ok = std::process::Command::new(root().join("scripts/build-plugins.sh"))
        .status()
        .expect("run scripts/build-plugins.sh")
        .success();
    assert!(ok, "scripts/build-plugins.sh failed");
}

/// Answers every prompt with the rest of a small problem, and the Judge with 0.8.
struct Fixed;

impl LanguageModel for Fixed {
    fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        let text = "a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty))\n  (:goal (on a b)))\n```".to_string();
        Ok(Generation {
            tokens: vec![1; 16],
            text,
            prompt_tokens: 100,
            cached_prompt_tokens: 0,
            prefill_tokens: 100,
            prefill_secs: 0.01,
            decode_secs: 0.01,
            stop_reason: StopReason::Eos,
            logprobs: Vec::new(),
            constraint: None,
        })
    }

    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.8)
    }

    fn name(&self) -> String {
        "fixed".into()
    }
}

/// Says every spec is solved: the episode ends after the Actor, with no repair.
struct AlwaysSolved;

impl Verifier for AlwaysSolved {
    fn verify(&self, _: &Spec) -> Verdict {
        Verdict {
            solved: true,
            outcome: Outcome::Solved,
            plan: vec!["(pick-up a)".into(), "(stack a b)".into()],
            diagnostics: Vec::new(),
            time_ms: 1,
            solver_time_ms: 1,
            solver_output: None,
        }
    }
}

#[test]
fn r13_a_poisoned_reward_is_recorded_as_the_episode_error() {
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
        &mut Fixed,
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
    // What the trace stores: the error, and no rewards (before, `"actor": null`).
    let v = serde_json::to_value(&rec).unwrap();
    assert!(
        v.get("rewards").is_none_or(|r| r.is_null()),
        "{}",
        v["rewards"]
    );
    assert!(!v.to_string().contains("\"actor\":null"));
}

/// Issue 35: the soak's first run ended the process at its first trap. A panicking guest
/// writes its message to stderr; inside `run_pipelined` (eval's and training's driver) that
/// write made wasmtime-wasi block on the driver's own tokio runtime, which panics. Now the
/// plugins run outside the async context: 40 episodes with `chaos-reward` and
/// `chaos-checker` (each traps, answers NaN or hangs on 10 % of calls) are all recorded, each
/// with rewards and a report or the plugin's error.
#[test]
fn r35_soak_plugins_that_trap_in_the_pipelined_driver_leave_every_episode_recorded() {
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
    run_pipelined(episodes, &cfg, &mut Fixed, &pool, &finalizer, 4, &mut |_| {}, &mut |r| {
        records.push(r);
        Ok::<(), ()>(())
    })
    .unwrap();

    assert_eq!(records.len(), n as usize, "every episode is recorded");
    let error = |r: &EpisodeRecord| r.error.clone().unwrap_or_default();
    for r in &records {
        assert!(r.rewards.is_some() != error(r).contains("reward plugin: "), "{}: {}", r.task_id, error(r));
        assert!(r.faithfulness.is_some() != error(r).contains("faithfulness checker: "), "{}: {}", r.task_id, error(r));
    }
    // The draws are a hash of these fixed inputs, so these counts are the same on every run.
    let count = |what: &str| records.iter().filter(|r| error(r).contains(what)).count();
    let (traps, nans, hangs) = (count("trapped: "), count("is NaN"), count("timed out") + count("ran out of fuel"));
    assert!(traps > 0 && nans > 0 && hangs > 0, "traps {traps}, NaNs {nans}, hangs {hangs}");
    assert!(records.iter().any(|r| r.error.is_none()), "most calls are answered honestly");
}

//! Issue 13: an episode whose reward plugin answers a poisoned value (NaN)
//! is recorded with the plugin's error and without rewards, so the trainer,
//! which skips episodes with an error, never sees the NaN.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::{BoxError, DomainAdapter, Outcome, Reward, Spec, Verdict, Verifier};
use onebrain_roles::{
    episode_input, run_episode, Episode, EpisodeConfig, Finalizer, Generation, LanguageModel, Mode,
    Role, SamplingConfig, StopReason, Strategy,
};
use onebrain_runtime::{
    HostOptions, InstancePolicy, PluginHost, PluginManifest, PluginRegistry, WasmDomainAdapter,
    WasmReward, World,
};

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

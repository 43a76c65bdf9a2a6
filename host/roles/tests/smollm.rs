//! The episode end to end with the real small model (SmolLM2-135M), the real verifier (Fast
//! Downward) and the bundled WebAssembly plugins, on two tasks. Skips, saying why, when the
//! set-up has not been run (`scripts/setup.sh --models test`, `scripts/build-plugins.sh`).

use std::path::Path;

use onebrain_model::ModelConfig;
use onebrain_roles::{
    solve_with, CheckerChoice, EpisodeConfig, Event, Mode, Services, SolveConfig, Strategy,
};
use onebrain_runtime::RuntimeConfig;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn ready() -> Option<&'static str> {
    onebrain_roles::test_setup_missing(root(), &["blocksworld", "gripper", "paper-rewards"])
}

/// Multi-role episodes in `problem` mode on BlocksWorld and Gripper with `model`, at most
/// `max_repairs` repairs (a budget of one verifier call more) of `max_tokens` tokens each.
fn multi_role(model: ModelConfig, max_repairs: u32, max_tokens: usize) -> SolveConfig {
    SolveConfig {
        model,
        episode: EpisodeConfig {
            strategy: Strategy::MultiRole,
            mode: Mode::Problem,
            max_repairs,
            budget: max_repairs + 1,
            max_tokens,
            ..Default::default()
        },
        plugins: RuntimeConfig {
            plugin_dirs: vec!["plugins".into()],
            reward: Some("paper-rewards".into()),
            domains: vec!["blocksworld".into(), "gripper".into()],
            ..Default::default()
        },
        checker: CheckerChoice::Native,
        ..Default::default()
    }
}

#[test]
fn smollm_episodes_complete_record_every_step_and_respect_the_budget() {
    if let Some(why) = ready() {
        eprintln!("skipping: {why}");
        return;
    }
    // Two repairs at most, short outputs: the test stays well under two minutes on 2 cores.
    let cfg = multi_role(ModelConfig::test_model(), 2, 32);
    let services = Services::load(&cfg, root()).expect("services");
    let mut model = onebrain_roles::load_model(&cfg, root()).expect("model");
    for (domain, seed) in [("blocksworld", 3), ("gripper", 5)] {
        let task = services.domain(domain).unwrap().generate(seed, 3).unwrap();
        let mut events = Vec::new();
        let rec = solve_with(&cfg, &services, &mut model, task, &mut |e: &Event| {
            events.push(e.clone())
        })
        .unwrap();
        assert!(rec.error.is_none(), "{:?}", rec.error);
        assert!(
            rec.solver_calls >= 1 && rec.solver_calls <= 3,
            "budget K = 3: {}",
            rec.solver_calls
        );
        assert_eq!(
            rec.steps.len() as u32,
            rec.solver_calls,
            "one generation per verifier call"
        );
        assert_eq!(rec.repairs, rec.solver_calls - 1);
        // It stops at the first success or spends the budget.
        assert!(rec.solved || rec.solver_calls == 3);
        assert_eq!(
            rec.solved,
            rec.steps.last().unwrap().verdict.as_ref().unwrap().solved
        );
        let s_j = rec.judge_score.expect("the Judge scored y_0");
        assert!(s_j > 0.0 && s_j < 1.0);
        assert!(rec.rewards.is_some(), "the reward plugin ran");
        assert!(
            rec.faithfulness.is_some(),
            "the checker ran (the task has a reference)"
        );
        for (i, s) in rec.steps.iter().enumerate() {
            assert_eq!(
                s.role,
                if i == 0 {
                    onebrain_roles::Role::Actor
                } else {
                    onebrain_roles::Role::Editor
                }
            );
            assert!(!s.output_tokens.is_empty() && s.output_tokens.len() <= 32);
            assert!(s.prompt_tokens > 100 && s.verdict.is_some());
            assert_eq!(s.prompt_sha256.len(), 64);
            if i >= 2 || (i == 0 && domain == "gripper") {
                // The model caches prefixes per role: a second repair reuses the first repair's
                // task prefix, and the second task's Actor the system prompt of the first.
                assert!(
                    s.cached_prompt_tokens > 0,
                    "prefix cache unused at step {i} of {domain}"
                );
            }
        }
        assert!(matches!(events.last(), Some(Event::Finished(_))));
        eprintln!(
            "{domain}: {} calls, solved {}, {:?}",
            rec.solver_calls, rec.solved, rec.timings
        );
        assert!(
            rec.timings.generation_ms > 0.0 && rec.timings.wall_ms >= rec.timings.generation_ms
        );
    }
}

/// A model request past the memory budget ends the episode with a recorded error
/// that names the budget, spends no verifier call, and the host goes on.
#[test]
fn an_episode_past_the_memory_budget_is_recorded_and_the_host_goes_on() {
    if let Some(why) = ready() {
        eprintln!("skipping: {why}");
        return;
    }
    // Below the weights alone: every request is refused before prefill.
    let cfg = multi_role(ModelConfig { memory_budget_mb: Some(64), ..ModelConfig::test_model() }, 1, 16);
    let services = Services::load(&cfg, root()).expect("services");
    let mut model = onebrain_roles::load_model(&cfg, root()).expect("model");
    for seed in [3, 4] {
        let task = services.domain("blocksworld").unwrap().generate(seed, 3).unwrap();
        let rec = solve_with(&cfg, &services, &mut model, task, &mut |_: &Event| {}).expect("a recorded episode");
        let error = rec.error.as_deref().expect("the refusal is recorded");
        assert!(error.contains("past the memory budget of 64 MiB"), "{error}");
        assert_eq!(rec.solver_calls, 0);
        assert!(!rec.solved);
        // An error, not an answer without PDDL.
        assert_eq!(rec.stop_error(), Some(error));
        assert!(rec.faithfulness.is_none(), "{:?}", rec.faithfulness);
    }
}

//! Best-of-k with the real plugins: a BlocksWorld task from the domain plugin, two
//! answers the planner would both solve, and the `text-agreement` reward as the selector. The
//! answer that states the task's own goal is picked over the one whose goal already holds,
//! though the Judge scores the other higher.

use std::collections::VecDeque;
use std::sync::Arc;

use onebrain_core::{BoxError, DomainAdapter};
use onebrain_roles::{
    episode_input, run_episode, Episode, EpisodeConfig, Finalizer, Generation, LanguageModel, Mode, Role,
    SamplingConfig, Strategy,
};
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, WasmDomainAdapter, WasmReward};

mod common;
// AlwaysSolved: both answers are b = 1, so only their agreement with the text differs.
use common::{after_objects, build, generation, goal_at_init, root, squash, AlwaysSolved};

/// Hands out prepared answers in order, and the Judge's prepared scores.
struct Answers {
    texts: VecDeque<String>,
    scores: VecDeque<f32>,
}

impl LanguageModel for Answers {
    fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        Ok(generation(&self.texts.pop_front().ok_or("no answer left")?))
    }

    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(self.scores.pop_front().unwrap_or(0.5))
    }

    fn name(&self) -> String {
        "answers".into()
    }
}

#[test]
fn best_of_k_picks_the_answer_that_agrees_with_the_text_over_the_judges_favourite() {
    build();
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
    let blocksworld = host.load(registry.get("blocksworld").unwrap()).unwrap();
    let domain = WasmDomainAdapter::new(&blocksworld, InstancePolicy::Reuse).unwrap();
    let reward = WasmReward::new(&host.load(registry.get("text-agreement").unwrap()).unwrap(), InstancePolicy::Reuse).unwrap();

    let task = domain.generate(3, 3).unwrap();
    let reference = task.reference.clone().expect("generated tasks carry their reference");
    let faithful = after_objects(&reference.problem).to_string();
    let trivial = goal_at_init(&faithful);
    let input = episode_input(&domain, task).unwrap();
    let cfg = EpisodeConfig { strategy: Strategy::BestOfK, mode: Mode::Problem, budget: 2, ..Default::default() };
    // The trivial answer first, and the Judge's favourite.
    let mut model = Answers { texts: [trivial, faithful].into(), scores: [0.9, 0.2].into() };
    let finalizer = Finalizer { reward: Some(Arc::new(reward)), checker: None };
    let rec = run_episode(Episode::new(input, &cfg, "answers"), &cfg, &mut model, &AlwaysSolved, &finalizer, &mut |_| {});

    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert_eq!((rec.solver_calls, rec.selected), (2, Some(1)), "{rec:#?}");
    let goal = &reference.problem[reference.problem.find("(:goal").unwrap()..];
    let returned = &rec.final_spec.as_ref().expect("a returned spec").problem;
    assert!(squash(returned).contains(&squash(goal.trim_end_matches(')'))), "{returned}");
    assert!(rec.rewards.as_ref().is_some_and(|r| r.actor > 0.0), "{:?}", rec.rewards);
}

//! `best-then-repair` with the real plugins: a BlocksWorld task from the domain plugin, the
//! `text-agreement` reward as Φ, and a planner that solves everything, so only Φ tells the
//! answers apart. The pick, the repair of a worthless pick, the budget and the ranking's
//! failure modes are checked here; the episode's bookkeeping (steps, kinds, calls) with them.

use std::collections::VecDeque;
use std::sync::Arc;

use onebrain_core::{BoxError, DomainAdapter};
use onebrain_roles::{
    episode_input, run_episode, Episode, EpisodeConfig, EpisodeInput, EpisodeRecord, Finalizer, Generation,
    LanguageModel, Mode, RepeatPolicy, Role, SamplingConfig, Strategy,
};
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, WasmDomainAdapter, WasmReward};

mod common;
use common::{after_objects, build, generation, goal_at_init, root, squash, AlwaysSolved};

/// Hands out prepared answers in order and remembers each prompt with its role.
struct Answers {
    texts: VecDeque<String>,
    prompts: Vec<(Role, String)>,
}

impl LanguageModel for Answers {
    fn generate(&mut self, role: Role, prompt: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        self.prompts.push((role, prompt.to_string()));
        Ok(generation(&self.texts.pop_front().ok_or("no answer left")?))
    }

    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.5)
    }

    fn name(&self) -> String {
        "answers".into()
    }
}

struct Setup {
    input: EpisodeInput,
    finalizer: Finalizer,
    faithful: String,
    trivial: String,
}

fn setup() -> Setup {
    build();
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
    let domain = WasmDomainAdapter::new(&host.load(registry.get("blocksworld").unwrap()).unwrap(), InstancePolicy::Reuse).unwrap();
    let reward = WasmReward::new(&host.load(registry.get("text-agreement").unwrap()).unwrap(), InstancePolicy::Reuse).unwrap();
    let task = domain.generate(3, 3).unwrap();
    let faithful = after_objects(&task.reference.as_ref().expect("a reference").problem).to_string();
    let trivial = goal_at_init(&faithful);
    Setup { input: episode_input(&domain, task).unwrap(), finalizer: Finalizer { reward: Some(Arc::new(reward)), checker: None }, faithful, trivial }
}

fn cfg(samples: u32, budget: u32) -> EpisodeConfig {
    EpisodeConfig { strategy: Strategy::BestThenRepair, mode: Mode::Problem, samples, budget, ..Default::default() }
}

fn run(s: &Setup, cfg: &EpisodeConfig, answers: &[&str]) -> (EpisodeRecord, Answers) {
    let mut model = Answers { texts: answers.iter().map(|a| a.to_string()).collect(), prompts: Vec::new() };
    let rec = run_episode(Episode::new(s.input.clone(), cfg, "answers"), cfg, &mut model, &AlwaysSolved, &s.finalizer, &mut |_| {});
    (rec, model)
}

fn kinds(rec: &EpisodeRecord) -> Vec<&str> {
    rec.steps.iter().map(|s| s.kind.as_str()).collect()
}

#[test]
fn a_pick_that_states_the_task_is_returned_without_a_repair() {
    let s = setup();
    let (rec, model) = run(&s, &cfg(2, 4), &[&s.trivial, &s.faithful]);
    assert!(rec.error.is_none(), "{:?}", rec.error);
    // Both samples are drawn even though the first is solved; Φ picks the second.
    assert_eq!((rec.solver_calls, rec.selected, kinds(&rec)), (2, Some(1), vec!["sample", "sample"]));
    assert!(model.prompts.iter().all(|(role, _)| *role == Role::Actor));
    let returned = &rec.final_spec.as_ref().expect("a returned spec").problem;
    assert!(squash(returned).ends_with(&squash(&s.faithful)), "{returned}");
}

#[test]
fn a_worthless_pick_is_repaired_by_the_editor_told_why_and_the_repair_is_returned() {
    let s = setup();
    let (rec, model) = run(&s, &cfg(2, 4), &[&s.trivial, &s.trivial, &s.faithful]);
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert_eq!((rec.solver_calls, rec.repairs, rec.selected), (3, 1, Some(2)), "{:?}", kinds(&rec));
    assert_eq!(kinds(&rec), ["sample", "sample", "editor"]);
    let (role, prompt) = model.prompts.last().expect("an Editor prompt");
    assert_eq!(*role, Role::Editor);
    // A solved spec goes to the Editor with the reason it is still no answer.
    assert!(prompt.contains("does not state the task's text"), "{prompt}");
    assert!(rec.solved);
}

#[test]
fn repairs_stop_at_the_budget_and_the_best_candidate_is_returned() {
    let s = setup();
    // Repeats kept: a repair that repeats the pick spends its budget unit instead of asking again.
    let cfg = EpisodeConfig { editor_repeats: RepeatPolicy::Keep, ..cfg(2, 4) };
    let (rec, model) = run(&s, &cfg, &[&s.trivial, &s.trivial, &s.trivial, &s.trivial]);
    assert!(rec.error.is_none(), "{:?}", rec.error);
    // K = 4: two samples, two repairs, then nothing more is asked for.
    assert_eq!((rec.solver_calls, rec.repairs), (4, 2));
    assert_eq!(model.prompts.len(), 4);
    assert_eq!(kinds(&rec), ["sample", "sample", "editor", "editor"]);
    // All worth 0 with equal Judge scores: the earliest step stands.
    assert_eq!(rec.selected, Some(0));
}

#[test]
fn samples_equal_to_the_budget_leave_no_repair() {
    let s = setup();
    let (rec, _) = run(&s, &cfg(3, 3), &[&s.trivial, &s.trivial, &s.trivial]);
    assert_eq!((rec.solver_calls, rec.repairs, kinds(&rec)), (3, 0, vec!["sample", "sample", "sample"]));
}

#[test]
fn without_a_reward_plugin_the_episode_ends_saying_so() {
    let s = setup();
    let cfg = cfg(1, 3);
    let mut model = Answers { texts: [s.trivial.clone()].into(), prompts: Vec::new() };
    let rec = run_episode(Episode::new(s.input.clone(), &cfg, "answers"), &cfg, &mut model, &AlwaysSolved, &Finalizer::default(), &mut |_| {});
    assert!(rec.error.as_deref().is_some_and(|e| e.contains("ranks by the reward plugin")), "{:?}", rec.error);
    // The one verified sample is still the answer.
    assert_eq!(rec.selected, Some(0));
}

#[test]
fn more_samples_than_the_budget_is_a_config_error() {
    assert!(cfg(4, 3).validate().is_err());
    assert!(cfg(0, 3).validate().is_err());
    assert!(cfg(3, 3).validate().is_ok());
}

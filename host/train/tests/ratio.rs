//! One policy, sampled and learned (issue 33): when the learner runs the sampler's own
//! quantized tiles, the log-probabilities recorded while sampling *are* the old policy's, so
//! the first minibatch's PPO ratio is 1 up to rounding, and the clip means what it says.
//!
//! The samples are real: SmolLM2-135M writes a BlocksWorld problem under the grammar at
//! T = 0.7, with trained-looking (non-zero) adapters, on whichever kernels this CPU samples
//! with (our tiles with AVX-512 VNNI, candle's quantized blocks otherwise). Skips when the test
//! model is absent.

use std::path::Path;

use onebrain_model::{
    resolve_model, Brain, ConstraintSpec, GrammarLimits, LearnerWeights, ModelConfig, Role, SamplingConfig,
    TEST_MODEL_FILE,
};
use onebrain_train::{Ablation, Advantage, Batch, Learner, PolicySample, PpoArgs};

const DOMAIN: &str = "(define (domain blocksworld)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?x)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (clear ?x)) (not (ontable ?x)) (not (handempty))))
  (:action stack :parameters (?x ?y)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y))))";

const PRIMER: &str = "```pddl\n(define (problem task)\n  (:domain blocksworld)\n  (:objects ";

const TEMPERATURE: f32 = 0.7;

fn load(learner_weights: LearnerWeights) -> Option<Brain> {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    let cfg = ModelConfig {
        lora_rank: Some(8),
        lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]),
        learner_weights,
        ..ModelConfig::test_model()
    };
    Some(Brain::load(&cfg).expect("load SmolLM2"))
}

/// Gives every adapter's B small random values, as a trained role has: with B = 0 the
/// adapters would add exact zeros and test nothing.
fn perturb_adapters(brain: &Brain) {
    let data = brain.trainable().data().lock().unwrap();
    for (name, var) in data.iter() {
        if name.ends_with(".b") && name.contains(".lora.") {
            let t = candle_core::Tensor::randn(0f32, 0.02, var.shape(), var.device()).unwrap();
            var.set(&t).unwrap();
        }
    }
}

/// Four constrained samples of one prompt (one group), two of them rewarded.
fn sampled_batch(brain: &mut Brain) -> Batch {
    let user = format!(
        "## Domain PDDL\n```pddl\n{DOMAIN}\n```\n## Task\nBlocks a, b and c are on the table and clear; the hand is \
         empty. Stack a on b and b on c.\n## Instruction\nWrite the PDDL problem."
    );
    let prompt = format!("{}{PRIMER}", brain.chat_prompt("You write PDDL.", &user));
    let spec = ConstraintSpec::Problem {
        domain: DOMAIN.into(),
        prefix: PRIMER.into(),
        limits: GrammarLimits::default(),
        avoid: vec![],
    };
    let tokens = brain.encode(&prompt).unwrap();
    let mut policy = Vec::new();
    for seed in 0..4u64 {
        let s = SamplingConfig {
            temperature: TEMPERATURE,
            top_p: 1.0,
            seed,
            max_tokens: 120,
            constraint: Some(spec.clone()),
            ..Default::default()
        };
        let g = brain.generate(Role::Actor, &prompt, &s).unwrap();
        assert_eq!(g.logprobs.len(), g.tokens.len());
        let reward = if seed % 2 == 0 { 1.0 } else { 0.0 };
        let mut sample = PolicySample::new(Role::Actor, tokens.clone(), g.tokens.clone(), (seed as usize, 0, 0), reward);
        sample.constraint = Some((spec.clone(), s.max_tokens));
        sample.rollout_logp = g.logprobs.clone();
        sample.temperature = TEMPERATURE;
        policy.push(sample);
    }
    Batch { policy, judge: vec![], stats: Default::default() }
}

fn args() -> PpoArgs {
    PpoArgs {
        learning_rate: 1e-3,
        batch_size: 4,
        group_size: 4,
        advantage: Advantage::Group,
        num_minibatches: 2,
        update_epochs: 2,
        detach_prompt: true,
        ..Default::default()
    }
}

#[test]
fn the_first_minibatch_ratio_is_one_on_the_samplers_weights() {
    let Some(mut brain) = load(LearnerWeights::Sampler) else { return };
    assert!(brain.learns_on_sampler_weights(), "a GGUF model on the CPU learns on its sampler's weights");
    perturb_adapters(&brain);
    let mut batch = sampled_batch(&mut brain);
    let mut learner = Learner::new(brain, None, args(), Ablation::ActorOnly, 0).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    let r = stats.first_abs_log_ratio.expect("the first minibatch had policy tokens");
    eprintln!(
        "first minibatch mean |log ratio| {r:.2e}; approx_kl {:.2e}, clipfrac {:.3}, {} steps",
        stats.approx_kl, stats.clipfrac, stats.steps
    );
    assert_eq!(stats.old_logp_source, "rollout");
    assert!(r < 1e-3, "mean |log ratio| of the first minibatch is {r:.2e}, not below 1e-3");
    assert_eq!(stats.steps, 4, "two epochs of two minibatches");
}

#[test]
fn a_dense_learner_does_not_take_the_samplers_logprobs_as_its_own() {
    let Some(mut brain) = load(LearnerWeights::Dense) else { return };
    assert!(!brain.learns_on_sampler_weights());
    let mut batch = sampled_batch(&mut brain);
    let mut learner = Learner::new(brain, None, args(), Ablation::ActorOnly, 0).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    assert_eq!(stats.old_logp_source, "scoring-pass");
    // Its own scoring pass: the first minibatch's ratio is 1 on the dense weights too.
    assert!(stats.first_abs_log_ratio.unwrap() < 1e-4);
}

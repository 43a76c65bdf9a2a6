//! One policy, sampled and learned (issue 33). The learner runs the sampler's own quantized
//! weights at the sampling temperature under the sampler's masks, and the test measures how far
//! the log-probabilities the sampler recorded are from the learner's (the sampler gap: about
//! 4e-2 per token here: the learner's whole-sequence forward splits the arithmetic otherwise
//! than token-by-token decoding, and 8-bit activations amplify the last bits). Because it is
//! not below 1e-3, the update recomputes π_old on its own numerics;
//! its first minibatch's ratio is then 1 to rounding, which this test checks across a scoring
//! pass and two epochs of two minibatches.
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

// The model tests' BlocksWorld fixture and seeded normals, not a copy of them.
#[path = "../../model/tests/common/mod.rs"]
mod common;
use common::{seeded_normal, DOMAIN, PRIMER};
use rand::{rngs::StdRng, SeedableRng};

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
    // Seeded: candle's CPU randn cannot be, and an unlucky draw can make a greedy or
    // constrained sample end at once (see `seeded_normal`).
    let mut rng = StdRng::seed_from_u64(7);
    let data = brain.trainable().data().lock().unwrap();
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for name in names {
        if name.ends_with(".b") && name.contains(".lora.") {
            let var = &data[name];
            var.set(&seeded_normal(&mut rng, 0.02, var.dims())).unwrap();
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
        forbid_goal_at_init: false,
        init_mutex: vec![],
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
fn the_first_minibatch_ratio_is_one_and_the_sampler_gap_is_measured() {
    let Some(mut brain) = load(LearnerWeights::Sampler) else { return };
    assert!(brain.learns_on_sampler_weights(), "a GGUF model on the CPU learns on its sampler's weights");
    perturb_adapters(&brain);
    let mut batch = sampled_batch(&mut brain);
    let mut learner = Learner::new(brain, None, args(), Ablation::ActorOnly, 0).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    let r = stats.first_abs_log_ratio.expect("the first minibatch had policy tokens");
    let gap = stats.sampler_gap.expect("the samples recorded their log-probabilities");
    eprintln!(
        "first minibatch mean |log ratio| {r:.2e}; sampler gap {gap:.2e}; approx_kl {:.2e}, clipfrac {:.3}",
        stats.approx_kl, stats.clipfrac
    );
    assert_eq!(stats.old_logp_source, "scoring-pass");
    assert!(r < 1e-3, "mean |log ratio| of the first minibatch is {r:.2e}, not below 1e-3");
    assert!(gap < 0.1, "the sampler and the learner are {gap:.2e} apart per token");
    assert_eq!(stats.steps, 4, "two epochs of two minibatches");
}

#[test]
fn a_dense_learner_recomputes_the_old_policy_too() {
    let Some(mut brain) = load(LearnerWeights::Dense) else { return };
    assert!(!brain.learns_on_sampler_weights());
    let mut batch = sampled_batch(&mut brain);
    let mut learner = Learner::new(brain, None, args(), Ablation::ActorOnly, 0).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    eprintln!("dense: sampler gap {:?}", stats.sampler_gap);
    assert_eq!(stats.old_logp_source, "scoring-pass");
    assert!(stats.first_abs_log_ratio.unwrap() < 1e-3);
}

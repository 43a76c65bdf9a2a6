//! Learning, end to end and small enough for CI: the constrained SmolLM2-135M Actor writes
//! a BlocksWorld problem that the real verifier (Fast Downward) solves only sometimes; each
//! PPO update on the solver's reward alone makes its batch's rewarded answers more likely
//! against its unrewarded ones, and the updates together raise the sampled success rate over
//! a fixed set of seeds.
//!
//! The log-prob check is made on each update's own batch, not on the base model's answers
//! over the whole run: once success nears 1 the policy settles on a few of the rewarded
//! answers, and the base's rewarded set as a whole may then lose as much mass as the
//! unrewarded one (CI saw 11/16 -> 16/16 solved with -0.108 vs -0.093).
//!
//! The test fails when the advantage's sign is flipped (checked by hand: negate the
//! advantage in `ppo::clipped_surrogate_sum` and the test fails; `docs/training.md` has the figures).
//!
//! Skips, saying why, when the set-up has not been run (`scripts/setup.sh --models test`,
//! `scripts/build-plugins.sh`).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use onebrain_model::{LearnerWeights, ModelConfig};
use onebrain_roles::{
    load_model, run_pipelined, CheckerChoice, Constrain, Episode, EpisodeConfig, EpisodeRecord,
    LanguageModel, Mode, Services, SolveConfig, Strategy, MAX_BATCH,
};
use onebrain_runtime::RuntimeConfig;
use onebrain_train::{Ablation, Advantage, Batch, Learner, PolicySample, PpoArgs};
use onebrain_verifier::VerifierPool;

/// The generated task (BlocksWorld, 3 blocks) and the seeds: the sampled success of the base
/// model on it is neither 0 nor 1, so there is something to learn and room to learn it.
///
/// The margin matters more than the exact figures, which move with any change to the model's
/// numerics. At T = 1.0 the base solved 11/16 when this test was written and 13–14/16 after
/// the integer kernels' work (which change moved it was not pinned down), with batches of 8/8
/// and no room left to rise: the test failed with PPO unchanged. At T = 1.6 over 32 seeds the
/// base solved 12–13/32 (the batches the verifier's timing made moved the rounding) and three
/// updates 16/32 on the sampler's weights, 30/32 on the dense learner it first ran on. With
/// batch-invariant decoding the draws no longer depend on timing: the base solves
/// 9/32, the first three batches held 3 solved answers of 24 and success stayed at 9; five
/// updates take it to 16/32, and with the sign flipped the test fails (docs/training.md).
/// Those are AVX-512 figures; on an AVX2 Zen 3, whose f32 products sum in another order, the
/// base solves 6/32 and five updates take it to 21/32.
const TASK_SEED: u64 = 3;
const EVAL_SEEDS: Range<u64> = 1000..1032;
const TEMPERATURE: f32 = 1.6;
const UPDATES: u64 = 5;
const EPISODES_PER_UPDATE: u64 = 8;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn ready() -> Option<&'static str> {
    onebrain_roles::test_setup_missing(root(), &["blocksworld", "paper-rewards"])
}

/// The Actor alone, sampled under the problem grammar; its reward R_A is b_0 (no Judge term).
fn config() -> SolveConfig {
    SolveConfig {
        // The learner training runs: the sampler's own tiled weights, where the CPU
        // has a tiled kernel; candle's quantized blocks and a dense learner elsewhere.
        model: ModelConfig { learner_weights: LearnerWeights::Sampler, ..ModelConfig::test_model() },
        episode: EpisodeConfig {
            strategy: Strategy::MultiRole,
            mode: Mode::Problem,
            max_repairs: 0,
            budget: 1,
            greedy: false,
            temperature: TEMPERATURE,
            judge: false,
            lambda_judge: 0.0,
            max_tokens: 160,
            constrain: Constrain::Grammar,
            ..Default::default()
        },
        plugins: RuntimeConfig {
            plugin_dirs: vec!["plugins".into()],
            reward: Some("paper-rewards".into()),
            domains: vec!["blocksworld".into()],
            ..Default::default()
        },
        checker: CheckerChoice::Native,
        ..Default::default()
    }
}

fn args() -> PpoArgs {
    PpoArgs {
        learning_rate: 2e-3,
        batch_size: EPISODES_PER_UPDATE as usize,
        group_size: EPISODES_PER_UPDATE as usize,
        advantage: Advantage::Group,
        update_epochs: 2,
        detach_prompt: true,
        ..Default::default()
    }
}

/// One sampled episode per seed, with the current parameters, all of them open at once as
/// in training's rollouts (decoded in batches of up to [`MAX_BATCH`]), returned in seed
/// order. On this task each seed's batched answer was checked to be the one it gets alone
/// (docs/training.md).
fn rollouts(
    cfg: &SolveConfig,
    services: &Services,
    learner: &mut Learner,
    seeds: Range<u64>,
) -> Vec<(usize, EpisodeRecord)> {
    let task = services.domain("blocksworld").unwrap().generate(TASK_SEED, 3).unwrap();
    let input = services.episode_input(task).unwrap();
    let name = learner.brain().name();
    let episodes: Vec<Episode> = seeds
        .clone()
        .map(|seed| Episode::new(input.clone(), &EpisodeConfig { seed, ..cfg.episode.clone() }, &name))
        .collect();
    let pool = VerifierPool::new(Arc::clone(&services.verifier), 2);
    let mut records = Vec::new();
    run_pipelined(episodes, &cfg.episode, learner.brain(), &pool, &services.finalizer, MAX_BATCH, &mut |_| {}, &mut |r| {
        records.push(r);
        Ok::<(), ()>(())
    })
    .unwrap();
    records.sort_by_key(|r| r.steps.first().map(|s| s.sampling.seed));
    assert_eq!(records.len(), seeds.count());
    records
        .into_iter()
        .map(|rec| {
            assert!(rec.error.is_none(), "{:?}", rec.error);
            let step = &rec.steps[0];
            assert!(step.sampling.constraint.is_some(), "the Actor decodes under the grammar");
            assert_ne!(step.stop_reason, "max-tokens", "a constrained answer ends by itself");
            (0, rec)
        })
        .collect()
}

fn solved(records: &[(usize, EpisodeRecord)]) -> usize {
    records.iter().filter(|(_, r)| r.b0).count()
}

#[test]
fn ppo_on_the_solver_reward_raises_rewarded_answers_and_sampled_success() {
    if let Some(why) = ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let cfg = config();
    let services = Services::load(&cfg, root()).expect("services");
    let brain = load_model(&cfg, root()).expect("SmolLM2");
    let mut learner = Learner::new(brain, None, args(), Ablation::ActorOnly, 0).unwrap();

    let before = rollouts(&cfg, &services, &mut learner, EVAL_SEEDS);
    let n = EVAL_SEEDS.count();
    eprintln!("base: {}/{n} solved", solved(&before));
    assert!(
        solved(&before) > 0 && solved(&before) < n,
        "the task must be solved only sometimes at base: {}/{n}",
        solved(&before)
    );

    // Both checks are made after the last evaluation, so that a failing run (the advantage's
    // sign flipped) shows all its figures.
    let mut mixed_batches = 0;
    let mut lagging = Vec::new();
    for u in 0..UPDATES {
        let first = 2000 + u * EPISODES_PER_UPDATE;
        let records = rollouts(&cfg, &services, &mut learner, first..first + EPISODES_PER_UPDATE);
        let mut batch =
            Batch::from_records(&records, Ablation::ActorOnly, |p| learner.brain_ref().encode(p))
                .unwrap();
        let (rewarded, unrewarded): (Vec<PolicySample>, Vec<PolicySample>) =
            batch.policy.iter().cloned().partition(|s| s.reward > 0.5);
        let mixed = !rewarded.is_empty() && !unrewarded.is_empty();
        let logprobs = |learner: &Learner| {
            (learner.mean_logprob(&rewarded).unwrap(), learner.mean_logprob(&unrewarded).unwrap())
        };
        let lp0 = if mixed { Some(logprobs(&learner)) } else { None };
        let stats = learner.update(&mut batch).unwrap();
        eprintln!(
            "update {u}: {}/{EPISODES_PER_UPDATE} solved, loss {:.4} -> {:.4}, kl {:.4}, {:.1} s",
            solved(&records),
            stats.total_first.unwrap_or(f32::NAN),
            stats.total,
            stats.approx_kl,
            stats.secs
        );
        if let Some(lp0) = lp0 {
            let lp1 = logprobs(&learner);
            let (gain_rewarded, gain_unrewarded) = (lp1.0 - lp0.0, lp1.1 - lp0.1);
            eprintln!(
                "  log-prob per token: rewarded {:.3} -> {:.3}, unrewarded {:.3} -> {:.3}",
                lp0.0, lp1.0, lp0.1, lp1.1
            );
            // (A NaN gain fails too.)
            if gain_rewarded.partial_cmp(&gain_unrewarded) != Some(std::cmp::Ordering::Greater) {
                lagging.push(format!("update {u}: {gain_rewarded:+.3} vs {gain_unrewarded:+.3}"));
            }
            mixed_batches += 1;
        }
    }
    assert!(mixed_batches > 0, "no update saw both a solved and an unsolved answer");

    let after = rollouts(&cfg, &services, &mut learner, EVAL_SEEDS);
    eprintln!("solved on the fixed seeds: {}/{n} -> {}/{n}", solved(&before), solved(&after));
    assert!(
        lagging.is_empty(),
        "each batch's rewarded answers should gain log-probability on its unrewarded ones \
         (rewarded vs unrewarded gain per token): {}",
        lagging.join("; ")
    );
    assert!(
        solved(&after) > solved(&before),
        "sampled success over the fixed seeds should rise: {} -> {}",
        solved(&before),
        solved(&after)
    );
}

//! Training's resident memory stays flat: ten PPO updates on SmolLM2-135M, each on new
//! prompts of a realistic length (as rollouts bring), one of them six times as long, and
//! the memory after update 10 is within 10 % of the memory after update 2 (a transient
//! spike aside). A run of the 0.5B model grew by about 0.25 GB an update before this was
//! fixed: its memory followed the largest update so far.
//!
//! Its own test binary: resident memory is the process's, and tests of one binary run on
//! threads of one process.

use onebrain_model::{rss_mib, Brain, LearnerWeights, ModelConfig, Role};
use onebrain_train::{Ablation, Advantage, Batch, JudgeSample, Learner, PolicySample, PpoArgs};

/// The update whose prompts are six times as long: a run's resident memory used to follow
/// its largest update so far, since glibc kept the freed pages mapped.
const LONG_UPDATE: usize = 5;

/// Prompts of about 350 tokens (about 2,000 at [`LONG_UPDATE`]) with a distinct tail per update and
/// sample, outputs of about 100: the shape of the small CPU run's rollouts, scaled down.
fn batch(brain: &Brain, update: usize) -> Batch {
    let enc = |s: &str| brain.encode(s).unwrap();
    let domain = "(:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y)) \
                  :effect (and (on ?x ?y) (not (holding ?x))))\n"
        .repeat(if update == LONG_UPDATE { 36 } else { 6 });
    let prompt = |k: usize| {
        enc(&brain.chat_prompt(
            "You write PDDL.",
            &format!("{domain}\nTask {update}-{k}: put block b{k} on the table."),
        ))
    };
    let answer = |k: usize| {
        enc(&format!(
            "(define (problem p{k}) (:domain blocksworld) (:objects {}) (:init {}) (:goal (and (ontable b{k}))))",
            (0..8).map(|i| format!("b{i}")).collect::<Vec<_>>().join(" "),
            (0..8).map(|i| format!("(clear b{i}) (ontable b{i})")).collect::<Vec<_>>().join(" "),
        ))
    };
    let policy = (0..4)
        .map(|k| {
            let role = if k < 3 { Role::Actor } else { Role::Editor };
            PolicySample::new(role, prompt(k), answer(k), (k, 0, u32::from(k == 3)), (k % 2) as f32)
        })
        .collect();
    let judge = (0..2)
        .map(|k| JudgeSample {
            prompt: prompt(10 + k),
            label: k == 0,
            score: 0.5,
        })
        .collect();
    Batch {
        policy,
        judge,
        stats: Default::default(),
    }
}

#[test]
fn resident_memory_stays_flat_after_the_longest_update() {
    // The dense learner this test was calibrated on. On the sampler-weights learner
    // it had not finished after 14 minutes on an AVX2 machine shared with three builds, where
    // candle's quantized kernels multiply many rows one at a time; it is still to be run there.
    let cfg = ModelConfig { learner_weights: LearnerWeights::Dense, ..ModelConfig::test_model() };
    let brain = match Brain::load(&cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("skipping: SmolLM2 test model absent (scripts/setup.sh): {e}");
            return;
        }
    };
    let args = PpoArgs {
        learning_rate: 1e-4,
        batch_size: 4,
        group_size: 4,
        advantage: Advantage::Group,
        update_epochs: 1,
        detach_prompt: true,
        judge_tail: 128,
        ..Default::default()
    };
    let mut learner = Learner::new(brain, None, args, Ablation::Full, 0).unwrap();
    let mut rss = Vec::new();
    for u in 1..=10 {
        // A generation before each update, as the rollouts in a run: it fills the prefix
        // cache, which the update empties.
        let prompt = learner.brain_ref().chat_prompt("You write PDDL.", &format!("Task {u}"));
        learner
            .brain()
            .generate(Role::Actor, &prompt, &onebrain_model::SamplingConfig::greedy(8))
            .unwrap();
        let mut b = batch(learner.brain_ref(), u);
        learner.update(&mut b).unwrap();
        // Measured where the trainer logs `perf/rss_mib`: right after the update.
        rss.push(rss_mib().expect("/proc/self/status"));
        eprintln!("after update {u}: {:.0} MiB", rss[u - 1]);
    }
    // Memory "after update N" is the level the process settles at there, not one reading:
    // right after an update the allocator may hold one more activation-sized buffer (about
    // 25 MiB here, 3 % of SmolLM2's 770 MiB), and which update leaves one is a matter of
    // thread timing. Measured on CI-like runs: 742, 741, then 792 after update 3, 768-780
    // after updates 4-10 (CI failed on 780 against a single reading); 768, 802 from update 6
    // on, 813 after update 10; 795 after update 8, 742 after 9, 786 after 10. So the baseline
    // is the higher of updates 1 and 2 (both before the long update), and update 10's level
    // the lowest of updates 8, 9 and 10.
    //
    // Since the heap keeps large freed blocks for reuse (`onebrain_model`'s heap policy, 22 %
    // faster updates), the long update may leave one such block behind for good, and one
    // activation-sized block (about 25 MiB) may join it, at whichever update thread timing
    // decides: 750 MiB after update 2, then 791 from update 5 to 10, flat to 0.1 % (Zen 5,
    // 2026-11-26); 751 at updates 3-6, then 776 from update 7 on (CI, 2026-11-27); 752 at
    // updates 2-6, 797 at 7, then 809 at 8-10, flat to 0.05 % (CI, 2026-12-06). Those are
    // levels, not leaks: up to 7.7 % above update 2, so the bound is 10 %.
    //
    // A leak grows at every update. From update 2 to the lowest of updates 8 to 10 (update 8
    // under a leak) there are six updates, so a leak of 13 MiB an update (1.7 % each) or more
    // fails this bound, and the one it was written for (memory that follows the largest
    // update so far, 0.25 GB an update on the 0.5B model before `malloc_trim`) fails it at
    // the long update. A second bound, 5 % from update 6, caught only leaks of 20 MiB an
    // update or more, weaker than this one, and failed CI on the late block above.
    let (at2, at10) = (rss[0].max(rss[1]), rss[7].min(rss[8]).min(rss[9]));
    assert!(
        at10 <= at2 * 1.10,
        "resident memory grew from {at2:.0} MiB after update 2 (the higher of updates 1 and 2) to {at10:.0} MiB after update 10 (the lowest of updates 8 to 10): {rss:?}"
    );
}

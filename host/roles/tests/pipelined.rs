//! Several scripted episodes in flight at once: the same records as one at a time, with the
//! verifier's checks overlapping the model's calls.

mod scripted;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onebrain_core::BoxError;
use onebrain_roles::{
    run_episode, run_pipelined, Episode, EpisodeConfig, Finalizer, Generation, LanguageModel, Role,
    SamplingConfig, Strategy,
};
use onebrain_verifier::VerifierPool;

use scripted::*;

/// Runs tasks `t/0`..`t/{n-1}` through [`run_pipelined`] with `in_flight` open at once; the
/// records in completion order.
fn run_many<M: LanguageModel>(
    n: usize,
    cfg: &EpisodeConfig,
    model: &mut M,
    pool: &VerifierPool,
    in_flight: usize,
) -> Vec<onebrain_roles::EpisodeRecord> {
    let mut out = Vec::new();
    let eps = (0..n).map(|i| Episode::new(input(&format!("t/{i}")), cfg, "scripted"));
    run_pipelined(
        eps,
        cfg,
        model,
        pool,
        &Finalizer::default(),
        in_flight,
        &mut |_| {},
        &mut |r| {
            out.push(r);
            Ok::<(), ()>(())
        },
    )
    .unwrap();
    out
}

#[test]
fn pipelined_runs_match_sequential_ones_and_overlap_verification() {
    let cfg = problem_mode(Strategy::MultiRole);
    let script = [BROKEN_TAIL, GOOD_TAIL, GOOD_TAIL, BROKEN_TAIL, GOOD_TAIL];
    // Sequential, for reference.
    let mut seq_model = Scripted::new(&script);
    let seq_verifier = NativeVerifier::default();
    let seq: Vec<_> = (0..3)
        .map(|i| {
            run_episode(
                Episode::new(input(&format!("t/{i}")), &cfg, "scripted"),
                &cfg,
                &mut seq_model,
                &seq_verifier,
                &Finalizer::default(),
                &mut |_| {},
            )
        })
        .collect();

    let log = Arc::new(Mutex::new(Vec::new()));
    let verifier = Arc::new(NativeVerifier {
        delay_ms: 150,
        log: Some(log.clone()),
        ..Default::default()
    });
    let pool = VerifierPool::new(verifier.clone(), 2);
    // One episode in flight: same script order as the sequential run.
    let mut model = Scripted::new(&script);
    let out = run_many(3, &cfg, &mut model, &pool, 1);
    let summary = |rs: &[onebrain_roles::EpisodeRecord]| {
        rs.iter()
            .map(|r| (r.task_id.clone(), r.solved, r.solver_calls, r.repairs))
            .collect::<Vec<_>>()
    };
    assert_eq!(summary(&out), summary(&seq));

    // Three in flight on two verifiers, every task solved at once: the model takes the
    // first three tasks' requests as one batch (they wait together), two of them verify
    // while the third queues, and when the first two end the model starts task 4 while
    // task 3 still verifies. (With two in flight the two tasks move in lockstep, batched
    // together and verified together, and nothing is left to overlap.)
    log.lock().unwrap().clear();
    let mut model = Scripted {
        delay_ms: 100,
        log: Some(log.clone()),
        ..Scripted::new(&[GOOD_TAIL; 4])
    };
    let start = Instant::now();
    let out = run_many(4, &cfg, &mut model, &pool, 3);
    let wall = start.elapsed();
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|r| r.solved && r.solver_calls == 1));
    let log = log.lock().unwrap();
    // Some generation ran while a verification was in flight: halfway through a 100 ms
    // generation, more verifications had started than ended.
    let before = |kind: &str, t: &Instant| log.iter().filter(|(k, u)| k == kind && u < t).count();
    let overlapped = log
        .iter()
        .filter(|(k, _)| k == "generate-start")
        .map(|(_, t)| *t + Duration::from_millis(50))
        .any(|mid| before("verify-start", &mid) > before("verify-end", &mid));
    let t0 = log.iter().map(|(_, t)| *t).min().unwrap();
    let timeline: Vec<String> = log
        .iter()
        .map(|(k, t)| format!("{k}@{}", (*t - t0).as_millis()))
        .collect();
    assert!(
        overlapped,
        "a generation started while a verification ran: {timeline:?}"
    );
    // Sequentially: 4 × (100 ms model + 150 ms verifier) = 1 s; overlapped it is less.
    assert!(wall < Duration::from_millis(1000), "{wall:?}");
}

/// A wave of verdicts that come back a few milliseconds apart shares the model's next call.
/// The first verdict of a training update's wave used to take the model for a Judge call of
/// one row, and the other fifteen waited for it (in a training run: 16.5 s, then 116.8 s).
#[test]
fn verdicts_close_behind_each_other_share_the_models_next_call() {
    let cfg = problem_mode(Strategy::MultiRole);
    let verifier = Arc::new(NativeVerifier { delay_ms: 5, ..Default::default() });
    // One worker: the four verdicts come back one after another, 5 ms apart, while the grace
    // is an eighth of the Actor's call of 4 × 200 ms.
    let pool = VerifierPool::new(verifier, 1);
    let mut model = Scripted { delay_ms: 200, ..Scripted::new(&[GOOD_TAIL; 4]) };
    let out = run_many(4, &cfg, &mut model, &pool, 4);
    assert!(out.iter().all(|r| r.solved && r.solver_calls == 1 && r.judge_score.is_some()));
    assert_eq!(model.judge_calls, [4], "the four Judge requests in one call");
}

#[test]
fn pipelined_episodes_never_wait_behind_newer_ones() {
    // `direct` validates plans inside the episode, so an open episode always wants the model:
    // the model must go to the oldest one, not to whichever slot a new episode refilled
    // (that once kept one episode waiting behind ten newer ones in a real run). Waiting
    // requests share one call, oldest first, so the answers depend on the attempt (its
    // seed), not on the call order: each task's first plan is wrong and its second right.
    struct SecondTry(Vec<u64>);
    impl LanguageModel for SecondTry {
        fn generate(&mut self, _: Role, _: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
            self.0.push(s.seed);
            let text = if s.seed == 0 {
                "I stack a on b.\n```plan\n(stack a b)\n```"
            } else {
                "First pick up a.\n```plan\n(pick-up a)\n(stack a b)\n```"
            };
            let mut g = Scripted::new(&[text]).generate(Role::Actor, "", s)?;
            g.text = text.into();
            Ok(g)
        }
        fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
            Ok(0.5)
        }
        fn name(&self) -> String {
            "second-try".into()
        }
    }
    let cfg = problem_mode(Strategy::Direct);
    let mut model = SecondTry(Vec::new());
    let pool = VerifierPool::new(Arc::new(NativeVerifier::default()), 1);
    let finished: Vec<_> = run_many(4, &cfg, &mut model, &pool, 2)
        .into_iter()
        .map(|r| (r.task_id, r.solved, r.solver_calls))
        .collect();
    let expected: Vec<_> = (0..4).map(|i| (format!("t/{i}"), true, 2)).collect();
    assert_eq!(finished, expected);
    // Two open at a time: first tries of t/0 and t/1, their second tries, then t/2 and t/3.
    assert_eq!(model.0, [0, 0, 1, 1, 0, 0, 1, 1]);
}

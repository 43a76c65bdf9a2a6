//! Drivers: what answers an [`Episode`]'s requests.
//!
//! [`run_episode`] answers them one after the other (`solve`). [`run_pipelined`] keeps a few
//! episodes in flight: whenever one waits for the verifier, the model works on another, and
//! verifications run on a [`VerifierPool`] (tokio's blocking threads, the planner a
//! subprocess), so the verifier checks task i while the model generates task i+1. The
//! model's requests that wait together go to it in one call: the oldest one with every other
//! generation in its role (or every Judge request), up to [`MAX_BATCH`], decoded as a batch.
//! When a verdict frees the model, the verdicts close behind it are waited for a moment
//! ([`grace`]), so that a wave of verifications becomes one call rather than one per verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onebrain_core::{
    Checker, FaithfulnessReport, FinishedEpisode, Reward, RewardSettings, Spec, Step, StepRole, Verdict, Verifier,
};
use onebrain_verifier::VerifierPool;

use crate::episode::{Episode, Request, Response};
use crate::model::LanguageModel;
use onebrain_model::Role;
use crate::record::{EpisodeRecord, Event, FailedPlugin, PluginFailure};
use crate::strategy::{EpisodeConfig, Select, Strategy};

/// Adds what the plugins say about a finished episode: rewards and faithfulness.
#[derive(Clone, Default)]
pub struct Finalizer {
    /// The reward function (multi-role episodes).
    pub reward: Option<Arc<dyn Reward>>,
    /// The faithfulness checker (tasks with a reference spec).
    pub checker: Option<Arc<dyn Checker>>,
}

impl std::fmt::Debug for Finalizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finalizer")
            .field("reward", &self.reward.is_some())
            .field("checker", &self.checker.is_some())
            .finish()
    }
}

impl Finalizer {
    /// Fills `rewards`, `faithfulness` and `timings.plugins_ms` of a finished record. Plugin
    /// failures are noted in `error` (text, for people) and in `failures` (with their kind,
    /// for reports); they never stop a run. An episode that stopped on its own error and
    /// returned no spec gets no faithfulness report: it has no answer to check.
    pub fn finalize(&self, rec: &mut EpisodeRecord, cfg: &EpisodeConfig, reference: Option<&Spec>) {
        let start = Instant::now();
        let mut errors = Vec::new();
        if let (Some(reward), Strategy::BestOfK, Select::Reward) = (&self.reward, rec.strategy, cfg.select) {
            // The pick decides which answer the checker below sees.
            if let Err(e) = select_by_reward(rec, cfg, reward.as_ref()) {
                errors.push(format!("{}{e}", FailedPlugin::Reward.error_prefix()));
                rec.failures.push(plugin_failure(FailedPlugin::Reward, &*e));
            }
        }
        if let (Some(reward), Strategy::MultiRole) = (&self.reward, rec.strategy) {
            let episode = finished_episode(rec, cfg);
            match reward.rewards(&episode) {
                Ok(r) => rec.rewards = Some(r),
                Err(e) => {
                    errors.push(format!("{}{e}", FailedPlugin::Reward.error_prefix()));
                    rec.failures.push(plugin_failure(FailedPlugin::Reward, &*e));
                }
            }
        }
        if let (Some(reference), Some(spec), false) = (reference, &rec.final_spec, rec.strategy.writes_plan()) {
            // An answer that does not parse has nothing to compare; the record says so elsewhere.
            rec.fact_agreement = onebrain_faithful::fact_agreement(&reference.problem, &spec.problem).ok();
        }
        if let (Some(checker), Some(reference), false) =
            (&self.checker, reference, rec.strategy.writes_plan())
        {
            match &rec.final_spec {
                Some(spec) => {
                    let plan = rec.solved.then_some(rec.final_plan.as_slice());
                    match checker.check(reference, spec, plan) {
                        Ok(r) => rec.faithfulness = Some(r),
                        Err(e) => {
                            errors.push(format!("{}{e}", FailedPlugin::Checker.error_prefix()));
                            rec.failures.push(plugin_failure(FailedPlugin::Checker, &*e));
                        }
                    }
                }
                // An episode that stopped on its own error (a request the memory budget
                // refused) has no answer to judge: the model did not write "no PDDL", it
                // wrote nothing. `error` holds only the episode's own so far.
                None if rec.error.is_some() => {}
                None => {
                    rec.faithfulness = Some(FaithfulnessReport {
                        explanation: vec!["the model wrote no PDDL".into()],
                        ..Default::default()
                    })
                }
            }
        }
        rec.timings.plugins_ms += start.elapsed().as_secs_f64() * 1e3;
        if !errors.is_empty() {
            let joined = errors.join("; ");
            rec.error = Some(match rec.error.take() {
                Some(e) => format!("{e}; {joined}"),
                None => joined,
            });
        }
    }
}

/// Φ(y) of each verified step of `rec` with its rewards: y scored alone, as a one-step
/// episode written by the Actor with the Judge's weight λ_J set to 0, so Φ(y) is the plugin's
/// Actor reward without its Judge term (`text-agreement`: b·A(y)). One entry per record
/// step, `None` for a step without a verdict. A failed call, or a Φ that is not a number,
/// is an error naming the step.
fn phi_per_step(
    rec: &EpisodeRecord,
    cfg: &EpisodeConfig,
    reward: &dyn Reward,
) -> Result<Vec<Option<(f32, onebrain_core::Rewards)>>, onebrain_core::BoxError> {
    let whole = finished_episode(rec, cfg);
    let settings = RewardSettings { lambda_judge: 0.0, ..whole.settings };
    let mut out: Vec<Option<(f32, onebrain_core::Rewards)>> = vec![None; rec.steps.len()];
    let verified = rec.steps.iter().enumerate().filter(|(_, s)| s.verdict.is_some());
    for ((at, s), step) in verified.zip(whole.steps) {
        let one = FinishedEpisode {
            task_id: whole.task_id.clone(),
            domain: whole.domain.clone(),
            task_text: whole.task_text.clone(),
            // Φ is about y alone, whoever wrote it: an Editor's repair is scored as an answer.
            steps: vec![Step { role: StepRole::Actor, ..step }],
            judge_score: s.judge_score.unwrap_or(0.5),
            settings,
        };
        let r = reward.rewards(&one)?;
        if !r.actor.is_finite() {
            return Err(format!("Φ of step {} is {}, not a number the selector can rank", s.index, r.actor).into());
        }
        out[at] = Some((r.actor, r));
    }
    Ok(out)
}

/// Best-of-k's pick by the reward plugin: the highest Φ (see [`phi_per_step`]) is returned,
/// ties to the higher Judge score, then to the earlier sample; its rewards become the
/// record's. A failed call (or a non-finite Φ) leaves the Judge's pick that the episode
/// made, and is reported.
fn select_by_reward(rec: &mut EpisodeRecord, cfg: &EpisodeConfig, reward: &dyn Reward) -> Result<(), onebrain_core::BoxError> {
    let phi = phi_per_step(rec, cfg, reward)?;
    let mut best: Option<(usize, f32, f32)> = None;
    for (at, s) in rec.steps.iter().enumerate() {
        let Some((p, _)) = &phi[at] else { continue };
        let judge = s.judge_score.unwrap_or(0.5);
        if best.is_none_or(|(_, bp, bj)| *p > bp || (*p == bp && judge > bj)) {
            best = Some((at, *p, judge));
        }
    }
    if let Some((at, _, _)) = best {
        rec.return_step(at);
        rec.rewards = phi[at].as_ref().map(|(_, r)| r.clone());
    }
    Ok(())
}

/// The answer to [`Request::Rank`]: Φ per record step from the finalizer's reward plugin.
/// A plugin failure ends the episode with what it has, the message naming the plugin.
fn rank(finalizer: &Finalizer, rec: &EpisodeRecord, cfg: &EpisodeConfig) -> Response {
    let Some(reward) = &finalizer.reward else {
        return Response::Failed("best-then-repair ranks by the reward plugin, and none is configured".into());
    };
    match phi_per_step(rec, cfg, reward.as_ref()) {
        Ok(phi) => Response::Ranked(phi.into_iter().map(|p| p.map(|(p, _)| p)).collect()),
        Err(e) => Response::Failed(format!("{}{e}", FailedPlugin::Reward.error_prefix())),
    }
}

/// A failed call of `plugin`, its kind read from the error's type: the core traits return a
/// `BoxError`, which for a WebAssembly plugin is the runtime's `PluginError` (or wraps one, so
/// the whole source chain is searched). Any other error (a native checker's) has no kind.
fn plugin_failure(plugin: FailedPlugin, e: &(dyn std::error::Error + 'static)) -> PluginFailure {
    let kind = std::iter::successors(Some(e), |e| e.source())
        .find_map(|e| e.downcast_ref::<onebrain_runtime::PluginError>())
        .map(onebrain_runtime::PluginError::failure_kind);
    PluginFailure { plugin, kind, message: e.to_string() }
}

/// What the reward function sees of a finished multi-role record: the task, every verified
/// Actor and Editor step, the Judge's score and the weights; never the reference spec.
pub fn finished_episode(rec: &EpisodeRecord, cfg: &EpisodeConfig) -> FinishedEpisode {
    let steps = rec
        .verified_steps()
        .filter_map(|s| {
            let role = match s.role {
                Role::Actor => StepRole::Actor,
                Role::Editor => StepRole::Editor,
                Role::Judge => return None,
            };
            let verdict = s.verdict.clone().expect("a verified step");
            Some(Step { role, spec: s.spec.clone(), verdict, output_tokens: s.output_tokens.len() as u32 })
        })
        .collect();
    FinishedEpisode {
        task_id: rec.task_id.clone(),
        domain: rec.domain.clone(),
        task_text: rec.task_text.clone(),
        steps,
        // Without a Judge call, s_J is the uninformative 0.5.
        judge_score: rec.judge_score.unwrap_or(0.5),
        settings: RewardSettings {
            max_repairs: cfg.max_repairs,
            judge_threshold: cfg.judge_threshold,
            lambda_judge: cfg.lambda_judge,
            repair_cost: cfg.repair_cost,
        },
    }
}

/// Answers a model request; a model error becomes [`Response::Failed`].
fn serve_model<M: LanguageModel + ?Sized>(model: &mut M, request: &Request) -> Option<Response> {
    match request {
        Request::Generate {
            role,
            prompt,
            sampling,
        } => Some(match model.generate(*role, prompt, sampling) {
            Ok(g) => Response::Generated(g),
            Err(e) => Response::Failed(format!("model error ({role}): {e}")),
        }),
        Request::Judge { prompt } => {
            let start = Instant::now();
            Some(match model.judge(prompt) {
                Ok(score) => Response::Judged {
                    score,
                    secs: start.elapsed().as_secs_f64(),
                },
                Err(e) => Response::Failed(format!("model error (judge): {e}")),
            })
        }
        _ => None,
    }
}

/// Runs one episode to the end, one request at a time, reporting each event as it happens.
pub fn run_episode<M: LanguageModel + ?Sized>(
    mut episode: Episode,
    cfg: &EpisodeConfig,
    model: &mut M,
    verifier: &dyn Verifier,
    finalizer: &Finalizer,
    on_event: &mut dyn FnMut(&Event),
) -> EpisodeRecord {
    let mut request = episode.start();
    loop {
        for e in episode.take_events() {
            on_event(&e);
        }
        let response = match &request {
            Request::Done => break,
            Request::Verify { spec } => Response::Verified(verifier.verify_task(&episode.task().text, spec)),
            Request::Rank => rank(finalizer, episode.record(), cfg),
            other => serve_model(model, other).expect("a model request"),
        };
        request = episode.resume(response);
    }
    for e in episode.take_events() {
        on_event(&e);
    }
    let reference = episode.task().reference.clone();
    let mut rec = episode.finish();
    finalizer.finalize(&mut rec, cfg, reference.as_ref());
    on_event(&Event::Finished(Box::new(rec.clone())));
    rec
}

struct Slot {
    episode: Episode,
    request: Request,
    /// Opening order: the model goes to the oldest open episode that needs it, so a slot
    /// freed and refilled never lets a newer episode overtake an older one.
    opened: u64,
    /// A verification for this slot is in flight.
    waiting: bool,
}

/// Runs `episodes` with up to `in_flight` of them open at once; `on_record` receives each
/// finished record (in completion order) and may stop the run by returning an error.
pub fn run_pipelined<M, I, E>(
    episodes: I,
    cfg: &EpisodeConfig,
    model: &mut M,
    pool: &VerifierPool,
    finalizer: &Finalizer,
    in_flight: usize,
    on_event: &mut dyn FnMut(&Event),
    on_record: &mut dyn FnMut(EpisodeRecord) -> Result<(), E>,
) -> Result<(), E>
where
    M: LanguageModel + ?Sized,
    I: IntoIterator<Item = Episode>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut episodes = episodes.into_iter();
    let in_flight = in_flight.max(1);
    rt.block_on(async {
        let mut slots: Vec<Option<Slot>> = Vec::new();
        let mut verifying: tokio::task::JoinSet<(usize, Verdict)> = tokio::task::JoinSet::new();
        let mut exhausted = false;
        let mut opened = 0u64;
        // How long the model's last call took: the grace before a call is a share of it.
        let mut last_call = Duration::ZERO;
        loop {
            // 1. Open episodes up to the bound.
            while !exhausted && slots.iter().filter(|s| s.is_some()).count() < in_flight {
                match episodes.next() {
                    Some(mut episode) => {
                        let request = episode.start();
                        let free = slots.iter().position(Option::is_none);
                        let slot = Some(Slot {
                            episode,
                            request,
                            opened,
                            waiting: false,
                        });
                        opened += 1;
                        match free {
                            Some(i) => slots[i] = slot,
                            None => slots.push(slot),
                        }
                    }
                    None => exhausted = true,
                }
            }
            // 2. Hand verifications to the pool; take verdicts that are ready.
            for (i, s) in slots.iter_mut().enumerate() {
                if let Some(Slot {
                    episode,
                    request: Request::Verify { spec },
                    waiting: waiting @ false,
                    ..
                }) = s
                {
                    *waiting = true;
                    let pool = pool.clone();
                    let spec = spec.clone();
                    // The task text, for a verifier with diagnostic reviewers (none by default).
                    let text = episode.task().text.clone();
                    verifying.spawn(async move { (i, pool.verify_task(text, spec).await) });
                }
            }
            while let Some(joined) = verifying.try_join_next() {
                let (i, verdict) = joined.expect("verification tasks do not panic");
                answer(&mut slots[i], Response::Verified(verdict));
            }
            // Rankings are plugin calls of a few milliseconds: answered here, in order.
            for s in slots.iter_mut() {
                if let Some(slot @ Slot { request: Request::Rank, .. }) = s {
                    let response = tokio::task::block_in_place(|| rank(finalizer, slot.episode.record(), cfg));
                    slot.request = slot.episode.resume(response);
                }
            }
            // 3. Close finished episodes (and go back to open new ones before waiting).
            let mut closed = false;
            for s in slots.iter_mut() {
                if matches!(
                    s,
                    Some(Slot {
                        request: Request::Done,
                        ..
                    })
                ) {
                    let mut slot = s.take().expect("matched");
                    for e in slot.episode.take_events() {
                        on_event(&e);
                    }
                    let reference = slot.episode.task().reference.clone();
                    let mut rec = slot.episode.finish();
                    // Plugins run outside the async context: a guest's write to stdout or
                    // stderr (a panic's message) makes wasmtime-wasi block on the ambient
                    // tokio runtime, which panics inside `block_on` and ended the whole run
                    // (the fault-injection soak). `block_in_place` leaves that context for the
                    // call.
                    tokio::task::block_in_place(|| finalizer.finalize(&mut rec, cfg, reference.as_ref()));
                    on_event(&Event::Finished(Box::new(rec.clone())));
                    on_record(rec)?;
                    closed = true;
                }
            }
            if closed {
                continue;
            }
            for s in slots.iter_mut().flatten() {
                for e in s.episode.take_events() {
                    on_event(&e);
                }
            }
            // 4. Give the model to the oldest episode that needs it, and in the same call to
            // every open episode whose request can share it (see `serve_batch`).
            let mut waiting: Vec<(u64, usize)> = slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s {
                    Some(Slot {
                        request: Request::Generate { .. } | Request::Judge { .. },
                        opened,
                        ..
                    }) => Some((*opened, i)),
                    _ => None,
                })
                .collect();
            if !waiting.is_empty() {
                waiting.sort_unstable();
                let order: Vec<usize> = waiting.into_iter().map(|(_, i)| i).collect();
                let start = Instant::now();
                serve_batch(model, &mut slots, &order);
                last_call = start.elapsed();
                continue;
            }
            // 5. Nothing for the model: wait for a verdict, or stop.
            if let Some(joined) = verifying.join_next().await {
                let (i, verdict) = joined.expect("verification tasks do not panic");
                answer(&mut slots[i], Response::Verified(verdict));
                // The verdicts still in flight join the call this one asks for if they come
                // within the grace: a training update's 16 verdicts come back a millisecond
                // apart, and the first used to take the model for a call of one row.
                let deadline = Instant::now() + grace(last_call);
                while wants_model(&slots) && !verifying.is_empty() {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match tokio::time::timeout(left, verifying.join_next()).await {
                        Ok(Some(joined)) => {
                            let (i, verdict) = joined.expect("verification tasks do not panic");
                            answer(&mut slots[i], Response::Verified(verdict));
                        }
                        Ok(None) | Err(_) => break,
                    }
                }
                continue;
            }
            if exhausted && slots.iter().all(Option::is_none) {
                return Ok(());
            }
        }
    })
}

/// How long a verdict that frees the model waits for the verifications still in flight: an
/// eighth of the model's last call, at most 10 s. A call costs far more than the wait, so
/// the model idles at most an eighth of its time this way; a verification slower than the
/// grace (a planner that searches) still overlaps the model's next call.
fn grace(last_call: Duration) -> Duration {
    (last_call / 8).min(Duration::from_secs(10))
}

/// Whether some open episode waits for the model.
fn wants_model(slots: &[Option<Slot>]) -> bool {
    slots
        .iter()
        .flatten()
        .any(|s| matches!(s.request, Request::Generate { .. } | Request::Judge { .. }))
}

/// Most requests [`run_pipelined`] hands the model in one call: a training update's 16
/// episodes (4 tasks × 4 samples) decode as one batch.
pub const MAX_BATCH: usize = 16;

/// Serves the oldest waiting request (`order[0]`; `order` lists the slots with a model
/// request, oldest first) together with every other one of its kind, oldest first, up to
/// [`MAX_BATCH`]: the Generate requests in the same role (each keeps its own sampling
/// config, seed included), or the Judge requests. What shares a call depends on when the
/// verdicts came back, and a row's output on what shares its call only through the batched
/// kernels' rounding (see `Brain::generate_rows`): a run with several episodes in flight is
/// repeatable in distribution, not bit for bit (nor strictly before: the order of calls
/// decided what the prefix cache held, and so how a prompt's prefill was chunked).
fn serve_batch<M: LanguageModel + ?Sized>(model: &mut M, slots: &mut [Option<Slot>], order: &[usize]) {
    let request = |i: usize| &slots[i].as_ref().expect("a waiting slot is open").request;
    match request(order[0]) {
        Request::Generate { role: first, .. } => {
            let first = *first;
            let mut batch = Vec::new();
            let mut requests = Vec::new();
            for &i in order {
                if let Request::Generate { role, prompt, sampling } = request(i) {
                    if *role == first && batch.len() < MAX_BATCH {
                        batch.push(i);
                        requests.push((*role, prompt.clone(), sampling.clone()));
                    }
                }
            }
            let mut results = model.generate_many(&requests).into_iter();
            for i in batch {
                let response = match results.next() {
                    Some(Ok(g)) => Response::Generated(g),
                    Some(Err(e)) => Response::Failed(format!("model error ({first}): {e}")),
                    None => Response::Failed(format!("model error ({first}): no result for this request")),
                };
                answer(&mut slots[i], response);
            }
        }
        Request::Judge { .. } => {
            let mut batch = Vec::new();
            let mut prompts = Vec::new();
            for &i in order {
                if let Request::Judge { prompt } = request(i) {
                    if batch.len() < MAX_BATCH {
                        batch.push(i);
                        prompts.push(prompt.clone());
                    }
                }
            }
            let start = Instant::now();
            let mut results = model.judge_many(&prompts).into_iter();
            // Each score's time is the call's (as a batch's generations share their prefill).
            let secs = start.elapsed().as_secs_f64();
            for i in batch {
                let response = match results.next() {
                    Some(Ok(score)) => Response::Judged { score, secs },
                    Some(Err(e)) => Response::Failed(format!("model error (judge): {e}")),
                    None => Response::Failed("model error (judge): no result for this request".into()),
                };
                answer(&mut slots[i], response);
            }
        }
        _ => unreachable!("only model requests wait for the model"),
    }
}

fn answer(slot: &mut Option<Slot>, response: Response) {
    let s = slot.as_mut().expect("an answer goes to an open slot");
    s.waiting = false;
    s.request = s.episode.resume(response);
}

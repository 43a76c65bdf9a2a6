//! The training loop (plumbing around the algorithm): tasks → rollouts → update → log →
//! checkpoint, resumable at every step.
//!
//! Per update u: the next `batch-size / group-size` tasks of the stream, each run
//! `group-size` times as a sampled multi-role episode (seed derived from the run seed, u and
//! the slot, so a rerun samples the same), every finished episode appended and flushed to
//! `episodes.jsonl`; then [`Learner::update`], a line in `metrics.jsonl`, the curves, and a
//! checkpoint. A resumed run reloads the newest checkpoint and reuses the episodes already
//! recorded for the update in progress, so a kill loses at most that update's compute.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use onebrain_core::Task;
use onebrain_durable::{stop_requested, FolderLock, StopSignal, Stopped};
use onebrain_eval::{check_plugins, TraceWriter};
use onebrain_model::Brain;
use onebrain_roles::{
    load_model, run_pipelined, Episode, EpisodeRecord, Event, LanguageModel, RolesError,
    Services,
};
use onebrain_verifier::VerifierPool;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::batch::Batch;
use crate::checkpoint::{self, ActorOffset, TrainState};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::heldout::{HeldOut, HeldOutLog, HeldOutRow};
use crate::learner::Learner;
use crate::metrics::{MetricsLog, MetricsRow, PeakMemory, StepClock};
use crate::stream::{SkippedTwin, TaskSource};

/// What the loop reports as it goes.
#[derive(Debug)]
pub enum TrainEvent<'a> {
    /// The run is set up.
    Started {
        /// Updates already done (resumed) and in all.
        done: u64,
        /// Updates in all.
        total: u64,
        /// Parameters the optimizer steps.
        trainable: usize,
        /// The run folder.
        run_dir: &'a Path,
    },
    /// An episode of the rollouts finished.
    Episode {
        /// The update it belongs to (0-based).
        update: u64,
        /// Episodes of this update finished so far, and in all.
        done: usize,
        /// Episodes in the update.
        total: usize,
        /// The record.
        record: &'a EpisodeRecord,
    },
    /// An update finished.
    Updated(&'a MetricsRow),
    /// A checkpoint was written.
    Checkpoint(&'a Path),
    /// An episode of a held-out evaluation finished.
    HeldOutEpisode {
        /// Updates done when the evaluation runs.
        update: u64,
        /// Episodes finished so far, and in all.
        done: usize,
        /// Episodes in the evaluation.
        total: usize,
        /// The record.
        record: &'a EpisodeRecord,
    },
    /// A held-out evaluation finished.
    HeldOut(&'a HeldOutRow),
    /// Something opening the run folder did that the user should know: a torn last line a
    /// kill left in a log, dropped; lines past the checkpoint it resumes from, removed.
    Note(&'a str),
}

/// One line of `episodes.jsonl`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct EpisodeLine {
    update: u64,
    slot: usize,
    group: usize,
    record: EpisodeRecord,
}

/// The run, loaded: model and optimizer, verifier and plugins, run folder.
pub struct Trainer {
    cfg: TrainConfig,
    run_dir: PathBuf,
    services: Services,
    learner: Learner,
    state: TrainState,
    stream: TaskSource,
    metrics: MetricsLog,
    /// Episodes a killed run recorded for the update it did not finish, by slot (read once,
    /// at open, and used up by the next update).
    resumed: HashMap<usize, (usize, EpisodeRecord)>,
    /// `episodes.jsonl`, open for appending.
    episodes: TraceWriter,
    /// `skipped-twins.jsonl`, open for appending: the candidates the stream skipped.
    twins: TraceWriter,
    /// The held-out slice and its log, when the config names one.
    heldout: Option<(HeldOut, HeldOutLog)>,
    /// Resident memory's peaks, phase by phase.
    memory: PeakMemory,
    /// Updates done when the newest checkpoint was written: a stop writes one if the run is
    /// past it, so that it resumes from where it stopped.
    checkpointed: u64,
    /// What opening did to the run folder's logs, said when the run starts.
    notes: Vec<String>,
    /// The run folder's lock, held while the trainer lives.
    _lock: FolderLock,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("run_dir", &self.run_dir)
            .field("state", &self.state)
            .finish()
    }
}
/// Refuses to resume `run_dir` under another config than the one its checkpoint `found` was
/// trained with, naming the keys that differ.
pub(crate) fn check_resumed_config(
    found: Option<&TrainState>,
    cfg: &TrainConfig,
    digest: &str,
    config_json: &Path,
    run_dir: &Path,
) -> Result<(), TrainError> {
    let Some(st) = found else { return Ok(()) };
    if st.config_sha256 == digest {
        return Ok(());
    }
    let changed = fs::read_to_string(config_json)
        .ok()
        .and_then(|t| serde_json::from_str::<TrainConfig>(&t).ok())
        .map(|old| changed_keys(&old, cfg).join(", "))
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| format!("see {}", config_json.display()));
    Err(TrainError::Config(format!(
        "the config differs from the one {} was trained with ({changed}); only `updates`, \
         `out-dir`, `eval-config` and `eval-every` may change on --resume",
        run_dir.display(),
    )))
}

/// The run's learner (with the frozen reference when the KL term needs one) and its state:
/// restored from the newest checkpoint `found`, or new, with `actors` the per-actor offsets
/// of a job array's learner (`None` on one machine).
pub(crate) fn open_learner(
    cfg: &TrainConfig,
    base: &Path,
    found: Option<(PathBuf, TrainState)>,
    digest: String,
    actors: Option<Vec<ActorOffset>>,
) -> Result<(Learner, TrainState), TrainError> {
    let solve = cfg.solve_config();
    let brain = load_model(&solve, base)?;
    let reference = if cfg.ppo.kl_coef > 0.0 { Some(load_model(&solve, base)?) } else { None };
    let mut learner = Learner::new(brain, reference, cfg.ppo.clone(), cfg.ablation, cfg.seed)?;
    let state = match found {
        Some((dir, st)) => {
            let slots = cfg.tasks_per_update() * cfg.ppo.group_size;
            st.check_counts(&dir, cfg.tasks_per_update() as u64, slots as u64)?;
            checkpoint::restore(&dir, &st, &mut learner)?;
            st
        }
        None => TrainState {
            format: 1,
            updates: 0,
            optimizer_steps: 0,
            tasks_consumed: 0,
            candidates_consumed: 0,
            twins_skipped: 0,
            episodes: 0,
            config_sha256: digest,
            actors,
        },
    };
    Ok((learner, state))
}


/// sha256 of the config with `updates`, `out-dir` and the held-out keys blanked: what must
/// not change across a resume (a run may be extended, moved to another folder, or evaluated
/// more or less often; none of that changes what it learns).
pub(crate) fn config_digest(cfg: &TrainConfig) -> String {
    let mut c = cfg.clone();
    c.updates = 0;
    c.out_dir = PathBuf::new();
    c.eval_config = None;
    c.eval_every = 0;
    c.keep_checkpoints_every = 0;
    let json = serde_json::to_string(&c).expect("config serialises");
    hex::encode(Sha256::digest(json.as_bytes()))
}

impl Trainer {
    /// Loads everything `cfg` names (`base`: the config file's folder). A fresh run needs an
    /// empty run folder; `resume` continues the run found there from its newest checkpoint.
    pub fn open(cfg: TrainConfig, base: &Path, resume: bool) -> Result<Trainer, TrainError> {
        cfg.validate()?;
        let cfg = cfg.as_run();
        let run_dir = base.join(&cfg.out_dir);
        // One process trains a folder at a time: taken before anything in it is read or
        // cleaned up, and released by the OS however this process ends.
        let lock = FolderLock::acquire(&run_dir)?;
        let checkpoints = run_dir.join("checkpoints");
        let found = checkpoint::latest(&checkpoints)?;
        let has_run = found.is_some() || run_dir.join("episodes.jsonl").exists();
        if has_run && !resume {
            return Err(TrainError::RunExists(run_dir));
        }
        let config_json = run_dir.join("config.json");
        let digest = config_digest(&cfg);
        check_resumed_config(found.as_ref().map(|(_, st)| st), &cfg, &digest, &config_json, &run_dir)?;
        let full = serde_json::to_string_pretty(&cfg).expect("config serialises");
        onebrain_durable::write_atomic(&config_json, full)?;

        let solve = cfg.solve_config();
        let services = Services::load(&solve, base)?;
        let (learner, state) = open_learner(&cfg, base, found, digest, None)?;
        let stream = open_stream(&cfg, base, &services)?;
        let mut notes = Vec::new();
        let metrics = MetricsLog::open_noting(&run_dir, state.updates, &mut notes)?;
        let episodes_path = run_dir.join("episodes.jsonl");
        // Episodes of updates past the checkpoint are dropped: those updates run again, from
        // the checkpoint's parameters, and would otherwise be in the log twice. The update in
        // progress (`state.updates`) keeps its episodes, which it reuses.
        let done = state.updates;
        let episodes = crate::logs::reopen_log(&episodes_path, |l: &EpisodeLine| l.update <= done, &mut notes)?;
        let resumed = read_episodes(&episodes_path, state.updates)?;
        // Lines of the update a kill interrupted are drawn again, and written again, by it.
        let twins = crate::logs::reopen_log(&run_dir.join(TWINS_FILE), |t: &SkippedTwin| t.update < done, &mut notes)?;
        let heldout = match &cfg.eval_config {
            Some(path) => Some((
                HeldOut::load(&base.join(path))?,
                HeldOutLog::open(&run_dir, state.updates, &mut notes)?,
            )),
            None => None,
        };
        if state.updates < cfg.updates {
            // Before anything more is written: a plugin whose component changed since the run
            // began would make its results mix two versions.
            check_plugins(&run_dir, &services.plugins)?;
            if let Some((h, _)) = &heldout {
                check_plugins(&run_dir.join("heldout"), &h.services.plugins)?;
            }
        }
        let checkpointed = state.updates;
        Ok(Trainer {
            cfg,
            run_dir,
            services,
            learner,
            state,
            stream,
            metrics,
            resumed,
            episodes,
            twins,
            heldout,
            memory: PeakMemory::default(),
            checkpointed,
            notes,
            _lock: lock,
        })
    }

    /// The run folder.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Counters of the run so far.
    pub fn state(&self) -> &TrainState {
        &self.state
    }

    /// Runs updates until `cfg.updates` are done; `stop_after` ends this call earlier (after
    /// that many updates), as a kill between updates would.
    ///
    /// A SIGINT or SIGTERM ([`onebrain_durable::install_stop_handlers`]) is taken at the next
    /// safe point: between two episodes of the rollouts (the episodes in flight are dropped,
    /// and run again on resuming, with the same seeds), or after an update is logged (an
    /// update in progress is finished, since it only computes). The run then writes a
    /// checkpoint of its last finished update if its newest one is older, and returns
    /// [`TrainError::Stopped`]: `--resume` continues from there exactly.
    pub fn run(
        &mut self,
        stop_after: Option<u64>,
        on_event: &mut dyn FnMut(&TrainEvent),
    ) -> Result<(), TrainError> {
        on_event(&TrainEvent::Started {
            done: self.state.updates,
            total: self.cfg.updates,
            trainable: self.learner.trainable_params(),
            run_dir: &self.run_dir,
        });
        for note in std::mem::take(&mut self.notes) {
            on_event(&TrainEvent::Note(&note));
        }
        match self.run_updates(stop_after, on_event) {
            Err(TrainError::Stopped(stopped)) => {
                self.checkpoint_if_behind(on_event)?;
                Err(TrainError::Stopped(stopped))
            }
            other => other,
        }
    }

    /// [`Trainer::run`]'s loop, up to the first stop.
    fn run_updates(&mut self, stop_after: Option<u64>, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        // The evaluation of the parameters as they stand, if one is due and not yet logged
        // (the base model's, or one a kill interrupted).
        self.evaluate_if_due(on_event)?;
        let mut ran = 0;
        while self.state.updates < self.cfg.updates && stop_after.is_none_or(|n| ran < n) {
            if let Some(signal) = stop_requested() {
                return Err(self.stopped_after_update(signal).into());
            }
            self.one_update(on_event)?;
            ran += 1;
            self.evaluate_if_due(on_event)?;
        }
        Ok(())
    }

    /// Where a stop between two updates leaves the run.
    fn stopped_after_update(&self, signal: StopSignal) -> Stopped {
        let at = match self.state.updates {
            0 => "before the first update".to_string(),
            n => format!("after update {n}"),
        };
        Stopped { signal, at, resume: "resume with --resume".into() }
    }

    /// Writes a checkpoint of the parameters as they stand if the newest one is older: a
    /// stopped run resumes from its last finished update, whatever `checkpoint-every` says.
    fn checkpoint_if_behind(&mut self, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        if self.checkpointed == self.state.updates {
            return Ok(());
        }
        self.save_checkpoint(on_event)
    }

    /// Writes the checkpoint of the parameters as they stand, after syncing the logs it counts
    /// (the checkpoint itself is synced as it is written): after an OS crash or a power cut
    /// the newest checkpoint is never ahead of `episodes.jsonl`, `metrics.jsonl`,
    /// `heldout.jsonl` or `skipped-twins.jsonl`.
    fn save_checkpoint(&mut self, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        self.episodes.sync()?;
        self.twins.sync()?;
        self.metrics.sync()?;
        if let Some((_, log)) = &mut self.heldout {
            log.sync()?;
        }
        let dir = checkpoint::save(
            &self.run_dir.join("checkpoints"),
            &self.learner,
            &self.state,
            self.cfg.keep_checkpoints,
            self.cfg.keep_checkpoints_every,
        )?;
        self.checkpointed = self.state.updates;
        on_event(&TrainEvent::Checkpoint(&dir));
        Ok(())
    }

    /// True when the held-out slice is evaluated after `update` updates.
    fn evaluation_due(&self, update: u64) -> bool {
        update == 0
            || update == self.cfg.updates
            || (self.cfg.eval_every > 0 && update % self.cfg.eval_every == 0)
    }

    /// Runs the held-out evaluation of the current parameters when one is due and not yet
    /// logged. Its trace makes it resumable: a rerun skips the episodes already there.
    fn evaluate_if_due(&mut self, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        let u = self.state.updates;
        if !self.evaluation_due(u) {
            return Ok(());
        }
        let Trainer {
            heldout: Some((heldout, log)),
            learner,
            run_dir,
            ..
        } = self
        else {
            return Ok(());
        };
        if log.has(u)? {
            return Ok(());
        }
        let t0 = Instant::now();
        let cfg = heldout.config_at(run_dir, u);
        let mut model: Option<Box<dyn LanguageModel + '_>> = Some(Box::new(learner.brain()));
        let out = match onebrain_eval::run_eval_with(
            &cfg,
            &heldout.base,
            &heldout.services,
            &mut || Err(RolesError::Config("the held-out slice runs the model being trained".into())),
            &mut model,
            None,
            &mut |p| {
                if let onebrain_eval::Progress::Finished {
                    done,
                    total,
                    record,
                } = p
                {
                    on_event(&TrainEvent::HeldOutEpisode {
                        update: u,
                        done: *done,
                        total: *total,
                        record,
                    });
                }
            },
        ) {
            Err(onebrain_eval::EvalError::Stopped(s)) => {
                let at = format!("during the held-out evaluation after {u} updates, {}", s.at);
                return Err(Stopped { at, resume: "resume with --resume".into(), ..s }.into());
            }
            out => out?,
        };
        drop(model);
        let records = onebrain_eval::read_trace(&out.trace_path)?.records;
        let row = HeldOutRow::from_records(u, &records, t0.elapsed().as_secs_f64());
        log.append(&row)?;
        on_event(&TrainEvent::HeldOut(&row));
        self.metrics.plot(&self.cfg.name)?;
        Ok(())
    }

    fn one_update(&mut self, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        let u = self.state.updates;
        let group_size = self.cfg.ppo.group_size;
        let n_tasks = self.cfg.tasks_per_update();
        let slots = n_tasks * group_size;

        // Rollouts: the episodes of this update not yet recorded.
        let t0 = Instant::now();
        let (cpu0, steal0) = (onebrain_model::cpu_seconds(), onebrain_model::steal_seconds());
        // What ran before (loading, a held-out evaluation, the last checkpoint) is its own phase.
        self.memory.phase();
        let mut records = std::mem::take(&mut self.resumed);
        let drawn = self.stream.draw(&self.services.domains, self.state.cursor(), u, n_tasks)?;
        let tasks: Vec<Task> = drawn.tasks;
        let mut todo = Vec::new();
        let mut seed_slot: HashMap<u64, usize> = HashMap::new();
        let model_name = self.learner.brain_ref().name();
        for slot in (0..slots).filter(|s| !records.contains_key(s)) {
            let group = slot / group_size;
            seed_slot.insert(episode_seed(self.cfg.seed, u, slot), slot);
            todo.push(rollout_episode(&self.cfg, &self.services, &model_name, tasks[group].clone(), u, slot)?);
        }
        if !todo.is_empty() {
            let episodes = &mut self.episodes;
            let mut taken: HashSet<usize> = records.keys().copied().collect();
            let mut done = records.len();
            let mut new: Vec<(usize, usize, EpisodeRecord)> = Vec::new();
            let rollouts = run_rollouts(
                &self.cfg,
                &self.services,
                &mut self.learner,
                todo,
                &mut |rec: EpisodeRecord| -> Result<(), TrainError> {
                    // An episode that ends after a stop was asked for is not recorded: the
                    // signal may have reached its planner too (a terminal's Ctrl-C goes to the
                    // whole process group), so its verdict may be the signal's. The resumed
                    // run runs it again, with the same seed.
                    if let Some(signal) = stop_requested() {
                        let at = format!("during update {}'s rollouts, with {done} of {slots} episodes recorded", u + 1);
                        return Err(Stopped { signal, at, resume: "resume with --resume".into() }.into());
                    }
                    // The first step's sampling seed names the slot; a record with no step
                    // (the model failed at once) takes its task's first free slot.
                    let slot = rec
                        .steps
                        .first()
                        .and_then(|s| seed_slot.get(&s.sampling.seed).copied())
                        .filter(|s| !taken.contains(s))
                        .or_else(|| {
                            (0..slots).find(|s| {
                                !taken.contains(s) && tasks[s / group_size].id == rec.task_id
                            })
                        })
                        .expect("every record has a free slot");
                    taken.insert(slot);
                    let line = EpisodeLine {
                        update: u,
                        slot,
                        group: slot / group_size,
                        record: rec,
                    };
                    episodes.append(&line)?;
                    done += 1;
                    on_event(&TrainEvent::Episode {
                        update: u,
                        done,
                        total: slots,
                        record: &line.record,
                    });
                    new.push((slot, line.group, line.record));
                    Ok(())
                },
            );
            for (slot, group, rec) in new {
                records.insert(slot, (group, rec));
            }
            if let Err(e) = rollouts {
                // What is recorded stays this update's: the update run again in this process
                // (after a stop, a full disk) reuses it rather than writing it twice.
                self.resumed = records;
                return Err(e);
            }
        }
        let rollout_secs = t0.elapsed().as_secs_f64();
        let cpu1 = onebrain_model::cpu_seconds();
        let rollout_peak = self.memory.phase();

        // The update, on the episodes in slot order (the same order whatever finished first).
        let mut ordered: Vec<(usize, (usize, EpisodeRecord))> = records.into_iter().collect();
        ordered.sort_by_key(|(slot, _)| *slot);
        let ordered: Vec<(usize, EpisodeRecord)> = ordered.into_iter().map(|(_, r)| r).collect();
        let brain: &Brain = self.learner.brain_ref();
        let mut batch = Batch::from_records(&ordered, self.cfg.ablation, |p| brain.encode(p))?;
        let stats = self.learner.update(&mut batch)?;
        // A step that made a parameter NaN or infinite (a dropped NaN gradient is not the
        // only way: a huge finite one, a learning rate, a spoiled moment) stops the run here,
        // before the update is counted or saved: the last checkpoint stays the last good one.
        let names = checkpoint::non_finite_state(&self.learner)?;
        if !names.is_empty() {
            return Err(TrainError::NonFinite { update: u + 1, names });
        }
        let since = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| b - a);
        let (cpu2, steal2) = (onebrain_model::cpu_seconds(), onebrain_model::steal_seconds());
        let clock = StepClock {
            rollout_secs,
            rollout_cpu_secs: since(cpu0, cpu1),
            update_cpu_secs: since(cpu1, cpu2),
            steal_secs: since(steal0, steal2),
            rollout_peak,
            update_peak: self.memory.phase(),
            peak_rss_mib: self.memory.so_far(),
        };

        self.state.updates += 1;
        self.state.set_cursor(drawn.cursor);
        self.state.episodes += slots as u64;
        self.state.optimizer_steps += stats.steps as u64;
        // Written with the update, not at the draw: a failed update that is run again in
        // this process draws them again, and a killed one drops them on resuming.
        for twin in &drawn.skipped {
            self.twins.append(twin)?;
        }
        let mut row = MetricsRow::new(
            self.state.updates,
            self.state.episodes,
            &batch.stats,
            &stats,
            &clock,
        );
        row.twins_skipped = self.state.twins_skipped;
        self.metrics.append(&row)?;
        self.metrics.plot(&self.cfg.name)?;
        on_event(&TrainEvent::Updated(&row));
        if self.state.updates % self.cfg.checkpoint_every == 0
            || self.state.updates == self.cfg.updates
        {
            self.save_checkpoint(on_event)?;
        }
        Ok(())
    }
}

/// The keys (`ppo.learning-rate`, …) whose values differ between two configs, `updates` and
/// `out-dir` aside.
pub(crate) fn changed_keys(old: &TrainConfig, new: &TrainConfig) -> Vec<String> {
    let flat = |c: &TrainConfig| {
        let mut out = std::collections::BTreeMap::new();
        let serde_json::Value::Object(top) = serde_json::to_value(c).expect("config serialises")
        else {
            return out;
        };
        for (k, v) in top {
            match v {
                serde_json::Value::Object(inner) => {
                    for (k2, v2) in inner {
                        out.insert(format!("{k}.{k2}"), v2);
                    }
                }
                v => {
                    out.insert(k, v);
                }
            }
        }
        for free in ["updates", "out-dir", "eval-config", "eval-every", "keep-checkpoints-every"] {
            out.remove(free);
        }
        out
    };
    let (a, b) = (flat(old), flat(new));
    let keys: std::collections::BTreeSet<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    keys.into_iter().cloned().collect()
}

/// Episode `slot` of update `update` on `task`, as the rollouts run it: sampled, with the seed
/// [`episode_seed`] gives it. The trainer and a job array's actors build it alike, so that
/// one actor samples exactly what `onebrain train` does.
pub(crate) fn rollout_episode(
    cfg: &TrainConfig,
    services: &Services,
    model_name: &str,
    task: Task,
    update: u64,
    slot: usize,
) -> Result<Episode, TrainError> {
    let mut ep = cfg.rollout_episode();
    ep.seed = episode_seed(cfg.seed, update, slot);
    let input = services.episode_input(task)?;
    Ok(Episode::new(input, &ep, model_name))
}

/// Runs `todo` as rollouts: the learner's model samples, `in-flight` episodes at once, the
/// verifier checks, and `on_record` gets each finished episode. The roles' prompt heads the
/// update may take from sampling are kept for these episodes only (a held-out evaluation
/// keeps none).
pub(crate) fn run_rollouts(
    cfg: &TrainConfig,
    services: &Services,
    learner: &mut Learner,
    todo: Vec<Episode>,
    on_record: &mut dyn FnMut(EpisodeRecord) -> Result<(), TrainError>,
) -> Result<(), TrainError> {
    let pool = VerifierPool::new(Arc::clone(&services.verifier), cfg.solver.workers);
    let ep_cfg = cfg.rollout_episode();
    let keep = learner.prompt_head_roles();
    learner.brain().keep_prompt_heads(&keep);
    let out = run_pipelined(
        todo,
        &ep_cfg,
        learner.brain(),
        &pool,
        &services.finalizer,
        cfg.in_flight,
        &mut |_: &Event| {},
        on_record,
    );
    learner.brain().keep_prompt_heads(&[]);
    out
}

/// The sampling seed of episode `slot` of update `update`: distinct per slot and spread out,
/// so that no two episodes' per-step seeds (seed + i) meet.
pub(crate) fn episode_seed(run_seed: u64, update: u64, slot: usize) -> u64 {
    onebrain_roles::episode_seed(run_seed, &[&update.to_le_bytes(), &(slot as u64).to_le_bytes()])
}

/// The run folder's log of the candidates the task stream skipped as held-out twins.
const TWINS_FILE: &str = "skipped-twins.jsonl";

/// The run's task stream, with the held-out tasks it keeps out; what could not be indexed
/// is said on stderr (a library has no other channel here, and the run goes on without it).
pub(crate) fn open_stream(cfg: &TrainConfig, base: &Path, services: &Services) -> Result<TaskSource, TrainError> {
    let mut notes = Vec::new();
    let stream = TaskSource::load(cfg, base, &services.domains, &mut notes)?;
    let mut err = std::io::stderr();
    for n in &notes {
        // Not `eprintln!`, which panics when stderr is a closed pipe.
        let _ = writeln!(err, "onebrain: held-out index: {n}");
    }
    if !stream.index().is_empty() {
        let _ = writeln!(
            err,
            "onebrain: the task stream keeps out {} held-out tasks (and their renamings)",
            stream.index().len()
        );
    }
    Ok(stream)
}

/// The episodes recorded for update `update`, by slot.
fn read_episodes(
    path: &Path,
    update: u64,
) -> Result<HashMap<usize, (usize, EpisodeRecord)>, TrainError> {
    Ok(onebrain_eval::read_jsonl::<EpisodeLine>(path)?
        .records
        .into_iter()
        .filter(|l| l.update == update)
        .map(|l| (l.slot, (l.group, l.record)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_config_names_its_changed_keys() {
        let a = TrainConfig::default();
        let mut b = a.clone();
        b.updates = 7;
        b.out_dir = PathBuf::from("elsewhere");
        assert!(changed_keys(&a, &b).is_empty());
        assert_eq!(config_digest(&a), config_digest(&b));
        b.ppo.learning_rate = 1e-4;
        b.seed = 3;
        assert_eq!(changed_keys(&a, &b), ["ppo.learning-rate", "seed"]);
        assert_ne!(config_digest(&a), config_digest(&b));
    }

    #[test]
    fn episode_seeds_are_distinct_and_leave_room_for_steps() {
        let mut seen = HashSet::new();
        for u in 0..4 {
            for slot in 0..64 {
                let s = episode_seed(7, u, slot);
                assert!(s < u64::MAX >> 7);
                for step in 0..6 {
                    assert!(
                        seen.insert(s + step),
                        "seed collision at update {u} slot {slot}"
                    );
                }
            }
        }
        assert_eq!(episode_seed(7, 1, 2), episode_seed(7, 1, 2));
    }
}

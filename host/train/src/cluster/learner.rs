//! The learner of a job array: learns update after update from the actors' groups, in the
//! task stream's order, and publishes the parameters after each.

use std::path::Path;
use std::time::Instant;

use onebrain_durable::{stop_requested, FolderLock, Stopped};

use super::episode_files::{Inbox, Taken};
use super::{publish, POLL};
use crate::batch::Batch;
use crate::checkpoint::{self, ActorOffset, TrainState};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::metrics::{ClusterMetrics, MetricsLog, MetricsRow, PeakMemory, StepClock};
use crate::trainer::{check_resumed_config, config_digest, open_learner, TrainEvent};

/// Runs the learner of `actors` actors until the run's `updates` are made.
pub(super) fn run(cfg: TrainConfig, base: &Path, actors: usize, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
    cfg.validate()?;
    let cfg = cfg.as_run();
    let run_dir = base.join(&cfg.out_dir);
    let _lock = FolderLock::acquire(&run_dir)?;
    let checkpoints = run_dir.join("checkpoints");
    let found = checkpoint::latest(&checkpoints)?;
    let config_json = run_dir.join("config.json");
    let digest = config_digest(&cfg);
    check_resumed_config(found.as_ref().map(|(_, st)| st), &cfg, &digest, &config_json, &run_dir)?;
    onebrain_durable::write_atomic(&config_json, serde_json::to_string_pretty(&cfg).expect("config serialises"))?;

    let tasks_per_update = cfg.tasks_per_update() as u64;
    let slots = tasks_per_update * cfg.ppo.group_size as u64;
    let (mut learner, mut state) = open_learner(&cfg, base, found, digest, Some(vec![ActorOffset::default(); actors]))?;
    let offsets = match state.actors.take() {
        Some(o) if o.len() == actors => o,
        other => {
            return Err(TrainError::Cluster(format!(
                "{} was learned from {} actors, not {actors}",
                run_dir.display(),
                other.map_or("no".to_string(), |o| o.len().to_string())
            )))
        }
    };
    let mut notes = Vec::new();
    let mut metrics = MetricsLog::open_noting(&run_dir, state.updates, &mut notes)?;
    on_event(&TrainEvent::Started { done: state.updates, total: cfg.updates, trainable: learner.trainable_params(), run_dir: &run_dir });
    for note in &notes {
        on_event(&TrainEvent::Note(note));
    }
    // Actors sample no further back than `max-staleness`, so no older version is read.
    let keep = cfg.max_staleness + 1;
    publish(&run_dir, learner.brain_ref(), state.updates, keep)?;

    let mut inbox = Inbox::new(actors, offsets);
    let mut memory = PeakMemory::default();
    while state.updates < cfg.updates {
        let u = state.updates;
        let positions = u * tasks_per_update..(u + 1) * tasks_per_update;

        // Waiting for the actors is this learner's rollout phase.
        let t0 = Instant::now();
        memory.phase();
        loop {
            inbox.poll(&run_dir)?;
            if inbox.has(positions.clone()) {
                break;
            }
            if let Some(signal) = stop_requested() {
                let at = format!("waiting for the actors' groups of update {}", u + 1);
                return Err(Stopped { signal, at, resume: "run the learner again".into() }.into());
            }
            std::thread::sleep(POLL);
        }
        let rollout_secs = t0.elapsed().as_secs_f64();
        let cpu1 = onebrain_model::cpu_seconds();
        let rollout_peak = memory.phase();

        // The batch: the groups in stream order, each from the actor that sampled it.
        let Taken { records, stale, max_lag } = inbox.take(positions, u, cfg.max_staleness);
        if records.is_empty() {
            return Err(TrainError::Cluster(format!(
                "every group of update {} was sampled more than max-staleness = {} updates ago",
                u + 1,
                cfg.max_staleness
            )));
        }
        let brain = learner.brain_ref();
        let mut batch = Batch::from_records(&records, cfg.ablation, |p| brain.encode(p))?;
        let stats = learner.update(&mut batch)?;
        let names = checkpoint::non_finite_state(&learner)?;
        if !names.is_empty() {
            return Err(TrainError::NonFinite { update: u + 1, names });
        }
        let cpu2 = onebrain_model::cpu_seconds();
        let clock = StepClock {
            rollout_secs,
            rollout_cpu_secs: None,
            update_cpu_secs: cpu1.zip(cpu2).map(|(a, b)| b - a),
            steal_secs: None,
            rollout_peak,
            update_peak: memory.phase(),
            peak_rss_mib: memory.so_far(),
        };

        state.updates += 1;
        state.tasks_consumed += tasks_per_update;
        state.candidates_consumed += tasks_per_update;
        state.episodes += slots;
        state.optimizer_steps += stats.steps as u64;
        let mut row = MetricsRow::new(state.updates, state.episodes, &batch.stats, &stats, &clock);
        row.cluster = Some(ClusterMetrics {
            dropped_stale: stale,
            duplicates: inbox.duplicates(),
            max_version_lag: max_lag,
            offsets: inbox.consumed().iter().map(|o| o.offset).collect(),
        });
        metrics.append(&row)?;
        metrics.plot(&cfg.name)?;
        on_event(&TrainEvent::Updated(&row));
        // Every update: the offsets in it are what makes a resumed learner take up the
        // same batch, and the parameters are published only once they are safe.
        let saved = TrainState { actors: Some(inbox.consumed().to_vec()), ..state.clone() };
        metrics.sync()?;
        let dir = checkpoint::save(&checkpoints, &learner, &saved, cfg.keep_checkpoints, cfg.keep_checkpoints_every)?;
        on_event(&TrainEvent::Checkpoint(&dir));
        publish(&run_dir, learner.brain_ref(), state.updates, keep)?;
        if let Some(signal) = stop_requested() {
            let at = format!("after update {}", state.updates);
            return Err(Stopped { signal, at, resume: "run the learner again".into() }.into());
        }
    }
    Ok(())
}

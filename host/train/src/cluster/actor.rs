//! An actor of a job array: samples its slice of the task stream with the newest published
//! parameters and appends each group to its own file.

use std::collections::HashMap;
use std::path::Path;

use onebrain_durable::{stop_requested, FolderLock, Stopped};
use onebrain_eval::{check_plugins, check_plugins_against, TraceWriter};
use onebrain_roles::{load_model, EpisodeRecord, LanguageModel};

use super::episode_files::{actor_file, read_from, GroupLine};
use super::{latest_params, POLL};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::learner::Learner;
use crate::stream::StreamCursor;
use crate::trainer::{episode_seed, open_stream, rollout_episode, run_rollouts, TrainEvent};

/// Runs actor `k` of `n` until every group of its slice up to the run's last update is in
/// its file.
pub(super) fn run(cfg: TrainConfig, base: &Path, k: usize, n: usize, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
    cfg.validate()?;
    let cfg = cfg.as_run();
    let out = base.join(&cfg.out_dir);
    let path = actor_file(&out, k);
    // One process per actor: its own lock folder, apart from the learner's run folder lock.
    let lock_dir = actor_dir(&out, k);
    std::fs::create_dir_all(&lock_dir).map_err(|e| TrainError::io(&lock_dir, e))?;
    let _lock = FolderLock::acquire(&lock_dir)?;

    // Where a killed actor stopped: after the last whole group in its file (opening the
    // writer cuts off a group a kill tore, which is sampled again).
    let mut next_slice = 0;
    for (g, _) in read_from(&path, 0)? {
        if g.actor != k || g.actors != n {
            return Err(TrainError::Cluster(format!(
                "{} holds groups of actor {} of {}, not of actor {k} of {n}",
                path.display(),
                g.actor,
                g.actors
            )));
        }
        next_slice = next_slice.max(g.slice + 1);
    }
    let mut file = TraceWriter::open(&path)?;

    let solve = cfg.solve_config();
    let services = onebrain_roles::Services::load(&solve, base)?;
    // Before a group is written: a plugin whose component changed since this actor began, or
    // that another actor of the run loaded at another version, would mix two versions'
    // results in one batch. Each actor records into its own folder (one writer a record) and
    // checks the others' records.
    for other in (0..n).filter(|&o| o != k) {
        check_plugins_against(&actor_dir(&out, other), &services.plugins)?;
    }
    check_plugins(&lock_dir, &services.plugins)?;
    let brain = load_model(&solve, base)?;
    let mut learner = Learner::new(brain, None, cfg.ppo.clone(), cfg.ablation, cfg.seed)?;
    let stream = open_stream(&cfg, base, &services)?;
    let model_name = learner.brain_ref().name();
    let tasks_per_update = cfg.tasks_per_update() as u64;
    let group_size = cfg.ppo.group_size;
    let total = cfg.updates * tasks_per_update;
    // Its groups, counted like updates: the positions below `total` that are ≡ K mod N.
    let mine = (total + (n - 1 - k) as u64) / n as u64;
    on_event(&TrainEvent::Started { done: next_slice.min(mine), total: mine, trainable: learner.trainable_params(), run_dir: &out });

    let mut cursor = StreamCursor::default();
    let mut loaded: Option<u64> = None;
    for position in 0..total {
        let update = position / tasks_per_update;
        // Every position is drawn, so that the stream (and its held-out twins) stands
        // where one machine's would.
        let drawn = stream.draw(&services.domains, cursor, update, 1)?;
        cursor = drawn.cursor;
        let slice = position / n as u64;
        if position % n as u64 != k as u64 || slice < next_slice {
            continue;
        }
        let (version, dir) = wait_for_version(&out, update.saturating_sub(cfg.max_staleness), update, on_event)?;
        if loaded != Some(version) {
            learner.brain().load_trainable(&dir)?;
            loaded = Some(version);
        }
        // The seeds and slots of `onebrain train`'s update `update`: the group's place in
        // that update's batch.
        let first_slot = (position - update * tasks_per_update) as usize * group_size;
        let task = drawn.tasks.into_iter().next().expect("a draw of one yields one task");
        let mut seed_sample: HashMap<u64, usize> = HashMap::new();
        let mut todo = Vec::with_capacity(group_size);
        for j in 0..group_size {
            seed_sample.insert(episode_seed(cfg.seed, update, first_slot + j), j);
            todo.push(rollout_episode(&cfg, &services, &model_name, task.clone(), update, first_slot + j)?);
        }
        let mut samples: Vec<Option<EpisodeRecord>> = vec![None; group_size];
        let mut done = 0;
        run_rollouts(&cfg, &services, &mut learner, todo, &mut |rec: EpisodeRecord| -> Result<(), TrainError> {
            if let Some(signal) = stop_requested() {
                let at = format!("during the group of stream position {position}");
                return Err(Stopped { signal, at, resume: "run the actor again".into() }.into());
            }
            // The first step's seed names the sample; a record with no step takes the
            // first free place.
            let j = rec
                .steps
                .first()
                .and_then(|s| seed_sample.get(&s.sampling.seed).copied())
                .filter(|&j| samples[j].is_none())
                .or_else(|| samples.iter().position(Option::is_none))
                .expect("every record has a free place");
            done += 1;
            on_event(&TrainEvent::Episode { update, done, total: group_size, record: &rec });
            samples[j] = Some(rec);
            Ok(())
        })?;
        let line = GroupLine {
            actor: k,
            actors: n,
            slice,
            position,
            version,
            episodes: samples.into_iter().map(|r| r.expect("every sample finished")).collect(),
        };
        // Synced before the next group: the learner's checkpoint records offsets into this
        // file, and an OS crash must not leave the file shorter than an offset it counted.
        file.append(&line)?;
        file.sync()?;
    }
    Ok(())
}

/// Actor `k`'s own folder in run folder `out`: its lock and its plugins' record.
fn actor_dir(out: &Path, k: usize) -> std::path::PathBuf {
    out.join("actors").join(format!("actor-{k}"))
}

/// Waits until the learner has published a version of at least `least` (the oldest that
/// may sample a task of update `update`) and returns the newest.
fn wait_for_version(
    out: &Path,
    least: u64,
    update: u64,
    on_event: &mut dyn FnMut(&TrainEvent),
) -> Result<(u64, std::path::PathBuf), TrainError> {
    let mut said = false;
    loop {
        if let Some((v, dir)) = latest_params(out)? {
            if v >= least {
                return Ok((v, dir));
            }
        }
        if let Some(signal) = stop_requested() {
            let at = format!("waiting for parameters v{least} for update {}", update + 1);
            return Err(Stopped { signal, at, resume: "run the actor again".into() }.into());
        }
        if !said {
            on_event(&TrainEvent::Note(&format!("waiting for the learner's parameters v{least} (for update {})", update + 1)));
            said = true;
        }
        std::thread::sleep(POLL);
    }
}

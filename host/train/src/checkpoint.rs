//! Checkpoints that survive a kill at any moment.
//!
//! `checkpoints/update-000012/` holds the model's trainable parameters (`Brain::save`:
//! `trainable.safetensors`, `brain.json`, so `onebrain solve` and `eval` load the folder as
//! it is), the optimizer's moments and value heads (`trainer.safetensors`) and the counters
//! (`state.json`). It is written under a `.partial` name, synced, then renamed into place;
//! `checkpoints/LATEST` names the newest complete one and is itself replaced by a rename. A
//! kill during a write leaves a `.partial` folder, which the next start removes, and the
//! previous checkpoint still named by `LATEST`. A write that fails (a full disk) removes its
//! `.partial` folder, giving its space back, and names the file it could not write.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::TrainError;
use crate::learner::Learner;
use crate::stream::StreamCursor;

const LATEST: &str = onebrain_model::LATEST_FILE;
const TRAINER_FILE: &str = "trainer.safetensors";
const STATE_FILE: &str = "state.json";
const PARTIAL: &str = ".partial";

/// The counters a checkpoint records besides the tensors: enough to continue exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainState {
    /// Format of this file.
    pub format: u32,
    /// Updates completed (the next update's number).
    pub updates: u64,
    /// Optimizer steps taken.
    pub optimizer_steps: u64,
    /// Tasks of the stream consumed (the next task's position).
    pub tasks_consumed: u64,
    /// Candidates of the stream looked at, admitted or skipped as held-out twins (the next
    /// candidate's number). Absent from checkpoints written before the stream skipped
    /// anything, where it equals `tasks_consumed` ([`latest`] fills it in).
    #[serde(default)]
    pub candidates_consumed: u64,
    /// Candidates skipped because they equal a held-out task up to renaming.
    #[serde(default)]
    pub twins_skipped: u64,
    /// Episodes recorded up to the end of `updates`.
    pub episodes: u64,
    /// sha256 of the run's config (every key but `updates` and `out-dir`): a resumed run
    /// must match it.
    pub config_sha256: String,
    /// A learner of a job array only: where it stands in each actor's episode file, so that
    /// a resumed learner reads on from there ([`crate::ClusterRole`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actors: Option<Vec<ActorOffset>>,
}

/// What a learner of a job array keeps of one actor's episode file: where it has read to
/// and the next slice it expects. Both go into every checkpoint, so a resumed learner reads
/// on from there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorOffset {
    /// Bytes of the file consumed: every group before it was learned, dropped or skipped.
    pub offset: u64,
    /// The next slice to learn; a group of an earlier slice is a duplicate.
    pub next_slice: u64,
}

/// The folder of checkpoint `updates` inside `checkpoints`.
pub fn checkpoint_dir(checkpoints: &Path, updates: u64) -> PathBuf {
    checkpoints.join(format!("update-{updates:06}"))
}

fn sync_file(path: &Path) -> Result<(), TrainError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| TrainError::io(path, e))
}

/// Writes checkpoint `state.updates` of `learner` into `checkpoints` and points `LATEST` at
/// it, then removes all but the newest `keep` and those at multiples of `keep_every`
/// (when not 0).
pub fn save(
    checkpoints: &Path,
    learner: &Learner,
    state: &TrainState,
    keep: usize,
    keep_every: u64,
) -> Result<PathBuf, TrainError> {
    save_with(checkpoints, learner, state, Keep { newest: keep, every: keep_every }, &mut |_| Ok(()))
}

/// Which checkpoints [`save`] leaves on disk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keep {
    /// The newest this many.
    pub(crate) newest: usize,
    /// And every one whose update is a multiple of this (0: none).
    pub(crate) every: u64,
}

impl Keep {
    fn forever(self, name: &str) -> bool {
        self.every > 0
            && name
                .strip_prefix("update-")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|u| u % self.every == 0)
    }
}

/// How many of `t`'s values are NaN or infinite (`x - x` is 0 for every finite `x`, NaN
/// otherwise: one sum on the device answers the common case).
fn non_finite(t: &Tensor) -> Result<usize, TrainError> {
    let t = t.to_dtype(DType::F32)?;
    if (&t - &t)?.sum_all()?.to_scalar::<f32>()? == 0.0 {
        return Ok(0);
    }
    Ok(t.flatten_all()?.to_vec1::<f32>()?.iter().filter(|x| !x.is_finite()).count())
}

/// The names of everything a checkpoint of `learner` would write that holds a NaN or an
/// infinity: the model's trainable parameters, the value heads and the optimizer's moments.
pub(crate) fn non_finite_state(learner: &Learner) -> Result<Vec<String>, TrainError> {
    let mut names = learner.brain_ref().non_finite_parameters()?;
    let (tensors, _) = learner.state();
    for (name, t) in &tensors {
        if non_finite(t)? > 0 {
            names.push(name.clone());
        }
    }
    names.sort();
    Ok(names)
}

/// [`save`] with a hook called after each file (tests inject a crash there).
pub(crate) fn save_with(
    checkpoints: &Path,
    learner: &Learner,
    state: &TrainState,
    keep: Keep,
    after_file: &mut dyn FnMut(&str) -> Result<(), TrainError>,
) -> Result<PathBuf, TrainError> {
    // Never written: a checkpoint that would not load back, and the previous one stays the
    // newest.
    let names = non_finite_state(learner)?;
    if !names.is_empty() {
        return Err(TrainError::NonFinite { update: state.updates, names });
    }
    fs::create_dir_all(checkpoints).map_err(|e| TrainError::io(checkpoints, e))?;
    let dir = checkpoint_dir(checkpoints, state.updates);
    let tmp = dir.with_extension(&PARTIAL[1..]);
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
    }
    let written = write_partial(&tmp, learner, state, after_file);
    if written.is_err() {
        // A full disk, most likely: the partial folder would only hold the space the next
        // write needs. The previous checkpoint stays the newest.
        let _ = fs::remove_dir_all(&tmp);
    }
    written?;
    publish(checkpoints, &tmp, &dir)?;
    let name = dir.file_name().expect("named").to_string_lossy().into_owned();
    prune(checkpoints, keep, &name)?;
    Ok(dir)
}

/// Writes the checkpoint's files into the folder `tmp`, each synced, calling `after_file`
/// after each.
fn write_partial(
    tmp: &Path,
    learner: &Learner,
    state: &TrainState,
    after_file: &mut dyn FnMut(&str) -> Result<(), TrainError>,
) -> Result<(), TrainError> {
    fs::create_dir_all(tmp).map_err(|e| TrainError::io(tmp, e))?;
    learner.brain_ref().save(tmp)?;
    for f in ["trainable.safetensors", "brain.json"] {
        sync_file(&tmp.join(f))?;
    }
    after_file("model")?;
    let (tensors, _) = learner.state();
    let trainer = tmp.join(TRAINER_FILE);
    candle_core::safetensors::save(&tensors, &trainer).map_err(|e| TrainError::Checkpoint {
        path: trainer.clone(),
        reason: e.to_string(),
    })?;
    sync_file(&trainer)?;
    after_file("trainer")?;
    let json = serde_json::to_string_pretty(state).expect("state serialises");
    onebrain_durable::write_atomic(&tmp.join(STATE_FILE), json)?;
    after_file("state")?;
    Ok(())
}

/// Renames the complete folder `tmp` to `dir` and points `LATEST` at it (`LATEST` replaced
/// whole, through `LATEST.partial`).
fn publish(checkpoints: &Path, tmp: &Path, dir: &Path) -> Result<(), TrainError> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
    }
    fs::rename(tmp, dir).map_err(|e| TrainError::io(dir, e))?;
    onebrain_durable::sync_dir(checkpoints);
    let name = dir.file_name().expect("named").to_string_lossy().into_owned();
    onebrain_durable::write_atomic(&checkpoints.join(LATEST), format!("{name}\n"))?;
    Ok(())
}

/// Removes all but the complete checkpoints `keep` names (never `current`).
fn prune(checkpoints: &Path, keep: Keep, current: &str) -> Result<(), TrainError> {
    let mut names: Vec<String> = fs::read_dir(checkpoints)
        .map_err(|e| TrainError::io(checkpoints, e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("update-") && !n.ends_with(PARTIAL))
        .collect();
    names.sort();
    let excess = names.len().saturating_sub(keep.newest.max(1));
    for n in names.into_iter().take(excess).filter(|n| n != current && !keep.forever(n)) {
        let p = checkpoints.join(&n);
        fs::remove_dir_all(&p).map_err(|e| TrainError::io(&p, e))?;
    }
    Ok(())
}

/// The newest complete checkpoint in `checkpoints`, if any: its folder and counters. Leftover
/// `.partial` folders of an interrupted write are removed.
pub fn latest(checkpoints: &Path) -> Result<Option<(PathBuf, TrainState)>, TrainError> {
    if !checkpoints.is_dir() {
        return Ok(None);
    }
    for entry in fs::read_dir(checkpoints)
        .map_err(|e| TrainError::io(checkpoints, e))?
        .flatten()
    {
        let n = entry.file_name().to_string_lossy().into_owned();
        if n.ends_with(PARTIAL) {
            let p = entry.path();
            let _ = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
    }
    let pointer = checkpoints.join(LATEST);
    let name = match fs::read_to_string(&pointer) {
        Ok(s) => s.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrainError::io(&pointer, e)),
    };
    let dir = checkpoints.join(&name);
    let state_path = dir.join(STATE_FILE);
    let text = fs::read_to_string(&state_path).map_err(|e| TrainError::io(&state_path, e))?;
    let mut state: TrainState = serde_json::from_str(&text).map_err(|e| TrainError::Checkpoint {
        path: dir.clone(),
        reason: format!("state.json: {e}"),
    })?;
    state.fill_in_candidates();
    state.check().map_err(|reason| TrainError::Checkpoint {
        path: dir.clone(),
        reason: format!("state.json: {reason}"),
    })?;
    Ok(Some((dir, state)))
}

impl TrainState {
    /// The stream's counters.
    pub fn cursor(&self) -> StreamCursor {
        StreamCursor {
            tasks: self.tasks_consumed,
            candidates: self.candidates_consumed,
            twins_skipped: self.twins_skipped,
        }
    }

    /// Takes the stream's counters from `cursor`.
    pub fn set_cursor(&mut self, cursor: StreamCursor) {
        self.tasks_consumed = cursor.tasks;
        self.candidates_consumed = cursor.candidates;
        self.twins_skipped = cursor.twins_skipped;
    }

    /// A `state.json` from before the stream skipped twins has neither candidate counter:
    /// its stream admitted every candidate, so it looked at exactly the tasks it consumed.
    /// (A newer one that has consumed tasks never says 0 candidates, so nothing else reads
    /// as old.)
    fn fill_in_candidates(&mut self) {
        if self.candidates_consumed == 0 && self.twins_skipped == 0 {
            self.candidates_consumed = self.tasks_consumed;
        }
    }

    /// What a `state.json` must say to be resumed from, on its own.
    fn check(&self) -> Result<(), String> {
        if self.format != 1 {
            return Err(format!("format {} (this build reads format 1)", self.format));
        }
        if self.tasks_consumed.checked_add(self.twins_skipped) != Some(self.candidates_consumed) {
            return Err(format!(
                "{} candidates looked at, but {} tasks consumed and {} twins skipped",
                self.candidates_consumed, self.tasks_consumed, self.twins_skipped
            ));
        }
        // AdamW's bias correction raises β to the step count as an i32: past it, the count
        // wraps and a step count of 0 divides by 1 − β⁰ = 0.
        if self.optimizer_steps > i32::MAX as u64 {
            return Err(format!("{} optimizer steps, past what AdamW counts", self.optimizer_steps));
        }
        Ok(())
    }

    /// The counters against the run's config, which a resume cannot change: every update
    /// consumes `tasks_per_update` tasks and records `episodes_per_update` episodes.
    pub(crate) fn check_counts(&self, dir: &Path, tasks_per_update: u64, episodes_per_update: u64) -> Result<(), TrainError> {
        let tasks = self.updates.checked_mul(tasks_per_update);
        let episodes = self.updates.checked_mul(episodes_per_update);
        if tasks != Some(self.tasks_consumed) || episodes != Some(self.episodes) {
            return Err(TrainError::Checkpoint {
                path: dir.to_path_buf(),
                reason: format!(
                    "state.json: {} updates of {tasks_per_update} tasks and {episodes_per_update} episodes each, \
                     but {} tasks and {} episodes",
                    self.updates, self.tasks_consumed, self.episodes
                ),
            });
        }
        Ok(())
    }
}

/// Loads checkpoint `dir` into `learner` (model parameters, optimizer, value heads).
pub fn restore(dir: &Path, state: &TrainState, learner: &mut Learner) -> Result<(), TrainError> {
    learner.brain().load_trainable(dir)?;
    let path = dir.join(TRAINER_FILE);
    let dev = learner.brain().device().clone();
    let tensors: HashMap<String, Tensor> = candle_core::safetensors::load(&path, &dev)
        .map_err(|e| TrainError::Checkpoint {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    // Moments that are not finite, or a negative second moment (its square root is NaN),
    // would make the first step's parameters NaN.
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    for name in names {
        let t = &tensors[name];
        let bad = |reason: String| TrainError::Checkpoint { path: path.clone(), reason: format!("`{name}` {reason}") };
        if t.dtype() != DType::F32 {
            return Err(bad(format!("holds {:?}, not f32", t.dtype())));
        }
        let n = non_finite(t)?;
        if n > 0 {
            return Err(bad(format!("holds {n} value(s) not finite (NaN or infinite)")));
        }
        if name.starts_with("v.") && t.elem_count() > 0 && t.min_all()?.to_scalar::<f32>()? < 0.0 {
            return Err(bad("holds a negative second moment".into()));
        }
    }
    learner
        .load_state(&tensors, state.optimizer_steps, state.updates)
        .map_err(|reason| TrainError::Checkpoint { path, reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ablation, PpoArgs};
    use onebrain_model::{Brain, ModelConfig};

    fn state(updates: u64) -> TrainState {
        TrainState {
            format: 1,
            updates,
            optimizer_steps: updates,
            tasks_consumed: 8 * updates,
            candidates_consumed: 8 * updates,
            twins_skipped: 0,
            episodes: 32 * updates,
            config_sha256: "c".into(),
            actors: None,
        }
    }

    /// Writes `state_json` as the newest checkpoint's `state.json` and reads it back.
    fn read_back(ckpts: &Path, state_json: &str) -> Result<TrainState, TrainError> {
        let dir = checkpoint_dir(ckpts, 2);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(STATE_FILE), state_json).unwrap();
        std::fs::write(ckpts.join(LATEST), "update-000002\n").unwrap();
        Ok(latest(ckpts)?.expect("a checkpoint").1)
    }

    #[test]
    fn the_stream_counters_round_trip_and_old_states_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = dir.path().join("checkpoints");
        let mut st = state(2);
        st.set_cursor(StreamCursor { tasks: 16, candidates: 17, twins_skipped: 1 });
        let back = read_back(&ckpts, &serde_json::to_string_pretty(&st).unwrap()).unwrap();
        assert_eq!(back, st);
        assert_eq!(back.cursor(), StreamCursor { tasks: 16, candidates: 17, twins_skipped: 1 });

        // Written before the stream skipped anything: every task consumed was a candidate.
        let old = r#"{"format": 1, "updates": 2, "optimizer_steps": 2, "tasks_consumed": 16, "episodes": 64, "config_sha256": "c"}"#;
        let back = read_back(&ckpts, old).unwrap();
        assert_eq!(back.cursor(), StreamCursor { tasks: 16, candidates: 16, twins_skipped: 0 });

        // Counters that do not add up are refused.
        let torn = old.replace("\"episodes\"", "\"candidates_consumed\": 15, \"twins_skipped\": 1, \"episodes\"");
        let err = read_back(&ckpts, &torn).unwrap_err().to_string();
        assert!(err.contains("15 candidates looked at, but 16 tasks consumed and 1 twins skipped"), "{err}");
    }

    /// A learner on SmolLM2 with the default PPO settings.
    fn smol_learner() -> Learner {
        let brain = Brain::load(&ModelConfig::test_model()).expect("SmolLM2 test model (run scripts/setup.sh)");
        Learner::new(brain, None, PpoArgs::default(), Ablation::Full, 0).unwrap()
    }

    /// A copy of `dir` beside it (`NAME.copy`), as a kill would have left it.
    fn copy_folder(dir: &Path) -> PathBuf {
        let copy = dir.with_extension("copy");
        std::fs::create_dir_all(&copy).unwrap();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
        copy
    }

    #[test]
    fn a_kill_during_a_checkpoint_write_leaves_the_previous_one_loadable() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = dir.path().join("checkpoints");
        let mut learner = smol_learner();
        save(&ckpts, &learner, &state(1), 2, 0).unwrap();
        // The next write fails after each of its files in turn (a full disk): its partial
        // folder is removed, giving the space back, and the previous checkpoint is the newest.
        // A kill at the same point leaves the partial folder, which the next start removes.
        for stage in ["model", "trainer", "state"] {
            let mut left: Option<PathBuf> = None;
            let err = save_with(&ckpts, &learner, &state(2), Keep { newest: 2, every: 0 }, &mut |s| {
                if s == stage {
                    left = Some(copy_folder(&checkpoint_dir(&ckpts, 2).with_extension("partial")));
                    Err(TrainError::Config(format!("failed after {s}")))
                } else {
                    Ok(())
                }
            });
            assert!(err.is_err());
            assert!(!checkpoint_dir(&ckpts, 2).with_extension("partial").exists(), "failed after {stage}");
            // What a kill at that point would have left behind.
            std::fs::rename(left.unwrap(), checkpoint_dir(&ckpts, 2).with_extension("partial")).unwrap();
            let (found, st) = latest(&ckpts).unwrap().expect("the previous checkpoint");
            assert_eq!(
                (found.clone(), st.updates),
                (checkpoint_dir(&ckpts, 1), 1),
                "killed after {stage}"
            );
            assert!(
                !checkpoint_dir(&ckpts, 2).with_extension("partial").exists(),
                "leftovers are removed"
            );
            restore(&found, &st, &mut learner).unwrap();
        }
        // A torn LATEST replacement (its temp file) is ignored too.
        std::fs::write(ckpts.join("LATEST.partial"), "update-0000").unwrap();
        assert_eq!(latest(&ckpts).unwrap().unwrap().1.updates, 1);
        // Later checkpoints replace it, and only the newest `keep` stay.
        for u in 2..=4 {
            save(&ckpts, &learner, &state(u), 2, 0).unwrap();
        }
        assert_eq!(latest(&ckpts).unwrap().unwrap().1.updates, 4);
        assert!(!checkpoint_dir(&ckpts, 2).exists() && checkpoint_dir(&ckpts, 3).exists());
        // `checkpoint = <run folder>` in solve/eval configs finds the newest.
        assert_eq!(
            onebrain_model::resolve_checkpoint(dir.path()),
            checkpoint_dir(&ckpts, 4)
        );
    }

    /// A parameter made NaN is never written: the save stops naming it and the update, and
    /// the previous checkpoint stays the newest. A spoiled optimizer moment or `state.json`
    /// is refused on resuming.
    #[test]
    fn non_finite_state_is_never_saved_and_never_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = dir.path().join("checkpoints");
        let mut learner = smol_learner();
        save(&ckpts, &learner, &state(1), 2, 0).unwrap();

        let var = learner.brain_ref().trainable().data().lock().unwrap()["actor.role_tokens"].clone();
        let good = var.as_tensor().copy().unwrap();
        var.set(&(var.as_tensor() * f64::NAN).unwrap()).unwrap();
        let err = save(&ckpts, &learner, &state(2), 2, 0).unwrap_err();
        assert!(matches!(&err, TrainError::NonFinite { update: 2, names } if names == &["actor.role_tokens"]), "{err}");
        assert!(err.to_string().contains("update 2") && err.to_string().contains("`actor.role_tokens`"), "{err}");
        assert!(!checkpoint_dir(&ckpts, 2).exists() && !checkpoint_dir(&ckpts, 2).with_extension("partial").exists());
        let (found, st) = latest(&ckpts).unwrap().unwrap();
        assert_eq!(st.updates, 1);
        var.set(&good).unwrap();

        // A NaN first moment in trainer.safetensors.
        let trainer = found.join(TRAINER_FILE);
        let mut tensors = candle_core::safetensors::load(&trainer, &candle_core::Device::Cpu).unwrap();
        let key = tensors.keys().find(|k| k.starts_with("m.")).unwrap().clone();
        let t = (&tensors[&key] * f64::NAN).unwrap();
        tensors.insert(key.clone(), t);
        candle_core::safetensors::save(&tensors, &trainer).unwrap();
        let err = restore(&found, &st, &mut learner).unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")) && err.contains("not finite"), "{err}");

        // Counters past what AdamW counts, or that the config cannot have made.
        let text = std::fs::read_to_string(found.join(STATE_FILE)).unwrap();
        std::fs::write(found.join(STATE_FILE), text.replace("\"optimizer_steps\": 1", "\"optimizer_steps\": 4294967296")).unwrap();
        let err = latest(&ckpts).unwrap_err().to_string();
        assert!(err.contains("4294967296 optimizer steps"), "{err}");
        let err = state(1).check_counts(&found, 4, 32).unwrap_err().to_string();
        assert!(err.contains("1 updates of 4 tasks and 32 episodes each, but 8 tasks and 32 episodes"), "{err}");
        state(3).check_counts(&found, 8, 32).unwrap();

        // Each cause is said once: in the message, not also as the source.
        let io = TrainError::io(&found, std::io::Error::other("disk full"));
        assert!(std::error::Error::source(&io).is_none() && io.to_string().ends_with("disk full"));
        let model = TrainError::from(onebrain_model::Error::InvalidConfig("x".into()));
        assert!(std::error::Error::source(&model).is_none());
    }

    /// A disk that fills up during a checkpoint write: the error names the file, the partial
    /// folder is removed (giving its space back: before, it stayed and held the space), the
    /// previous checkpoint is the newest and loads, and once there is space the next write
    /// succeeds.
    #[test]
    fn a_full_disk_during_a_checkpoint_write_keeps_the_previous_one_and_names_the_file() {
        let disk = match onebrain_durable::SmallDisk::mount(192 << 20) {
            Ok(d) => d,
            Err(why) => return eprintln!("skipping: {why}"),
        };
        let ckpts = disk.path().join("run/checkpoints");
        let mut learner = smol_learner();
        let free = disk.available();
        save(&ckpts, &learner, &state(1), 2, 0).unwrap();
        let size = free - disk.available();
        // Room for half a checkpoint, then for a third of one: the disk fills in different files.
        for leave in [size / 2, size / 3, 4096] {
            disk.fill_to(leave).unwrap();
            let err = save(&ckpts, &learner, &state(2), 2, 0).unwrap_err().to_string();
            assert!(err.contains("update-000002") && (err.contains("disk is full") || err.contains("No space left")), "{err}");
            assert!(!checkpoint_dir(&ckpts, 2).with_extension("partial").exists(), "{err}");
            let (found, st) = latest(&ckpts).unwrap().expect("the previous checkpoint");
            assert_eq!(st.updates, 1);
            restore(&found, &st, &mut learner).unwrap();
            disk.unfill();
        }
        save(&ckpts, &learner, &state(2), 2, 0).unwrap();
        assert_eq!(latest(&ckpts).unwrap().unwrap().1.updates, 2);
    }

    #[test]
    fn checkpoints_at_multiples_of_keep_every_stay() {
        let dir = tempfile::tempdir().unwrap();
        let ckpts = dir.path().join("checkpoints");
        let learner = smol_learner();
        for u in 0..=7 {
            save(&ckpts, &learner, &state(u), 2, 3).unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(&ckpts)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("update-"))
            .collect();
        names.sort();
        // 0, 3 and 6 forever; 6 and 7 are also the newest two.
        let want: Vec<String> = [0, 3, 6, 7].iter().map(|&u| format!("update-{u:06}")).collect();
        assert_eq!(names, want);
        assert_eq!(latest(&ckpts).unwrap().unwrap().1.updates, 7);
    }
}

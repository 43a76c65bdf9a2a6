//! Training over a job array: one learner and N actors that share nothing but a folder.
//!
//! - Actor K of N ([`ClusterRole::Actor`], `cluster/actor.rs`) samples the groups of the task
//!   stream's positions p with p mod N = K, with the same rollout code as `onebrain train`,
//!   and appends each group as one line to `OUT/actors/actor-K.jsonl` (`episode_files.rs`),
//!   tagged with the parameter version that sampled it. Restarted, it continues after the
//!   last group its file holds.
//! - The learner ([`ClusterRole::Learner`], `cluster/learner.rs`) forms update u's batch from
//!   the groups of positions u·T .. (u+1)·T (T tasks per update), each group from the one
//!   actor that sampled it, drops a group more than `max-staleness` updates old, skips one
//!   written twice, runs `ppo_update`, checkpoints (with its offset in every actor file) and
//!   publishes the parameters: `OUT/params/vNNNNNN/`, renamed into place, then `LATEST`.
//! - An actor waits for version ≥ u − `max-staleness` before sampling a task of update u, so
//!   the learner drops nothing unless an actor ran under another bound; with one actor and
//!   `max-staleness = 0` the array learns exactly what `onebrain train` does.

mod actor;
mod episode_files;
mod learner;

use std::fs;
use std::path::{Path, PathBuf};

use onebrain_model::Brain;

use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::trainer::TrainEvent;

pub use episode_files::{actor_file, read_from, GroupLine};

/// What one process of a job array does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterRole {
    /// Learns from the groups of this many actors and publishes the parameters.
    Learner {
        /// Actors in the array.
        actors: usize,
    },
    /// Samples the tasks of its slice and appends them to its file.
    Actor {
        /// Its number, from 0.
        k: usize,
        /// Actors in the array.
        n: usize,
    },
}

impl ClusterRole {
    /// The role of array task `task` of `count` (Slurm's `SLURM_ARRAY_TASK_ID` and
    /// `SLURM_ARRAY_TASK_COUNT`): task 0 learns, task t is actor t − 1 of count − 1.
    pub fn of_array_task(task: usize, count: usize) -> Result<ClusterRole, TrainError> {
        if count < 2 || task >= count {
            return Err(TrainError::Cluster(format!(
                "array task {task} of {count}: an array needs a learner and at least one actor (tasks 0..count)"
            )));
        }
        Ok(match task {
            0 => ClusterRole::Learner { actors: count - 1 },
            t => ClusterRole::Actor { k: t - 1, n: count - 1 },
        })
    }

    /// Runs the role on `cfg` (`base`: the config file's folder) until the run's `updates`
    /// are learned (an actor: until its slice of them is sampled). Either picks up where a
    /// killed process of the same role left off.
    pub fn run(self, cfg: TrainConfig, base: &Path, on_event: &mut dyn FnMut(&TrainEvent)) -> Result<(), TrainError> {
        match self {
            ClusterRole::Learner { actors } if actors > 0 => learner::run(cfg, base, actors, on_event),
            ClusterRole::Actor { k, n } if k < n => actor::run(cfg, base, k, n, on_event),
            other => Err(TrainError::Cluster(format!("{other:?}: needs at least one actor, and K < N"))),
        }
    }
}

/// `OUT/params`: the published parameters.
fn params_root(out: &Path) -> PathBuf {
    out.join("params")
}

fn version_name(version: u64) -> String {
    format!("v{version:06}")
}

/// Publishes `brain`'s trainable parameters as `version` (updates made): written beside,
/// renamed to `OUT/params/vNNNNNN`, then named by `LATEST` (itself replaced by a rename), so
/// an actor reads a whole version or the one before. A version already there is left as it
/// is (a resumed learner republishes what it wrote before being killed). Versions more than
/// `keep` behind are removed.
pub(crate) fn publish(out: &Path, brain: &Brain, version: u64, keep: u64) -> Result<(), TrainError> {
    let root = params_root(out);
    fs::create_dir_all(&root).map_err(|e| TrainError::io(&root, e))?;
    let dir = root.join(version_name(version));
    if !dir.exists() {
        let tmp = onebrain_durable::partial_path(&dir);
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
        }
        brain.save(&tmp)?;
        fs::rename(&tmp, &dir).map_err(|e| TrainError::io(&dir, e))?;
        onebrain_durable::sync_dir(&root);
    }
    onebrain_durable::write_atomic(&root.join(onebrain_model::LATEST_FILE), version_name(version))?;
    for old in 0..version.saturating_sub(keep) {
        let d = root.join(version_name(old));
        if d.exists() {
            let _ = fs::remove_dir_all(d);
        }
    }
    Ok(())
}

/// The newest published version and its folder, if any.
pub(crate) fn latest_params(out: &Path) -> Result<Option<(u64, PathBuf)>, TrainError> {
    let root = params_root(out);
    let pointer = root.join(onebrain_model::LATEST_FILE);
    let name = match fs::read_to_string(&pointer) {
        Ok(s) => s.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrainError::io(&pointer, e)),
    };
    let version = name
        .strip_prefix('v')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| TrainError::Cluster(format!("{}: `{name}` names no version", pointer.display())))?;
    Ok(Some((version, root.join(name))))
}

/// How long a role sleeps before looking at the shared folder again: far below an episode's
/// seconds, far above what a file system's metadata costs.
const POLL: std::time::Duration = std::time::Duration::from_millis(200);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_task_zero_learns_and_the_others_act() {
        assert_eq!(ClusterRole::of_array_task(0, 3).unwrap(), ClusterRole::Learner { actors: 2 });
        assert_eq!(ClusterRole::of_array_task(2, 3).unwrap(), ClusterRole::Actor { k: 1, n: 2 });
        assert!(ClusterRole::of_array_task(0, 1).is_err(), "a learner alone has no episodes");
        assert!(ClusterRole::of_array_task(3, 3).is_err());
    }

    #[test]
    fn the_latest_pointer_names_a_version() {
        let dir = tempfile::tempdir().unwrap();
        assert!(latest_params(dir.path()).unwrap().is_none());
        std::fs::create_dir_all(params_root(dir.path())).unwrap();
        std::fs::write(params_root(dir.path()).join("LATEST"), "v000012\n").unwrap();
        let (v, d) = latest_params(dir.path()).unwrap().unwrap();
        assert_eq!((v, d), (12, dir.path().join("params/v000012")));
    }
}

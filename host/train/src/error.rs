//! Why training stopped.

use std::path::PathBuf;

use onebrain_roles::RolesError;

/// Why training stopped. Episodes already recorded and the last complete checkpoint survive
/// every one of these.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A config value is unusable.
    #[error("config: {0}")]
    Config(String),
    /// The config file could not be read or parsed.
    #[error("{path}: {message}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The model, verifier or plugins could not be set up.
    #[error(transparent)]
    Setup(#[from] RolesError),
    /// A forward, backward or optimizer step failed. (The underlying errors of this, the
    /// next two and `HeldOut` are in their messages, not sources, so that a chain printer
    /// such as anyhow's `{:#}` says them once.)
    #[error("model: {0}")]
    Model(onebrain_model::Error),
    /// A tensor operation failed.
    #[error("tensor: {0}")]
    Tensor(candle_core::Error),
    /// A file of the run folder could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// An update left parameters NaN or infinite. The run stops before the update is
    /// counted or saved, so its last checkpoint is the last good state.
    #[error(
        "update {update} left {} parameter(s) not finite (NaN or infinite): {}; the run stops, \
         and its last checkpoint is the last good state",
        .names.len(),
        .names.iter().take(4).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    NonFinite {
        /// The update's number (1 for the first).
        update: u64,
        /// The parameters (and optimizer moments) at fault, sorted.
        names: Vec<String>,
    },
    /// A checkpoint is unusable.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint folder.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The run folder holds a run already and `--resume` was not given.
    #[error(
        "{0} already holds a training run: pass --resume to continue it, or choose another out-dir"
    )]
    RunExists(PathBuf),
    /// A JSONL log of the run folder could not be written.
    #[error(transparent)]
    Log(#[from] onebrain_eval::TraceError),
    /// A file of the run folder could not be written whole (a full disk among the causes:
    /// the message names the file, and what it held before is kept), or another process
    /// writes the folder.
    #[error(transparent)]
    Folder(#[from] onebrain_durable::Error),
    /// A plugin's component changed since the run began: resuming would mix two versions.
    #[error(transparent)]
    Plugins(#[from] onebrain_eval::PluginRecordError),
    /// SIGINT or SIGTERM stopped the run at a safe point: every recorded episode and the
    /// checkpoint of the last finished update are on disk, and `--resume` continues exactly.
    #[error(transparent)]
    Stopped(#[from] onebrain_durable::Stopped),
    /// The held-out evaluation failed.
    #[error("held-out evaluation: {0}")]
    HeldOut(onebrain_eval::EvalError),
    /// The domain plugin could not generate a task.
    #[error("task stream: {0}")]
    Tasks(String),
    /// A job array's files disagree with the role reading them: an actor's file written
    /// under another number of actors, a line that is not a group, a learner resumed with
    /// another number of actors.
    #[error("training over a job array: {0}")]
    Cluster(String),
    /// Every candidate the stream looked at for a long run equals a held-out task up to
    /// renaming: the `[tasks]` stream cannot stay clear of the held-out sets.
    #[error(
        "task stream: the {skipped} candidates from candidate {from} on all equal held-out tasks \
         (up to renaming of objects); the [tasks] stream cannot stay clear of the held-out sets"
    )]
    TwinsOnly {
        /// The first candidate of the run of twins.
        from: u64,
        /// Candidates skipped in a row.
        skipped: u64,
    },
}

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> TrainError {
        TrainError::Io {
            path: path.into(),
            error,
        }
    }
}

impl From<onebrain_model::Error> for TrainError {
    fn from(e: onebrain_model::Error) -> Self {
        TrainError::Model(e)
    }
}

impl From<candle_core::Error> for TrainError {
    fn from(e: candle_core::Error) -> Self {
        TrainError::Tensor(e)
    }
}

impl From<onebrain_eval::EvalError> for TrainError {
    fn from(e: onebrain_eval::EvalError) -> Self {
        match e {
            // A stop is the run's, not an evaluation failure.
            onebrain_eval::EvalError::Stopped(s) => TrainError::Stopped(s),
            e => TrainError::HeldOut(e),
        }
    }
}

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
    /// A forward, backward or optimizer step failed.
    #[error("model: {0}")]
    Model(#[from] onebrain_model::Error),
    /// A tensor operation failed.
    #[error("tensor: {0}")]
    Tensor(#[from] candle_core::Error),
    /// A file of the run folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
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
    /// The held-out evaluation failed.
    #[error("held-out evaluation: {0}")]
    HeldOut(#[from] onebrain_eval::EvalError),
    /// The domain plugin could not generate a task.
    #[error("task stream: {0}")]
    Tasks(String),
}

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TrainError {
        TrainError::Io {
            path: path.into(),
            source,
        }
    }
}

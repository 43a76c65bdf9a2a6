use std::path::PathBuf;

/// Why the verifier could not be set up or could not run the planner at all.
///
/// Bad specs are never errors: they are verdicts. These are the failures of
/// the machinery itself.
#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    /// Fast Downward is not where it should be.
    #[error("Fast Downward is not installed: {0}")]
    NotInstalled(String),
    /// The interpreter that runs the driver could not be started.
    #[error("could not start {0}: {1}")]
    Spawn(PathBuf, #[source] std::io::Error),
    /// The temporary working directory could not be prepared or read.
    #[error("I/O error in the planner's working directory: {0}")]
    Io(#[source] std::io::Error),
}

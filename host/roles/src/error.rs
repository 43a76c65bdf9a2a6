//! The errors of this crate.

use std::path::PathBuf;

/// Why a solve or an episode could not run. A bad model output is never an error: it is a
/// failure verdict in the record.
#[derive(Debug, thiserror::Error)]
pub enum RolesError {
    /// A config value is out of range or unknown.
    #[error("invalid config: {0}")]
    Config(String),
    /// A config file could not be read or parsed.
    #[error("cannot read config {path}: {message}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A task file could not be read.
    #[error("cannot read task file {path}: {source}")]
    TaskFile {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A PDDL file given as a task, a domain or a reference is unusable: it does not parse
    /// (the message has the line and column), or it belongs to another domain.
    #[error("{path}: {message}")]
    Pddl {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its position.
        message: String,
    },
    /// The language model could not be loaded.
    #[error("cannot load the model: {0}")]
    Model(#[source] onebrain_model::Error),
    /// The verifier (Fast Downward) could not be set up.
    #[error("cannot set up the verifier: {0}")]
    Verifier(#[source] onebrain_verifier::VerifierError),
    /// A plugin could not be loaded.
    #[error("cannot load the plugins: {0}")]
    Plugins(#[source] onebrain_runtime::RegistryError),
    /// A domain plugin failed to describe its domain or a task.
    #[error("domain plugin `{domain}` failed: {message}")]
    Domain {
        /// The plugin's domain name.
        domain: String,
        /// What it said.
        message: String,
    },
    /// No configured domain plugin has this name.
    #[error("no domain plugin named `{0}` is configured (add it to [plugins] domains)")]
    UnknownDomain(String),
    /// The strategy needs something the task lacks.
    #[error("the {strategy} strategy needs {what}")]
    Unsupported {
        /// The strategy.
        strategy: String,
        /// What is missing.
        what: String,
    },
}

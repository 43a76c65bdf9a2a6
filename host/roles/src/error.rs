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
    #[error("cannot read task file {path}: {error}")]
    TaskFile {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message, not as a source: a chain printer such as
        /// anyhow's `{:#}` would say it twice).
        error: std::io::Error,
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
    /// The language model could not be loaded. (The underlying errors of this and the next
    /// two are in their messages, not sources, so that a chain printer says them once.)
    #[error("cannot load the model: {0}")]
    Model(onebrain_model::Error),
    /// The verifier (Fast Downward) could not be set up.
    #[error("cannot set up the verifier: {0}")]
    Verifier(onebrain_verifier::VerifierError),
    /// A plugin could not be loaded.
    #[error("cannot load the plugins: {0}")]
    Plugins(onebrain_runtime::RegistryError),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of the error and its sources, as a chain printer (anyhow's `{:#}`)
    /// writes them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(s) = next {
            out = format!("{out}: {s}");
            next = s.source();
        }
        out
    }

    #[test]
    fn a_wrapped_error_is_said_once_when_its_chain_is_printed() {
        let e = RolesError::Verifier(onebrain_verifier::VerifierError::NotInstalled("no .venv".into()));
        assert_eq!(chain(&e), "cannot set up the verifier: Fast Downward is not installed: no .venv");
        let e = RolesError::TaskFile {
            path: "t.txt".into(),
            error: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        };
        assert_eq!(chain(&e), "cannot read task file t.txt: gone");
    }
}

//! Why a run folder's file could not be written, or its folder cannot be had.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Why a file could not be written whole, or a folder cannot be written by this process.
/// Each names the file or folder, and says its cause once, in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The disk (or the user's quota) is full. The file keeps what it held before this write:
    /// a replaced file is the old one, a log ends on its last whole record.
    #[error(
        "{path}: the disk is full ({error}); the file keeps what it held before this write: \
         free some space, then resume"
    )]
    DiskFull {
        /// The file being written.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The file could not be written, synced or renamed into place for another reason.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// An earlier append to this log failed, and cutting its partial record back failed too:
    /// nothing more is appended, so that the torn record stays the last line (which readers
    /// drop) and never ends up in the middle.
    #[error("{path}: an earlier append failed and its partial record could not be cut back ({error}); nothing more is appended")]
    Poisoned {
        /// The log.
        path: PathBuf,
        /// Why the cut failed.
        error: String,
    },
    /// Another process holds the folder's lock: one process writes a folder at a time.
    #[error(
        "{dir} is in use by another onebrain process ({holder}): one process writes a folder at a \
         time; wait for it to end or stop it (a stopped or killed process releases the folder at once)"
    )]
    Locked {
        /// The folder.
        dir: PathBuf,
        /// Who holds it, as its lock file says (`pid 1234: onebrain train …`).
        holder: String,
    },
    /// The lock file could not be created or locked.
    #[error("cannot lock {path}: {error}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
}

impl Error {
    /// The error of a write to `path` that failed with `error`: [`Error::DiskFull`] when the
    /// disk or quota is full, else [`Error::Write`].
    pub fn write(path: &Path, error: std::io::Error) -> Error {
        if is_full(&error) {
            Error::DiskFull { path: path.to_path_buf(), error }
        } else {
            Error::Write { path: path.to_path_buf(), error }
        }
    }

    /// Whether this is a full disk or quota.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull { .. })
    }
}

/// ENOSPC or EDQUOT.
pub(crate) fn is_full(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
}

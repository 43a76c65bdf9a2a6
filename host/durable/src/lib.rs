//! How a run folder's files are written, so that a full disk, a signal or a second process
//! never costs what a run already did.
//!
//! - [`write_atomic`] and [`replace_with`] replace a whole file (a checkpoint's parts, a
//!   report, `config.json`, an export): the new bytes go to `NAME.partial` in the same folder,
//!   are synced, and are renamed over `NAME`, and the folder is synced. A kill or a full disk
//!   at any moment leaves the old file or the new one, never a part of either.
//! - [`AppendFile`] grows a JSONL log (a trace, `metrics.jsonl`, `episodes.jsonl`) by whole
//!   records: an append that fails part way (a full disk) is cut back, so the file still ends
//!   on its last whole record and a later append cannot leave half a line in its middle.
//! - [`FolderLock`] lets one process write a folder at a time: an OS advisory lock on
//!   `DIR/lock`, which names its holder for the second process's refusal and which the OS
//!   releases when the holder dies, however it dies.
//! - [`install_stop_handlers`] turns the first SIGINT or SIGTERM into a flag
//!   ([`stop_requested`]) that a run reads at its safe points, then stops with [`Stopped`];
//!   a second signal ends the process at once.
//! - [`SmallDisk`] is a size-limited tmpfs for tests that fill a disk on purpose.
//!
//! Every error names the file, and a full disk says so ([`Error::DiskFull`]).
//!
//! ```
//! use onebrain_durable::{write_atomic, AppendFile, FolderLock};
//!
//! let dir = tempfile::tempdir()?;
//! let lock = FolderLock::acquire(dir.path())?;
//! // A second writer of the folder is refused, and told who holds it.
//! let refused = FolderLock::acquire(dir.path()).unwrap_err().to_string();
//! assert!(refused.contains(&format!("pid {}", std::process::id())), "{refused}");
//!
//! write_atomic(&dir.path().join("report.json"), b"{}")?;
//! let mut log = AppendFile::open(&dir.path().join("trace.jsonl"))?;
//! log.append(b"{\"n\":1}\n")?;
//! assert_eq!(std::fs::read(dir.path().join("trace.jsonl"))?, b"{\"n\":1}\n");
//! drop(lock);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod append;
mod atomic;
mod error;
mod lock;
mod small_disk;
mod stop;

pub use append::AppendFile;
pub use atomic::{partial_path, replace_with, sync_dir, write_atomic};
pub use error::Error;
pub use lock::{FolderLock, LOCK_FILE};
pub use small_disk::SmallDisk;
pub use stop::{install_stop_handlers, request_stop, stop_requested, StopSignal, Stopped};

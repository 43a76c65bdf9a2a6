//! One writer per folder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;

/// The lock file in a folder that a process writes.
pub const LOCK_FILE: &str = "lock";

/// The right to write a folder, held as long as this value lives: an exclusive OS advisory
/// lock (`flock`) on `DIR/lock`. A second process that asks for it is refused at once with
/// [`Error::Locked`], which names the holder: the lock file holds its pid and command line.
///
/// The OS releases the lock when the holder's file is closed, however the process ends (a
/// kill -9 included), so a killed run never blocks its own resume. The file stays in the
/// folder: removing it would let a process that had opened the old file and one that creates
/// a new one both hold "the" lock. Its text is stale once its holder is gone, and is only read
/// while the lock is held.
#[derive(Debug)]
pub struct FolderLock {
    dir: PathBuf,
    _file: File,
}

impl FolderLock {
    /// Takes `dir`'s lock (creating the folder and the lock file), or refuses with
    /// [`Error::Locked`] when another process holds it.
    pub fn acquire(dir: &Path) -> Result<FolderLock, Error> {
        let path = dir.join(LOCK_FILE);
        let err = |error| Error::Lock { path: path.clone(), error };
        std::fs::create_dir_all(dir).map_err(err)?;
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(err)?;
        let deadline = Instant::now() + OWN_FORK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = holder(&mut file);
                    // A lock this process released can still be held by a child that another of
                    // its threads has just forked: the child shares the lock's open file until
                    // its exec closes it. Only then is the holder named as this process.
                    if holder.starts_with(&own_holder_prefix()) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                        let _ = file.seek(SeekFrom::Start(0));
                        continue;
                    }
                    return Err(Error::Locked { dir: dir.to_path_buf(), holder });
                }
                Err(TryLockError::Error(e)) => return Err(err(e)),
            }
        }
        // Who holds it, for the refusal of the next one (written once the lock is ours).
        let me = format!("{}{}\n", own_holder_prefix(), command_line());
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(me.as_bytes()))
            .map_err(|e| Error::write(&path, e))?;
        Ok(FolderLock { dir: dir.to_path_buf(), _file: file })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// How long a lock that names this process as its holder is waited for before the refusal:
/// far longer than any fork-to-exec window, short enough that a lock this process really
/// still holds is refused promptly.
const OWN_FORK_WAIT: Duration = Duration::from_secs(2);

/// How a lock file names this process.
fn own_holder_prefix() -> String {
    format!("pid {}: ", std::process::id())
}

/// What the lock file says of its holder; the holder may not have written it yet.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    match text.trim() {
        "" => "a process that has just started".to_string(),
        t => t.lines().next().unwrap_or(t).to_string(),
    }
}

/// This process's command line, as one line, its program by name (its full path only makes
/// the message longer).
fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|a| Path::new(&a).file_name().map_or_else(|| a.clone(), |n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI failed once when the re-acquire after `drop(lock)` was refused, naming this process:
    /// a child that another test thread had just forked still shared the lock's file.
    #[test]
    fn a_released_lock_is_taken_while_children_are_forked_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let forker = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        };
        for _ in 0..200 {
            let lock = FolderLock::acquire(&run).unwrap();
            drop(lock);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        forker.join().unwrap();
    }

    #[test]
    fn a_second_writer_is_refused_naming_the_holder_and_a_released_lock_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let lock = FolderLock::acquire(&run).unwrap();
        assert_eq!(lock.dir(), run);
        let err = FolderLock::acquire(&run).unwrap_err();
        let Error::Locked { holder, .. } = &err else { panic!("{err}") };
        assert!(holder.starts_with(&format!("pid {}: ", std::process::id())), "{holder}");
        assert!(err.to_string().contains("one process writes a folder at a time"), "{err}");
        drop(lock);
        // Released: the next one takes it, and the stale text is replaced.
        let again = FolderLock::acquire(&run).unwrap();
        drop(again);
        assert!(std::fs::read_to_string(run.join(LOCK_FILE)).unwrap().starts_with("pid "));
    }
}

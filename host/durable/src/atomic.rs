//! Whole-file replacement: write beside, sync, rename, sync the folder.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The name a file is written under before it is renamed into place: `NAME.partial` in the
/// same folder (a rename is atomic only within one filesystem). A kill leaves at most this
/// file behind, and the next write of `NAME` replaces it.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes`, whole: they are written to [`partial_path`], synced, and
/// renamed over `path`, and the folder is synced. A kill or a full disk at any moment leaves
/// either the old file or the new one; on an error the old one is there, and the partial file
/// is removed.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), Error> {
    replace_with(path, |tmp| {
        let write = || -> std::io::Result<()> {
            let mut f = File::create(tmp)?;
            f.write_all(bytes.as_ref())?;
            f.sync_all()
        };
        write().map_err(|e| Error::write(path, e))
    })
}

/// [`write_atomic`] for writers that take a path (a safetensors or GGUF writer): `write`
/// writes the whole file at the path it is given, which is `path`'s [`partial_path`]; the file
/// is then synced and renamed over `path`. When `write` fails, its error is returned and the
/// partial file removed; `path` is untouched either way.
pub fn replace_with<E: From<Error>>(path: &Path, write: impl FnOnce(&Path) -> Result<(), E>) -> Result<(), E> {
    let tmp = partial_path(path);
    if let Err(e) = write(&tmp) {
        free_and_remove(&tmp);
        return Err(e);
    }
    commit(&tmp, path).map_err(|e| {
        free_and_remove(&tmp);
        E::from(e)
    })
}

/// Empties a file, then removes it. Removing alone frees nothing while any process holds the
/// file open, and a child forked by another thread holds every open file until its exec
/// closes them; emptying frees the blocks at once. Errors are ignored: the file may be gone.
pub(crate) fn free_and_remove(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = f.set_len(0);
    }
    let _ = std::fs::remove_file(path);
}

/// Syncs the written `tmp` and renames it over `path`; errors name `path`, the file the
/// caller meant to write.
fn commit(tmp: &Path, path: &Path) -> Result<(), Error> {
    File::open(tmp).and_then(|f| f.sync_all()).map_err(|e| Error::write(path, e))?;
    std::fs::rename(tmp, path).map_err(|e| Error::write(path, e))?;
    sync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")));
    Ok(())
}

/// Syncs a folder, so that a rename or a new file in it survives a crash of the machine. Not
/// every filesystem allows it, and a rename's atomicity does not depend on it: a failure is
/// ignored.
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = File::open(dir) {
        let _ = f.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_is_whole_and_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write_atomic(&path, "old").unwrap();
        write_atomic(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert!(!partial_path(&path).exists());
        assert_eq!(partial_path(&path), dir.path().join("report.json.partial"));
    }

    #[test]
    fn a_writer_that_fails_leaves_the_old_file_and_no_partial_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trainer.safetensors");
        write_atomic(&path, "old").unwrap();
        let err = replace_with(&path, |tmp| -> Result<(), Error> {
            std::fs::write(tmp, "half").unwrap();
            Err(Error::write(tmp, std::io::Error::from(std::io::ErrorKind::StorageFull)))
        })
        .unwrap_err();
        assert!(err.is_disk_full() && err.to_string().contains("the disk is full"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert!(!partial_path(&path).exists());
    }
}

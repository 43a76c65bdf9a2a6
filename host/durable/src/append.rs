//! A log that grows by whole records.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// A file that grows by whole records (JSONL lines): each [`AppendFile::append`] lands whole
/// or not at all. A write that fails part way, as on a full disk, has its part cut back, so
/// the file still ends on its last whole record: nothing written before is lost, and a later
/// append (once there is space) cannot leave half a record in the middle of the log, where
/// readers refuse it. A kill mid-append leaves a torn last line, which readers drop.
#[derive(Debug)]
pub struct AppendFile {
    path: PathBuf,
    file: File,
    /// The file's length after the last whole record: where a failed append is cut back to.
    len: u64,
    /// The file's length at the last [`AppendFile::sync`]; 0 before one, since what another
    /// process left may still be only in the OS's cache.
    synced: u64,
    /// Why a failed append could not be cut back, if one could not: no more appends then.
    poisoned: Option<String>,
}

impl AppendFile {
    /// Opens `path` for appending, creating it (its folder must exist).
    pub fn open(path: &Path) -> Result<AppendFile, Error> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::write(path, e))?;
        let len = file.metadata().map_err(|e| Error::write(path, e))?.len();
        Ok(AppendFile { path: path.to_path_buf(), file, len, synced: 0, poisoned: None })
    }

    /// Appends `bytes` (whole records, each ending in a newline) and hands them to the OS, so
    /// that a kill of the process keeps them. On an error the file is as it was before.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if let Some(error) = &self.poisoned {
            return Err(Error::Poisoned { path: self.path.clone(), error: error.clone() });
        }
        match self.file.write_all(bytes).and_then(|()| self.file.flush()) {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Part of the record may be in the file: cut it back to the last whole one.
                if let Err(cut) = self.file.set_len(self.len) {
                    self.poisoned = Some(cut.to_string());
                }
                Err(Error::write(&self.path, e))
            }
        }
    }

    /// Syncs what was appended to the disk: an OS crash or a power cut after it returns
    /// keeps every record so far. A checkpoint that counts on the records (a trainer's) calls
    /// this before it is written, so it can never be ahead of its logs.
    pub fn sync(&mut self) -> Result<(), Error> {
        if self.is_synced() {
            return Ok(());
        }
        self.file.sync_data().map_err(|e| Error::write(&self.path, e))?;
        self.synced = self.len;
        Ok(())
    }

    /// Whether every record is synced to the disk (the file is empty, or [`AppendFile::sync`]
    /// ran after the last append).
    pub fn is_synced(&self) -> bool {
        self.synced == self.len
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length after its last whole record.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_is_unsynced_until_sync_and_a_reopened_log_is_not_taken_as_synced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut log = AppendFile::open(&path).unwrap();
        assert!(log.is_synced(), "an empty log has nothing to sync");
        log.append(b"{}\n").unwrap();
        assert!(!log.is_synced());
        log.sync().unwrap();
        assert!(log.is_synced());
        drop(log);
        // What an earlier process appended may still be only in the OS's cache.
        let mut reopened = AppendFile::open(&path).unwrap();
        assert!(!reopened.is_synced());
        reopened.sync().unwrap();
        assert!(reopened.is_synced());
    }
}

//! The JSONL trace: one [`EpisodeRecord`] per line, appended and flushed as each task ends,
//! so a killed run keeps what it did. Reading skips a torn last line (the write the kill
//! interrupted) and reports it; a resumed run skips the (task, strategy) pairs already there.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use onebrain_roles::{EpisodeRecord, Strategy};

/// Why the trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("trace {path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A line other than the last does not parse: the file is not a trace.
    #[error("trace {path}, line {line}: {message}")]
    BadLine {
        /// The trace file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The JSON error.
        message: String,
    },
    /// A record could not be serialised.
    #[error("cannot serialise a record: {0}")]
    Serialize(#[source] serde_json::Error),
}

/// What [`read_jsonl`] (or [`read_trace`]) found.
#[derive(Debug)]
pub struct TraceContents<T = EpisodeRecord> {
    /// The complete records, in file order.
    pub records: Vec<T>,
    /// A last line that was cut off mid-write, dropped.
    pub torn_tail: bool,
}

impl<T> Default for TraceContents<T> {
    fn default() -> Self {
        TraceContents {
            records: Vec::new(),
            torn_tail: false,
        }
    }
}

impl TraceContents {
    /// The (task, strategy) pairs already done.
    pub fn done(&self) -> HashSet<(String, Strategy)> {
        self.records
            .iter()
            .map(|r| (r.task_id.clone(), r.strategy))
            .collect()
    }
}

/// Reads a trace. A last line that does not parse (a torn write) is dropped, not an error;
/// any other bad line is.
pub fn read_trace(path: &Path) -> Result<TraceContents, TraceError> {
    read_jsonl(path)
}

/// Reads any JSONL log written by [`TraceWriter`] (training's episode and metrics logs too),
/// by the trace's rules: a missing file is empty, a torn last line is dropped and reported,
/// any other line that does not parse as `T` is an error naming it.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<TraceContents<T>, TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TraceContents::default()),
        Err(e) => return Err(io(e)),
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(io)?;
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let mut out = TraceContents::default();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(r) => out.records.push(r),
            Err(_) if Some(i) == last => out.torn_tail = true,
            Err(e) => {
                return Err(TraceError::BadLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}

/// Appends records to a trace, one flushed line each.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: File,
}

impl TraceWriter {
    /// Opens `path` for appending (creating it and its folder). A torn last line left by a
    /// killed run is cut off first, so the next record starts on a line of its own.
    pub fn open(path: &Path) -> Result<TraceWriter, TraceError> {
        let io = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        if let Ok(text) = std::fs::read(path) {
            let keep = match text.iter().rposition(|&b| b == b'\n') {
                Some(nl) => nl + 1,
                None => 0,
            };
            if keep < text.len() {
                let f = OpenOptions::new().write(true).open(path).map_err(io)?;
                f.set_len(keep as u64).map_err(io)?;
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(TraceWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one record and flushes it to the OS.
    /// Any record serialises: training logs its own lines (episodes with their update and
    /// slot, metrics) through the same writer.
    pub fn append(&mut self, record: &impl serde::Serialize) -> Result<(), TraceError> {
        let mut line = serde_json::to_string(record).map_err(TraceError::Serialize)?;
        line.push('\n');
        let io = |source| TraceError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(line.as_bytes()).map_err(io)?;
        self.file.flush().map_err(io)
    }

    /// The trace file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_drops_only_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        assert!(read_jsonl::<u32>(&path).unwrap().records.is_empty());

        std::fs::write(&path, "1\n2\n{\"cut").unwrap();
        let c = read_jsonl::<u32>(&path).unwrap();
        assert_eq!((c.records, c.torn_tail), (vec![1, 2], true));

        std::fs::write(&path, "1\nnot a record\n3\n").unwrap();
        match read_jsonl::<u32>(&path) {
            Err(TraceError::BadLine { line: 2, .. }) => {}
            other => panic!("expected a bad line 2, got {other:?}"),
        }
    }
}

//! The JSONL trace: one [`EpisodeRecord`] per line, appended and flushed as each task ends,
//! so a killed run keeps what it did. Reading skips a torn last line (the write the kill
//! interrupted) and reports it; a resumed run skips the (task, strategy) pairs already there.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
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
/// by the trace's rules: a missing file is empty, a torn last line (one that is not a whole
/// JSON value) is dropped and reported, any other line that does not parse as `T` is an
/// error naming it.
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
    let mut bytes = Vec::new();
    BufReader::new(file).read_to_end(&mut bytes).map_err(io)?;
    parse_jsonl(path, &bytes)
}

/// [`read_jsonl`]'s rules on a log already in memory (a gzipped trace once decompressed);
/// `path` only names it in errors.
pub fn parse_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<TraceContents<T>, TraceError> {
    // Lines as bytes: a write killed inside a multi-byte character leaves a torn line that is
    // not UTF-8, and reading the file as text refused the whole trace (issue 35, fuzzing).
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let blank = |l: &[u8]| l.iter().all(u8::is_ascii_whitespace);
    let last = lines.iter().rposition(|l| !blank(l));
    let mut out = TraceContents::default();
    for (i, line) in lines.iter().enumerate() {
        if blank(line) {
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(r) => out.records.push(r),
            // Torn: the last line, and not a whole JSON value (a kill cuts a write short; it
            // cannot make a complete one). A whole value of the wrong shape is an error like
            // any other line, and [`TraceWriter::open`] judges the same way (issue 35).
            Err(_) if Some(i) == last && !is_json(line) => out.torn_tail = true,
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

/// Whether `line` is one whole JSON value: a line a kill did not cut short.
fn is_json(line: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
}

/// Appends records to a trace, one flushed line each.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: File,
}

impl TraceWriter {
    /// Opens `path` for appending (creating it and its folder). A torn last line left by a
    /// killed run (the last line that is not blank and not a whole JSON value, which is what
    /// [`read_jsonl`] drops) is cut off first, and a whole last record missing its newline
    /// gets one, so the next record starts on a line of its own.
    pub fn open(path: &Path) -> Result<TraceWriter, TraceError> {
        let io = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        if let Ok(text) = std::fs::read(path) {
            // The last line that is not blank: where a kill leaves a torn write.
            let end = text.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
            let start = text[..end].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let last = &text[start..end];
            if is_json(last) {
                // A whole record, which readers count. If the kill cut its newline off, it
                // gets one: cutting it lost an episode a resumed run then skipped as done
                // (issue 35, fuzzing).
                if !text[end..].contains(&b'\n') {
                    let mut f = OpenOptions::new().append(true).open(path).map_err(io)?;
                    f.write_all(b"\n").map_err(io)?;
                }
            } else if start < text.len() {
                // What readers drop as torn is cut, newline or not, so the next record does
                // not leave it behind as a bad line in the middle (issue 35, fuzzing).
                let f = OpenOptions::new().write(true).open(path).map_err(io)?;
                f.set_len(start as u64).map_err(io)?;
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

    /// Regression (issue 35, fuzzing): a write killed inside a multi-byte character left a
    /// torn line that is not UTF-8, and the whole trace became unreadable.
    #[test]
    fn r35_4_a_torn_line_cut_inside_a_character_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut bytes = b"\"a\"\n\"b\"\n\"caf".to_vec();
        bytes.push(0xC3); // the first byte of `é`
        std::fs::write(&path, &bytes).unwrap();
        let c = read_jsonl::<String>(&path).unwrap();
        assert_eq!((c.records, c.torn_tail), (vec!["a".to_string(), "b".to_string()], true));
        // A whole value of the wrong shape is no torn write: an error naming it, last or not.
        std::fs::write(&path, "\"a\"\n{\"b\": 1}\n").unwrap();
        assert!(matches!(read_jsonl::<String>(&path), Err(TraceError::BadLine { line: 2, .. })));
        // Anywhere else it is an error naming the line.
        std::fs::write(&path, [&b"\"a\"\n\"\xC3\"\n"[..], b"\"c\"\n"].concat()).unwrap();
        assert!(matches!(read_jsonl::<String>(&path), Err(TraceError::BadLine { line: 2, .. })));
    }

    /// Regression (issue 35, fuzzing): a kill between a record and its newline left a whole
    /// record that readers count, and reopening cut it off: the resumed run skipped the
    /// episode as done and the trace lost it.
    #[test]
    fn r35_4_a_whole_record_without_its_newline_is_kept_on_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"n\":1}\n{\"n\":2}").unwrap();
        assert_eq!(read_jsonl::<serde_json::Value>(&path).unwrap().records.len(), 2);
        let mut w = TraceWriter::open(&path).unwrap();
        w.append(&serde_json::json!({"n": 3})).unwrap();
        let c = read_jsonl::<serde_json::Value>(&path).unwrap();
        assert_eq!(c.records.len(), 3);
        assert!(!c.torn_tail);
        // A torn one is still cut, and so is a spoiled last line that kept its newline.
        for tail in ["{\"n\":", "\u{0}{\"n\":2}\n", "{\"n\":\n\n"] {
            std::fs::write(&path, format!("{{\"n\":1}}\n{tail}")).unwrap();
            TraceWriter::open(&path).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"n\":1}\n", "{tail:?}");
        }
    }
}

//! The JSONL trace: one [`EpisodeRecord`] per line, appended and flushed as each task ends,
//! so a killed run keeps what it did. Reading skips a torn last line (the write the kill
//! interrupted) and reports it; any other line that does not parse is an error naming the file
//! and the line. An append that a full disk cuts short is taken back whole
//! ([`onebrain_durable::AppendFile`]), so a log never holds half a line in its middle. A
//! resumed run skips the (task, strategy) pairs already there.
//! An evaluation's line is a [`TraceRow`]: the episode's record with what the evaluation knows
//! of its task beside it (its size), which readers of the bare record ignore.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};

use onebrain_durable::AppendFile;
use std::path::{Path, PathBuf};

use onebrain_roles::{EpisodeRecord, Strategy};
use serde::{Deserialize, Serialize};

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
    /// A record could not be appended whole, or the log could not be rewritten (a full disk
    /// among the causes): the file keeps every record it had.
    #[error(transparent)]
    Write(#[from] onebrain_durable::Error),
}

/// One line of an evaluation's trace: the episode, and beside its fields what the
/// evaluation knows of the task that the episode does not record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRow {
    /// The episode, its fields at the top level of the line as in every trace.
    #[serde(flatten)]
    pub record: EpisodeRecord,
    /// Objects the task's reference problem declares (its size bucket in the report).
    /// Absent for a task without a reference, and in traces written before it was recorded,
    /// which still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_objects: Option<u32>,
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

/// [`read_trace`], with each record's [`TraceRow`] fields.
pub fn read_trace_rows(path: &Path) -> Result<TraceContents<TraceRow>, TraceError> {
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
    // not UTF-8, and reading the file as text would refuse the whole trace (found by fuzzing).
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
            // any other line, and [`TraceWriter::open`] judges the same way.
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

/// Appends records to a trace, one flushed line each, each whole or not at all.
#[derive(Debug)]
pub struct TraceWriter {
    file: AppendFile,
    /// The bytes of a torn last line that opening cut off, if it cut one.
    dropped: Option<usize>,
}

impl TraceWriter {
    /// Opens `path` for appending (creating it and its folder). A torn last line left by a
    /// killed run (the last line that is not blank and not a whole JSON value, which is what
    /// [`read_jsonl`] drops) is cut off first, and a whole last record missing its newline
    /// gets one, so the next record starts on a line of its own. [`TraceWriter::dropped_tail`]
    /// says whether a line was cut.
    pub fn open(path: &Path) -> Result<TraceWriter, TraceError> {
        let io = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut dropped = None;
        if let Ok(text) = std::fs::read(path) {
            // The last line that is not blank: where a kill leaves a torn write.
            let end = text.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
            let start = text[..end].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let last = &text[start..end];
            if is_json(last) {
                // A whole record, which readers count. If the kill cut its newline off, it
                // gets one: cutting it would lose an episode a resumed run then skips as done
                // (found by fuzzing).
                if !text[end..].contains(&b'\n') {
                    let mut f = OpenOptions::new().append(true).open(path).map_err(io)?;
                    f.write_all(b"\n").map_err(|e| onebrain_durable::Error::write(path, e))?;
                }
            } else if start < text.len() {
                // What readers drop as torn is cut, newline or not, so the next record does
                // not leave it behind as a bad line in the middle (found by fuzzing).
                let f = OpenOptions::new().write(true).open(path).map_err(io)?;
                f.set_len(start as u64).map_err(io)?;
                dropped = Some(end - start);
            }
        }
        Ok(TraceWriter { file: AppendFile::open(path)?, dropped })
    }

    /// Appends one record and flushes it to the OS. A write that fails part way (a full disk)
    /// is cut back, so the trace keeps every record before it and nothing of this one.
    /// Any record serialises: training logs its own lines (episodes with their update and
    /// slot, metrics) through the same writer.
    pub fn append(&mut self, record: &impl serde::Serialize) -> Result<(), TraceError> {
        let mut line = serde_json::to_string(record).map_err(TraceError::Serialize)?;
        line.push('\n');
        Ok(self.file.append(line.as_bytes())?)
    }

    /// Syncs every record so far to the disk ([`AppendFile::sync`]): a checkpoint that counts
    /// on them is written after this, so an OS crash cannot leave it ahead of its log.
    pub fn sync(&mut self) -> Result<(), TraceError> {
        Ok(self.file.sync()?)
    }

    /// Whether every record so far is synced to the disk.
    pub fn is_synced(&self) -> bool {
        self.file.is_synced()
    }

    /// The trace file.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The length in bytes of the torn last line opening cut off (a killed run's), if it cut
    /// one: the caller says so.
    pub fn dropped_tail(&self) -> Option<usize> {
        self.dropped
    }
}

/// What [`retain_jsonl`] did to a log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retained {
    /// Records kept.
    pub kept: usize,
    /// Whole records the predicate refused, now gone.
    pub removed: usize,
    /// Whether a torn last line (a killed write) was dropped.
    pub torn_tail: bool,
}

/// Keeps only the records of the JSONL log at `path` that `keep` accepts, by [`read_jsonl`]'s
/// rules (a torn last line is dropped, any other bad line is an error naming it). Kept lines
/// stay byte for byte; the file is replaced atomically, and only when something goes, so a
/// kill or a full disk while it is rewritten leaves the old log. A missing file stays missing.
pub fn retain_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
    keep: impl Fn(&T) -> bool,
) -> Result<Retained, TraceError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Retained::default()),
        Err(source) => return Err(TraceError::Io { path: path.to_path_buf(), source }),
    };
    let mut out = Retained::default();
    let mut text: Vec<u8> = Vec::with_capacity(bytes.len());
    for line in jsonl_lines(path, &bytes)? {
        match line {
            Line::Record(raw) => match serde_json::from_slice::<T>(raw) {
                Ok(r) if keep(&r) => {
                    out.kept += 1;
                    text.extend_from_slice(raw);
                    text.push(b'\n');
                }
                Ok(_) => out.removed += 1,
                Err(e) => return Err(bad_line(path, raw, &bytes, e)),
            },
            Line::Torn => out.torn_tail = true,
        }
    }
    if out.removed > 0 || out.torn_tail {
        onebrain_durable::write_atomic(path, &text)?;
    }
    Ok(out)
}

/// A non-blank line of a JSONL log.
enum Line<'a> {
    /// A whole JSON value.
    Record(&'a [u8]),
    /// The last line, not a whole JSON value: a write a kill cut short.
    Torn,
}

/// The log's non-blank lines: whole values, and a torn last line; any other line that is not
/// a whole JSON value is an error naming it.
fn jsonl_lines<'a>(path: &Path, bytes: &'a [u8]) -> Result<Vec<Line<'a>>, TraceError> {
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let blank = |l: &[u8]| l.iter().all(u8::is_ascii_whitespace);
    let last = lines.iter().rposition(|l| !blank(l));
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if blank(line) {
            continue;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
            Ok(_) => out.push(Line::Record(line)),
            Err(_) if Some(i) == last => out.push(Line::Torn),
            Err(e) => {
                return Err(TraceError::BadLine { path: path.to_path_buf(), line: i + 1, message: e.to_string() })
            }
        }
    }
    Ok(out)
}

/// The error of `raw`, a line of `bytes` that is JSON but not the record expected.
fn bad_line(path: &Path, raw: &[u8], bytes: &[u8], e: serde_json::Error) -> TraceError {
    // `raw` borrows from `bytes`: its offset gives its line number.
    let offset = raw.as_ptr() as usize - bytes.as_ptr() as usize;
    let line = bytes[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
    TraceError::BadLine { path: path.to_path_buf(), line, message: e.to_string() }
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

    /// Regression (found by fuzzing): a write killed inside a multi-byte character left a
    /// torn line that is not UTF-8, and the whole trace became unreadable.
    #[test]
    fn a_torn_line_cut_inside_a_character_is_dropped() {
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

    /// Regression (found by fuzzing): a kill between a record and its newline left a whole
    /// record that readers count, and reopening cut it off: the resumed run skipped the
    /// episode as done and the trace lost it.
    #[test]
    fn a_whole_record_without_its_newline_is_kept_on_reopening() {
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

    #[test]
    fn retaining_keeps_lines_byte_for_byte_and_rewrites_only_when_something_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episodes.jsonl");
        // Spacing a serialiser would not write: kept lines must stay as they are.
        std::fs::write(&path, "{\"u\": 0}\n{\"u\":1}\n{\"u\": 2}\n{\"u\": 3").unwrap();
        let done = retain_jsonl(&path, |r: &serde_json::Value| r["u"].as_u64() <= Some(1)).unwrap();
        assert_eq!(done, Retained { kept: 2, removed: 1, torn_tail: true });
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"u\": 0}\n{\"u\":1}\n");
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(retain_jsonl(&path, |_: &serde_json::Value| true).unwrap().removed, 0);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), before);
        // A corrupt line in the middle is an error naming the file and the line, and the log
        // is left as it is.
        std::fs::write(&path, "{\"u\": 0}\n{\"u\"\n{\"u\": 2}\n").unwrap();
        let err = retain_jsonl(&path, |_: &serde_json::Value| false).unwrap_err().to_string();
        assert!(err.contains("episodes.jsonl, line 2"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
        assert!(retain_jsonl(&dir.path().join("absent"), |_: &serde_json::Value| true).unwrap() == Retained::default());
    }

    /// A full disk part way through an append: the partial line is cut back, so the trace keeps
    /// every record, and the next append, once there is space, does not leave half a line in
    /// the middle of the trace (which would make the whole trace unreadable). Before, the
    /// partial line stayed.
    #[test]
    fn a_full_disk_mid_append_leaves_no_half_line_in_the_trace() {
        let disk = match onebrain_durable::SmallDisk::mount(128 * 1024) {
            Ok(d) => d,
            Err(why) => return eprintln!("skipping: {why}"),
        };
        let path = disk.path().join("out/trace.jsonl");
        let mut w = TraceWriter::open(&path).unwrap();
        w.append(&serde_json::json!({"n": 1})).unwrap();
        disk.fill_to(4096).unwrap();
        let big = serde_json::json!({"n": 2, "text": "z".repeat(64 * 1024)});
        let err = w.append(&big).unwrap_err();
        assert!(err.to_string().contains("trace.jsonl: the disk is full"), "{err}");
        disk.unfill();
        w.append(&big).unwrap();
        let c = read_jsonl::<serde_json::Value>(&path).unwrap();
        assert_eq!((c.records.len(), c.torn_tail), (2, false));
    }

    /// Opening says when it cut a torn last line, so that the run can say it dropped it.
    #[test]
    fn opening_reports_the_torn_line_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"n\":1}\n{\"n\":").unwrap();
        assert_eq!(TraceWriter::open(&path).unwrap().dropped_tail(), Some(5));
        assert_eq!(TraceWriter::open(&path).unwrap().dropped_tail(), None);
    }
}

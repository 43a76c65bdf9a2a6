//! The run's append-only JSONL logs (`episodes.jsonl`, `metrics.jsonl`, `heldout.jsonl`,
//! `skipped-twins.jsonl`), reopened on resume.

use std::path::Path;

use onebrain_eval::{retain_jsonl, TraceWriter};

use crate::error::TrainError;

/// Opens the JSONL log at `path` for appending after dropping the rows `keep` refuses: a
/// resumed run's logs must end where its checkpoint's parameters do, or the updates after the
/// checkpoint, which run again, would be in them twice. Kept lines stay byte for byte; the log
/// is replaced atomically, so a kill or a full disk meanwhile leaves it as it was. A torn last
/// line is dropped; any other line that is not a `T` is an error naming the file and the line.
/// What was dropped goes to `notes`, for the run to say.
pub(crate) fn reopen_log<T: serde::de::DeserializeOwned>(
    path: &Path,
    keep: impl Fn(&T) -> bool,
    notes: &mut Vec<String>,
) -> Result<TraceWriter, TrainError> {
    let done = retain_jsonl(path, keep)?;
    if done.torn_tail {
        notes.push(format!("{}: dropped a torn last line (a write the previous run did not finish)", path.display()));
    }
    if done.removed > 0 {
        notes.push(format!(
            "{}: removed {} line(s) written after the checkpoint this run resumes from (their updates run again)",
            path.display(),
            done.removed
        ));
    }
    Ok(TraceWriter::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reopening says what it dropped: a torn last line (before, dropped without a word) and
    /// the lines past the checkpoint; a corrupt line in the middle is an error naming the file
    /// and the line, and the log is left as it was.
    #[test]
    fn reopening_a_log_says_what_it_dropped_and_refuses_a_corrupt_middle_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episodes.jsonl");
        std::fs::write(&path, "{\"update\":0}\n{\"update\":1}\n{\"update\":2}\n{\"upd").unwrap();
        let mut notes = Vec::new();
        let mut w = reopen_log(&path, |r: &serde_json::Value| r["update"].as_u64() <= Some(1), &mut notes).unwrap();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("episodes.jsonl: dropped a torn last line"), "{}", notes[0]);
        assert!(notes[1].contains("removed 1 line(s) written after the checkpoint"), "{}", notes[1]);
        w.append(&serde_json::json!({"update": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"update\":0}\n{\"update\":1}\n{\"update\":1}\n");

        let spoiled = "{\"update\":0}\n{\"upd\n{\"update\":1}\n";
        std::fs::write(&path, spoiled).unwrap();
        let err = reopen_log(&path, |_: &serde_json::Value| true, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("episodes.jsonl, line 2"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), spoiled);
    }
}

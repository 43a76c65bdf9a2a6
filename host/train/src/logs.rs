//! The run's append-only JSONL logs (`metrics.jsonl`, `heldout.jsonl`), reopened on resume.

use std::fs;
use std::path::Path;

use onebrain_eval::TraceWriter;
use serde::Serialize;

use crate::error::TrainError;

/// Opens the JSONL log at `path` for appending after dropping the rows `keep` refuses: a
/// resumed run's logs must end where its checkpoint's parameters do.
pub(crate) fn reopen_log<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
    keep: impl Fn(&T) -> bool,
) -> Result<TraceWriter, TrainError> {
    let rows: Vec<T> = onebrain_eval::read_jsonl(path)?.records;
    let text: String = rows
        .iter()
        .filter(|r| keep(r))
        .map(|r| serde_json::to_string(r).expect("a row serialises") + "\n")
        .collect();
    fs::write(path, text).map_err(|e| TrainError::io(path, e))?;
    Ok(TraceWriter::open(path)?)
}

//! Which plugin components a run's results came from: `plugins.json` in its folder.
//!
//! A plugin is read once and compiled from memory, so a run keeps the version it loaded even if
//! its `.wasm` is replaced meanwhile. What a replacement can do is split a run in two: results
//! before a resume from one version, after it from another. So the first run of a folder
//! records each loaded plugin's SHA-256, and a run that resumes there with a plugin whose
//! component differs is refused, naming the plugin and both digests, before it writes a result.
//! Plugins the record lacks (a config that added one) are added to it.

use std::path::{Path, PathBuf};

use onebrain_runtime::PluginDigest;
use serde::{Deserialize, Serialize};

/// The record's file name in a run folder.
pub const PLUGINS_FILE: &str = "plugins.json";

/// What `plugins.json` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginRecord {
    /// Every plugin the folder's runs loaded, by name.
    plugins: Vec<PluginDigest>,
}

/// Why a run folder's plugins cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum PluginRecordError {
    /// A plugin's component differs from the one the folder's results so far came from.
    #[error(
        "plugin `{name}` changed since this run began: {} records its component as sha256 {recorded}, \
         the one loaded now is sha256 {loaded}; resuming would mix the two versions' results. Put \
         the recorded version back to resume, or start a new run in another folder",
        record.display()
    )]
    Changed {
        /// The record.
        record: PathBuf,
        /// The plugin.
        name: String,
        /// The digest the record holds.
        recorded: String,
        /// The digest of the component loaded now.
        loaded: String,
    },
    /// The record could not be read or does not parse.
    #[error("{}: {message}", path.display())]
    Unreadable {
        /// The record.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The record could not be written whole.
    #[error(transparent)]
    Write(#[from] onebrain_durable::Error),
}

/// Checks the plugins loaded now (`loaded`) against `dir/plugins.json`, and records those it
/// lacks (all of them in a new folder). A plugin the record names with another digest is
/// [`PluginRecordError::Changed`], and nothing is written.
pub fn check_plugins(dir: &Path, loaded: &[PluginDigest]) -> Result<(), PluginRecordError> {
    let path = dir.join(PLUGINS_FILE);
    let mut record = read_record(&path)?;
    same_components(&path, &record, loaded)?;
    let mut added = false;
    for p in loaded {
        if !record.plugins.iter().any(|r| r.name == p.name) {
            record.plugins.push(p.clone());
            added = true;
        }
    }
    if added {
        std::fs::create_dir_all(dir).map_err(|e| onebrain_durable::Error::write(&path, e))?;
        let text = serde_json::to_string_pretty(&record).expect("a plugin record serialises") + "\n";
        onebrain_durable::write_atomic(&path, text)?;
    }
    Ok(())
}

/// Checks the plugins loaded now against `dir/plugins.json` without writing to it: a folder
/// another process records into (another actor of a job array) can refuse a mix of versions
/// without two writers of one record. A missing record agrees with anything.
pub fn check_plugins_against(dir: &Path, loaded: &[PluginDigest]) -> Result<(), PluginRecordError> {
    let path = dir.join(PLUGINS_FILE);
    let record = read_record(&path)?;
    same_components(&path, &record, loaded)
}

/// [`PluginRecordError::Changed`] for the first loaded plugin that `record` (read from
/// `path`) names with another digest.
fn same_components(path: &Path, record: &PluginRecord, loaded: &[PluginDigest]) -> Result<(), PluginRecordError> {
    for p in loaded {
        if let Some(r) = record.plugins.iter().find(|r| r.name == p.name && r.sha256 != p.sha256) {
            return Err(PluginRecordError::Changed {
                record: path.to_path_buf(),
                name: p.name.clone(),
                recorded: r.sha256.clone(),
                loaded: p.sha256.clone(),
            });
        }
    }
    Ok(())
}

fn read_record(path: &Path) -> Result<PluginRecord, PluginRecordError> {
    let unreadable = |message: String| PluginRecordError::Unreadable { path: path.to_path_buf(), message };
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| unreadable(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PluginRecord::default()),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(name: &str, sha: &str) -> PluginDigest {
        PluginDigest { name: name.into(), version: "0.1.0".into(), sha256: sha.into() }
    }

    #[test]
    fn a_changed_component_is_refused_naming_the_plugin_and_both_digests() {
        let dir = tempfile::tempdir().unwrap();
        check_plugins(dir.path(), &[digest("paper-rewards", "aaa"), digest("blocksworld", "bbb")]).unwrap();
        // The same components resume; a plugin the record lacks is added.
        check_plugins(dir.path(), &[digest("paper-rewards", "aaa"), digest("gripper", "ccc")]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(PLUGINS_FILE)).unwrap();
        assert!(text.contains("gripper") && text.contains("blocksworld"), "{text}");
        let err = check_plugins(dir.path(), &[digest("blocksworld", "ddd")]).unwrap_err().to_string();
        assert!(err.contains("plugin `blocksworld` changed") && err.contains("sha256 bbb") && err.contains("sha256 ddd"), "{err}");
        assert!(err.contains("plugins.json"), "{err}");
        // Checked against without a write: a missing record agrees, a changed digest does not.
        let other = tempfile::tempdir().unwrap();
        check_plugins_against(other.path(), &[digest("blocksworld", "ddd")]).unwrap();
        assert!(!other.path().join(PLUGINS_FILE).exists(), "checking against writes nothing");
        let err = check_plugins_against(dir.path(), &[digest("blocksworld", "ddd")]).unwrap_err().to_string();
        assert!(err.contains("plugin `blocksworld` changed"), "{err}");
        check_plugins_against(dir.path(), &[digest("blocksworld", "bbb"), digest("new", "eee")]).unwrap();
        std::fs::write(dir.path().join(PLUGINS_FILE), "{").unwrap();
        let err = check_plugins(dir.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("plugins.json: "), "{err}");
    }
}

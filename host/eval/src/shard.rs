//! Evaluation over a job array: `--shard K/N` runs the K-th of N deterministic slices of the
//! run's (strategy, task) list into a folder of its own; `--merge` joins the slices into the
//! run's trace and writes the one report.
//!
//! The run's episodes are listed in one order: the config's strategies, and within each its
//! tasks as the benchmarks list them. Episode `i` belongs to shard `i mod N`, so every shard
//! gets a share of every strategy and domain. A shard lives in `OUT/shards/K-of-N/`: its
//! trace, its own report (to watch it), and `shard.json`, which names the episodes it holds
//! and the digest of the config that planned them. A shard skips episodes already in its own
//! trace or in the run's `OUT/trace.jsonl`, so it resumes like an unsharded run, and shards
//! can finish a run that began unsharded. The merge needs neither the model nor the plugins:
//! the manifests list the episodes, and the traces hold them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use onebrain_roles::Strategy;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::EvalConfig;
use crate::trace::{read_trace, read_trace_rows, TraceRow, TraceWriter};

/// One slice of a run: the `index`-th of `count` (`0 ≤ index < count`), as `K/N` on the
/// command line, where a job array's task id is `K`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    /// K: which slice, from 0.
    pub index: usize,
    /// N: how many slices.
    pub count: usize,
}

impl Shard {
    /// Whether episode `i` of the run's list is in this slice.
    pub fn holds(&self, i: usize) -> bool {
        i % self.count == self.index
    }

    /// The slice's folder inside the run's out-dir.
    pub fn dir(&self, out_dir: &Path) -> PathBuf {
        out_dir.join("shards").join(format!("{}-of-{}", self.index, self.count))
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: expected K/N with 0 ≤ K < N, e.g. 3/8 (K is a job array's task id)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// One episode of the run's list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedEpisode {
    /// Its place in the run's list.
    pub index: usize,
    /// The strategy.
    pub strategy: Strategy,
    /// The task id.
    pub task: String,
}

/// `shard.json`: what a shard holds and which config planned it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardManifest {
    /// [`config_digest`] of the config the shard ran.
    pub config_digest: String,
    /// K.
    pub shard: usize,
    /// N.
    pub of: usize,
    /// Episodes in the whole run.
    pub total: usize,
    /// The shard's episodes, in the run's order.
    pub episodes: Vec<PlannedEpisode>,
}

/// Why a shard could not run or the shards could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A `shard.json` does not parse.
    #[error("{path} is not a shard manifest: {message}")]
    BadManifest {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        message: String,
    },
    /// A shard was planned by a different config (or, for the same config, a different task
    /// list: the data changed under it).
    #[error("{path} belongs to another run: {why}; merge it with the config it ran, or remove its folder to run it again")]
    Foreign {
        /// The manifest.
        path: PathBuf,
        /// What differs.
        why: String,
    },
    /// No shard has run.
    #[error("no shards to merge in {dir}: run `onebrain eval --config C --shard K/N` for K = 0..N first")]
    NoShards {
        /// The `shards` folder.
        dir: PathBuf,
    },
    /// Some episodes are in no trace.
    #[error("{missing} of {total} episodes are in no trace yet, so the report would be partial: {which}")]
    Incomplete {
        /// Episodes missing.
        missing: usize,
        /// Episodes in the run.
        total: usize,
        /// Which shards to (re)run.
        which: String,
    },
    /// A trace could not be read or written.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// A manifest could not be written whole (a full disk among the causes).
    #[error(transparent)]
    Write(#[from] onebrain_durable::Error),
    /// `--shard` on a config with transfer benchmarks, which are not sharded.
    #[error("--shard splits the [[benchmarks]]; this config also has [[transfer]] benchmarks, which run unsharded: give them a config of their own")]
    Transfer,
}

/// sha256 of the config with what cannot change a result blanked: the run's name and
/// out-dir, the report's statistics (applied at the merge), and the hardware (`in-flight`,
/// the solver's `workers`, the model's `device`), which each machine of an array may set to
/// fit itself.
pub fn config_digest(cfg: &EvalConfig) -> String {
    let mut c = cfg.clone();
    c.name = String::new();
    c.out_dir = PathBuf::new();
    c.in_flight = 0;
    c.solver.workers = 0;
    c.model.device = Default::default();
    c.report = Default::default();
    let json = serde_json::to_string(&c).expect("an eval config serialises");
    hex::encode(Sha256::digest(json.as_bytes()))
}

/// Records `manifest` as the shard's in `dir`, or checks it against the one a previous run
/// of the shard wrote there.
pub(crate) fn claim(dir: &Path, manifest: &ShardManifest) -> Result<(), ShardError> {
    let path = dir.join("shard.json");
    if path.is_file() {
        let found = read_manifest(&path)?;
        if let Some(why) = difference(&found, manifest) {
            return Err(ShardError::Foreign { path, why });
        }
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|source| ShardError::Io { path: path.clone(), source })?;
    let text = serde_json::to_string_pretty(manifest).expect("a manifest serialises");
    Ok(onebrain_durable::write_atomic(&path, text)?)
}

fn difference(found: &ShardManifest, want: &ShardManifest) -> Option<String> {
    if found.config_digest != want.config_digest {
        Some(format!("its config digest is {}, this config's is {}", short(&found.config_digest), short(&want.config_digest)))
    } else if (found.shard, found.of, found.total) != (want.shard, want.of, want.total) || found.episodes != want.episodes {
        Some(format!(
            "it holds {} of {} episodes as shard {}/{}, but this config's task list gives it {} of {}: the data changed",
            found.episodes.len(),
            found.total,
            found.shard,
            found.of,
            want.episodes.len(),
            want.total
        ))
    } else {
        None
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

fn read_manifest(path: &Path) -> Result<ShardManifest, ShardError> {
    let text = std::fs::read_to_string(path).map_err(|source| ShardError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text).map_err(|e| ShardError::BadManifest { path: path.to_path_buf(), message: e.to_string() })
}

/// What [`merge_shards`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// Shards read.
    pub shards: usize,
    /// Episodes in the run.
    pub total: usize,
    /// Records appended to the run's trace now (the rest were there already).
    pub appended: usize,
}

/// Joins the shards in `out_dir/shards/` into `trace` (the run's trace): checks that every
/// shard was planned by the config whose digest is `digest` and that every episode of the
/// run is in some trace, then appends the records `trace` lacks, in the run's order. A
/// merge loses nothing (records already in `trace` stay) and can be repeated.
pub fn merge_shards(out_dir: &Path, trace: &Path, digest: &str) -> Result<Merged, ShardError> {
    let dir = out_dir.join("shards");
    let mut manifests: Vec<(PathBuf, ShardManifest)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = entry.path().join("shard.json");
            if path.is_file() {
                let m = read_manifest(&path)?;
                manifests.push((path, m));
            }
        }
    }
    if manifests.is_empty() {
        return Err(ShardError::NoShards { dir });
    }
    manifests.sort_by_key(|(_, m)| (m.of, m.shard));
    let total = manifests[0].1.total;
    for (path, m) in &manifests {
        if m.config_digest != digest {
            let why = format!("its config digest is {}, this config's is {}", short(&m.config_digest), short(digest));
            return Err(ShardError::Foreign { path: path.clone(), why });
        }
        if m.total != total {
            let why = format!("it plans {} episodes, another shard of this config {total}: the data changed between them", m.total);
            return Err(ShardError::Foreign { path: path.clone(), why });
        }
    }

    // The run's list, from every manifest; an index no manifest holds is a shard never run.
    let mut plan: BTreeMap<usize, &PlannedEpisode> = BTreeMap::new();
    for (_, m) in &manifests {
        for e in &m.episodes {
            plan.insert(e.index, e);
        }
    }
    let run = read_trace(trace)?;
    let in_run: std::collections::HashSet<(String, Strategy)> = run.done();
    // Whole rows, so the merged trace keeps what the shards recorded beside each episode.
    let mut found: HashMap<(String, Strategy), TraceRow> = HashMap::new();
    let mut lacking: Vec<String> = Vec::new();
    let mut missing = 0;
    for (path, m) in &manifests {
        let rows = read_trace_rows(&path.with_file_name("trace.jsonl"))?.records;
        let mut have = 0;
        for r in rows {
            found.entry((r.record.task_id.clone(), r.record.strategy)).or_insert(r);
        }
        for e in &m.episodes {
            let key = (e.task.clone(), e.strategy);
            if in_run.contains(&key) || found.contains_key(&key) {
                have += 1;
            }
        }
        if have < m.episodes.len() {
            missing += m.episodes.len() - have;
            lacking.push(format!("shard {}/{} has {have} of {}", m.shard, m.of, m.episodes.len()));
        }
    }
    // Shards never started: the indices no manifest planned, by the slicing each N implies.
    let unplanned: Vec<usize> = (0..total).filter(|i| !plan.contains_key(i)).collect();
    if !unplanned.is_empty() {
        missing += unplanned.len();
        let mut counts: Vec<usize> = manifests.iter().map(|(_, m)| m.of).collect();
        counts.dedup();
        for n in counts {
            let mut never: Vec<usize> = unplanned.iter().map(|i| i % n).collect();
            never.sort_unstable();
            never.dedup();
            lacking.extend(never.into_iter().map(|k| format!("shard {k}/{n} never ran")));
        }
    }
    if missing > 0 {
        let which = format!("{}; rerun those (each resumes from its trace), then merge again", lacking.join(", "));
        return Err(ShardError::Incomplete { missing, total, which });
    }

    let mut writer = TraceWriter::open(trace)?;
    let mut appended = 0;
    for e in plan.values() {
        let key = (e.task.clone(), e.strategy);
        if in_run.contains(&key) {
            continue;
        }
        let record = found.remove(&key).expect("checked complete above");
        writer.append(&record)?;
        appended += 1;
    }
    Ok(Merged { shards: manifests.len(), total, appended })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_as_k_of_n_and_slice_round_robin() {
        let s: Shard = "3/8".parse().unwrap();
        assert_eq!(s, Shard { index: 3, count: 8 });
        assert_eq!(s.to_string(), "3/8");
        assert!(s.holds(3) && s.holds(11) && !s.holds(4));
        for bad in ["8/8", "1/0", "3", "-1/4", "a/b", "1/2/3"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("K/N"), "{bad}: {e}");
        }
        assert_eq!(s.dir(Path::new("out")), Path::new("out/shards/3-of-8"));
    }

    #[test]
    fn the_digest_ignores_names_folders_and_parallelism_only() {
        let cfg = EvalConfig::from_toml("out-dir = \"a\"\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsample = 2").unwrap();
        let mut moved = cfg.clone();
        moved.name = "other".into();
        moved.out_dir = "b".into();
        moved.in_flight = 7;
        moved.solver.workers = 3;
        assert_eq!(config_digest(&cfg), config_digest(&moved));
        let mut changed = cfg.clone();
        changed.episode.max_tokens += 1;
        assert_ne!(config_digest(&cfg), config_digest(&changed));
    }
}

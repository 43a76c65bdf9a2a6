//! The tasks of an evaluation: PlanBench sets, Planetarium rows (Gripper), or tasks a domain
//! plugin generates from seeds. Every task carries its reference spec.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use onebrain_core::{DomainAdapter, Spec, Task};
use onebrain_roles::{domain_text_input, read_nonempty_text, read_reference, EpisodeInput, ReferenceFiles};
use serde::{Deserialize, Serialize};

use crate::planbench::{load_planbench, LoadError, PlanBenchSet};

/// Why tasks could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A PlanBench set could not be read.
    #[error(transparent)]
    PlanBench(#[from] LoadError),
    /// A benchmark table lacks a key its source needs.
    #[error("benchmark `{domain}`: source {source_kind} needs `{key}`")]
    MissingKey {
        /// The benchmark's domain.
        domain: String,
        /// Its source.
        source_kind: String,
        /// The missing key.
        key: &'static str,
    },
    /// A Planetarium file could not be read.
    #[error("cannot read {path}: {message}")]
    Planetarium {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The config names an unknown PlanBench set.
    #[error("unknown PlanBench set `{0}` (expected blocksworld, blocksworld_3, mystery_blocksworld, mystery_blocksworld_3 or logistics)")]
    UnknownSet(String),
    /// A PlanBench task id like `blocksworld/2` names no task.
    #[error("no PlanBench task `{0}`")]
    NoSuchTask(String),
    /// A problem file of a `folder` benchmark is unusable (unreadable, does not parse, or of
    /// another domain); the message names the file and the line.
    #[error(transparent)]
    ProblemFile(#[from] onebrain_roles::RolesError),
    /// A `folder` benchmark's folder cannot be listed, or holds no `.pddl` file (or a
    /// `text-folder` one no complete task).
    #[error("cannot read task folder {path}: {message}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A `text-folder` benchmark has no domain plugin, so it has no plugin's tasks.
    #[error("benchmark `{0}`: a text-folder benchmark has no domain plugin to state or generate its tasks; only `onebrain eval` runs it")]
    NoPlugin(String),
    /// The domain plugin failed to generate a task.
    #[error("domain plugin `{domain}` failed to generate seed {seed}: {message}")]
    Generate {
        /// The plugin's domain.
        domain: String,
        /// The seed.
        seed: u64,
        /// What it said.
        message: String,
    },
}

/// Where a benchmark's tasks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// A PlanBench set read in place (`set`).
    Planbench,
    /// Planetarium rows (`file`, e.g. `planetarium/gripper-train.jsonl.gz`), such as Gripper.
    Planetarium,
    /// Tasks the domain plugin generates, one per seed from `first-seed`, of `size` objects.
    Generated,
    /// A folder of problem files of the plugin's domain (`folder`, relative to the data
    /// folder unless absolute): the plugin states each in words, and the file is its
    /// reference.
    Folder,
    /// Tasks whose domain is given only in prose, for `full` mode and no plugin: `folder`
    /// (relative to the data folder unless absolute) holds `NAME.domain.txt` and
    /// `NAME.problem.txt` per task, and `reference-folder`, when given, `NAME.domain.pddl` and
    /// `NAME.problem.pddl`, the reference for the faithfulness check. `domain` only names the
    /// benchmark in the report.
    TextFolder,
}

fn default_max_objects() -> u32 {
    12
}

/// One benchmark of an evaluation: a task source, the domain plugin that describes it, and
/// how many tasks to sample.
///
/// ```toml
/// [[benchmarks]]
/// domain = "gripper"
/// source = "planetarium"
/// file = "planetarium/gripper-train.jsonl.gz"
/// sample = 5
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Benchmark {
    /// The domain plugin's name (`blocksworld`, `mystery-blocksworld`, `logistics`, `gripper`).
    pub domain: String,
    /// Where the tasks come from.
    pub source: SourceKind,
    /// PlanBench: the set (`blocksworld`, `blocksworld_3`, `mystery_blocksworld`,
    /// `mystery_blocksworld_3`, `logistics`).
    #[serde(default)]
    pub set: Option<String>,
    /// Planetarium: the rows' file, relative to the data folder.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Folder: the folder of `.pddl` problem files. Text-folder: the folder of task texts.
    #[serde(default)]
    pub folder: Option<PathBuf>,
    /// Text-folder: the folder of reference PDDL, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_folder: Option<PathBuf>,
    /// Planetarium: rows with more objects are skipped (prompts stay short).
    #[serde(default = "default_max_objects")]
    pub max_objects: u32,
    /// Generated: the first seed.
    #[serde(default)]
    pub first_seed: u64,
    /// Generated: objects per task.
    #[serde(default)]
    pub size: Option<u32>,
    /// How many tasks: spread evenly over the set (every ⌊len/n⌋-th task from `offset`).
    pub sample: usize,
    /// The first task taken.
    #[serde(default)]
    pub offset: usize,
}

/// Every `len / n`-th index from `offset`, `n` of them (fewer if the set is smaller).
fn spread(len: usize, n: usize, offset: usize) -> Vec<usize> {
    if len == 0 || n == 0 {
        return Vec::new();
    }
    let n = n.min(len);
    let stride = (len / n).max(1);
    (0..n).map(|i| (offset + i * stride) % len).collect()
}

/// The PlanBench task `set/instance` (e.g. `blocksworld/2`) as a [`Task`] of domain plugin
/// `domain`: for `onebrain solve --planbench`.
pub fn planbench_task(data: &Path, id: &str, domain: &str) -> Result<Task, TaskError> {
    let (set, instance) = id
        .split_once('/')
        .ok_or_else(|| TaskError::NoSuchTask(id.into()))?;
    let set = PlanBenchSet::from_name(set).ok_or_else(|| TaskError::UnknownSet(set.into()))?;
    let instance: u32 = instance
        .parse()
        .map_err(|_| TaskError::NoSuchTask(id.into()))?;
    load_planbench(data, set)?
        .into_iter()
        .find(|t| t.instance_id == instance)
        .map(|t| Task {
            id: format!("planbench/{}/{}", set.name(), t.instance_id),
            domain: domain.to_string(),
            text: t.nl_statement,
            reference: Some(Spec {
                domain: t.domain_pddl,
                problem: t.problem_pddl,
            }),
        })
        .ok_or_else(|| TaskError::NoSuchTask(id.into()))
}

/// The domain plugin that describes a PlanBench set.
pub fn plugin_for_set(set: &str) -> Option<&'static str> {
    match set {
        "blocksworld" | "blocksworld_3" => Some("blocksworld"),
        "mystery_blocksworld" | "mystery_blocksworld_3" => Some("mystery-blocksworld"),
        "logistics" => Some("logistics"),
        _ => None,
    }
}

#[derive(Deserialize)]
struct PlanetariumRow {
    id: u64,
    problem_pddl: String,
    natural_language: String,
    num_objects: u32,
}

impl Benchmark {
    /// The benchmark's tasks. `data` is the shared data folder; `adapter` the domain plugin
    /// (its reference domain for Planetarium rows, its generator for generated tasks).
    pub fn tasks(&self, data: &Path, adapter: &dyn DomainAdapter) -> Result<Vec<Task>, TaskError> {
        let missing = |key| TaskError::MissingKey {
            domain: self.domain.clone(),
            source_kind: format!("{:?}", self.source).to_lowercase(),
            key,
        };
        match self.source {
            SourceKind::Planbench => {
                let set = self.set.as_ref().ok_or_else(|| missing("set"))?;
                let s = PlanBenchSet::from_name(set)
                    .ok_or_else(|| TaskError::UnknownSet(set.clone()))?;
                let all = load_planbench(data, s)?;
                Ok(spread(all.len(), self.sample, self.offset)
                    .into_iter()
                    .map(|i| {
                        let t = &all[i];
                        Task {
                            id: format!("planbench/{}/{}", s.name(), t.instance_id),
                            domain: self.domain.clone(),
                            text: t.nl_statement.clone(),
                            reference: Some(Spec {
                                domain: t.domain_pddl.clone(),
                                problem: t.problem_pddl.clone(),
                            }),
                        }
                    })
                    .collect())
            }
            SourceKind::Planetarium => {
                let max_objects = &self.max_objects;
                let path = data.join(self.file.as_ref().ok_or_else(|| missing("file"))?);
                let err = |message: String| TaskError::Planetarium {
                    path: path.clone(),
                    message,
                };
                let domain_pddl = adapter
                    .domain_pddl()
                    .map_err(|e| err(format!("the {} plugin's domain: {e}", self.domain)))?;
                let f = std::fs::File::open(&path).map_err(|e| err(e.to_string()))?;
                let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
                    Box::new(BufReader::new(flate2::read::GzDecoder::new(f)))
                } else {
                    Box::new(BufReader::new(f))
                };
                // One pass, keeping only the small rows; the sample is then spread over them.
                let mut rows = Vec::new();
                for (i, line) in reader.lines().enumerate() {
                    let line = line.map_err(|e| err(e.to_string()))?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    let row: PlanetariumRow = serde_json::from_str(&line)
                        .map_err(|e| err(format!("line {}: {e}", i + 1)))?;
                    if row.num_objects <= *max_objects {
                        rows.push(row);
                    }
                }
                rows.sort_by_key(|r| r.id);
                Ok(spread(rows.len(), self.sample, self.offset)
                    .into_iter()
                    .map(|i| {
                        let r = &rows[i];
                        Task {
                            id: format!("planetarium/{}/{}", self.domain, r.id),
                            domain: self.domain.clone(),
                            text: r.natural_language.clone(),
                            reference: Some(Spec {
                                domain: domain_pddl.clone(),
                                problem: r.problem_pddl.clone(),
                            }),
                        }
                    })
                    .collect())
            }
            SourceKind::Folder => {
                let dir = data.join(self.folder.as_ref().ok_or_else(|| missing("folder"))?);
                let err = |message: String| TaskError::Folder { path: dir.clone(), message };
                let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .map_err(|e| err(e.to_string()))?
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "pddl"))
                    .collect();
                if files.is_empty() {
                    return Err(err("no .pddl file in it".into()));
                }
                files.sort();
                spread(files.len(), self.sample, self.offset)
                    .into_iter()
                    .map(|i| {
                        let mut t = onebrain_roles::task_from_problem_file(adapter, &files[i])?;
                        t.id = format!("folder/{}", t.id);
                        t.domain = self.domain.clone();
                        Ok(t)
                    })
                    .collect()
            }
            SourceKind::TextFolder => Err(TaskError::NoPlugin(self.domain.clone())),
            SourceKind::Generated => {
                let size = self.size.ok_or_else(|| missing("size"))?;
                (0..self.sample as u64)
                    .map(|i| {
                        let seed = self.first_seed + i;
                        let mut t =
                            adapter
                                .generate(seed, size)
                                .map_err(|e| TaskError::Generate {
                                    domain: self.domain.clone(),
                                    seed,
                                    message: e.to_string(),
                                })?;
                        t.id = format!("generated/{}", t.id);
                        t.domain = self.domain.clone();
                        Ok(t)
                    })
                    .collect()
            }
        }
    }

    /// A `text-folder` benchmark's tasks as episode inputs (`full` mode, no plugin): each
    /// `NAME.problem.txt` of `folder` with its `NAME.domain.txt`, and the reference PDDL of
    /// `reference-folder` when given. A missing or empty text, a missing reference, or a
    /// reference that does not parse is an error naming the file.
    pub fn text_inputs(&self, data: &Path) -> Result<Vec<EpisodeInput>, TaskError> {
        let dir = data.join(self.folder.as_ref().ok_or_else(|| TaskError::MissingKey {
            domain: self.domain.clone(),
            source_kind: "text-folder".into(),
            key: "folder",
        })?);
        let err = |message: String| TaskError::Folder { path: dir.clone(), message };
        let mut names: Vec<String> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| err(e.to_string()))?.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".problem.txt") {
                names.push(name.to_string());
            } else if let Some(name) = file.strip_suffix(".domain.txt") {
                if !dir.join(format!("{name}.problem.txt")).exists() {
                    return Err(err(format!("{file} has no {name}.problem.txt beside it")));
                }
            }
        }
        if names.is_empty() {
            return Err(err("no NAME.problem.txt in it (a task is NAME.domain.txt and NAME.problem.txt)".into()));
        }
        names.sort();
        let refs = self.reference_folder.as_ref().map(|r| data.join(r));
        spread(names.len(), self.sample, self.offset)
            .into_iter()
            .map(|i| {
                let name = &names[i];
                let description = read_nonempty_text(&dir.join(format!("{name}.domain.txt")))?;
                let text = read_nonempty_text(&dir.join(format!("{name}.problem.txt")))?;
                let reference = match &refs {
                    Some(r) => Some(read_reference(&ReferenceFiles {
                        domain: r.join(format!("{name}.domain.pddl")),
                        problem: r.join(format!("{name}.problem.pddl")),
                    })?),
                    None => None,
                };
                let mut input = domain_text_input(&self.domain, description, text, name, reference);
                input.task.id = format!("text-folder/{}", input.task.id);
                Ok(input)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_even_and_bounded() {
        assert_eq!(spread(10, 3, 0), [0, 3, 6]);
        assert_eq!(spread(10, 3, 1), [1, 4, 7]);
        assert_eq!(spread(2, 5, 0), [0, 1]);
        assert!(spread(0, 5, 0).is_empty());
    }

    #[test]
    fn benchmark_tables_parse() {
        let b: Benchmark = toml::from_str(
            "domain = \"blocksworld\"\nsource = \"planbench\"\nset = \"blocksworld\"\nsample = 5",
        )
        .unwrap();
        assert_eq!(
            (b.source, b.set.as_deref()),
            (SourceKind::Planbench, Some("blocksworld"))
        );
        let b: Benchmark =
            toml::from_str("domain = \"gripper\"\nsource = \"generated\"\nsize = 3\nsample = 2")
                .unwrap();
        assert_eq!(
            (b.source, b.size, b.first_seed),
            (SourceKind::Generated, Some(3), 0)
        );
        assert!(toml::from_str::<Benchmark>(
            "domain = \"g\"\nsource = \"planbench\"\nset = \"x\"\nsample = 1\nbogus = 2"
        )
        .is_err());
        assert_eq!(
            plugin_for_set("mystery_blocksworld_3"),
            Some("mystery-blocksworld")
        );
    }
}

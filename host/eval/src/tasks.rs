//! The tasks of an evaluation: PlanBench sets, Planetarium rows (Gripper), or tasks a domain
//! plugin generates from seeds. Every task carries its reference spec.

use std::collections::BTreeMap;
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

/// Planetarium rows' object limit when `max-objects` is not given: prompts stay short.
const PLANETARIUM_MAX_OBJECTS: u32 = 12;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Objects the problem `problem` declares in `:objects` (names, not types); `None` when it does
/// not parse. This is a task's size in the report's size buckets and in `min-objects` and
/// `max-objects`.
pub(crate) fn problem_objects(problem: &str) -> Option<u32> {
    onebrain_pddl::parse_problem(problem)
        .ok()
        .map(|p| u32::try_from(p.objects.len()).unwrap_or(u32::MAX))
}

/// `problem` with every predicate named in `rename` (as the head of a parenthesised atom)
/// renamed, and its `(:domain …)` set to `domain`: a reference problem written for another
/// spelling of the same domain, moved into the plugin's. Comments and spacing are kept.
fn rename_predicates(problem: &str, rename: &BTreeMap<String, String>, domain: &str) -> String {
    let mut out = String::with_capacity(problem.len());
    let mut rest = problem;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let head_start = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..head_start]);
        rest = &rest[head_start..];
        let head_len = rest
            .find(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ';')
            .unwrap_or(rest.len());
        let head = &rest[..head_len];
        rest = &rest[head_len..];
        if head.eq_ignore_ascii_case(":domain") {
            // `(:domain NAME)`: the name, after the spacing, is replaced.
            out.push_str(head);
            let gap = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..gap]);
            rest = &rest[gap..];
            let name_len = rest
                .find(|c: char| c.is_whitespace() || c == ')' || c == ';')
                .unwrap_or(rest.len());
            out.push_str(domain);
            rest = &rest[name_len..];
        } else {
            out.push_str(rename.get(head).map_or(head, String::as_str));
        }
    }
    out.push_str(rest);
    out
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
    /// Planetarium and PlanBench: rows whose reference problem declares fewer objects are
    /// skipped. Default 0: none is.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_objects: u32,
    /// Planetarium and PlanBench: rows whose reference problem declares more objects are
    /// skipped. When not given, Planetarium rows stop at 12 (prompts stay short) and a
    /// PlanBench set has no limit, so the configs written before the key applied to
    /// PlanBench take the tasks they always took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u32>,
    /// Planetarium: predicates renamed in each reference problem, from the file's names to
    /// the plugin's, e.g. `{ "on-table" = "ontable", "arm-empty" = "handempty" }` for
    /// Planetarium BlocksWorld (the IPC-2023 spelling of the domain) under the PlanBench
    /// `blocksworld` plugin. With any given, the problem's `(:domain …)` becomes the
    /// plugin's domain name too, so the reference checks against the plugin's domain.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rename_predicates: BTreeMap<String, String>,
    /// Planetarium: only rows whose text states the initial state and the goal fact by fact.
    /// An abstract text ("stack the blocks into a single tower") allows many states, and the
    /// faithfulness check compares an answer with the row's one reference, so such a row
    /// can count a faithful answer as unfaithful. Default false: every row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explicit_only: bool,
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
    /// 1 when the text states the initial state abstractly ("all the balls are in the first
    /// room"), so the row's reference is one of several states the text allows.
    #[serde(default)]
    init_is_abstract: u8,
    /// The same for the goal ("gather all balls into one room").
    #[serde(default)]
    goal_is_abstract: u8,
}

impl PlanetariumRow {
    /// True when the text states both the initial state and the goal fact by fact.
    fn is_explicit(&self) -> bool {
        self.init_is_abstract == 0 && self.goal_is_abstract == 0
    }
}

impl Benchmark {
    /// Whether a row of `objects` objects is in `min-objects..=max-objects`, `max-objects`
    /// defaulting to `default_max`.
    fn holds_size(&self, objects: u32, default_max: u32) -> bool {
        self.min_objects <= objects && objects <= self.max_objects.unwrap_or(default_max)
    }

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
                let mut all = load_planbench(data, s)?;
                // Only when a limit is given: with none, every row stays, whether its problem
                // parses or not, as before the limits applied to PlanBench.
                if self.min_objects > 0 || self.max_objects.is_some() {
                    all.retain(|t| problem_objects(&t.problem_pddl).is_some_and(|n| self.holds_size(n, u32::MAX)));
                }
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
                let path = data.join(self.file.as_ref().ok_or_else(|| missing("file"))?);
                let err = |message: String| TaskError::Planetarium {
                    path: path.clone(),
                    message,
                };
                let domain_pddl = adapter
                    .domain_pddl()
                    .map_err(|e| err(format!("the {} plugin's domain: {e}", self.domain)))?;
                let domain_name = if self.rename_predicates.is_empty() {
                    String::new()
                } else {
                    onebrain_pddl::parse_domain(&domain_pddl)
                        .map_err(|e| err(format!("the {} plugin's domain does not parse: {e}", self.domain)))?
                        .name
                };
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
                    // `num_objects` is the count of the problem's `:objects` in every row of the
                    // BlocksWorld and Gripper files (checked on all 129,975), and needs no parse.
                    if self.holds_size(row.num_objects, PLANETARIUM_MAX_OBJECTS) && (row.is_explicit() || !self.explicit_only) {
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
                                problem: if self.rename_predicates.is_empty() {
                                    r.problem_pddl.clone()
                                } else {
                                    rename_predicates(&r.problem_pddl, &self.rename_predicates, &domain_name)
                                },
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

    fn table(text: &str) -> Benchmark {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn size_limits_default_to_none_for_planbench_and_twelve_for_planetarium() {
        let planbench = table("domain = \"logistics\"\nsource = \"planbench\"\nset = \"logistics\"\nsample = 5");
        assert_eq!((planbench.min_objects, planbench.max_objects), (0, None));
        assert!(planbench.holds_size(24, u32::MAX) && planbench.holds_size(0, u32::MAX));
        let planetarium = table("domain = \"gripper\"\nsource = \"planetarium\"\nfile = \"g.jsonl\"\nsample = 5");
        assert!(planetarium.holds_size(12, PLANETARIUM_MAX_OBJECTS));
        assert!(!planetarium.holds_size(13, PLANETARIUM_MAX_OBJECTS));
        let bounded = table(
            "domain = \"gripper\"\nsource = \"planetarium\"\nfile = \"g.jsonl\"\nmin-objects = 6\nmax-objects = 15\nsample = 5",
        );
        let held: Vec<u32> = (0..20).filter(|&n| bounded.holds_size(n, PLANETARIUM_MAX_OBJECTS)).collect();
        assert_eq!(held, (6..=15).collect::<Vec<_>>());
        // Not given, the keys are left out of the serialised config (which the shard digest
        // hashes), so it says nothing a config did not.
        let json = serde_json::to_value(&planbench).unwrap();
        assert!(json.get("min_objects").is_none() && json.get("max_objects").is_none(), "{json}");
    }

    #[test]
    fn problem_objects_counts_names_not_types() {
        let typed = "(define (problem p) (:domain d) (:objects a b - block r - room c) (:init) (:goal (and)))";
        assert_eq!(problem_objects(typed), Some(4));
        assert_eq!(problem_objects("(define (problem p) (:domain d) (:init) (:goal (and)))"), Some(0));
        assert_eq!(problem_objects("(define (problem"), None);
    }

    /// PlanBench's BlocksWorld domain, as the `blocksworld` plugin ships it.
    fn planbench_blocksworld() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/blocksworld/domain.pddl");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn renamed_predicates_move_a_planetarium_reference_into_the_plugins_domain() {
        let planetarium = "(define (problem swap_2)\n    (:domain blocksworld)\n    (:requirements :strips)\n    (:objects b1 b2)\n    (:init (arm-empty) (clear b2) (on b2 b1) (on-table b1) ; a note (arm-empty)\n    )\n    (:goal (and (arm-empty) (on-table b2) (on b1 b2) (clear b1)))\n)";
        let rename: BTreeMap<String, String> =
            [("on-table", "ontable"), ("arm-empty", "handempty")].map(|(a, b)| (a.to_string(), b.to_string())).into();
        let moved = rename_predicates(planetarium, &rename, "blocksworld-4ops");
        assert_eq!(
            moved,
            "(define (problem swap_2)\n    (:domain blocksworld-4ops)\n    (:requirements :strips)\n    (:objects b1 b2)\n    (:init (handempty) (clear b2) (on b2 b1) (ontable b1) ; a note (handempty)\n    )\n    (:goal (and (handempty) (ontable b2) (on b1 b2) (clear b1)))\n)"
        );
        let errors: Vec<_> = onebrain_pddl::check_sources(&planbench_blocksworld(), &moved)
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        // Before the renaming the reference does not even name the plugin's domain.
        assert!(onebrain_pddl::check_sources(&planbench_blocksworld(), planetarium).iter().any(|d| d.is_error()));
        // Only whole names at the head of an atom: objects and longer names are left alone.
        let odd = "(define (problem p) (:domain x) (:objects on-table) (:init (on-tables on-table)) (:goal (and)))";
        assert_eq!(
            rename_predicates(odd, &rename, "y"),
            "(define (problem p) (:domain y) (:objects on-table) (:init (on-tables on-table)) (:goal (and)))"
        );
    }

    /// An adapter that only has a domain: PlanBench rows need none, Planetarium rows its
    /// reference domain.
    struct DomainOnly(String);
    impl DomainAdapter for DomainOnly {
        fn name(&self) -> String {
            "domain-only".into()
        }
        fn description(&self) -> Result<String, onebrain_core::BoxError> {
            Ok(String::new())
        }
        fn domain_pddl(&self) -> Result<String, onebrain_core::BoxError> {
            Ok(self.0.clone())
        }
        fn generate(&self, _: u64, _: u32) -> Result<Task, onebrain_core::BoxError> {
            Err("no generator".into())
        }
        fn describe(&self, _: &str) -> Result<String, onebrain_core::BoxError> {
            Ok(String::new())
        }
    }

    fn data() -> Option<PathBuf> {
        let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
        if data.is_dir() {
            Some(data)
        } else {
            eprintln!("skipping: {} is absent", data.display());
            None
        }
    }

    fn sizes(tasks: &[Task]) -> Vec<u32> {
        tasks.iter().map(|t| problem_objects(&t.reference.as_ref().unwrap().problem).unwrap()).collect()
    }

    #[test]
    fn planbench_rows_are_chosen_by_size_only_when_a_limit_is_given() {
        let Some(data) = data() else { return };
        let adapter = DomainOnly(String::new());
        // No limit: the rows spread over the whole set, as before the keys applied here.
        let plain = table("domain = \"blocksworld\"\nsource = \"planbench\"\nset = \"blocksworld\"\nsample = 10");
        let all = load_planbench(&data, PlanBenchSet::Blocksworld).unwrap();
        let expected: Vec<String> =
            spread(all.len(), 10, 0).into_iter().map(|i| format!("planbench/blocksworld/{}", all[i].instance_id)).collect();
        let ids: Vec<String> = plain.tasks(&data, &adapter).unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(ids, expected);
        // Every PlanBench problem parses, so a limit drops rows only for their size.
        for set in PlanBenchSet::ALL {
            assert!(load_planbench(&data, set).unwrap().iter().all(|t| problem_objects(&t.problem_pddl).is_some()), "{set:?}");
        }
        let five = table("domain = \"blocksworld\"\nsource = \"planbench\"\nset = \"blocksworld\"\nmin-objects = 5\nsample = 10");
        let tasks = five.tasks(&data, &adapter).unwrap();
        assert_eq!((tasks.len(), sizes(&tasks)), (10, vec![5; 10]));
        let big = table("domain = \"logistics\"\nsource = \"planbench\"\nset = \"logistics\"\nmin-objects = 12\nsample = 30");
        let tasks = big.tasks(&data, &adapter).unwrap();
        assert_eq!(tasks.len(), 30);
        assert!(sizes(&tasks).iter().all(|&n| (12..=24).contains(&n)), "{:?}", sizes(&tasks));
        let small = table("domain = \"logistics\"\nsource = \"planbench\"\nset = \"logistics\"\nmax-objects = 9\nsample = 30");
        let mut few = sizes(&small.tasks(&data, &adapter).unwrap());
        few.sort_unstable();
        assert_eq!(few, [8, 9, 9, 9], "PlanBench Logistics has 4 rows of 8-9 objects");
    }

    #[test]
    fn planetarium_rows_keep_their_default_and_take_a_size_range() {
        let Some(data) = data() else { return };
        let adapter = DomainOnly(planbench_blocksworld());
        let ids = |t: Vec<Task>| t.into_iter().map(|t| t.id).collect::<Vec<_>>();
        let base = "domain = \"blocksworld\"\nsource = \"planetarium\"\nfile = \"planetarium/blocksworld-train.jsonl.gz\"\nsample = 20\n";
        let default = table(base).tasks(&data, &adapter).unwrap();
        assert!(sizes(&default).iter().all(|&n| n <= 12));
        let twelve = table(&format!("{base}max-objects = 12")).tasks(&data, &adapter).unwrap();
        assert_eq!(ids(default), ids(twelve), "no `max-objects` is 12, as before");
        let ranged = table(&format!(
            "{base}min-objects = 6\nmax-objects = 15\nrename-predicates = {{ \"on-table\" = \"ontable\", \"arm-empty\" = \"handempty\" }}"
        ))
        .tasks(&data, &adapter)
        .unwrap();
        assert_eq!(ranged.len(), 20);
        assert!(sizes(&ranged).iter().all(|&n| (6..=15).contains(&n)), "{:?}", sizes(&ranged));
        for t in &ranged {
            let spec = t.reference.as_ref().unwrap();
            let errors: Vec<_> =
                onebrain_pddl::check_sources(&spec.domain, &spec.problem).into_iter().filter(|d| d.is_error()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", t.id);
        }
    }
}

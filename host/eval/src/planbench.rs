//! PlanBench tasks, read in place from `../shared/data/planbench`.
//!
//! Each `nl_tasks_<set>.jsonl` row names its problem file and carries the
//! task's NL statement and a ground-truth plan. BlocksWorld plans name blocks
//! by colour (`(unstack yellow orange)`); [`PlanBenchTask::ground_truth_plan`]
//! is decoded back to the PDDL objects through the set's `encoded_objects`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The PlanBench sets that ship with NL statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanBenchSet {
    /// BlocksWorld, 4–5 blocks (500 tasks).
    Blocksworld,
    /// BlocksWorld, 3 blocks (100 tasks).
    Blocksworld3,
    /// Mystery BlocksWorld: the same states with obfuscated names (500 tasks).
    Mystery,
    /// Mystery BlocksWorld, 3 blocks (100 tasks).
    Mystery3,
    /// Logistics (285 tasks).
    Logistics,
}

impl PlanBenchSet {
    /// Every set.
    pub const ALL: [PlanBenchSet; 5] = [
        PlanBenchSet::Blocksworld,
        PlanBenchSet::Blocksworld3,
        PlanBenchSet::Mystery,
        PlanBenchSet::Mystery3,
        PlanBenchSet::Logistics,
    ];

    /// The set's folder under `planbench/` and its config name.
    fn paths(self) -> (&'static str, &'static str) {
        match self {
            PlanBenchSet::Blocksworld => ("blocksworld", "blocksworld"),
            PlanBenchSet::Blocksworld3 => ("blocksworld", "blocksworld_3"),
            PlanBenchSet::Mystery => ("mystery_blocksworld", "mystery_blocksworld"),
            PlanBenchSet::Mystery3 => ("mystery_blocksworld", "mystery_blocksworld_3"),
            PlanBenchSet::Logistics => ("logistics", "logistics"),
        }
    }

    /// The name used in configs and reports, e.g. `blocksworld_3`.
    pub fn name(self) -> &'static str {
        self.paths().1
    }

    /// Parses a config name.
    pub fn from_name(name: &str) -> Option<PlanBenchSet> {
        PlanBenchSet::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One PlanBench task.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanBenchTask {
    /// The set it comes from.
    pub set: PlanBenchSet,
    /// PlanBench's instance number (`instance-N.pddl`).
    pub instance_id: u32,
    /// The domain file's path.
    pub domain_path: PathBuf,
    /// The problem file's path.
    pub problem_path: PathBuf,
    /// The domain PDDL text.
    pub domain_pddl: String,
    /// The problem PDDL text.
    pub problem_pddl: String,
    /// The task in the benchmark's own words: initial conditions and goal.
    pub nl_statement: String,
    /// The ground-truth plan, one `(action obj …)` per step, in PDDL object names.
    pub ground_truth_plan: Vec<String>,
}

/// Why a PlanBench set could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A row of a `nl_tasks_*.jsonl` file is not what PlanBench writes.
    #[error("{path}, line {line}: {message}")]
    BadRow {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
struct Row {
    instance_id: u32,
    problem_pddl: String,
    domain_pddl: String,
    nl_statement: String,
    ground_truth_plan: String,
}

/// Loads every task of `set` from `data` (the `../shared/data` folder).
pub fn load_planbench(data: &Path, set: PlanBenchSet) -> Result<Vec<PlanBenchTask>, LoadError> {
    let (folder, config) = set.paths();
    let dir = data.join("planbench").join(folder);
    let tasks_path = dir.join(format!("nl_tasks_{config}.jsonl"));
    let config_path = dir.join("prompts").join(format!("{config}_config.yaml"));
    let colours = colour_names(&read(&config_path)?);
    let mut tasks = Vec::new();
    let mut domain_cache: Option<(PathBuf, String)> = None;
    for (i, line) in read(&tasks_path)?
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let row: Row = serde_json::from_str(line).map_err(|e| LoadError::BadRow {
            path: tasks_path.clone(),
            line: i + 1,
            message: e.to_string(),
        })?;
        let domain_path = dir.join(&row.domain_pddl);
        let domain_pddl = match &domain_cache {
            Some((p, text)) if *p == domain_path => text.clone(),
            _ => {
                let text = read(&domain_path)?;
                domain_cache = Some((domain_path.clone(), text.clone()));
                text
            }
        };
        let problem_path = dir.join(&row.problem_pddl);
        tasks.push(PlanBenchTask {
            set,
            instance_id: row.instance_id,
            problem_pddl: read(&problem_path)?,
            domain_path,
            problem_path,
            domain_pddl,
            nl_statement: row.nl_statement,
            ground_truth_plan: decode_plan(&row.ground_truth_plan, &colours),
        });
    }
    Ok(tasks)
}

/// Colour → object letter from a config's `encoded_objects` flow map
/// (`{"a": "red block", …}`); empty for sets whose plans use PDDL names.
fn colour_names(config_yaml: &str) -> Vec<(String, String)> {
    let Some(start) = config_yaml.find("encoded_objects:") else {
        return Vec::new();
    };
    let rest = &config_yaml[start..];
    let (Some(open), Some(close)) = (rest.find('{'), rest.find('}')) else {
        return Vec::new();
    };
    let quoted: Vec<&str> = rest[open + 1..close]
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    quoted
        .chunks(2)
        .filter_map(|pair| match pair {
            [key, value] => value
                .strip_suffix(" block")
                .map(|colour| (colour.to_string(), key.to_string())),
            _ => None,
        })
        .collect()
}

fn decode_plan(plan: &str, colours: &[(String, String)]) -> Vec<String> {
    plan.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('('))
        .map(|step| {
            let inner = step.trim_start_matches('(').trim_end_matches(')');
            let words: Vec<&str> = inner
                .split_whitespace()
                .map(|w| {
                    colours
                        .iter()
                        .find(|(c, _)| c == w)
                        .map_or(w, |(_, obj)| obj.as_str())
                })
                .collect();
            format!("({})", words.join(" ").to_lowercase())
        })
        .collect()
}

fn read(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_decode_to_objects() {
        let yaml = "x: 1\nencoded_objects:\n  {\"a\": \"red block\", \"b\": \"blue block\",\n   \"c\": \"orange block\"}\n";
        let colours = colour_names(yaml);
        assert_eq!(colours.len(), 3);
        assert_eq!(
            decode_plan("(unstack red blue)\n(put-down red)\n", &colours),
            ["(unstack a b)", "(put-down a)"]
        );
        // Sets that already use PDDL names pass through.
        assert_eq!(
            colour_names("encoded_objects:\n  {\"p\": \"package_{}\"}"),
            Vec::new()
        );
        assert_eq!(
            decode_plan("(load-airplane p0 a1 l1-0)\n", &[]),
            ["(load-airplane p0 a1 l1-0)"]
        );
    }

    #[test]
    fn every_set_loads_when_the_data_is_here() {
        let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
        if !data.is_dir() {
            eprintln!("skipping: {} is absent", data.display());
            return;
        }
        for (set, n) in [
            (PlanBenchSet::Blocksworld, 500),
            (PlanBenchSet::Blocksworld3, 100),
            (PlanBenchSet::Mystery, 500),
            (PlanBenchSet::Mystery3, 100),
            (PlanBenchSet::Logistics, 285),
        ] {
            let tasks = load_planbench(&data, set).unwrap();
            assert_eq!(tasks.len(), n, "{set:?}");
            let t = &tasks[0];
            assert!(
                t.nl_statement.contains("My goal is to have that"),
                "{set:?}"
            );
            assert!(t.problem_pddl.contains("(:goal"));
            assert!(!t.ground_truth_plan.is_empty());
        }
        let bw = load_planbench(&data, PlanBenchSet::Blocksworld).unwrap();
        assert!(bw[0]
            .ground_truth_plan
            .iter()
            .all(|s| !s.contains("red") && !s.contains("yellow")));
    }
}

//! The training tasks in their fixed order, with the evaluation tasks kept out.
//!
//! Candidates are numbered from 0. Candidate i of a generated stream is domain i mod d, seed
//! `first-seed + i`, of size `sizes[⌊i / d⌋ mod len]`, where `sizes` is the curriculum's
//! stage for the update that draws it ([`TaskStream::sizes_at`]); of a benchmark stream, row
//! i mod rows. A candidate equal, up to a renaming of objects, to a task of a held-out eval
//! set (`eval-config` and `[tasks] held-out`) is skipped, so the task at stream position p is
//! the p-th admitted candidate. [`StreamCursor`] counts both, and the checkpoint keeps it:
//! a resumed run draws exactly the tasks the uninterrupted one would have.
//!
//! Without held-out sets or a curriculum every candidate is admitted and candidate i is the
//! task the stream yielded at position i before skipping existed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::{DomainAdapter, Task};
use onebrain_eval::{EvalConfig, SourceKind};
use onebrain_pddl::{parse_problem, ProblemShape, RENAMING_NODE_BUDGET};
use onebrain_roles::{config_base, RolesError};
use serde::{Deserialize, Serialize};

use crate::config::{TaskStream, TrainConfig};
use crate::error::TrainError;

/// Candidates a generated stream may skip in a row before it gives up: far more than a
/// stream that merely meets an evaluation task now and then skips (one in 160 for the
/// shipped configs), few enough to stop a stream that can only repeat the held-out sets in
/// seconds rather than forever.
const MAX_TWINS_IN_A_ROW: u64 = 1000;

/// Where the stream stands: what a checkpoint records of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamCursor {
    /// Tasks yielded (the next task's position).
    pub tasks: u64,
    /// Candidates looked at, admitted or skipped (the next candidate's number).
    pub candidates: u64,
    /// Candidates skipped as held-out twins: `candidates - tasks`.
    pub twins_skipped: u64,
}

/// A candidate the stream skipped: one line of `skipped-twins.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedTwin {
    /// The update (0-based) whose draw skipped it.
    pub update: u64,
    /// Its candidate number.
    pub candidate: u64,
    /// Its task id, e.g. `mystery-blocksworld/seed-158-size-4`.
    pub task: String,
    /// The held-out task it equals up to renaming, e.g. `planbench/mystery_blocksworld/102`.
    pub twin_of: String,
}

/// What one draw gave: the tasks, the candidates skipped on the way, and where the stream
/// stands after it.
#[derive(Clone, Debug)]
pub struct Draw {
    /// The admitted tasks, in stream order.
    pub tasks: Vec<Task>,
    /// The candidates skipped, in order.
    pub skipped: Vec<SkippedTwin>,
    /// The cursor after the draw.
    pub cursor: StreamCursor,
}

/// The reference problems of held-out tasks, by their renaming key.
#[derive(Clone, Debug, Default)]
pub struct HeldOutIndex {
    /// Task id and shape of every indexed task.
    entries: Vec<(String, ProblemShape)>,
    /// Entries by [`ProblemShape::key`].
    by_key: HashMap<u64, Vec<usize>>,
}

impl HeldOutIndex {
    /// Adds `task`'s reference problem; the error says why it cannot be (no reference, or
    /// one that does not parse).
    pub fn insert(&mut self, task: &Task) -> Result<(), String> {
        let shape = reference_shape(task)?;
        self.by_key
            .entry(shape.key())
            .or_default()
            .push(self.entries.len());
        self.entries.push((task.id.clone(), shape));
        Ok(())
    }

    /// Tasks indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no task is indexed: the stream skips nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The id of a held-out task that `task` equals up to a renaming of objects. A
    /// comparison the search budget cannot settle counts as equal: skipping a training task
    /// costs nothing, training on an evaluation task spoils the evaluation. A task with no
    /// reference that parses cannot be compared and is no one's twin.
    pub fn twin_of(&self, task: &Task) -> Option<&str> {
        if self.is_empty() {
            return None;
        }
        let shape = reference_shape(task).ok()?;
        self.by_key
            .get(&shape.key())?
            .iter()
            .map(|&i| &self.entries[i])
            .find(|(_, held)| shape.compare(held, RENAMING_NODE_BUDGET).maybe_same())
            .map(|(id, _)| id.as_str())
    }

    /// The index of the tasks of the eval configs at `paths`, built with the run's domain
    /// plugins. What cannot be indexed is left out and said in `notes`, one line each: a
    /// benchmark whose domain plugin the run does not load (the stream cannot generate its
    /// tasks either), a text-folder benchmark (no plugin, no reference problem), a task with
    /// no reference problem that parses.
    pub fn load(
        paths: &[PathBuf],
        adapters: &[Arc<dyn DomainAdapter>],
        notes: &mut Vec<String>,
    ) -> Result<HeldOutIndex, TrainError> {
        let mut index = HeldOutIndex::default();
        for path in paths {
            let cfg = EvalConfig::from_file(path).map_err(|e| TrainError::ConfigFile {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let data = config_base(path).join(&cfg.data);
            for b in &cfg.benchmarks {
                let set = format!("{} benchmark `{}`", path.display(), b.domain);
                if b.source == SourceKind::TextFolder {
                    notes.push(format!(
                        "{set}: a text-folder has no reference problems to compare; not kept out"
                    ));
                    continue;
                }
                let Ok(adapter) = adapter(adapters, &b.domain) else {
                    notes.push(format!("{set}: this run loads no `{}` plugin, so it never generates its tasks; not indexed", b.domain));
                    continue;
                };
                let tasks = b
                    .tasks(&data, adapter.as_ref())
                    .map_err(|e| TrainError::Tasks(format!("held-out {set}: {e}")))?;
                for t in &tasks {
                    if let Err(why) = index.insert(t) {
                        notes.push(format!("{set}: task {} {why}; not kept out", t.id));
                    }
                }
            }
        }
        Ok(index)
    }
}

/// The shape of `task`'s reference problem.
fn reference_shape(task: &Task) -> Result<ProblemShape, String> {
    let spec = task.reference.as_ref().ok_or("has no reference problem")?;
    let problem = parse_problem(&spec.problem)
        .map_err(|e| format!("has a reference problem that does not parse ({e})"))?;
    Ok(ProblemShape::new(&problem))
}

/// The domain plugin called `name` among `adapters`.
fn adapter<'a>(
    adapters: &'a [Arc<dyn DomainAdapter>],
    name: &str,
) -> Result<&'a Arc<dyn DomainAdapter>, TrainError> {
    adapters
        .iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| TrainError::Setup(RolesError::UnknownDomain(name.to_string())))
}

/// The eval configs whose tasks a run keeps out of its stream: `eval-config` and
/// `[tasks] held-out`, resolved against `base` (the train config's folder), without repeats.
pub fn held_out_sets(cfg: &TrainConfig, base: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in cfg.eval_config.iter().chain(&cfg.tasks.held_out) {
        let p = base.join(p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Where candidates come from.
#[derive(Clone, Debug)]
enum Candidates {
    /// Generated by the domain plugins, in turn.
    Generated {
        domains: Vec<String>,
        first_seed: u64,
    },
    /// Benchmark rows, cycled.
    Rows(Vec<Task>),
}

/// The training tasks in their fixed order, held-out twins skipped.
#[derive(Clone, Debug)]
pub struct TaskSource {
    candidates: Candidates,
    /// The `[tasks]` table: the sizes by update.
    stream: TaskStream,
    index: HeldOutIndex,
}

impl TaskSource {
    /// The stream `cfg` describes (`base`: the config file's folder), with the index of its
    /// held-out sets ([`held_out_sets`]). `notes` receives what could not be indexed.
    pub fn load(
        cfg: &TrainConfig,
        base: &Path,
        adapters: &[Arc<dyn DomainAdapter>],
        notes: &mut Vec<String>,
    ) -> Result<TaskSource, TrainError> {
        let index = HeldOutIndex::load(&held_out_sets(cfg, base), adapters, notes)?;
        let t = &cfg.tasks;
        let candidates = if t.benchmarks.is_empty() {
            for d in &t.domains {
                adapter(adapters, d)?;
            }
            Candidates::Generated {
                domains: t.domains.clone(),
                first_seed: t.first_seed,
            }
        } else {
            Candidates::Rows(benchmark_rows(cfg, base, adapters)?)
        };
        Ok(TaskSource {
            candidates,
            stream: t.clone(),
            index,
        })
    }

    /// A generated stream over `stream`'s domains and sizes that keeps out the tasks of
    /// `index`: for tests, and for a stream built without config files.
    pub fn generated(stream: &TaskStream, index: HeldOutIndex) -> TaskSource {
        TaskSource {
            candidates: Candidates::Generated {
                domains: stream.domains.clone(),
                first_seed: stream.first_seed,
            },
            stream: stream.clone(),
            index,
        }
    }

    /// The same stream keeping out the tasks of `index` instead (an empty one: nothing).
    pub fn with_index(self, index: HeldOutIndex) -> TaskSource {
        TaskSource { index, ..self }
    }

    /// The held-out tasks the stream keeps out.
    pub fn index(&self) -> &HeldOutIndex {
        &self.index
    }

    /// Candidate `i`, as the draw of update `update` sees it.
    pub fn candidate(
        &self,
        adapters: &[Arc<dyn DomainAdapter>],
        i: u64,
        update: u64,
    ) -> Result<Task, TrainError> {
        match &self.candidates {
            Candidates::Generated {
                domains,
                first_seed,
            } => {
                let d = &domains[(i % domains.len() as u64) as usize];
                let sizes = self.stream.sizes_at(update, d);
                let size = sizes[((i / domains.len() as u64) % sizes.len() as u64) as usize];
                let seed = first_seed + i;
                adapter(adapters, d)?.generate(seed, size).map_err(|e| {
                    TrainError::Tasks(format!("{d}: generate(seed {seed}, size {size}): {e}"))
                })
            }
            Candidates::Rows(rows) => Ok(rows[(i % rows.len() as u64) as usize].clone()),
        }
    }

    /// The next `n` admitted tasks after `cursor`, for update `update`.
    pub fn draw(
        &self,
        adapters: &[Arc<dyn DomainAdapter>],
        mut cursor: StreamCursor,
        update: u64,
        n: usize,
    ) -> Result<Draw, TrainError> {
        let mut draw = Draw {
            tasks: Vec::with_capacity(n),
            skipped: Vec::new(),
            cursor,
        };
        let mut in_a_row = 0;
        while draw.tasks.len() < n {
            let i = cursor.candidates;
            let task = self.candidate(adapters, i, update)?;
            cursor.candidates += 1;
            match self.index.twin_of(&task) {
                None => {
                    cursor.tasks += 1;
                    in_a_row = 0;
                    draw.tasks.push(task);
                }
                Some(twin) => {
                    cursor.twins_skipped += 1;
                    in_a_row += 1;
                    draw.skipped.push(SkippedTwin {
                        update,
                        candidate: i,
                        task: task.id,
                        twin_of: twin.to_string(),
                    });
                    if in_a_row >= self.max_twins_in_a_row() {
                        return Err(TrainError::TwinsOnly {
                            from: i + 1 - in_a_row,
                            skipped: in_a_row,
                        });
                    }
                }
            }
        }
        draw.cursor = cursor;
        Ok(draw)
    }

    /// A benchmark stream that skipped every row once can only repeat them.
    fn max_twins_in_a_row(&self) -> u64 {
        match &self.candidates {
            Candidates::Generated { .. } => MAX_TWINS_IN_A_ROW,
            Candidates::Rows(rows) => rows.len() as u64,
        }
    }
}

/// The rows of a benchmark stream, in config order.
fn benchmark_rows(
    cfg: &TrainConfig,
    base: &Path,
    adapters: &[Arc<dyn DomainAdapter>],
) -> Result<Vec<Task>, TrainError> {
    let data = base.join(&cfg.data);
    let mut rows = Vec::new();
    for b in &cfg.tasks.benchmarks {
        if b.source == SourceKind::TextFolder {
            return Err(TrainError::Tasks(
                onebrain_eval::TaskError::NoPlugin(b.domain.clone()).to_string(),
            ));
        }
        let adapter = adapter(adapters, &b.domain)?;
        rows.extend(
            b.tasks(&data, adapter.as_ref())
                .map_err(|e| TrainError::Tasks(e.to_string()))?,
        );
    }
    if rows.is_empty() {
        return Err(TrainError::Tasks(
            "the [tasks] benchmarks hold no task".into(),
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CurriculumStage;
    use onebrain_core::{BoxError, Spec};

    /// A domain whose task of seed s and size n is a directed chain of n objects with the
    /// object at s mod n marked in the goal: two tasks are equal up to renaming exactly when
    /// their sizes and their s mod n are.
    struct Chains;

    fn chain(names: &[String], mark: usize) -> String {
        let init: String = names
            .windows(2)
            .map(|w| format!(" (next {} {})", w[0], w[1]))
            .collect();
        format!(
            "(define (problem p) (:domain chains) (:objects {}) (:init{init}) (:goal (marked {})))",
            names.join(" "),
            names[mark]
        )
    }

    impl DomainAdapter for Chains {
        fn name(&self) -> String {
            "chains".into()
        }
        fn description(&self) -> Result<String, BoxError> {
            Ok(String::new())
        }
        fn domain_pddl(&self) -> Result<String, BoxError> {
            Ok(String::new())
        }
        fn generate(&self, seed: u64, size: u32) -> Result<Task, BoxError> {
            let names: Vec<String> = (0..size).map(|i| format!("o{i}")).collect();
            Ok(task(
                &format!("chains/seed-{seed}-size-{size}"),
                &chain(&names, (seed % u64::from(size)) as usize),
            ))
        }
        fn describe(&self, _: &str) -> Result<String, BoxError> {
            Ok(String::new())
        }
    }

    fn task(id: &str, problem: &str) -> Task {
        Task {
            id: id.into(),
            domain: "chains".into(),
            text: String::new(),
            reference: Some(Spec {
                domain: String::new(),
                problem: problem.into(),
            }),
        }
    }

    fn adapters() -> Vec<Arc<dyn DomainAdapter>> {
        vec![Arc::new(Chains)]
    }

    fn stream(sizes: &[u32]) -> TaskStream {
        TaskStream {
            domains: vec!["chains".into()],
            sizes: sizes.to_vec(),
            first_seed: 1,
            ..TaskStream::default()
        }
    }

    fn ids(draw: &Draw) -> Vec<&str> {
        draw.tasks.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn without_held_out_sets_candidate_i_is_the_old_position_i() {
        let mut s = stream(&[3, 4]);
        s.domains = vec!["chains".into(), "chains".into()];
        let source = TaskSource::generated(&s, HeldOutIndex::default());
        let draw = source
            .draw(&adapters(), StreamCursor::default(), 0, 6)
            .unwrap();
        // Size (i / d) mod s, seed first-seed + i: the formula the stream always had.
        assert_eq!(
            ids(&draw),
            [
                "chains/seed-1-size-3",
                "chains/seed-2-size-3",
                "chains/seed-3-size-4",
                "chains/seed-4-size-4",
                "chains/seed-5-size-3",
                "chains/seed-6-size-3"
            ]
        );
        assert_eq!(
            draw.cursor,
            StreamCursor {
                tasks: 6,
                candidates: 6,
                twins_skipped: 0
            }
        );
    }

    #[test]
    fn the_curriculum_picks_the_stage_of_the_drawing_update() {
        let mut s = stream(&[99]);
        s.curriculum = vec![
            CurriculumStage {
                from_update: 0,
                sizes: vec![3, 4],
                domain_sizes: Default::default(),
            },
            CurriculumStage {
                from_update: 2,
                sizes: vec![8],
                domain_sizes: Default::default(),
            },
            CurriculumStage {
                from_update: 5,
                sizes: vec![10, 12, 14],
                domain_sizes: Default::default(),
            },
        ];
        s.validate().unwrap();
        assert_eq!(
            [0, 1, 2, 4, 5, 99].map(|u| s.sizes_at(u, "chains").to_vec()),
            [
                vec![3, 4],
                vec![3, 4],
                vec![8],
                vec![8],
                vec![10, 12, 14],
                vec![10, 12, 14]
            ]
        );
        let source = TaskSource::generated(&s, HeldOutIndex::default());
        let mut cursor = StreamCursor::default();
        let mut sizes = Vec::new();
        for update in 0..6 {
            let draw = source.draw(&adapters(), cursor, update, 2).unwrap();
            sizes.extend(
                draw.tasks
                    .iter()
                    .map(|t| t.id.rsplit('-').next().unwrap().parse::<u32>().unwrap()),
            );
            cursor = draw.cursor;
        }
        // Two tasks an update; within a stage the sizes cycle with the candidate number.
        assert_eq!(sizes, [3, 4, 3, 4, 8, 8, 8, 8, 8, 8, 12, 14]);
    }

    #[test]
    fn a_stage_can_size_one_domain_apart() {
        let mut s = stream(&[99]);
        s.domains = vec!["chains".into(), "logistics".into()];
        s.curriculum = vec![CurriculumStage {
            from_update: 0,
            sizes: vec![8, 10],
            domain_sizes: [("logistics".to_string(), vec![2, 3])].into(),
        }];
        s.validate().unwrap();
        assert_eq!((s.sizes_at(0, "chains"), s.sizes_at(7, "logistics")), (&[8, 10][..], &[2, 3][..]));
        let toml = "[plugins]\nreward = \"r\"\n[tasks]\ndomains = [\"chains\", \"logistics\"]\n[[tasks.curriculum]]\nfrom-update = 0\nsizes = [8, 10]\ndomain-sizes = { logistics = [2, 3] }\n";
        assert_eq!(TrainConfig::from_toml(toml).unwrap().tasks.curriculum, s.curriculum);
    }

    #[test]
    fn curriculum_stages_are_validated() {
        let stage = |from_update, sizes: &[u32]| CurriculumStage {
            from_update,
            sizes: sizes.to_vec(),
            domain_sizes: Default::default(),
        };
        let mut s = stream(&[3]);
        for (stages, why) in [
            (vec![stage(1, &[3])], "from-update = 0"),
            (
                vec![stage(0, &[3]), stage(4, &[5]), stage(4, &[6])],
                "increasing",
            ),
            (vec![stage(0, &[3]), stage(4, &[])], "no sizes"),
            (
                vec![CurriculumStage { domain_sizes: [("other".to_string(), vec![2])].into(), ..stage(0, &[3]) }],
                "names `other`",
            ),
            (
                vec![CurriculumStage { domain_sizes: [("chains".to_string(), vec![])].into(), ..stage(0, &[3]) }],
                "gives it no sizes",
            ),
        ] {
            s.curriculum = stages;
            let err = s.validate().unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
        let toml = "[plugins]\nreward = \"r\"\n[tasks]\ndomains = [\"chains\"]\n[[tasks.curriculum]]\nfrom-update = 0\nsizes = [3]\nmax = 4\n";
        let err = TrainConfig::from_toml(toml).unwrap_err().to_string();
        assert!(err.contains("max"), "unknown keys are errors: {err}");
        let cfg = TrainConfig::from_toml(&toml.replace("max = 4\n", "")).unwrap();
        assert_eq!(cfg.tasks.curriculum, [stage(0, &[3])]);
    }

    #[test]
    fn a_held_out_twin_is_replaced_by_the_next_candidate() {
        // Candidate 2 is seed 3, size 3: the chain with its first object marked. Held out
        // under other names, it is skipped, and so is candidate 8 (seed 9, size 3) later.
        let mut index = HeldOutIndex::default();
        let names: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
        index
            .insert(&task("eval/chain-3", &chain(&names, 0)))
            .unwrap();
        assert!(index
            .insert(&Task {
                reference: None,
                ..task("eval/text", "")
            })
            .is_err());
        assert_eq!(index.len(), 1);
        let source = TaskSource::generated(&stream(&[3, 4]), index);
        let a = &adapters();
        let draw = source.draw(a, StreamCursor::default(), 0, 4).unwrap();
        assert_eq!(
            ids(&draw),
            [
                "chains/seed-1-size-3",
                "chains/seed-2-size-4",
                "chains/seed-4-size-4",
                "chains/seed-5-size-3"
            ]
        );
        assert_eq!(
            draw.skipped,
            [SkippedTwin {
                update: 0,
                candidate: 2,
                task: "chains/seed-3-size-3".into(),
                twin_of: "eval/chain-3".into()
            }]
        );
        assert_eq!(
            draw.cursor,
            StreamCursor {
                tasks: 4,
                candidates: 5,
                twins_skipped: 1
            }
        );

        // Drawn in two updates from the cursor a checkpoint keeps: the same tasks.
        let first = source.draw(a, StreamCursor::default(), 0, 2).unwrap();
        let second = source.draw(a, first.cursor, 1, 6).unwrap();
        let straight = source.draw(a, StreamCursor::default(), 0, 8).unwrap();
        assert_eq!([ids(&first), ids(&second)].concat(), ids(&straight));
        assert_eq!(second.cursor, straight.cursor);
        assert_eq!(
            straight.cursor,
            StreamCursor {
                tasks: 8,
                candidates: 10,
                twins_skipped: 2
            }
        );
        assert_eq!(
            second
                .skipped
                .iter()
                .map(|s| (s.update, s.candidate))
                .collect::<Vec<_>>(),
            [(1, 2), (1, 8)]
        );

        // Without the index the twin is yielded.
        let open = source
            .with_index(HeldOutIndex::default())
            .draw(a, StreamCursor::default(), 0, 3)
            .unwrap();
        assert_eq!(ids(&open)[2], "chains/seed-3-size-3");
    }

    #[test]
    fn a_stream_of_nothing_but_twins_stops() {
        let mut index = HeldOutIndex::default();
        let names: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
        for mark in 0..3 {
            index
                .insert(&task(&format!("eval/{mark}"), &chain(&names, mark)))
                .unwrap();
        }
        let source = TaskSource::generated(&stream(&[3]), index);
        let err = source
            .draw(&adapters(), StreamCursor::default(), 0, 1)
            .unwrap_err();
        assert!(
            matches!(
                err,
                TrainError::TwinsOnly {
                    from: 0,
                    skipped: MAX_TWINS_IN_A_ROW
                }
            ),
            "{err}"
        );
    }
}

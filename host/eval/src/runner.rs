//! `onebrain eval`: every strategy on every benchmark task, appended to the trace as each
//! episode ends, then the report next to the trace. A rerun resumes: (task, strategy) pairs
//! already in the trace are skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::Task;
use onebrain_roles::{
    episode_seed, load_model, run_pipelined, Episode, EpisodeConfig, EpisodeInput, EpisodeRecord, Event, LanguageModel,
    RolesError, Services, Strategy,
};
use onebrain_verifier::VerifierPool;

use onebrain_durable::{stop_requested, FolderLock, StopSignal, Stopped};

use crate::config::{ConfigError, EvalConfig};
use crate::plugins::{check_plugins, PluginRecordError};
use crate::report::{Report, ReportPaths};
use crate::tasks::{problem_objects, SourceKind, TaskError};
use crate::shard::{claim, config_digest, merge_shards, Merged, PlannedEpisode, Shard, ShardError, ShardManifest};
use crate::trace::{read_trace, read_trace_rows, TraceError, TraceRow, TraceWriter};

/// Why an evaluation stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The config is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model, verifier or plugins could not be set up.
    #[error(transparent)]
    Setup(#[from] RolesError),
    /// A benchmark's tasks could not be loaded.
    #[error(transparent)]
    Tasks(#[from] TaskError),
    /// The trace could not be read or written.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A shard could not run, or the shards could not be merged.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// The transfer benchmarks could not be run.
    #[error(transparent)]
    Transfer(#[from] crate::transfer::TransferRunError),
    /// Every episode of the run stopped on an error of its own (a model error, such as a
    /// request the memory budget refused): the run has no answer to report. The trace
    /// and the report are written all the same.
    #[error(
        "none of the {episodes} episode(s) in {} gave an answer: each stopped on an error, the first: {first}. \
         A rerun skips the episodes in the trace: remove it to run them again",
        trace.display()
    )]
    NoAnswers {
        /// Episodes in the trace.
        episodes: usize,
        /// The first episode's error.
        first: String,
        /// The trace.
        trace: PathBuf,
    },
    /// A file of the output folder could not be written whole (a full disk among the
    /// causes: the message names the file), or another process writes the folder.
    #[error(transparent)]
    Folder(#[from] onebrain_durable::Error),
    /// A plugin's component changed since the run in this folder began.
    #[error(transparent)]
    Plugins(#[from] PluginRecordError),
    /// SIGINT or SIGTERM stopped the run between two episodes: every finished episode is in
    /// the trace, and rerunning the command resumes.
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// The report just written could not be read back.
    #[error("cannot read the report back from {dir}: {source}")]
    Report {
        /// The output folder.
        dir: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// What a finished evaluation produced.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOutcome {
    /// The JSONL trace.
    pub trace_path: PathBuf,
    /// The report files.
    pub report_paths: ReportPaths,
    /// The success table, as Markdown, for the terminal.
    pub summary: String,
    /// Episodes run now.
    pub ran: usize,
    /// Episodes found in the trace and skipped.
    pub skipped: usize,
    /// Episodes in the trace, run now or before.
    pub episodes: usize,
    /// Of those, the ones that stopped on an error of their own before their answer
    /// ([`EpisodeRecord::stop_error`]).
    pub unanswered: usize,
    /// The first of their errors.
    pub unanswered_error: Option<String>,
}

impl EvalOutcome {
    /// [`EvalError::NoAnswers`] when the trace has episodes and every one stopped on an
    /// error of its own: `onebrain eval` then exits with it, not with a report of 0 %.
    pub fn no_answers(&self) -> Option<EvalError> {
        (self.unanswered > 0 && self.unanswered == self.episodes).then(|| EvalError::NoAnswers {
            episodes: self.episodes,
            first: self.unanswered_error.clone().unwrap_or_default(),
            trace: self.trace_path.clone(),
        })
    }
}

/// Progress, for the terminal.
#[derive(Clone, Debug)]
pub enum Progress<'a> {
    /// The task list is known.
    Planned {
        /// Episodes in the run (tasks × strategies).
        total: usize,
        /// Already in the trace.
        done: usize,
        /// The trace ended in a torn line (a killed run), which was dropped.
        torn_tail: bool,
    },
    /// Something happened inside an episode.
    Event(&'a Event),
    /// An episode finished and is in the trace.
    Finished {
        /// Episodes done, including skipped ones.
        done: usize,
        /// Episodes in the run.
        total: usize,
        /// The record.
        record: &'a EpisodeRecord,
    },
}

/// A one-line progress bar for [`Progress::Finished`].
pub fn progress_line(done: usize, total: usize, r: &EpisodeRecord) -> String {
    let width = 24;
    let filled = if total > 0 {
        done * width / total
    } else {
        width
    };
    format!(
        "[{}{}] {done}/{total} {:<11} {:<38} {} ({} calls, {:.0} s)",
        "#".repeat(filled),
        ".".repeat(width - filled),
        r.strategy.as_str(),
        r.task_id,
        match (r.stop_error(), r.solved) {
            (Some(_), _) => "error",
            (None, true) => "solved",
            (None, false) => "unsolved",
        },
        r.solver_calls,
        r.timings.wall_ms / 1e3
    )
}

/// A task of the run: a plugin's (its episode input comes from the plugin), or one whose
/// input is given whole (a domain in prose).
enum EvalTask {
    Plugin(Task),
    Given(EpisodeInput),
}

impl EvalTask {
    fn task(&self) -> &Task {
        match self {
            EvalTask::Plugin(t) => t,
            EvalTask::Given(input) => &input.task,
        }
    }
}

/// Runs the evaluation `cfg` (read from a file in `base`): loads everything, runs, reports.
pub fn run_eval(
    cfg: &EvalConfig,
    base: &Path,
    shard: Option<Shard>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<EvalOutcome, EvalError> {
    cfg.validate()?;
    if shard.is_some() && !cfg.transfer.is_empty() {
        return Err(ShardError::Transfer.into());
    }
    let solve_cfg = cfg.solve_config(cfg.strategies[0]);
    let services = Services::load(&solve_cfg, base)?;
    let mut model: Option<Box<dyn LanguageModel>> = None;
    run_eval_with(
        cfg,
        base,
        &services,
        &mut || Ok(Box::new(load_model(&solve_cfg, base)?) as Box<dyn LanguageModel>),
        &mut model,
        shard,
        progress,
    )
}

/// The trace file of an evaluation.
pub fn trace_path(cfg: &EvalConfig, base: &Path) -> PathBuf {
    base.join(&cfg.out_dir).join("trace.jsonl")
}

/// [`run_eval`] with the services given and the model loaded by `load` only if there is work
/// left (tests pass a scripted model; the trainer passes the model it is training). With a
/// `shard`, only its slice of the run's episodes, into the shard's folder ([`crate::shard`]).
pub fn run_eval_with<'m>(
    cfg: &EvalConfig,
    base: &Path,
    services: &Services,
    load: &mut dyn FnMut() -> Result<Box<dyn LanguageModel + 'm>, RolesError>,
    model: &mut Option<Box<dyn LanguageModel + 'm>>,
    shard: Option<Shard>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<EvalOutcome, EvalError> {
    let data = base.join(&cfg.data);
    let mut tasks: Vec<EvalTask> = Vec::new();
    for b in &cfg.benchmarks {
        if b.source == SourceKind::TextFolder {
            tasks.extend(b.text_inputs(&data)?.into_iter().map(EvalTask::Given));
        } else {
            let adapter = services.domain(&b.domain)?;
            tasks.extend(b.tasks(&data, adapter.as_ref())?.into_iter().map(EvalTask::Plugin));
        }
    }
    // The run's episodes in their one order: strategies, then tasks (a shard takes every
    // N-th).
    let listed: Vec<(usize, Strategy, &EvalTask)> = cfg
        .strategies
        .iter()
        .flat_map(|&s| tasks.iter().map(move |t| (s, t)))
        .enumerate()
        .map(|(i, (s, t))| (i, s, t))
        .collect();
    // Each task's size, from its reference problem, for the trace rows: the record itself
    // does not carry the reference.
    let sizes: std::collections::HashMap<&str, u32> = tasks
        .iter()
        .filter_map(|t| {
            let t = t.task();
            Some((t.id.as_str(), problem_objects(&t.reference.as_ref()?.problem)?))
        })
        .collect();
    // One process writes a run's folder (a shard's, for a shard) at a time.
    let out_dir = base.join(&cfg.out_dir);
    let folder = shard.map_or_else(|| out_dir.clone(), |s| s.dir(&out_dir));
    let _lock = FolderLock::acquire(&folder)?;
    let run_trace = trace_path(cfg, base);
    let existing = read_trace(&run_trace)?;
    let mut done_pairs = existing.done();
    let mut torn_tail = existing.torn_tail;
    let (trace, mine): (PathBuf, Vec<(Strategy, &EvalTask)>) = match shard {
        None => (run_trace, listed.iter().map(|&(_, s, t)| (s, t)).collect()),
        Some(shard) => {
            let dir = shard.dir(&base.join(&cfg.out_dir));
            let held: Vec<&(usize, Strategy, &EvalTask)> = listed.iter().filter(|(i, _, _)| shard.holds(*i)).collect();
            let manifest = ShardManifest {
                config_digest: config_digest(cfg),
                shard: shard.index,
                of: shard.count,
                total: listed.len(),
                episodes: held
                    .iter()
                    .map(|&&(index, strategy, t)| PlannedEpisode { index, strategy, task: t.task().id.clone() })
                    .collect(),
            };
            claim(&dir, &manifest)?;
            let trace = dir.join("trace.jsonl");
            let own = read_trace(&trace)?;
            done_pairs.extend(own.done());
            torn_tail |= own.torn_tail;
            (trace, held.iter().map(|&&(_, s, t)| (s, t)).collect())
        }
    };
    let total = mine.len();
    let todo: Vec<(Strategy, &EvalTask)> = mine
        .into_iter()
        .filter(|(s, t)| !done_pairs.contains(&(t.task().id.clone(), *s)))
        .collect();
    let skipped = total - todo.len();
    progress(&Progress::Planned {
        total,
        done: skipped,
        torn_tail,
    });

    let mut ran = 0;
    if !todo.is_empty() {
        // Before any result is written: a plugin whose component changed since the folder's
        // first run would make this trace mix two versions.
        check_plugins(&folder, &services.plugins)?;
        if let Some(signal) = stop_requested() {
            return Err(stopped(signal, skipped, total, &trace).into());
        }
        let mut writer = TraceWriter::open(&trace)?;
        if model.is_none() {
            *model = Some(load()?);
        }
        let model = model.as_mut().expect("loaded");
        let pool = VerifierPool::new(Arc::clone(&services.verifier), cfg.solver.workers);
        let mut done = skipped;
        for &strategy in &cfg.strategies {
            let ep_cfg = cfg.solve_config(strategy).episode;
            let mut episodes = Vec::new();
            for (_, t) in todo.iter().filter(|(s, _)| *s == strategy) {
                let input = match t {
                    EvalTask::Plugin(task) => services.episode_input(task.clone())?,
                    EvalTask::Given(input) => services.with_foreign_example(input.clone())?,
                };
                // Each episode samples with a seed of its own, from the task and strategy,
                // so that a run's tasks draw independent samples whatever the order or shard.
                let seed = episode_seed(ep_cfg.seed, &[strategy.as_str().as_bytes(), &[0], input.task.id.as_bytes()]);
                episodes.push(Episode::new(input, &EpisodeConfig { seed, ..ep_cfg.clone() }, &model.name()));
            }
            // Both callbacks report progress; the cell lets them share it.
            let cell = std::cell::RefCell::new(&mut *progress);
            run_pipelined(
                episodes,
                &ep_cfg,
                model.as_mut(),
                &pool,
                &services.finalizer,
                cfg.in_flight,
                &mut |e| (*cell.borrow_mut())(&Progress::Event(e)),
                &mut |rec| {
                    // An episode that ends after a stop was asked for is not written: the
                    // signal may have reached its planner too (a terminal's Ctrl-C goes to
                    // the whole process group), so its verdict may be the signal's. The
                    // resumed run runs it again, with the same seed.
                    if let Some(signal) = stop_requested() {
                        return Err(EvalError::Stopped(stopped(signal, done, total, writer.path())));
                    }
                    let reference_objects = sizes.get(rec.task_id.as_str()).copied();
                    let row = TraceRow { record: rec, reference_objects };
                    writer.append(&row)?;
                    done += 1;
                    ran += 1;
                    (*cell.borrow_mut())(&Progress::Finished {
                        done,
                        total,
                        record: &row.record,
                    });
                    Ok::<(), EvalError>(())
                },
            )?;
        }
    }
    let (report, report_paths) = report_of(&cfg.name, &trace, cfg.report.delta, cfg.report.checkpoints)?;
    let summary = summary_table(&report_paths)?;
    Ok(outcome(trace, report_paths, summary, &report, ran, skipped))
}

/// Where a stop left an evaluation: `done` of its `total` episodes in `trace`.
fn stopped(signal: StopSignal, done: usize, total: usize, trace: &Path) -> Stopped {
    Stopped {
        signal,
        at: format!("after {done} of {total} episodes, each in {}", trace.display()),
        resume: "run the same command again to resume".into(),
    }
}

/// What the run produced, its counts read from its `report`.
fn outcome(
    trace_path: PathBuf,
    report_paths: ReportPaths,
    summary: String,
    report: &Report,
    ran: usize,
    skipped: usize,
) -> EvalOutcome {
    EvalOutcome {
        trace_path,
        report_paths,
        summary,
        ran,
        skipped,
        episodes: report.strategies.iter().map(|x| x.n).sum(),
        unanswered: report.strategies.iter().map(|x| x.unanswered).sum(),
        unanswered_error: report.strategies.iter().find_map(|x| x.unanswered_error.clone()),
    }
}

/// `onebrain eval --merge`: joins the shards of the run `cfg` into its trace
/// ([`merge_shards`]) and writes the run's report.
pub fn merge_eval(cfg: &EvalConfig, base: &Path) -> Result<(Merged, EvalOutcome), EvalError> {
    let _lock = FolderLock::acquire(&base.join(&cfg.out_dir))?;
    let trace = trace_path(cfg, base);
    let merged = merge_shards(&base.join(&cfg.out_dir), &trace, &config_digest(cfg))?;
    let (report, report_paths) = report_of(&cfg.name, &trace, cfg.report.delta, cfg.report.checkpoints)?;
    let summary = summary_table(&report_paths)?;
    let total = merged.total;
    Ok((merged, outcome(trace, report_paths, summary, &report, 0, total)))
}

/// Recomputes the report from a trace and writes it next to the trace.
pub fn write_report(
    name: &str,
    trace: &Path,
    delta: f64,
    checkpoints: usize,
) -> Result<ReportPaths, EvalError> {
    let _lock = FolderLock::acquire(trace.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))?;
    report_of(name, trace, delta, checkpoints).map(|(_, paths)| paths)
}

/// [`write_report`], and the report it wrote.
fn report_of(name: &str, trace: &Path, delta: f64, checkpoints: usize) -> Result<(Report, ReportPaths), EvalError> {
    let contents = read_trace_rows(trace)?;
    let report = Report::from_rows(name, &contents.records, delta, checkpoints);
    let dir = trace
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let paths = report.write(&dir)?;
    Ok((report, paths))
}

/// The first table of the Markdown report.
fn summary_table(paths: &ReportPaths) -> Result<String, EvalError> {
    let dir = paths
        .markdown
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let md = std::fs::read_to_string(&paths.markdown)
        .map_err(|source| EvalError::Report { dir, source })?;
    Ok(md
        .split("\n## ")
        .nth(1)
        .map(|t| format!("## {}", t.trim_end()))
        .unwrap_or(md))
}

//! `onebrain solve`: one task, one episode, each step reported as it happens.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use onebrain_core::{DomainAdapter, Spec, Task};

use crate::config::SolveConfig;
use crate::driver::run_episode;
use crate::episode::{Episode, EpisodeInput};
use crate::error::RolesError;
use crate::model::LanguageModel;
use crate::record::{EpisodeRecord, Event};
use crate::setup::{load_model, Services};

/// Where the task comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskInput {
    /// Task text given inline.
    Text(String),
    /// Task text in a file.
    File(PathBuf),
    /// A task the domain plugin generates from a seed, with `size` objects (it has a reference).
    Generated {
        /// The seed.
        seed: u64,
        /// Objects.
        size: u32,
    },
    /// A task already built (e.g. a PlanBench task from `onebrain_eval::planbench_task`).
    Task(Task),
    /// A problem file of the plugin's domain: the plugin's `describe` writes the task text,
    /// and the file is the reference for the faithfulness check.
    ProblemFile(PathBuf),
}

/// A domain no plugin has: its PDDL file, for `problem` mode (the model writes the problem).
#[derive(Clone, Debug, PartialEq)]
pub struct DomainFile {
    /// The domain PDDL file.
    pub path: PathBuf,
    /// A reference problem for the faithfulness check, if any.
    pub reference_problem: Option<PathBuf>,
}

/// What `onebrain solve` was asked.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveOptions {
    /// The config (`configs/solve*.toml`).
    pub config: SolveConfig,
    /// The config file's folder: relative plugin paths are resolved against it.
    pub base: PathBuf,
    /// The domain plugin's name (`blocksworld`, …); for [`TaskInput::Task`] the task's own
    /// domain is used when this is empty.
    pub domain: String,
    /// The task.
    pub task: TaskInput,
    /// A domain given as a PDDL file instead of a plugin (`--domain-file`).
    pub domain_file: Option<DomainFile>,
}

fn read_file(path: &Path) -> Result<String, RolesError> {
    std::fs::read_to_string(path).map_err(|error| RolesError::TaskFile { path: path.to_path_buf(), error })
}

/// A PDDL file (a domain, a problem, a reference) read whole; unreadable is a PDDL-file error.
fn read_pddl(path: &Path) -> Result<String, RolesError> {
    std::fs::read_to_string(path).map_err(|e| pddl_err(path, format!("cannot read it ({e})")))
}

fn pddl_err(path: &Path, message: impl std::fmt::Display) -> RolesError {
    RolesError::Pddl { path: path.to_path_buf(), message: message.to_string() }
}

/// The task a problem file of `adapter`'s domain states: the plugin describes it in words,
/// and the file is its reference. A file that does not parse, or names another domain, is an
/// error naming the file (and the line).
pub fn task_from_problem_file(adapter: &dyn DomainAdapter, path: &Path) -> Result<Task, RolesError> {
    let problem = read_pddl(path)?;
    let parsed = onebrain_pddl::parse_problem(&problem).map_err(|e| pddl_err(path, e))?;
    let domain_pddl = adapter.domain_pddl().map_err(|e| RolesError::Domain { domain: adapter.name(), message: e.to_string() })?;
    let domain = onebrain_pddl::parse_domain(&domain_pddl).map_err(|e| RolesError::Domain { domain: adapter.name(), message: e.to_string() })?;
    if !parsed.domain_name.eq_ignore_ascii_case(&domain.name) {
        return Err(pddl_err(
            path,
            format!(
                "line {}, column {}: the problem is of domain `{}`, but the `{}` plugin's domain is `{}`",
                parsed.domain_span.line, parsed.domain_span.column, parsed.domain_name, adapter.name(), domain.name
            ),
        ));
    }
    let text = adapter.describe(&problem).map_err(|e| RolesError::Domain { domain: adapter.name(), message: e.to_string() })?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Task {
        id: format!("{}/{stem}", adapter.name()),
        domain: adapter.name(),
        text,
        reference: Some(Spec { domain: domain_pddl, problem }),
    })
}

/// The episode input of a task over a domain file: the domain PDDL is given (`problem`
/// mode), the description says so, and a reference problem (checked against the domain)
/// enables the faithfulness check.
fn domain_file_input(d: &DomainFile, task_text: String, task_name: String) -> Result<EpisodeInput, RolesError> {
    let domain_pddl = read_pddl(&d.path)?;
    let domain = onebrain_pddl::parse_domain(&domain_pddl).map_err(|e| pddl_err(&d.path, e))?;
    let reference = match &d.reference_problem {
        Some(p) => {
            let problem = read_pddl(p)?;
            let parsed = onebrain_pddl::parse_problem(&problem).map_err(|e| pddl_err(p, e))?;
            if !parsed.domain_name.eq_ignore_ascii_case(&domain.name) {
                return Err(pddl_err(
                    p,
                    format!("line {}, column {}: the problem is of domain `{}`, not `{}` ({})", parsed.domain_span.line, parsed.domain_span.column, parsed.domain_name, domain.name, d.path.display()),
                ));
            }
            Some(Spec { domain: domain_pddl.clone(), problem })
        }
        None => None,
    };
    Ok(EpisodeInput {
        task: Task { id: format!("{}/{task_name}", domain.name), domain: domain.name.clone(), text: task_text, reference },
        description: format!("The `{}` domain, given as the PDDL below.", domain.name),
        domain_pddl: Some(domain_pddl),
        example: None,
        foreign_example: None,
    })
}

/// Loads the model, the verifier and the plugins, runs one episode, and returns its record.
/// `on_event` sees every step as it happens ([`render_event`] prints one).
pub fn solve(
    opts: &SolveOptions,
    on_event: &mut impl FnMut(&Event),
) -> Result<EpisodeRecord, RolesError> {
    opts.config.validate()?;
    let services = Services::load(&opts.config, &opts.base)?;
    if let Some(d) = &opts.domain_file {
        // No plugin: the model writes the problem for the given domain.
        let (text, name) = match &opts.task {
            TaskInput::Text(t) => (t.clone(), "input".to_string()),
            TaskInput::File(p) => (read_file(p)?, p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()),
            _ => return Err(RolesError::Config("--domain-file takes the task as --text or --file".into())),
        };
        if text.trim().is_empty() {
            return Err(RolesError::Config("the task text is empty".into()));
        }
        let mut input = domain_file_input(d, text, name)?;
        if let Some(other) = services.domains.first() {
            input.foreign_example = crate::setup::foreign_example(other.as_ref())?;
        }
        let mut cfg = opts.config.clone();
        cfg.episode.mode = crate::extract::Mode::Problem;
        let mut model = load_model(&cfg, &opts.base)?;
        let episode = Episode::new(input, &cfg.episode, &model.name());
        return Ok(run_episode(episode, &cfg.episode, &mut model, services.verifier.as_ref(), &services.finalizer, on_event));
    }
    let task = build_task(opts, &services)?;
    let mut model = load_model(&opts.config, &opts.base)?;
    solve_with(&opts.config, &services, &mut model, task, on_event)
}

/// [`solve`] with the model and services already loaded (tests use a scripted model).
pub fn solve_with<M: LanguageModel + ?Sized>(
    cfg: &SolveConfig,
    services: &Services,
    model: &mut M,
    task: Task,
    on_event: &mut impl FnMut(&Event),
) -> Result<EpisodeRecord, RolesError> {
    let input = services.episode_input(task)?;
    let episode = Episode::new(input, &cfg.episode, &model.name());
    Ok(run_episode(
        episode,
        &cfg.episode,
        model,
        services.verifier.as_ref(),
        &services.finalizer,
        on_event,
    ))
}

fn build_task(opts: &SolveOptions, services: &Services) -> Result<Task, RolesError> {
    let text_task = |text: String| Task {
        id: format!("{}/input", opts.domain),
        domain: opts.domain.clone(),
        text,
        reference: None,
    };
    match &opts.task {
        TaskInput::Text(t) => Ok(text_task(t.clone())),
        TaskInput::File(p) => {
            let text = read_file(p)?;
            let mut t = text_task(text);
            t.id = format!(
                "{}/{}",
                opts.domain,
                p.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            Ok(t)
        }
        TaskInput::Generated { seed, size } => {
            let adapter = services.domain(&opts.domain)?;
            adapter
                .generate(*seed, *size)
                .map_err(|e| RolesError::Domain {
                    domain: opts.domain.clone(),
                    message: e.to_string(),
                })
        }
        TaskInput::ProblemFile(p) => task_from_problem_file(services.domain(&opts.domain)?.as_ref(), p),
        TaskInput::Task(t) => {
            let mut t = t.clone();
            if !opts.domain.is_empty() {
                t.domain = opts.domain.clone();
            }
            Ok(t)
        }
    }
}

/// One event as the terminal shows it (several lines for generations and verdicts).
pub fn render_event(e: &Event) -> String {
    let mut s = String::new();
    match e {
        Event::Started { task_id, strategy } => {
            let _ = write!(s, "== {task_id} ({strategy})");
        }
        Event::Generated {
            index,
            role,
            kind,
            text,
            tokens,
            secs,
            ..
        } => {
            let _ = writeln!(
                s,
                "-- step {index}: {role} ({kind}), {tokens} tokens in {secs:.1} s"
            );
            for line in text.trim().lines().take(60) {
                let _ = writeln!(s, "   | {line}");
            }
            s.pop();
        }
        Event::Verified { index, verdict, .. } => {
            let planner = if verdict.solver_time_ms > 0 {
                format!(", planner {} ms", verdict.solver_time_ms)
            } else {
                String::new()
            };
            if verdict.solved {
                let _ = write!(
                    s,
                    "   verifier (step {index}): solved, {} steps ({} ms{planner})",
                    verdict.plan.len(),
                    verdict.time_ms
                );
            } else {
                let _ = write!(
                    s,
                    "   verifier (step {index}): not solved, {:?} ({} ms{planner})",
                    verdict.outcome, verdict.time_ms
                );
                for d in verdict.diagnostics.iter().filter(|d| d.is_error()).take(3) {
                    let at = match (d.line, d.column) {
                        (Some(l), Some(c)) => format!(" at {l}:{c}"),
                        _ => String::new(),
                    };
                    let _ = write!(
                        s,
                        "\n     [{}]{at} {}",
                        d.category,
                        d.message.lines().next().unwrap_or_default()
                    );
                }
            }
        }
        Event::Judged { index, score, .. } => {
            let _ = write!(s, "   judge (step {index}): s_J = {score:.3}");
        }
        Event::Finished(rec) => {
            let _ = write!(
                s,
                "== {}: {} after {} verifier call(s), {} repair(s), {:.1} s",
                rec.task_id,
                if rec.solved { "solved" } else { "not solved" },
                rec.solver_calls,
                rec.repairs,
                rec.timings.wall_ms / 1e3
            );
            if let Some(r) = &rec.rewards {
                let _ = write!(
                    s,
                    "\n   rewards: actor {:.2}, editor {:.2}, judge {:.2}",
                    r.actor, r.editor, r.judge
                );
            }
            if let Some(f) = &rec.faithfulness {
                let drift = f
                    .drift
                    .map_or("none".to_string(), |d| d.as_str().to_string());
                let _ = write!(
                    s,
                    "\n   faithful: {} (drift: {drift}, schema F1 {:.2})",
                    f.faithful, f.schema_f1
                );
            }
            if let Some(err) = &rec.error {
                let _ = write!(s, "\n   note: {err}");
            }
            if let Some(spec) = &rec.final_spec {
                let _ = write!(s, "\n-- final problem:\n{}", spec.problem.trim());
                if rec.mode == crate::Mode::Full {
                    let _ = write!(s, "\n-- final domain:\n{}", spec.domain.trim());
                }
            }
            if !rec.final_plan.is_empty() {
                let _ = write!(s, "\n-- plan:\n{}", rec.final_plan.join("\n"));
            }
        }
    }
    s
}

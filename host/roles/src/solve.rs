//! `onebrain solve`: one task, one episode, each step reported as it happens.

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

/// A domain no plugin has and no PDDL states: its description in prose, for `full` mode
/// (the model writes the domain and the problem).
#[derive(Clone, Debug, PartialEq)]
pub struct DomainText {
    /// The file describing the domain.
    pub path: PathBuf,
    /// A reference domain and problem, for the faithfulness check.
    pub reference: Option<ReferenceFiles>,
}

/// A reference spec given as two PDDL files.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceFiles {
    /// The reference domain.
    pub domain: PathBuf,
    /// The reference problem, of that domain.
    pub problem: PathBuf,
}

/// A domain that no plugin provides.
#[derive(Clone, Debug, PartialEq)]
pub enum CustomDomain {
    /// Given as PDDL (`--domain-file`): `problem` mode.
    File(DomainFile),
    /// Given as prose (`--domain-text`): `full` mode.
    Text(DomainText),
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
    /// A domain given as a file instead of a plugin (`--domain-file`, `--domain-text`).
    pub custom_domain: Option<CustomDomain>,
}

fn file_stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// A text file's name without `.txt` and without the `.domain` or `.problem` of the
/// text-folder layout: `lamps.domain.txt` names `lamps`.
fn text_stem(path: &Path) -> String {
    let stem = file_stem(path);
    let name = stem.strip_suffix(".domain").or_else(|| stem.strip_suffix(".problem")).unwrap_or(&stem);
    name.to_string()
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

/// Reads a problem file that must parse and be of `domain` (read from `domain_path`).
fn read_problem_of(domain: &onebrain_pddl::Domain, domain_path: &Path, path: &Path) -> Result<String, RolesError> {
    let problem = read_pddl(path)?;
    let parsed = onebrain_pddl::parse_problem(&problem).map_err(|e| pddl_err(path, e))?;
    if !parsed.domain_name.eq_ignore_ascii_case(&domain.name) {
        return Err(pddl_err(
            path,
            format!(
                "line {}, column {}: the problem is of domain `{}`, not `{}` ({})",
                parsed.domain_span.line,
                parsed.domain_span.column,
                parsed.domain_name,
                domain.name,
                domain_path.display()
            ),
        ));
    }
    Ok(problem)
}

/// A reference spec from two files: the domain must parse, and the problem must parse and
/// be of that domain; otherwise the error names the file and the line.
pub fn read_reference(files: &ReferenceFiles) -> Result<Spec, RolesError> {
    let domain_pddl = read_pddl(&files.domain)?;
    let domain = onebrain_pddl::parse_domain(&domain_pddl).map_err(|e| pddl_err(&files.domain, e))?;
    let problem = read_problem_of(&domain, &files.domain, &files.problem)?;
    Ok(Spec { domain: domain_pddl, problem })
}

/// Reads a text a task needs (a description, a task statement); an empty one is an error
/// naming the file.
pub fn read_nonempty_text(path: &Path) -> Result<String, RolesError> {
    let text = read_file(path)?;
    if text.trim().is_empty() {
        return Err(RolesError::Config(format!("{} is empty", path.display())));
    }
    Ok(text)
}

/// The episode input of a task whose domain is given only in prose (`full` mode: the model
/// writes the domain and the problem). `domain` names the domain in the task id and the
/// report; a `reference` enables the faithfulness check.
pub fn domain_text_input(domain: &str, description: String, task_text: String, task_name: &str, reference: Option<Spec>) -> EpisodeInput {
    EpisodeInput {
        task: Task { id: format!("{domain}/{task_name}"), domain: domain.to_string(), text: task_text, reference },
        description,
        domain_pddl: None,
        example: None,
        foreign_example: None,
    }
}

/// The episode input of a task over a domain file: the domain PDDL is given (`problem`
/// mode), the description says so, and a reference problem (checked against the domain)
/// enables the faithfulness check.
fn domain_file_input(d: &DomainFile, task_text: String, task_name: String) -> Result<EpisodeInput, RolesError> {
    let domain_pddl = read_pddl(&d.path)?;
    let domain = onebrain_pddl::parse_domain(&domain_pddl).map_err(|e| pddl_err(&d.path, e))?;
    let reference = match &d.reference_problem {
        Some(p) => Some(Spec { domain: domain_pddl.clone(), problem: read_problem_of(&domain, &d.path, p)? }),
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
    if let Some(custom) = &opts.custom_domain {
        // No plugin: the model writes the problem for the given domain, or (prose) both.
        let flag = match custom {
            CustomDomain::File(_) => "--domain-file",
            CustomDomain::Text(_) => "--domain-text",
        };
        let (text, name) = match &opts.task {
            TaskInput::Text(t) => (t.clone(), "input".to_string()),
            TaskInput::File(p) => (read_nonempty_text(p)?, text_stem(p)),
            _ => return Err(RolesError::Config(format!("{flag} takes the task as --text or --file"))),
        };
        if text.trim().is_empty() {
            return Err(RolesError::Config("the task text is empty".into()));
        }
        let mut cfg = opts.config.clone();
        let input = match custom {
            CustomDomain::File(d) => {
                cfg.episode.mode = crate::extract::Mode::Problem;
                domain_file_input(d, text, name)?
            }
            CustomDomain::Text(d) => {
                let strategy = cfg.episode.strategy;
                if strategy.writes_plan() || strategy == crate::Strategy::LlmPlusP {
                    return Err(RolesError::Config(format!(
                        "--domain-text runs the multi-role or self-refine strategy: {strategy} needs a domain plugin"
                    )));
                }
                cfg.episode.mode = crate::extract::Mode::Full;
                let description = read_nonempty_text(&d.path)?;
                let reference = d.reference.as_ref().map(read_reference).transpose()?;
                domain_text_input(&text_stem(&d.path), description, text, &name, reference)
            }
        };
        let input = services.with_foreign_example(input)?;
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

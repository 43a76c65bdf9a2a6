use std::path::{Path, PathBuf};

use anyhow::Context;
use onebrain_eval::planbench_task;
use onebrain_roles::{
    config_base, render_event, side_by_side, solve, Constrain, CustomDomain, DomainFile, DomainText, Mode, ReferenceFiles, SolveConfig,
    EpisodeRecord, SolveOptions, Strategy, TaskInput,
};

use crate::cmd::print_json;
use crate::flags::SolveArgs;
use crate::out::{self, outln};

pub fn run(args: SolveArgs) -> anyhow::Result<()> {
    let mut config = SolveConfig::from_file(&args.config)?;
    if let Some(s) = &args.strategy {
        config.episode.strategy = s.parse::<Strategy>()?;
    }
    args.device.apply(&mut config.model);
    if let Some(m) = &args.mode {
        config.episode.mode = m.parse::<Mode>().map_err(anyhow::Error::msg)?;
    }
    if let Some(c) = &args.constrain {
        config.episode.constrain = c.parse::<Constrain>()?;
    }
    if let Some(dir) = &args.checkpoint {
        config.checkpoint = Some(absolute(dir)?);
    }
    if let Some(path) = &args.domain_file {
        check_domain_file(path, &config)?;
    }
    let domain = args.domain.clone().unwrap_or_default();
    let task = if let Some(path) = args.problem_file {
        TaskInput::ProblemFile(path)
    } else if let Some(text) = args.text {
        TaskInput::Text(text)
    } else if let Some(file) = args.file {
        TaskInput::File(file)
    } else if let Some(seed) = args.seed {
        TaskInput::Generated {
            seed,
            size: args.size,
        }
    } else {
        let id = args
            .planbench
            .as_deref()
            .expect("clap requires one task source");
        TaskInput::Task(
            planbench_task(&args.data, id, &domain)
                .with_context(|| format!("cannot load PlanBench task {id}"))?,
        )
    };
    let mut opts = SolveOptions {
        config,
        base: config_base(&args.config),
        domain,
        task,
        custom_domain: custom_domain(args.domain_file, args.domain_text, args.reference_domain, args.reference_problem)?,
    };
    let json = args.json;
    let record = solve_printing(&opts, json)?;
    if json {
        print_json(&record)?;
    }
    let Some(trained) = args.side_by_side else { return Ok(()) };
    let first_label = match &opts.config.checkpoint {
        Some(dir) => checkpoint_label(dir),
        None => "base".to_string(),
    };
    opts.config.checkpoint = Some(absolute(&trained)?);
    let second_label = checkpoint_label(&trained);
    outln!("\n== the same task with the role parameters of {}", trained.display())?;
    let second = solve_printing(&opts, false)?;
    outln!("\n== side by side\n{}", side_by_side(&[(&first_label, &record), (&second_label, &second)]).trim_end())?;
    Ok(())
}

/// One episode, each event printed as it happens unless `json` (the record alone is then
/// printed by the caller).
fn solve_printing(opts: &SolveOptions, json: bool) -> anyhow::Result<EpisodeRecord> {
    // An event line that cannot be printed: a broken pipe ends the process
    // quietly at once (the reader is gone, the episode's work would be lost on
    // nobody); any other error ends the command once the episode is over.
    let mut failed = None;
    let record = solve(opts, &mut |event| {
        if !json && failed.is_none() {
            failed = out::quit_on_broken_pipe(outln!("{}", render_event(event))).err();
        }
    })?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(record),
    }
}

/// A checkpoint's column heading: `train-cpu-full, update 30` for a folder
/// `…/train-cpu-full/checkpoints/update-000030`, else the folder's name.
fn checkpoint_label(dir: &Path) -> String {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let folder = name(dir).unwrap_or_else(|| dir.display().to_string());
    let Some(update) = folder.strip_prefix("update-").and_then(|n| n.parse::<u64>().ok()) else { return folder };
    let run = dir.parent().filter(|p| name(p).as_deref() == Some("checkpoints")).and_then(Path::parent).and_then(name);
    match run {
        Some(run) => format!("{run}, update {update}"),
        None => format!("update {update}"),
    }
}

/// A `--domain-file` past the grammar's bounds is refused before the model loads, naming the
/// file, the figure and the limit. One that does not parse is left to the episode,
/// which reports it as before.
fn check_domain_file(path: &Path, config: &SolveConfig) -> anyhow::Result<()> {
    if config.episode.constrain == Constrain::None {
        return Ok(());
    }
    let spec = onebrain_model::ConstraintSpec::Problem {
        domain: crate::cmd::read(path)?,
        prefix: String::new(),
        limits: config.episode.grammar,
        avoid: Vec::new(),
        forbid_goal_at_init: false,
        init_mutex: Vec::new(),
    };
    match spec.check_bounds() {
        Err(e @ onebrain_grammar::GrammarError::TooLarge { .. }) => anyhow::bail!("--domain-file {}: {e}", path.display()),
        _ => Ok(()),
    }
}

/// `--domain-file` or `--domain-text` with their references (clap keeps the two apart).
fn custom_domain(
    domain_file: Option<PathBuf>,
    domain_text: Option<PathBuf>,
    reference_domain: Option<PathBuf>,
    reference_problem: Option<PathBuf>,
) -> anyhow::Result<Option<CustomDomain>> {
    Ok(match (domain_file, domain_text) {
        (Some(path), _) => Some(CustomDomain::File(DomainFile { path, reference_problem })),
        (None, Some(path)) => {
            let reference = match (reference_domain, reference_problem) {
                (Some(domain), Some(problem)) => Some(ReferenceFiles { domain, problem }),
                (None, None) => None,
                (None, Some(_)) => anyhow::bail!(
                    "--domain-text has no reference domain: give --reference-domain with --reference-problem"
                ),
                (Some(_), None) => unreachable!("clap requires --reference-problem with --reference-domain"),
            };
            Some(CustomDomain::Text(DomainText { path, reference }))
        }
        (None, None) => None,
    })
}

/// A path given on the command line, made independent of the config file's folder.
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}

use std::io::Write;

use onebrain_eval::{
    merge_eval, progress_line, run_eval, run_transfer_eval, trace_path, write_report, EvalConfig, Progress, Shard,
    TransferRecord,
};
use onebrain_roles::{config_base, render_event};

use crate::flags::EvalArgs;
use crate::out::{errln, outln};

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    // The first SIGINT or SIGTERM stops the run between two episodes (exit 130 or 143,
    // `main`); a second one at once.
    onebrain_durable::install_stop_handlers()?;
    let mut cfg = EvalConfig::from_file(&args.config)?;
    let base = config_base(&args.config);
    if let Some(dir) = &args.checkpoint {
        cfg.checkpoint = Some(if dir.is_absolute() {
            dir.clone()
        } else {
            std::env::current_dir()?.join(dir)
        });
    }
    args.device.apply(&mut cfg.model);
    if let Some(c) = &args.constrain {
        cfg.episode.constrain = c.parse::<onebrain_roles::Constrain>()?;
    }
    if let Some(seed) = args.seed {
        cfg.episode.seed = seed;
    }
    if let Some(n) = args.in_flight {
        cfg.in_flight = n as usize;
    }
    if let Some(dir) = &args.out_dir {
        cfg.out_dir = std::env::current_dir()?.join(dir);
    }
    if args.report_only {
        let paths = write_report(
            &cfg.name,
            &trace_path(&cfg, &base),
            cfg.report.delta,
            cfg.report.checkpoints,
        )?;
        outln!("report: {}", paths.markdown.display())?;
        return Ok(());
    }
    if args.shard.is_some() && !cfg.transfer.is_empty() {
        return Err(onebrain_eval::ShardError::Transfer.into());
    }
    if args.merge {
        let (merged, outcome) = merge_eval(&cfg, &base)?;
        outln!("{}\n", outcome.summary)?;
        outln!(
            "merged {} shard(s): {} episode(s) added, {} in the run",
            merged.shards, merged.appended, merged.total
        )?;
        outln!("trace:  {}", outcome.trace_path.display())?;
        outln!("report: {}", outcome.report_paths.markdown.display())?;
        if let Some(e) = outcome.no_answers() {
            return Err(e.into());
        }
        return Ok(());
    }
    if !cfg.benchmarks.is_empty() {
        run_planning(&cfg, &base, args.shard, args.verbose)?;
    }
    if !cfg.transfer.is_empty() {
        let (trace, table) = run_transfer_eval(&cfg, &base, &mut |r: &TransferRecord, done, total| {
            let got = r.parsed.as_deref().unwrap_or("no answer read");
            let mark = if r.correct { "right" } else { "wrong" };
            errln!("{done}/{total} {} {:<36} {mark} ({got}; {} tokens, {:.0} s)", r.kind.column(), r.id, r.output_tokens, r.model_secs);
        })?;
        outln!("{table}")?;
        outln!("transfer trace: {}", trace.display())?;
    }
    Ok(())
}

fn run_planning(cfg: &EvalConfig, base: &std::path::Path, shard: Option<Shard>, verbose: bool) -> anyhow::Result<()> {
    let outcome = run_eval(cfg, base, shard, &mut |p| print_progress(p, verbose))?;
    outln!("{}\n", outcome.summary)?;
    outln!(
        "ran {} episode(s), {} found in the trace",
        outcome.ran, outcome.skipped
    )?;
    outln!("trace:  {}", outcome.trace_path.display())?;
    outln!("report: {}", outcome.report_paths.markdown.display())?;
    if let Some(s) = shard {
        outln!("shard {s}: when every shard is done, `onebrain eval --config C --merge` writes the run's report")?;
    }
    // A run with no answer at all (every request refused) is a set-up error, not 0 %.
    if let Some(e) = outcome.no_answers() {
        return Err(e.into());
    }
    Ok(())
}

/// An eval's progress on stderr: the plan, a line per finished episode, and with `verbose`
/// every step (`onebrain eval`, and `onebrain posthoc`'s evaluations).
pub(super) fn print_progress(p: &Progress, verbose: bool) {
    match p {
        Progress::Planned {
            total,
            done,
            torn_tail,
        } => {
            let torn = if *torn_tail {
                " (the trace's torn last line, from a killed run, was dropped)"
            } else {
                ""
            };
            errln!("{total} episodes, {done} already in the trace{torn}");
        }
        Progress::Event(e) if verbose => errln!("{}", render_event(e)),
        Progress::Event(_) => {}
        Progress::Finished {
            done,
            total,
            record,
        } => {
            errln!("{}", progress_line(*done, *total, record));
            let _ = std::io::stderr().flush();
        }
    }
}

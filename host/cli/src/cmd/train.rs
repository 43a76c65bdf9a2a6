use std::io::Write;

use onebrain_eval::progress_line;
use onebrain_roles::config_base;
use anyhow::{bail, Context};
use onebrain_train::{ClusterRole, TrainConfig, TrainEvent, Trainer};

use crate::flags::{TrainArgs, TrainRole};
use crate::out::{err, errln, outln};

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let mut cfg = TrainConfig::from_file(&args.config)?;
    let base = config_base(&args.config);
    if let Some(n) = args.updates {
        cfg.updates = n;
    }
    args.device.apply(&mut cfg.model);
    if let Some(dir) = &args.out_dir {
        cfg.out_dir = std::env::current_dir()?.join(dir);
    }
    if args.skip_heldout {
        cfg.eval_config = None;
        cfg.eval_every = 0;
    }
    let role = cluster_role(&args)?;
    // The first SIGINT or SIGTERM stops the run at its next safe point (exit 130 or 143,
    // `main`); a second one at once.
    onebrain_durable::install_stop_handlers()?;
    let verbose = args.verbose;
    if let Some(role) = role {
        let run_dir = base.join(&cfg.out_dir);
        role.run(cfg, &base, &mut |e| print_event(verbose, e))?;
        outln!("run:         {}", run_dir.display())?;
        return Ok(());
    }
    let mut trainer = Trainer::open(cfg, &base, args.resume)?;
    trainer.run(None, &mut |e| print_event(verbose, e))?;
    let dir = trainer.run_dir();
    outln!("run:         {}", dir.display())?;
    outln!("metrics:     {}", dir.join("metrics.jsonl").display())?;
    outln!("curves:      {}", dir.join("curves.svg").display())?;
    if dir.join("heldout.jsonl").exists() {
        outln!("held-out:    {}", dir.join("heldout.jsonl").display())?;
    }
    outln!("checkpoints: {}", dir.join("checkpoints").display())?;
    Ok(())
}

/// The job-array role the flags name, if any: `--actor` and `--actors` only with theirs.
fn cluster_role(args: &TrainArgs) -> anyhow::Result<Option<ClusterRole>> {
    let role = match (args.role, args.actor.as_ref(), args.actors) {
        (None, None, None) => return Ok(None),
        (None, ..) => bail!("--actor and --actors need --role (actor or learner)"),
        (Some(TrainRole::Learner), None, Some(actors)) => ClusterRole::Learner { actors },
        (Some(TrainRole::Actor), Some(s), None) => ClusterRole::Actor { k: s.index, n: s.count },
        (Some(TrainRole::Array), None, None) => {
            let var = |name: &str| -> anyhow::Result<usize> {
                let v = std::env::var(name).with_context(|| format!("--role array reads {name}: not set (not a Slurm array task?)"))?;
                v.parse().with_context(|| format!("{name}={v}: not a number"))
            };
            ClusterRole::of_array_task(var("SLURM_ARRAY_TASK_ID")?, var("SLURM_ARRAY_TASK_COUNT")?)?
        }
        (Some(TrainRole::Learner), ..) => bail!("--role learner takes --actors N, and no --actor"),
        (Some(TrainRole::Actor), ..) => bail!("--role actor takes --actor K/N, and no --actors"),
        (Some(TrainRole::Array), ..) => bail!("--role array reads its role from Slurm's variables: no --actor or --actors"),
    };
    if args.resume {
        bail!("a --role always continues what its files hold: no --resume");
    }
    Ok(Some(role))
}

/// Prints what the loop reports, on stderr.
fn print_event(verbose: bool, e: &TrainEvent) {
    match e {
        TrainEvent::Started {
            done,
            total,
            trainable,
            run_dir,
        } => errln!(
            "training {} ({trainable} trainable parameters): {done} of {total} updates done",
            run_dir.display()
        ),
        TrainEvent::Episode {
            update,
            done,
            total,
            record,
        } => episode_progress(
            verbose,
            || {
                format!(
                    "  update {} episode {done}/{total}: {} b0={} bT={} repairs={}{}",
                    update + 1,
                    record.task_id,
                    u8::from(record.b0),
                    u8::from(record.solved),
                    record.repairs,
                    record.error.as_deref().map(|e| format!(" error: {e}")).unwrap_or_default()
                )
            },
            || format!("  update {} rollouts {done}/{total}", update + 1),
        ),
        TrainEvent::Updated(row) => finish_line(verbose, &row.line()),
        TrainEvent::Checkpoint(dir) => errln!("  checkpoint {}", dir.display()),
        TrainEvent::HeldOutEpisode {
            update,
            done,
            total,
            record,
        } => episode_progress(
            verbose,
            || format!("  held-out {update}: {}", progress_line(*done, *total, record)),
            || format!("  held-out after {update} updates: {done}/{total}"),
        ),
        TrainEvent::HeldOut(row) => finish_line(verbose, &row.line()),
        TrainEvent::Note(note) => errln!("onebrain: {note}"),
    }
    let _ = std::io::stderr().flush();
}

/// One episode done: its own line when verbose, else the progress line rewritten in place.
fn episode_progress(verbose: bool, line: impl FnOnce() -> String, bar: impl FnOnce() -> String) {
    if verbose {
        errln!("{}", line());
    } else {
        err!("\r{}", bar());
    }
}

/// A summary line, over the progress line it ends when not verbose.
fn finish_line(verbose: bool, line: &str) {
    if !verbose {
        err!("\r");
    }
    errln!("{line}");
}

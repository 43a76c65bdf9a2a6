use std::io::Write;

use onebrain_eval::progress_line;
use onebrain_roles::config_base;
use onebrain_train::{TrainConfig, TrainEvent, Trainer};

use crate::flags::TrainArgs;
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
    // The first SIGINT or SIGTERM stops the run at its next safe point (exit 130 or 143,
    // `main`); a second one at once.
    onebrain_durable::install_stop_handlers()?;
    let mut trainer = Trainer::open(cfg, &base, args.resume)?;
    let verbose = args.verbose;
    trainer.run(None, &mut |e| {
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
            } => {
                if verbose {
                    errln!(
                        "  update {} episode {done}/{total}: {} b0={} bT={} repairs={}{}",
                        update + 1,
                        record.task_id,
                        u8::from(record.b0),
                        u8::from(record.solved),
                        record.repairs,
                        record
                            .error
                            .as_deref()
                            .map(|e| format!(" error: {e}"))
                            .unwrap_or_default()
                    );
                } else {
                    err!("\r  update {} rollouts {done}/{total}", update + 1);
                }
            }
            TrainEvent::Updated(row) => finish_line(verbose, &row.line()),
            TrainEvent::Checkpoint(dir) => errln!("  checkpoint {}", dir.display()),
            TrainEvent::HeldOutEpisode {
                update,
                done,
                total,
                record,
            } => {
                if verbose {
                    errln!("  held-out {update}: {}", progress_line(*done, *total, record));
                } else {
                    err!("\r  held-out after {update} updates: {done}/{total}");
                }
            }
            TrainEvent::HeldOut(row) => finish_line(verbose, &row.line()),
            TrainEvent::Note(note) => errln!("onebrain: {note}"),
        }
        let _ = std::io::stderr().flush();
    })?;
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

/// A summary line, over the progress line it ends when not verbose.
fn finish_line(verbose: bool, line: &str) {
    if !verbose {
        err!("\r");
    }
    errln!("{line}");
}

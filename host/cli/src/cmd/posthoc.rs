//! `onebrain posthoc`: a training run's kept checkpoints evaluated afterwards on an eval
//! config's tasks, a row per update in `RUN/posthoc/SET.jsonl` (`compare --set SET`).

use onebrain_train::{evaluate_update, posthoc_dir, posthoc_rows_path, set_name};

use crate::flags::PosthocArgs;
use crate::out::{errln, outln};

pub fn run(args: PosthocArgs) -> anyhow::Result<()> {
    // As `eval`: the first SIGINT or SIGTERM stops between two episodes, a second at once.
    onebrain_durable::install_stop_handlers()?;
    let set = set_name(&args.config)?;
    for &update in &args.updates {
        errln!("== update {update}: {}", posthoc_dir(&args.run, &set).join(format!("update-{update:06}")).display());
        let row = evaluate_update(
            &args.run,
            &args.config,
            update,
            |cfg| {
                args.device.apply(&mut cfg.model);
                if let Some(n) = args.in_flight {
                    cfg.in_flight = n as usize;
                }
            },
            &mut |p| super::eval::print_progress(p, false),
        )?;
        outln!("{}", row.line())?;
    }
    outln!("rows: {}", posthoc_rows_path(&args.run, &set).display())?;
    Ok(())
}

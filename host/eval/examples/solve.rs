//! `onebrain solve` without the CLI, on a PlanBench task:
//! `cargo run --release -p onebrain-eval --example solve -- configs/solve-demo.toml blocksworld blocksworld_3/2`.

use std::path::PathBuf;

use onebrain_eval::planbench_task;
use onebrain_roles::{config_base, render_event, solve, SolveConfig, SolveOptions, TaskInput};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 4, "usage: solve CONFIG DOMAIN SET/INSTANCE");
    let path = PathBuf::from(&args[1]);
    let data = std::env::var("ONEBRAIN_DATA").unwrap_or_else(|_| "../shared/data".into());
    let task = planbench_task(&PathBuf::from(data), &args[3], &args[2])?;
    let opts = SolveOptions {
        config: SolveConfig::from_file(&path)?,
        base: config_base(&path),
        domain: args[2].clone(),
        task: TaskInput::Task(task),
    };
    let rec = solve(&opts, &mut |e| println!("{}", render_event(e)))?;
    eprintln!("{}", serde_json::to_string(&rec.timings)?);
    Ok(())
}

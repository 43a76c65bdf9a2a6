//! Runs an eval config without the CLI (the same library call `onebrain eval` makes):
//! `cargo run --release -p onebrain-eval --example eval -- configs/eval-base.toml`.

use std::path::PathBuf;

use onebrain_eval::{progress_line, run_eval, EvalConfig, Progress};
use onebrain_roles::{config_base, render_event};

fn main() -> anyhow::Result<()> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "configs/eval-base.toml".into()),
    );
    let verbose = std::env::var_os("EVAL_VERBOSE").is_some();
    let cfg = EvalConfig::from_file(&path)?;
    let out = run_eval(&cfg, &config_base(&path), &mut |p| match p {
        Progress::Planned {
            total,
            done,
            torn_tail,
        } => {
            eprintln!(
                "{total} episodes, {done} already in the trace{}",
                if *torn_tail {
                    " (a torn last line was dropped)"
                } else {
                    ""
                }
            )
        }
        Progress::Event(e) if verbose => eprintln!("{}", render_event(e)),
        Progress::Event(_) => {}
        Progress::Finished {
            done,
            total,
            record,
        } => eprintln!("{}", progress_line(*done, *total, record)),
    })?;
    println!(
        "{}\n\ntrace: {}\nreport: {}",
        out.summary,
        out.trace_path.display(),
        out.report_paths.markdown.display()
    );
    Ok(())
}

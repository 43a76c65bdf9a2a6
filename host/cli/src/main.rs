//! `onebrain`: glue between flags and the libraries. No algorithm lives here.
//!
//! Exit codes. The commands that answer yes or no (`check`, `validate`,
//! `faithful`) exit as grep does: 0 for yes (solved, valid, faithful), 1 for no,
//! 2 for an error (usage, I/O, set-up), so a script can tell a rejected spec from a
//! solved one without reading its output. Every other command exits 0 when it did
//! its work, 1 for I/O and set-up errors and 2 for usage errors. A reader that
//! closes the pipe early (`onebrain plugins check | head -1`) ends the command
//! quietly with status 0, as ripgrep does (`out`). `train`, `eval` and `posthoc`
//! stopped by SIGINT or SIGTERM exit 130 or 143 (128 + the signal), after saying
//! where they stopped.

mod cmd;
mod flags;
mod out;
mod render;

use std::process::ExitCode;

use clap::Parser;

use crate::out::errln;

/// The system allocator, counting the heap the program holds: a training run's metrics give
/// each phase's peak of it beside the resident peak (`perf/update_peak_heap_mib`), which tells
/// memory the run holds from memory the heap kept.
#[global_allocator]
static HEAP: onebrain_model::CountingAllocator = onebrain_model::CountingAllocator::new();

fn main() -> ExitCode {
    let flags = flags::Flags::parse();
    let answers_yes_or_no = flags.command.answers_yes_or_no();
    match cmd::run(flags) {
        Ok(cmd::Status::Yes) => ExitCode::SUCCESS,
        Ok(cmd::Status::No) => ExitCode::from(1),
        // Rust ignores SIGPIPE, so a closed pipe comes back as this error.
        Err(err) if out::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            errln!("onebrain: {err:#}");
            // A run that SIGINT or SIGTERM stopped exits as a shell reports that signal's kill
            // (130, 143), having said where it stopped.
            if let Some(signal) = onebrain_durable::stop_requested() {
                return ExitCode::from(signal.exit_code());
            }
            ExitCode::from(if answers_yes_or_no { 2 } else { 1 })
        }
    }
}

//! `onebrain`: glue between flags and the libraries. No algorithm lives here.
//!
//! Exit codes: 0 when a verdict was reached (solved or not, valid or not),
//! 1 for I/O and set-up errors, 2 for usage errors. A reader that closes the
//! pipe early (`onebrain plugins check | head -1`) ends the command quietly
//! with status 0, as ripgrep does (`out`).

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
    match cmd::run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        // Rust ignores SIGPIPE, so a closed pipe comes back as this error.
        Err(err) if out::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            errln!("onebrain: {err:#}");
            ExitCode::from(1)
        }
    }
}

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

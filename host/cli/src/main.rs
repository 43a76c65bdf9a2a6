//! `onebrain`: glue between flags and the libraries. No algorithm lives here.
//!
//! Exit codes: 0 when a verdict was reached (solved or not, valid or not),
//! 1 for I/O and set-up errors, 2 for usage errors.

mod cmd;
mod flags;
mod render;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let flags = flags::Flags::parse();
    match cmd::run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("onebrain: {err:#}");
            ExitCode::from(1)
        }
    }
}

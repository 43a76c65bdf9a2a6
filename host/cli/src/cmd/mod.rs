//! One module per subcommand; `run` is the single dispatch.

mod bench;
mod check;
mod compare;
mod eval;
mod export;
mod faithful;
mod generate;
mod plugins;
mod posthoc;
mod solve;
mod train;
mod validate;

use std::path::Path;

use anyhow::Context;

use crate::flags::{Command, Flags};
use crate::out::outln;

/// What a command that ran to its end answers: the exit status 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Solved, valid, faithful; or, for a command that answers no question, done.
    Yes,
    /// Not solved, not valid, not faithful (`check`, `validate`, `faithful`).
    No,
}

impl Status {
    /// `Yes` when `b`, else `No`.
    pub fn of(b: bool) -> Status {
        if b {
            Status::Yes
        } else {
            Status::No
        }
    }
}

/// Runs the subcommand the user chose.
pub fn run(flags: Flags) -> anyhow::Result<Status> {
    let done = |r: anyhow::Result<()>| r.map(|()| Status::Yes);
    match flags.command {
        Command::Check(args) => check::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Faithful(args) => faithful::run(args),
        Command::Generate(args) => done(generate::run(args)),
        Command::Plugins(args) => done(plugins::run(args)),
        Command::Bench(args) => done(bench::run(args)),
        Command::Solve(args) => done(solve::run(args)),
        Command::Eval(args) => done(eval::run(args)),
        Command::Train(args) => done(train::run(args)),
        Command::Compare(args) => done(compare::run(args)),
        Command::Posthoc(args) => done(posthoc::run(args)),
        Command::Export(args) => done(export::run(args)),
    }
}

/// Reads a text file, naming it in the error.
pub fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Prints one JSON object on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

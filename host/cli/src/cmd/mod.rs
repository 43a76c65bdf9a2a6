//! One module per subcommand; `run` is the single dispatch.

mod bench;
mod bench_training;
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

/// Runs the subcommand the user chose.
pub fn run(flags: Flags) -> anyhow::Result<()> {
    match flags.command {
        Command::Check(args) => check::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Faithful(args) => faithful::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Solve(args) => solve::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Train(args) => train::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Posthoc(args) => posthoc::run(args),
        Command::Export(args) => export::run(args),
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

//! Printing that ends quietly on a broken pipe, as ripgrep's does.
//!
//! Rust ignores `SIGPIPE`, so a write to a pipe whose reader has gone returns
//! `BrokenPipe`, and `println!` turns that into a panic (exit status 101, a
//! panic message on stderr). `onebrain plugins check | head -1` closes the pipe
//! on purpose: the reader has what it wants, and that is not an error. So every
//! line the binary prints goes through the macros here instead:
//!
//! - [`outln!`] and [`out!`] write to stdout and return the `io::Result`, which
//!   the subcommand passes up with `?`; `main` then finds `BrokenPipe` in the
//!   error's chain and exits 0 without a word ([`is_broken_pipe`]).
//! - [`errln!`] and [`err!`] write to stderr (progress, warnings). Their callers
//!   cannot pass an error up (progress callbacks), so a broken pipe there ends
//!   the process at once with status 0, as ripgrep's `eprintln_locked!` does;
//!   any other stderr error is dropped, as there is nowhere left to report it.
//! - [`quit_on_broken_pipe`] does the same for a stdout write inside such a
//!   callback (`solve`'s event lines).
//!
//! Status 0 is ripgrep's choice and the documented one (README, "Hostile
//! inputs"): the reader closing early is the normal end of a pipeline. Ending
//! at once is also what a C program's default `SIGPIPE` does; traces and
//! checkpoints are written so that a run killed at any point resumes.

use std::fmt;
use std::io::{self, Write};

/// Writes `args` to stdout (locked, so a line is never split by another thread).
pub fn stdout(args: fmt::Arguments) -> io::Result<()> {
    io::stdout().lock().write_fmt(args)
}

/// Writes `args` to stderr; a broken pipe ends the process quietly (status 0).
pub fn stderr(args: fmt::Arguments) {
    let mut e = io::stderr().lock();
    if let Err(err) = e.write_fmt(args).and_then(|()| e.flush()) {
        if err.kind() == io::ErrorKind::BrokenPipe {
            quit();
        }
    }
}

/// For a stdout write whose error cannot be passed up: a broken pipe ends the
/// process quietly (status 0), any other error is returned to the caller.
pub fn quit_on_broken_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => quit(),
        other => other,
    }
}

/// Whether `err` comes from a write to a pipe whose reader has gone.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn quit() -> ! {
    std::process::exit(0)
}

/// `println!` that returns the `io::Result` instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that returns the `io::Result` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that ends the process quietly on a broken pipe instead of panicking.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that ends the process quietly on a broken pipe instead of panicking.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!($($arg)*))
    };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_found_under_context() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("printing the report");
        assert!(is_broken_pipe(&e));
        let other = anyhow::Error::from(io::Error::from(io::ErrorKind::NotFound)).context("reading");
        assert!(!is_broken_pipe(&other));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}

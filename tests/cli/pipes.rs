//! A reader that closes the pipe early (`onebrain plugins check | head -1`)
//! ends the command quietly with status 0, as ripgrep's does, in every subcommand
//! that prints. Before, `println!` panicked on the broken pipe (status 101) in
//! some runs, depending on when `head` exited.
//!
//! Three readers, each run many times on every printing subcommand that needs
//! no model and no planner:
//! - one that closes before anything is written, so the first write fails
//!   every time (deterministic, where `head` is a race);
//! - one that reads the first line and closes, as `head -1` does;
//! - one that gets stdout and stderr on one pipe and closes at once, as
//!   `2>&1 | head -1` does, so a warning on stderr meets the closed pipe first.
//!
//! `ONEBRAIN_PIPE_RUNS` sets the runs per command and reader (default 8).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;

use crate::harness::{build_plugins, fixture, onebrain_command};

fn runs() -> usize {
    std::env::var("ONEBRAIN_PIPE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

/// The printing subcommands that run without a model or a planner, each with
/// enough output that a reader closing after one line leaves writes to fail.
fn commands(broken_dir: &Path, plan: &Path) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let f = |name: &str| fixture(name).display().to_string();
    let broken = broken_dir.display().to_string();
    let plan = plan.display().to_string();
    vec![
        s(&["plugins", "list"]),
        s(&["plugins", "list", "--json"]),
        s(&["plugins", "check"]),
        s(&["plugins", "check", "--json"]),
        s(&["plugins", "inspect", "blocksworld"]),
        // A skipped folder: a warning goes to stderr before anything to stdout.
        s(&["plugins", "list", "--plugins-dir", "plugins", "--plugins-dir", &broken]),
        s(&["validate", "--domain", &f("blocks-domain.pddl"), "--problem", &f("blocks-problem-stack.pddl"), "--plan", &plan]),
        s(&["validate", "--json", "--domain", &f("blocks-domain.pddl"), "--problem", &f("blocks-problem-stack.pddl"), "--plan", &plan]),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Reader {
    ClosedAtOnce,
    HeadOne,
    BothStreamsClosedAtOnce,
}

/// Runs `args` into `reader`; returns the exit code and what stderr said.
fn run(args: &[String], reader: Reader) -> (Option<i32>, String) {
    let (pipe_r, pipe_w) = std::io::pipe().unwrap();
    let mut cmd = onebrain_command();
    cmd.args(args).stdin(Stdio::null());
    match reader {
        Reader::BothStreamsClosedAtOnce => cmd.stdout(pipe_w.try_clone().unwrap()).stderr(pipe_w),
        _ => cmd.stdout(pipe_w).stderr(Stdio::piped()),
    };
    // Closed before the child starts writing: its first write fails.
    let pipe_r = match reader {
        Reader::HeadOne => Some(pipe_r),
        _ => {
            drop(pipe_r);
            None
        }
    };
    let mut child = cmd.spawn().expect("run onebrain");
    // The parent's copies of the write end went into `cmd`; drop them so the
    // reader sees end-of-file when the child is done.
    drop(cmd);
    if let Some(r) = pipe_r {
        let mut line = String::new();
        let _ = BufReader::new(r).read_line(&mut line);
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).unwrap();
    }
    (child.wait().unwrap().code(), stderr)
}

#[test]
fn a_reader_closing_early_ends_every_printing_subcommand_quietly() {
    build_plugins();
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(broken.join("no-manifest")).unwrap();
    std::fs::write(broken.join("no-manifest/plugin.toml"), "name = [").unwrap();
    let plan = tmp.path().join("plan");
    std::fs::write(&plan, "(pick-up b)\n(stack b c)\n(pick-up a)\n(stack a b)\n").unwrap();
    let mut tried = 0;
    for args in commands(&broken, &plan) {
        for reader in [Reader::ClosedAtOnce, Reader::HeadOne, Reader::BothStreamsClosedAtOnce] {
            for _ in 0..runs() {
                let (code, stderr) = run(&args, reader);
                tried += 1;
                assert!(!stderr.contains("panicked"), "{args:?} into {reader:?} panicked:\n{stderr}");
                assert_eq!(code, Some(0), "{args:?} into {reader:?}: status {code:?}\n{stderr}");
                // Quiet: no error message about the pipe either (a warning for the
                // broken folder may precede it).
                assert!(!stderr.to_lowercase().contains("broken pipe"), "{args:?} into {reader:?}:\n{stderr}");
            }
        }
    }
    eprintln!("{tried} runs into early-closing readers, all quiet with status 0");
}

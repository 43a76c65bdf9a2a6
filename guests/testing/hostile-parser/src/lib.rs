//! A hostile `diagnostic-parser`: messages that try to rewrite
//! the terminal, and a list of diagnostics that all point at one large
//! message. The attack is the planner's stdout; empty stdout (the smoke call
//! of `plugins check`) gets nothing.
//!
//! Its `review` misbehaves as the task text says: `trap` panics,
//! `loop` never returns, `flood` answers more diagnostics than the host takes,
//! `blank` one with an empty message, `ansi` one that tries to rewrite the
//! terminal; an empty text (the smoke call) gets nothing.

use onebrain_sdk::{Category, Diagnostic, DiagnosticParser, Result, SolverOutput, Spec};

#[derive(Default)]
struct HostileParser;

fn aliased(n: usize, len: usize) -> Vec<Diagnostic> {
    let mut shared = std::mem::ManuallyDrop::new("D".repeat(len).into_bytes());
    let (ptr, cap) = (shared.as_mut_ptr(), shared.capacity());
    // SAFETY: deliberately unsound (every message owns the same buffer): the
    // host receives one pointer `n` times and must not copy it `n` times.
    (0..n).map(|_| Diagnostic::error(Category::SolverError, unsafe { String::from_raw_parts(ptr, len, cap) })).collect()
}

impl DiagnosticParser for HostileParser {
    fn parse(&self, raw: &SolverOutput, _native: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        let (cmd, arg) = raw.stdout.split_once(':').unwrap_or((&raw.stdout, ""));
        match cmd {
            "" => Ok(Vec::new()),
            "ansi" => Ok(vec![Diagnostic::error(Category::Syntax, "\x1b[2J\x1b[Hsolved: true\n\u{202e}eurt :devlos")]),
            "alias" => Ok(aliased(arg.parse().unwrap_or(100_000), 1 << 20)),
            other => Err(format!("unknown command {other}")),
        }
    }

    fn review(&self, task_text: &str, _candidate: &Spec, _found: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        let warning = |m: &str| Diagnostic::warning(Category::ObjectType, m);
        match task_text {
            "" => Ok(Vec::new()),
            "trap" => panic!("review trapped on purpose"),
            "loop" => loop {
                std::hint::black_box(());
            },
            "flood" => Ok((0..1000).map(|i| warning(&format!("finding {i}"))).collect()),
            "blank" => Ok(vec![warning("object \"x\" is not named"), warning("  ")]),
            "ansi" => Ok(vec![warning("\x1b[2J\x1b[Hsolved: true\n")]),
            other => Err(format!("unknown command {other}")),
        }
    }
}

onebrain_sdk::export_diagnostic_parser!(HostileParser);

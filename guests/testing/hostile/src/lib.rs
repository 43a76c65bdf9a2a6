//! A deliberately hostile plugin for the runtime's containment tests (Spin's
//! `core-wasi-test`). It implements `domain-adapter`; `describe(command)`
//! runs one attack, named by the command.

use onebrain_sdk::{DomainAdapter, Result};
use std::hint::black_box;

#[derive(Default)]
struct Hostile;

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    // black_box keeps the frame (and the recursion) from being optimised away.
    black_box(n) + recurse(black_box(n + 1))
}

impl DomainAdapter for Hostile {
    fn name(&self) -> String {
        "hostile".into()
    }

    /// The smoke call of `plugins check`: an error that tries to erase the
    /// "FAILED" line above it, forge an "ok" and retitle the window.
    fn generate(&self, _seed: u64, _size: u32) -> Result<onebrain_sdk::Task> {
        Err("\x1b[1A\x1b[2K\rhostile 0.1.0 (domain-adapter): ok\x1b]0;all plugins ok\x07".into())
    }

    fn describe(&self, command: &str) -> Result<String> {
        let (cmd, arg) = command.split_once(':').unwrap_or((command, ""));
        match cmd {
            "ok" => Ok("fine".into()),
            // Spins forever with no side effect.
            "loop" => loop {
                black_box(());
            },
            // Legal work that simply takes too long: count to 10^12.
            "slow" => {
                let mut x = 0u64;
                for i in 0..1_000_000_000_000u64 {
                    x = black_box(x.wrapping_add(i));
                }
                Ok(x.to_string())
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(arg.parse().unwrap_or(30)));
                Ok("slept".into())
            }
            // Allocates and touches 1 MiB at a time, keeping it all.
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    black_box(&hoard);
                }
            }
            "recursion" => Ok(recurse(0).to_string()),
            "huge" => Ok("x".repeat(arg.parse().unwrap_or(16 << 20))),
            // An error message of `arg` bytes (errors once skipped the output cap).
            "error" => Err("e".repeat(arg.parse().unwrap_or(48 << 20))),
            // Text that tries to rewrite the terminal: up a line, erase it,
            // forge an "ok", retitle the window, reverse what follows.
            "ansi" => Err("\x1b[1A\x1b[2K\rhostile 0.1.0 (domain-adapter): ok\n\x1b]0;owned\x07\u{202e}".into()),
            "ansi-ok" => Ok("line one\r\nline two\x1b[31m red\x1b[0m\ttab".into()),
            "ansi-panic" => panic!("\x1b[2J\x1b[Hall plugins ok"),
            "panic" => panic!("hostile plugin panicked on purpose"),
            "stderr" => {
                for _ in 0..10_000 {
                    eprintln!("a line of noise that fills the captured stderr buffer");
                }
                Ok("noisy".into())
            }
            "read" => std::fs::read_to_string(arg).map_err(|e| format!("read {arg}: {e}")),
            "list" => std::fs::read_dir(arg)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<_>>().join(","))
                .map_err(|e| format!("list {arg}: {e}")),
            "write" => std::fs::write(arg, "pwned").map(|_| "written".into()).map_err(|e| format!("write {arg}: {e}")),
            "env" => Ok(format!("{:?}|{:?}", std::env::vars().collect::<Vec<_>>(), std::env::args().collect::<Vec<_>>())),
            "net" => std::net::TcpStream::connect(arg).map(|_| "connected".into()).map_err(|e| format!("connect {arg}: {e}")),
            other => Err(format!("unknown command {other}")),
        }
    }
}

onebrain_sdk::export_domain_adapter!(Hostile);

//! The README's five-minute tour, run as written, so that it cannot rot.
//!
//! Every `sh` block between "## A five-minute tour" and the next section runs in one bash
//! script, in a scratch copy of the repository: `configs/` is copied (the tour writes a config
//! there), everything else is linked, and `runs/` starts empty. Two things differ from a
//! user's machine, neither in the commands: `onebrain` is the binary under test, and the
//! copied configs name the small test model instead of the default, with short answers and
//! one group an update ([`CAPS`]), so the tour takes minutes, not the 1.5B's hours. (A link
//! named as the default model would not do: a known model file is checked against its size.)

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{model_ready, one_compute_thread, repo, shared_data};

/// The shell commands of the README's tour, in order.
fn tour_commands(readme: &str) -> Vec<String> {
    let start = readme.find("\n## A five-minute tour").expect("README has a five-minute tour");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in section.lines() {
        match line.trim_end() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            l if in_sh && !l.trim().is_empty() => commands.push(l.to_string()),
            _ => {}
        }
    }
    commands
}

/// A scratch repository: `configs/` copied with the test model in place of every model file,
/// the rest linked, `../shared` linked too (the configs read `../../shared/data`).
fn scratch_repo(dir: &Path, shared: &Path) -> PathBuf {
    let root = dir.join("repo");
    fs::create_dir_all(root.join("configs")).unwrap();
    for entry in fs::read_dir(repo()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "configs" || name == "runs" || name == ".git" {
            continue;
        }
        std::os::unix::fs::symlink(entry.path().canonicalize().unwrap(), root.join(&name)).unwrap();
    }
    for entry in fs::read_dir(repo().join("configs")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let text = fs::read_to_string(entry.path()).unwrap();
            let text: String = text.lines().map(|l| format!("{}\n", scaled_down(l))).collect();
            fs::write(root.join("configs").join(entry.file_name()), text).unwrap();
        }
    }
    std::os::unix::fs::symlink(shared.parent().unwrap().canonicalize().unwrap(), dir.join("shared")).unwrap();
    root
}

/// Caps on the copied configs' sizes, so that every command of the tour finishes in CI's time
/// on two cores: answers of a few dozen tokens (they need not be good, only pass through every
/// stage), two verifier calls an episode (one repair), one group of four episodes an update.
const CAPS: [(&str, u64); 6] = [
    ("max-tokens", 24),
    ("plan-max-tokens", 24),
    ("budget", 2),
    ("batch-size", 4),
    ("in-flight", 4),
    ("sample", 1),
];

/// A config line with the test model in place of any model file and its size under [`CAPS`].
fn scaled_down(line: &str) -> String {
    if line.starts_with("path = \"") && line.ends_with(".gguf\"") {
        return format!("path = \"{}\"", onebrain_model::TEST_MODEL_FILE);
    }
    for (key, cap) in CAPS {
        let value = line.strip_prefix(key).and_then(|r| r.trim_start().strip_prefix('=')).map(str::trim);
        if let Some(n) = value.and_then(|v| v.parse::<u64>().ok()) {
            return format!("{key} = {}", n.min(cap));
        }
    }
    line.to_string()
}

fn lines(path: &Path) -> usize {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).lines().count()
}

#[test]
fn the_readme_tour_runs_as_written() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let Some(shared) = shared_data() else { return };
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let commands = tour_commands(&readme);
    assert!(commands.len() >= 10, "the tour's commands: {commands:#?}");

    let dir = tempfile::tempdir().unwrap();
    let root = scratch_repo(dir.path(), &shared);
    // A function outranks any `PATH` the tour sets, so every `onebrain` is the binary under test.
    let script = format!(
        "set -euo pipefail -x\nonebrain() {{ \"$ONEBRAIN_UNDER_TEST\" \"$@\"; }}\n{}\n",
        commands.join("\n")
    );
    let out = one_compute_thread(&mut Command::new("bash"))
        .arg("-c")
        .arg(&script)
        .current_dir(&root)
        .env("ONEBRAIN_UNDER_TEST", env!("CARGO_BIN_EXE_onebrain"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail = |s: &str| s.chars().rev().take(6000).collect::<Vec<_>>().into_iter().rev().collect::<String>();
    assert!(out.status.success(), "the tour stopped: {:?}\n--- stdout\n{}\n--- stderr\n{}", out.status, tail(&stdout), tail(&stderr));

    // What each step of the tour promises.
    let episodes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("== ")).collect();
    for domain in ["blocksworld", "gripper"] {
        assert!(episodes.iter().any(|l| l.contains(domain)), "solve shows a {domain} episode: {episodes:#?}");
    }
    assert!(root.join("runs/eval-base/report.md").is_file(), "eval writes its report");
    assert_eq!(lines(&root.join("runs/try/metrics.jsonl")), 2, "train, then resume to update 2");
    let arm = fs::read_to_string(root.join("configs/my-arm.toml")).unwrap();
    assert!(arm.contains("\nreward = \"grounded-rewards\""), "the sed swaps the reward plugin:\n{arm}");
    assert_eq!(lines(&root.join("runs/my-arm/metrics.jsonl")), 1, "the swapped arm trains");
}

#[test]
fn the_copied_configs_are_scaled_down_and_nothing_else() {
    assert_eq!(scaled_down("max-tokens = 320"), "max-tokens = 24");
    assert_eq!(scaled_down("plan-max-tokens=8"), "plan-max-tokens = 8");
    assert_eq!(scaled_down("batch-size = 16"), "batch-size = 4");
    assert_eq!(scaled_down("path = \"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf\""), format!("path = \"{}\"", onebrain_model::TEST_MODEL_FILE));
    assert_eq!(scaled_down("budget = 6"), "budget = 2");
    for kept in ["max-tokens-per-plan = 9", "max-repairs = 2", "# max-tokens = 320", "path = \"../x\""] {
        assert_eq!(scaled_down(kept), kept);
    }
}

#[test]
fn the_tour_reader_finds_each_block_s_commands() {
    let readme = "# x\n## A five-minute tour\ntext\n```sh\na --b\n\nc # d\n```\n```toml\nk = 1\n```\n```sh\ne\n```\n## Results\n```sh\nf\n```\n";
    assert_eq!(tour_commands(readme), ["a --b", "c # d", "e"]);
}

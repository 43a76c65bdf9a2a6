//! The scripts that keep a training arm's evaluations going beside it
//! (`scripts/sizes-arm-evals.sh`), on a stand-in for the binary that records each call and
//! writes the report a finished evaluation leaves.

use std::path::Path;
use std::process::{Child, Command};

use super::harness::repo;

/// A stand-in for `onebrain`: appends `threads=N ARGS` to $CALLS, and writes the report of
/// the evaluation it was asked for; an `eval` also makes the checkpoint folder $NEW_CHECKPOINT
/// (the arm writing one while an evaluation runs).
const STAND_IN: &str = r#"#!/bin/sh
echo "threads=$RAYON_NUM_THREADS $*" >> "$CALLS"
case "$1" in
  posthoc) dir=$(printf '%s/posthoc/%s/update-%06d' "$3" "$(basename "$5" .toml)" "$7") ;;
  eval) dir=$3; [ -n "$NEW_CHECKPOINT" ] && mkdir -p "$NEW_CHECKPOINT" ;;
esac
mkdir -p "$dir" && touch "$dir/report.md"
"#;

/// Runs `scripts/sizes-arm-evals.sh PARTS` over the run folder `run`, and returns its calls of
/// the binary, each with its post-hoc update or evaluation folder relative to `root`.
fn evals(root: &Path, run: &Path, parts: &[&str], new_checkpoint: &Path) -> Vec<String> {
    let bin = root.join("onebrain");
    std::fs::write(&bin, STAND_IN).unwrap();
    Command::new("chmod").arg("+x").arg(&bin).status().unwrap();
    let calls = root.join("calls");
    let out = Command::new(repo().join("scripts/sizes-arm-evals.sh"))
        .args(parts)
        .env("ONEBRAIN_BIN", &bin)
        .env("RUN", run)
        .env("OUT", root.join("out"))
        .env("COMMITTED", root.join("nothing-committed"))
        .env("SEEDS", "0")
        .env("CALLS", &calls)
        .env("NEW_CHECKPOINT", new_checkpoint)
        .output()
        .expect("run scripts/sizes-arm-evals.sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let root = format!("{}/", root.display());
    std::fs::read_to_string(calls).unwrap().lines().map(|l| l.replace(&root, "")).collect()
}

fn checkpoint(run: &Path, update: u32) -> std::path::PathBuf {
    run.join(format!("checkpoints/update-{update:06}"))
}

/// A process whose command line reads as the arm's `onebrain train` on `run`, once it does.
fn arm_stand_in(run: &Path) -> Child {
    let arm = Command::new("bash")
        .arg("-c")
        .arg(format!("exec -a 'onebrain train --out-dir {}' sleep 60", run.display()))
        .spawn()
        .unwrap();
    let cmdline = format!("/proc/{}/cmdline", arm.id());
    for _ in 0..500 {
        if std::fs::read_to_string(&cmdline).is_ok_and(|c| c.starts_with("onebrain train")) {
            return arm;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the stand-in arm never read as `onebrain train`");
}

#[test]
fn a_checkpoint_written_during_an_evaluation_is_evaluated_post_hoc_before_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(checkpoint(&run, 20)).unwrap();
    // Update 20's post-hoc evaluations are done; the arm writes update 40 during the first
    // evaluation.
    for set in ["eval-large", "eval-heldout"] {
        let done = run.join(format!("posthoc/{set}/update-000020"));
        std::fs::create_dir_all(&done).unwrap();
        std::fs::write(done.join("report.md"), "").unwrap();
    }
    let calls = evals(dir.path(), &run, &["greedy", "combined"], &checkpoint(&run, 40));
    // The script asks `nproc`, which counts the cores this process may run on.
    let nproc = Command::new("nproc").output().unwrap();
    let t = format!("threads={}", String::from_utf8_lossy(&nproc.stdout).trim());
    assert_eq!(
        calls,
        [
            format!("{t} eval --out-dir out/eval-large-base --config configs/eval-large.toml"),
            format!("{t} posthoc --run run --config configs/eval-large.toml --updates 40"),
            format!("{t} posthoc --run run --config configs/eval-heldout.toml --updates 40"),
            format!("{t} eval --out-dir out/eval-large-combined-base/seed-0 --config configs/eval-large-combined.toml --seed 0"),
            format!("{t} eval --out-dir out/eval-heldout-combined-base/seed-0 --config configs/eval-heldout-combined.toml --seed 0"),
        ],
        "with no arm running, every evaluation on every core"
    );
    // Run again: every report is there, so nothing runs.
    std::fs::remove_file(dir.path().join("calls")).unwrap();
    std::fs::write(dir.path().join("calls"), "").unwrap();
    assert!(evals(dir.path(), &run, &["greedy", "posthoc", "combined"], &checkpoint(&run, 40)).is_empty());
}

#[test]
fn evaluations_beside_the_running_arm_take_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut arm = arm_stand_in(&run);
    let calls = evals(dir.path(), &run, &["greedy"], &dir.path().join("unused"));
    arm.kill().unwrap();
    arm.wait().unwrap();
    assert_eq!(calls, ["threads=1 eval --out-dir out/eval-large-base --config configs/eval-large.toml"]);
}

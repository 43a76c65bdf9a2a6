use std::fs;
use std::path::Path;

use crate::harness::{fixture, model_ready, TestCommand};

fn train(out: &Path, extra: &[&str]) -> TestCommand {
    let mut cmd = TestCommand::new(&["train", "--config"])
        .arg(fixture("configs/train-smollm.toml"))
        .arg("--out-dir")
        .arg(out);
    for a in extra {
        cmd = cmd.arg(a);
    }
    cmd
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

#[test]
fn train_bad_config_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    fs::write(&cfg, "[ppo]\nclip = 0.3\n").unwrap();
    let err = TestCommand::new(&["train", "--config"])
        .arg(&cfg)
        .fails_with(1);
    assert!(err.contains("bad.toml") && err.contains("clip"), "{err}");
}

/// One update end to end (rollouts with the real model, Fast Downward and the plugins, PPO,
/// the Judge loss), then a refused restart, then a resume after a kill that tore the episode
/// log, and the trained run loaded by `solve`.
#[test]
fn train_runs_checkpoints_and_resumes() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // `--resume` on an empty folder starts the run: scripts/run-arms.sh always passes it, so
    // that a run killed before its first checkpoint continues instead of being refused.
    let (out, err) = train(&run, &["--resume"]).output_text();
    assert!(out.contains("checkpoints:"), "{out}");
    assert!(err.contains("update   1: b0 "), "{err}");
    let metrics = lines(&run.join("metrics.jsonl"));
    assert_eq!(metrics.len(), 1);
    for key in [
        "charts/success_b0",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/total",
        "perf/train_tokens_per_s",
        // `onebrain` counts its heap (its global allocator), so each phase's heap peak is there.
        "perf/rollout_peak_heap_mib",
        "perf/update_peak_heap_mib",
    ] {
        assert!(metrics[0].get(key).is_some(), "{key} in {}", metrics[0]);
    }
    // The update prefilled no prompt again: it took the heads its rollouts' sampler kept.
    assert_eq!(metrics[0]["perf/prompt_heads_computed"], 0, "{}", metrics[0]);
    let episodes = lines(&run.join("episodes.jsonl"));
    assert_eq!(episodes.len(), 2);
    assert!(episodes
        .iter()
        .all(|e| e["update"] == 0 && e["record"]["rewards"].is_object()));
    assert_eq!(
        fs::read_to_string(run.join("checkpoints/LATEST"))
            .unwrap()
            .trim(),
        "update-000001"
    );
    assert!(run.join("curves.svg").is_file() && run.join("config.json").is_file());
    // The held-out slice, before the update and after it, with its own resumable trace.
    assert!(err.contains("held-out after 0 updates: b0 ") && err.contains("held-out after 1 updates: "), "{err}");
    let heldout = lines(&run.join("heldout.jsonl"));
    assert_eq!(heldout.iter().map(|h| h["update"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1]);
    assert!(heldout.iter().all(|h| h["tasks"] == 1 && h["checked"] == 1), "{heldout:?}");
    assert!(run.join("heldout/update-000001/trace.jsonl").is_file());
    assert!(fs::read_to_string(run.join("curves.svg")).unwrap().contains("held-out b0"));

    // The run folder is not overwritten by accident.
    let refused = train(&run, &[]).fails_with(1);
    assert!(refused.contains("--resume"), "{refused}");

    // A kill mid-write left a torn episode line: resume drops it and finishes update 2.
    let mut log = fs::read_to_string(run.join("episodes.jsonl")).unwrap();
    log.push_str("{\"update\":1,\"slot\":0,\"gro");
    fs::write(run.join("episodes.jsonl"), log).unwrap();
    let (_, err) = train(&run, &["--resume", "--updates", "2"]).output_text();
    assert!(
        err.contains("1 of 2 updates done") && err.contains("update   2: "),
        "{err}"
    );
    assert_eq!(lines(&run.join("metrics.jsonl")).len(), 2);
    // The base evaluation is not run again; the new last update gets one.
    let heldout = lines(&run.join("heldout.jsonl"));
    assert_eq!(heldout.iter().map(|h| h["update"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    let episodes = lines(&run.join("episodes.jsonl"));
    assert_eq!(
        episodes.iter().filter(|e| e["update"] == 1).count(),
        2,
        "no episode twice"
    );
    assert_eq!(
        fs::read_to_string(run.join("checkpoints/LATEST"))
            .unwrap()
            .trim(),
        "update-000002"
    );

    // `solve --checkpoint <run>` loads the newest checkpoint of the run.
    let rec = TestCommand::new(&["solve", "--config"])
        .arg(fixture("configs/solve-smollm.toml"))
        .arg("--domain")
        .arg("blocksworld")
        .arg("--seed")
        .arg("3")
        .arg("--checkpoint")
        .arg(&run)
        .json();
    assert_eq!(rec["steps"][0]["role"], "actor");

    // `solve --side-by-side <run>`: the base model, then the trained run, in one table.
    let text = TestCommand::new(&["solve", "--config"])
        .arg(fixture("configs/solve-smollm.toml"))
        .args(&["--domain", "blocksworld", "--seed", "3", "--side-by-side"])
        .arg(&run)
        .stdout();
    let table = text.split("== side by side").nth(1).unwrap_or_else(|| panic!("no table: {text}"));
    let header = table.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(header.trim_start().starts_with("base"), "{table}");
    for row in ["solved", "plan", "faithful", "goal holds at the start", "initial facts"] {
        assert!(table.lines().any(|l| l.starts_with(row)), "{row}: {table}");
    }

    // `posthoc`: the parameters after 0 and 2 updates solve the held-out slice again, one row
    // per update, and give the answers the run's own evaluations gave (greedy, the run's
    // model and initial role parameters).
    let eval = fixture("configs/eval-heldout-smollm.toml");
    let out = TestCommand::new(&["posthoc", "--run"])
        .arg(&run)
        .arg("--config")
        .arg(&eval)
        .args(&["--updates", "0,2", "--in-flight", "1"])
        .stdout();
    assert!(out.contains("held-out after 2 updates: b0 "), "{out}");
    let rows = lines(&run.join("posthoc/eval-heldout-smollm.jsonl"));
    assert_eq!(rows.iter().map(|h| h["update"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 2]);
    let outputs = |trace: &Path| -> Vec<String> {
        lines(trace)
            .iter()
            .flat_map(|r| r["steps"].as_array().unwrap().iter().map(|s| s["output"].to_string()).collect::<Vec<_>>())
            .collect()
    };
    for u in ["update-000000", "update-000002"] {
        let again = outputs(&run.join("posthoc/eval-heldout-smollm").join(u).join("trace.jsonl"));
        assert!(!again.is_empty(), "{u}: no steps");
        assert_eq!(again, outputs(&run.join("heldout").join(u).join("trace.jsonl")), "{u}");
    }
    let text = TestCommand::new(&["compare", "--set", "eval-heldout-smollm"]).arg(&run).stdout();
    assert!(text.contains("update 2"), "{text}");
    // A checkpoint the run did not keep is named.
    let err = TestCommand::new(&["posthoc", "--run"])
        .arg(&run)
        .arg("--config")
        .arg(&eval)
        .args(&["--updates", "5"])
        .fails_with(1);
    assert!(err.contains("update-000005") && err.contains("keep-checkpoints-every"), "{err}");
}

/// `compare` on the committed arms: a row per held-out evaluation, the change with its
/// interval, the arms against the first one, and the table and curves written to `--out`.
#[test]
fn compare_sets_the_committed_arms_side_by_side() {
    let full = crate::harness::repo().join("results/train-cpu-full");
    let grounded = crate::harness::repo().join("results/train-cpu-grounded");
    let out = tempfile::tempdir().unwrap();
    let text = TestCommand::new(&["compare"])
        .arg(&full)
        .arg(&grounded)
        .arg("--out")
        .arg(out.path())
        .stdout();
    // The full arm's update-0 and update-30 rows, as heldout.jsonl holds them.
    assert!(text.contains("| **full**, update 0 | 31/40 [62, 88] | 37/40 [80, 97] | 0/40 [0, 9] |"), "{text}");
    assert!(text.contains("| full, update 30 | 32/40 [65, 90] |"), "{text}");
    assert!(text.contains("| full: change | +3 [-15, +20] |"), "{text}");
    assert!(text.contains("grounded (update "), "{text}");
    for file in ["arms.md", "arms-reward.svg", "arms-b0.svg", "arms-goal-at-init.svg", "arms-heldout.svg"] {
        let body = fs::read_to_string(out.path().join(file)).unwrap();
        assert!(body.contains("full") && body.contains("grounded"), "{file}: {body}");
    }
}

#[test]
fn compare_refuses_a_run_without_a_held_out_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("metrics.jsonl"), "").unwrap();
    let err = TestCommand::new(&["compare"]).arg(dir.path()).fails_with(1);
    assert!(err.contains("no held-out evaluation"), "{err}");
}

/// Starts `onebrain train` on `run` with `extra` flags, waits until it has started training,
/// runs `meanwhile` with its pid, then sends it `signal`: its exit status and stderr.
fn train_signalled(run: &Path, extra: &[&str], signal: i32, meanwhile: impl FnOnce(u32)) -> (std::process::ExitStatus, String) {
    use std::io::{BufRead, BufReader};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    let mut child = crate::harness::onebrain_command()
        .args(["train", "--skip-heldout", "--config"])
        .arg(fixture("configs/train-smollm.toml"))
        .arg("--out-dir")
        .arg(run)
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (stderr, said) = (child.stderr.take().unwrap(), Arc::clone(&said));
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
                said.lock().unwrap().push(String::from_utf8_lossy(&l).into_owned());
            }
        })
    };
    let started = Instant::now();
    while !said.lock().unwrap().iter().any(|l| l.contains("0 of 1 updates done")) {
        assert!(started.elapsed() < Duration::from_secs(300), "no start: {:?}", said.lock().unwrap());
        assert!(child.try_wait().unwrap().is_none(), "ended: {:?}", said.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    meanwhile(child.id());
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let stderr = said.lock().unwrap().join("\n");
    (status, stderr)
}

/// Where a run of one update of two episodes may stop, by its episode log.
fn stopping_points(run: &Path) -> Vec<String> {
    let recorded = fs::read_to_string(run.join("episodes.jsonl")).unwrap_or_default().lines().count();
    vec![
        "before the first update".into(),
        format!("during update 1's rollouts, with {recorded} of 2 episodes recorded"),
    ]
}

/// SIGTERM while the rollouts run: a second `train` on the folder is refused at once, naming the
/// first; the first stops before it records another episode, exits 143 saying where it stopped,
/// and keeps its folder's lock no longer. A plugin whose component changed since the run began
/// is refused on resuming, naming it and both digests. SIGINT stops the resume the same way,
/// exiting 130; the next resume finishes the update with each episode once. Before, the signal
/// killed the process wherever it was, and a second process trained into the same folder.
#[test]
fn a_signal_stops_training_at_a_safe_point_and_the_resume_finishes_it() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (status, stderr) = train_signalled(&run, &[], libc::SIGTERM, |pid| {
        let refused = train(&run, &["--resume", "--skip-heldout"]).fails_with(1);
        let holder = format!("in use by another onebrain process (pid {pid}: onebrain train");
        assert!(refused.contains(&holder), "{refused}");
    });
    assert_eq!(status.code(), Some(143), "{stderr}");
    // The episodes that finished before the signal are recorded, none after it.
    assert!(
        stopping_points(&run).iter().any(|at| stderr.contains(&format!("onebrain: stopped by SIGTERM {at}; resume with --resume"))),
        "{stderr}"
    );

    // The reward plugin's recorded component, changed: the resume is refused before it writes.
    let record = run.join("plugins.json");
    let text = fs::read_to_string(&record).unwrap();
    let plugins: serde_json::Value = serde_json::from_str(&text).unwrap();
    let reward = plugins["plugins"].as_array().unwrap().iter().find(|p| p["name"] == "paper-rewards").unwrap();
    let sha = reward["sha256"].as_str().unwrap().to_string();
    fs::write(&record, text.replace(&sha, &"0".repeat(64))).unwrap();
    let err = train(&run, &["--resume", "--skip-heldout"]).fails_with(1);
    assert!(err.contains("plugin `paper-rewards` changed since this run began") && err.contains(&sha) && err.contains(&"0".repeat(64)), "{err}");
    fs::write(&record, text).unwrap();

    // SIGINT on the resume, unless both episodes were recorded before the first stop: then
    // the resume goes straight to the update, which a signal does not cut short.
    if lines(&run.join("episodes.jsonl")).len() < 2 {
        let (status, stderr) = train_signalled(&run, &["--resume"], libc::SIGINT, |_| {});
        let stopped = stopping_points(&run).iter().any(|at| stderr.contains(&format!("onebrain: stopped by SIGINT {at}; resume with --resume")));
        // The resume may have finished its last episode and the update before the signal came.
        let finished = status.code() == Some(0) || stderr.contains("stopped by SIGINT after update 1");
        assert!((status.code() == Some(130) && stopped) || finished, "{status}: {stderr}");
    }

    let (_, err) = train(&run, &["--resume", "--skip-heldout"]).output_text();
    let episodes = lines(&run.join("episodes.jsonl"));
    let mut slots: Vec<u64> = episodes.iter().map(|e| e["slot"].as_u64().unwrap()).collect();
    slots.sort();
    assert_eq!(slots, [0, 1], "each episode once: {err}");
    assert_eq!(lines(&run.join("metrics.jsonl")).len(), 1);
    assert_eq!(fs::read_to_string(run.join("checkpoints/LATEST")).unwrap().trim(), "update-000001");
}

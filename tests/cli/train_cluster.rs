//! `onebrain train --role`: a learner and actors as separate processes sharing a folder
//! (docs/cluster.md), against one machine's run and through kills.

use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{fixture, model_ready, onebrain_command, TestCommand};

const CONFIG: &str = "configs/train-cluster-smollm.toml";

/// A process of the array (or one machine's run) on the cluster fixture, its stderr in
/// `log` for the failure messages.
fn spawn(out: &Path, log: &Path, extra: &[&str]) -> Child {
    onebrain_command()
        .args(["train", "--config"])
        .arg(fixture(CONFIG))
        .arg("--out-dir")
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn finish(mut child: Child, log: &Path) {
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {}", fs::read_to_string(log).unwrap_or_default());
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A metrics row without what differs between two runs of the same updates: timings,
/// memory and rates, and the array's own accounting.
fn learned(row: &serde_json::Value) -> serde_json::Value {
    let mut row = row.as_object().unwrap().clone();
    row.retain(|k, _| !(k.starts_with("time/") || k.starts_with("perf/") || k.starts_with("cluster/")));
    serde_json::Value::Object(row)
}

/// Waits until `done` holds, failing after `secs`.
fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "waited {secs} s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn actor_and_actors_flags_need_a_role() {
    let err = TestCommand::new(&["train", "--config"]).arg(fixture(CONFIG)).args(&["--actor", "0/1"]).fails_with(1);
    assert!(err.contains("--actor and --actors need --role"), "{err}");
    let err = TestCommand::new(&["train", "--config"])
        .arg(fixture(CONFIG))
        .args(&["--role", "learner", "--actor", "0/1"])
        .fails_with(1);
    assert!(err.contains("--role learner takes --actors N"), "{err}");
    let err = TestCommand::new(&["train", "--config"]).arg(fixture(CONFIG)).args(&["--role", "array"]).fails_with(1);
    assert!(err.contains("SLURM_ARRAY_TASK_ID"), "{err}");
}

/// One actor and `max-staleness = 0`: every group is sampled by the parameters the learner
/// then updates, as on one machine, so the two runs' metrics agree to the last digit. This
/// holds only with `keep-sampler-heads = false` (the fixture's): one machine's update would
/// otherwise take the prompt heads its own sampler computed, which the learner, another
/// process, computes itself.
#[test]
fn one_actor_without_staleness_learns_what_one_machine_does() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (one, array) = (dir.path().join("one"), dir.path().join("array"));
    let log = dir.path().join("one.log");
    finish(spawn(&one, &log, &["--skip-heldout"]), &log);

    let (llog, alog) = (dir.path().join("learner.log"), dir.path().join("actor.log"));
    let learner = spawn(&array, &llog, &["--role", "learner", "--actors", "1"]);
    let actor = spawn(&array, &alog, &["--role", "actor", "--actor", "0/1"]);
    finish(actor, &alog);
    finish(learner, &llog);

    let (a, b) = (lines(&one.join("metrics.jsonl")), lines(&array.join("metrics.jsonl")));
    assert_eq!(a.len(), 2);
    assert_eq!(a.iter().map(learned).collect::<Vec<_>>(), b.iter().map(learned).collect::<Vec<_>>());
    for row in &b {
        assert_eq!((row["cluster/dropped_stale"].as_u64(), row["cluster/max_version_lag"].as_u64()), (Some(0), Some(0)), "{row}");
    }
    assert_eq!(fs::read_to_string(array.join("params/LATEST")).unwrap().trim(), "v000002");
}

/// A learner and two actors over three updates; actor 1 and the learner are each killed
/// (SIGKILL) once mid-run and started again, and a group is written twice. Every group is
/// learned once: six episodes, each actor file consumed to its end, the repeat skipped, and
/// no group older than `max-staleness` learned.
#[test]
fn killed_actors_and_learner_resume_and_lose_or_repeat_no_episode() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("array");
    let log = |name: &str| dir.path().join(format!("{name}.log"));
    let role = |name: &str| -> Vec<&'static str> {
        match name {
            "learner" => vec!["--updates", "3", "--role", "learner", "--actors", "2"],
            "actor-0" => vec!["--updates", "3", "--role", "actor", "--actor", "0/2"],
            _ => vec!["--updates", "3", "--role", "actor", "--actor", "1/2"],
        }
    };
    let start = |name: &str| spawn(&out, &log(name), &role(name));
    let kill = |child: &mut Child| {
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    };
    let metrics = out.join("metrics.jsonl");
    let mut learner = start("learner");
    let actor0 = start("actor-0");
    let mut actor1 = start("actor-1");

    // Actor 1's only group is of update 2: killed while it waits for, or samples with, v1.
    wait_for("update 1", 600, || !lines(&metrics).is_empty());
    kill(&mut actor1);
    let actor1 = start("actor-1");

    // The learner, killed once update 2 is learned; meanwhile a group is written twice (as a
    // second copy of an actor would).
    wait_for("update 2", 600, || lines(&metrics).len() >= 2);
    kill(&mut learner);
    let file0 = out.join("actors/actor-0.jsonl");
    let first = fs::read_to_string(&file0).unwrap().lines().next().unwrap().to_string();
    fs::OpenOptions::new().append(true).open(&file0).map(|mut f| std::io::Write::write_all(&mut f, format!("{first}\n").as_bytes())).unwrap().unwrap();
    let learner = start("learner");

    finish(actor0, &log("actor-0"));
    finish(actor1, &log("actor-1"));
    finish(learner, &log("learner"));

    let rows = lines(&metrics);
    assert_eq!(rows.iter().map(|r| r["update"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(rows[2]["global_episodes"], 6);
    for row in &rows {
        assert_eq!(row["cluster/dropped_stale"], 0, "{row}");
        assert!(row["cluster/max_version_lag"].as_u64().unwrap() == 0, "within max-staleness = 0: {row}");
    }
    // Each actor's file holds each of its slices once, besides the repeat; the learner read
    // and skipped the repeat, and consumed actor 1's file to its end and actor 0's to its
    // end or to the repeat, when that came last.
    let ends: Vec<u64> = (0..2).map(|k| fs::metadata(out.join(format!("actors/actor-{k}.jsonl"))).unwrap().len()).collect();
    let offsets: Vec<u64> = rows[2]["cluster/offsets"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
    assert_eq!(offsets[1], ends[1]);
    assert!(offsets[0] == ends[0] || offsets[0] + first.len() as u64 + 1 == ends[0], "{offsets:?} {ends:?}");
    let slices = |k: usize| -> Vec<u64> {
        let mut s: Vec<u64> = lines(&out.join(format!("actors/actor-{k}.jsonl"))).iter().map(|g| g["slice"].as_u64().unwrap()).collect();
        s.sort();
        s
    };
    assert_eq!(slices(0), [0, 0, 1]);
    assert_eq!(slices(1), [0]);
    assert!(rows[2]["cluster/duplicates"].as_u64().unwrap() >= 1, "the repeat is skipped: {rows:?}");
}

/// An actor started with another version of a plugin than a peer's record is refused before
/// it samples, naming the plugin and both digests; the peer's record is left as it was, and
/// the refused actor records nothing of its own.
#[test]
fn an_actor_whose_plugin_differs_from_a_peers_is_refused() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("array");
    let peer = out.join("actors/actor-1");
    fs::create_dir_all(&peer).unwrap();
    let record = r#"{"plugins": [{"name": "blocksworld", "version": "0.1.0", "sha256": "00ff"}]}"#;
    fs::write(peer.join("plugins.json"), record).unwrap();
    let log = dir.path().join("actor.log");
    let mut actor = spawn(&out, &log, &["--role", "actor", "--actor", "0/2"]);
    // An actor that is not refused loads the model and waits for a learner that never comes.
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = actor.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            actor.kill().unwrap();
            actor.wait().unwrap();
            panic!("the actor was not refused: {}", fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("plugin `blocksworld` changed") && err.contains("sha256 00ff"), "{err}");
    assert!(err.contains("actor-1/plugins.json"), "{err}");
    assert_eq!(fs::read_to_string(peer.join("plugins.json")).unwrap(), record);
    assert!(!out.join("actors/actor-0/plugins.json").exists());
}

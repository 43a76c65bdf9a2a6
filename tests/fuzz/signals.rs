//! SIGTERM and SIGINT at random moments of a training run's writes, as a campaign with counts:
//! its checkpoints (SmolLM2's adapters, value heads and optimizer moments, through
//! `onebrain_train::save_checkpoint`), `episodes.jsonl` and `metrics.jsonl`.
//!
//! Each run is a child process that installs the handlers `onebrain train` installs and writes
//! a run as the trainer does: per update, its episodes (one line each, 10 ms apart, skipping
//! those recorded before a stop), the parameters changed (a marker in the role tokens: the update's number),
//! its metrics row, and every second update a checkpoint (`checkpoint-every = 2`). It takes a
//! stop at the trainer's safe points: between episodes and between updates, writing a
//! checkpoint first if its newest one is older. The parent sends SIGTERM or SIGINT during a
//! write drawn at random: in three cases of four a checkpoint, 0-8 ms after its partial folder
//! appears; else any write (an episode's line or a checkpoint), 0-100 ms after it starts;
//! sometimes a second signal right after (an immediate exit, mid-write), then
//! checks the exit status (130, 143) and the message, resumes the run to its end, and checks
//! that the checkpoint loads with the parameters of its update and that every episode and
//! metrics row is there exactly once.
//!
//! The normal suite runs 2 (`ONEBRAIN_FUZZ_CASES` for a campaign; `ONEBRAIN_FUZZ_SEED` picks
//! the delays). Skipped with a message where the test model is absent.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candle_core::Tensor;
use onebrain_durable::{stop_requested, FolderLock, StopSignal, Stopped};
use onebrain_eval::{read_jsonl, retain_jsonl, TraceWriter};
use onebrain_model::{Brain, ModelConfig};
use onebrain_train::{
    latest, restore, save_checkpoint, Ablation, Learner, MetricsLog, MetricsRow, PpoArgs, RolloutStats, StepClock,
    TrainState, UpdateStats,
};
use serde::{Deserialize, Serialize};

/// Updates of a run, episodes of an update, and the checkpoint interval.
const UPDATES: u64 = 6;
const SLOTS: usize = 4;
const EVERY: u64 = 2;
/// The parameter that carries the update's number.
const MARKER: &str = "actor.role_tokens";
const CHILD_ENV: &str = "ONEBRAIN_SIGNAL_CHILD";
/// The most a signal meant for a checkpoint waits once its partial folder is there.
const CHECKPOINT_SPAN_MS: u64 = 8;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One line of the child's `episodes.jsonl`.
#[derive(Serialize, Deserialize)]
struct EpisodeLine {
    update: u64,
    slot: usize,
}

// ------------------------------------------------------------------------- the child

/// Not a test of its own: the training run the campaign signals, in a child process (a signal
/// to this process would reach every test). Runs only with `ONEBRAIN_SIGNAL_CHILD` set to the
/// run folder, and exits as `onebrain train` does.
#[test]
fn child_process_of_the_signal_campaign() {
    let Ok(run) = std::env::var(CHILD_ENV) else { return };
    onebrain_durable::install_stop_handlers().unwrap();
    let code = match train(Path::new(&run)) {
        Ok(()) => 0,
        Err(stopped) => {
            eprintln!("onebrain: {stopped}");
            i32::from(stopped.signal.exit_code())
        }
    };
    std::process::exit(code);
}

/// Sets the marker parameter to `value`.
fn mark(learner: &Learner, value: u64) {
    let data = learner.brain_ref().trainable().data().lock().unwrap();
    let var = data[MARKER].clone();
    let t = Tensor::full(value as f32, var.as_tensor().shape(), var.as_tensor().device()).unwrap();
    var.set(&t).unwrap();
}

/// The marker parameter's value (every element must hold it).
fn marked(learner: &Learner) -> f32 {
    let data = learner.brain_ref().trainable().data().lock().unwrap();
    let v: Vec<f32> = data[MARKER].as_tensor().flatten_all().unwrap().to_vec1().unwrap();
    assert!(v.iter().all(|x| *x == v[0]), "a marker mixed from two writes");
    v[0]
}

fn state(updates: u64) -> TrainState {
    TrainState {
        format: 1,
        updates,
        optimizer_steps: updates,
        tasks_consumed: updates,
        candidates_consumed: updates,
        twins_skipped: 0,
        episodes: updates * SLOTS as u64,
        config_sha256: "signal-campaign".into(),
        actors: None,
    }
}

fn stopped(signal: StopSignal, at: String) -> Stopped {
    Stopped { signal, at, resume: "resume with --resume".into() }
}

/// The run, as the trainer writes one; `Err` when a signal stopped it.
fn train(run: &Path) -> Result<(), Stopped> {
    let _lock = FolderLock::acquire(run).unwrap();
    let ckpts = run.join("checkpoints");
    let brain = Brain::load(&ModelConfig::test_model()).unwrap();
    let mut learner = Learner::new(brain, None, PpoArgs::default(), Ablation::Full, 0).unwrap();
    let mut st = match latest(&ckpts).unwrap() {
        Some((dir, st)) => {
            restore(&dir, &st, &mut learner).unwrap();
            assert_eq!(marked(&learner), st.updates as f32, "{}: the parameters of another update", dir.display());
            st
        }
        None => {
            mark(&learner, 0);
            state(0)
        }
    };
    // The logs, reopened as the trainer reopens them: rows past the checkpoint dropped, the
    // update in progress keeping its episodes.
    let done = st.updates;
    let episodes_path = run.join("episodes.jsonl");
    retain_jsonl(&episodes_path, |l: &EpisodeLine| l.update <= done).unwrap();
    let mut episodes = TraceWriter::open(&episodes_path).unwrap();
    let mut recorded: HashSet<usize> =
        read_jsonl::<EpisodeLine>(&episodes_path).unwrap().records.iter().filter(|l| l.update == done).map(|l| l.slot).collect();
    let mut metrics = MetricsLog::open(run, st.updates).unwrap();
    let mut checkpointed = st.updates;
    eprintln!("ready");
    let save = |learner: &Learner, st: &TrainState, checkpointed: &mut u64| {
        eprintln!("event: checkpoint {}", st.updates);
        save_checkpoint(&ckpts, learner, st, 1, 0).unwrap();
        *checkpointed = st.updates;
    };
    while st.updates < UPDATES {
        if let Some(signal) = stop_requested() {
            if checkpointed != st.updates {
                save(&learner, &st, &mut checkpointed);
            }
            return Err(stopped(signal, format!("after update {}", st.updates)));
        }
        let u = st.updates;
        let todo: Vec<usize> = (0..SLOTS).filter(|s| !recorded.contains(s)).collect();
        for slot in todo {
            if let Some(signal) = stop_requested() {
                if checkpointed != st.updates {
                    save(&learner, &st, &mut checkpointed);
                }
                let at = format!("during update {}'s rollouts, with {} of {SLOTS} episodes recorded", u + 1, recorded.len());
                return Err(stopped(signal, at));
            }
            // An episode takes a moment, so that signals land in the rollouts too.
            std::thread::sleep(Duration::from_millis(10));
            eprintln!("event: episode {u} {slot}");
            episodes.append(&EpisodeLine { update: u, slot }).unwrap();
            recorded.insert(slot);
        }
        recorded.clear();
        // The update: the parameters change.
        mark(&learner, u + 1);
        st = state(u + 1);
        let row = MetricsRow::new(st.updates, st.episodes, &RolloutStats::default(), &UpdateStats::default(), &StepClock::default());
        metrics.append(&row).unwrap();
        if st.updates % EVERY == 0 || st.updates == UPDATES {
            save(&learner, &st, &mut checkpointed);
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------ the campaign

/// A small deterministic generator (xorshift), seeded by `ONEBRAIN_FUZZ_SEED` (default 35).
fn rng() -> impl FnMut() -> u64 {
    let seed: u64 = std::env::var("ONEBRAIN_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(35);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn child(run: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_process_of_the_signal_campaign", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, run)
        .current_dir(repo());
    cmd
}

/// The child on `run`, its stderr's lines gathered by a thread.
fn start(run: &Path) -> (std::process::Child, Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let mut proc = child(run).stderr(Stdio::piped()).spawn().unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (stderr, lines) = (proc.stderr.take().unwrap(), Arc::clone(&lines));
        std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).for_each(|l| lines.lock().unwrap().push(l)))
    };
    (proc, lines, reader)
}

/// Waits for the child to have loaded its model and opened its run; returns when it did.
fn wait_ready(proc: &mut std::process::Child, lines: &Mutex<Vec<String>>, what: &str) -> Instant {
    let started = Instant::now();
    while !lines.lock().unwrap().iter().any(|l| l == "ready") {
        assert!(started.elapsed() < Duration::from_secs(120), "{what}: the child never got ready: {:?}", lines.lock().unwrap());
        if let Some(status) = proc.try_wait().unwrap() {
            panic!("{what}: the child ended before it was ready ({status}): {:?}", lines.lock().unwrap());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Instant::now()
}

/// Waits until the child has begun its `k`-th write (or ended); returns that write's kind.
fn wait_event(proc: &mut std::process::Child, lines: &Mutex<Vec<String>>, k: usize) -> String {
    loop {
        if let Some(e) = lines.lock().unwrap().iter().filter_map(|l| l.strip_prefix("event: ")).nth(k) {
            return e.split(' ').next().unwrap_or("").to_string();
        }
        if proc.try_wait().unwrap().is_some() {
            return "end".into();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Whether a checkpoint is being written: a `.partial` folder or pointer in `checkpoints/`.
fn writing_checkpoint(run: &Path) -> bool {
    std::fs::read_dir(run.join("checkpoints"))
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".partial")))
        .unwrap_or(false)
}

fn send(pid: u32, signal: StopSignal) {
    // SAFETY: kill(2) on our own child's pid; a child that has just exited answers ESRCH.
    unsafe { libc::kill(pid as i32, signal.number()) };
}

/// What one signalled run ended as.
#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    by_signal: BTreeMap<&'static str, usize>,
    two_signals: usize,
    during_checkpoint: usize,
    finished_first: usize,
    stopped_at: BTreeMap<String, usize>,
    /// The write each signal followed (`episode`, `checkpoint`, or `end` past the last).
    after: BTreeMap<String, usize>,
    lost_or_doubled: usize,
}

#[test]
fn fuzz_signals_during_checkpoint_writes() {
    if let Some(why) = onebrain_roles::test_setup_missing(&repo(), &[]) {
        return eprintln!("skipping: {why}");
    }
    let n: usize = std::env::var("ONEBRAIN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    // A run's writes, counted: each signal follows one of them, drawn at random, by a random
    // part of the time a checkpoint takes, so that it lands anywhere in the writes after it.
    let calibration = tempfile::tempdir().unwrap();
    let (mut proc, lines, reader) = start(&calibration.path().join("run"));
    wait_ready(&mut proc, &lines, "calibration");
    assert!(proc.wait().unwrap().success());
    reader.join().unwrap();
    let kinds: Vec<String> = lines.lock().unwrap().iter().filter_map(|l| l.strip_prefix("event: ")).map(|e| e.split(' ').next().unwrap_or("").to_string()).collect();
    let events = kinds.len() as u64;
    // Checkpoints are few of a run's writes (3 of 27) but the ones a stop must not tear: three
    // cases in four signal one of them as it is written, the rest any write.
    let checkpoints: Vec<usize> = (0..kinds.len()).filter(|&i| kinds[i] == "checkpoint").collect();
    assert!(!checkpoints.is_empty(), "the calibration run wrote no checkpoint");
    let span = 100;
    check_run(&calibration.path().join("run")).unwrap();
    let mut next = rng();
    let mut tally = Tally::default();
    for case in 0..n {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let first = if next() % 2 == 0 { StopSignal::Terminate } else { StopSignal::Interrupt };
        let second = (next() % 4 == 0).then(|| if next() % 2 == 0 { StopSignal::Terminate } else { StopSignal::Interrupt });
        let at_checkpoint = next() % 4 != 0;
        let event = if at_checkpoint {
            checkpoints[(next() % checkpoints.len() as u64) as usize]
        } else {
            (next() % events) as usize
        };
        // A checkpoint of SmolLM2's adapters is written in tens of milliseconds: a signal meant
        // for one waits for its partial folder, then a few milliseconds at most.
        let delay = Duration::from_millis(next() % if at_checkpoint { CHECKPOINT_SPAN_MS } else { span });
        let (mut proc, lines, reader) = start(&run);
        wait_ready(&mut proc, &lines, &format!("case {case}"));
        let after = wait_event(&mut proc, &lines, event);
        if at_checkpoint {
            let t0 = Instant::now();
            while !writing_checkpoint(&run) && t0.elapsed() < Duration::from_secs(2) && proc.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        std::thread::sleep(delay);
        if writing_checkpoint(&run) {
            tally.during_checkpoint += 1;
        }
        *tally.after.entry(after).or_default() += 1;
        send(proc.id(), first);
        if let Some(s) = second {
            std::thread::sleep(Duration::from_millis(next() % 20));
            send(proc.id(), s);
        }
        let status = proc.wait().unwrap();
        reader.join().unwrap();
        let stderr = lines.lock().unwrap().join("\n");
        tally.runs += 1;
        *tally.by_signal.entry(first.name()).or_default() += 1;
        tally.two_signals += usize::from(second.is_some());
        match status.code() {
            Some(0) => tally.finished_first += 1,
            Some(code) => {
                let codes: Vec<i32> = [Some(first), second].into_iter().flatten().map(|s| i32::from(s.exit_code())).collect();
                assert!(codes.contains(&code), "case {case}: exit {code} after {first} {second:?}: {stderr}");
                if second.is_none() {
                    let said = stderr.lines().find(|l| l.starts_with(&format!("onebrain: stopped by {first} "))).unwrap_or_else(|| panic!("case {case}: {stderr}"));
                    assert!(said.ends_with("; resume with --resume"), "{said}");
                    let at = said.split(" with ").next().unwrap().split(&format!("by {first} ")).nth(1).unwrap();
                    *tally.stopped_at.entry(at.split(' ').take(2).collect::<Vec<_>>().join(" ")).or_default() += 1;
                    // A clean stop leaves a checkpoint of its last finished update: the logs end there.
                    // (None before the first update finished.)
                    let updates = latest(&run.join("checkpoints")).unwrap().map_or(0, |(_, st)| st.updates);
                    let rows = read_jsonl::<MetricsRow>(&run.join("metrics.jsonl")).unwrap().records;
                    assert_eq!(rows.last().map_or(0, |r| r.update), updates, "case {case}: {stderr}");
                }
            }
            None => panic!("case {case}: killed by a signal ({status}): {stderr}"),
        }
        // The resume runs to the end.
        let out = child(&run).output().unwrap();
        assert!(out.status.success(), "case {case}: the resume failed: {}", String::from_utf8_lossy(&out.stderr));
        let whole = check_run(&run);
        if let Err(why) = &whole {
            tally.lost_or_doubled += 1;
            panic!("case {case} ({first}, {second:?}, {delay:?}): {why}");
        }
    }
    eprintln!(
        "fuzz signals/checkpoints: {} runs ({:?}; {} with a second signal; sent up to {span} ms after the start of \
         {:?} of the {events} writes of a run, {} while a checkpoint folder was being written; {} finished before the \
         signal; stopped {:?}); {} with an episode or metrics row lost or doubled (seed {})",
        tally.runs,
        tally.by_signal,
        tally.two_signals,
        tally.after,
        tally.during_checkpoint,
        tally.finished_first,
        tally.stopped_at,
        tally.lost_or_doubled,
        std::env::var("ONEBRAIN_FUZZ_SEED").unwrap_or_else(|_| "35".into())
    );
}

/// A finished run: the last checkpoint is the last update's, nothing partial is left, and every
/// episode and metrics row is there exactly once, in order.
fn check_run(run: &Path) -> Result<(), String> {
    let ckpts = run.join("checkpoints");
    let (_, st) = latest(&ckpts).map_err(|e| e.to_string())?.ok_or("no checkpoint")?;
    if st.updates != UPDATES {
        return Err(format!("the newest checkpoint is update {}", st.updates));
    }
    if writing_checkpoint(run) {
        return Err("a partial checkpoint is left".into());
    }
    let episodes: Vec<(u64, usize)> =
        read_jsonl::<EpisodeLine>(&run.join("episodes.jsonl")).map_err(|e| e.to_string())?.records.iter().map(|l| (l.update, l.slot)).collect();
    let mut seen: HashSet<(u64, usize)> = HashSet::new();
    for e in &episodes {
        if !seen.insert(*e) {
            return Err(format!("episode {e:?} twice"));
        }
    }
    if seen.len() != UPDATES as usize * SLOTS {
        return Err(format!("{} episodes, not {}", seen.len(), UPDATES as usize * SLOTS));
    }
    let rows: Vec<u64> = read_jsonl::<MetricsRow>(&run.join("metrics.jsonl")).map_err(|e| e.to_string())?.records.iter().map(|r| r.update).collect();
    if rows != (1..=UPDATES).collect::<Vec<_>>() {
        return Err(format!("metrics rows {rows:?}"));
    }
    Ok(())
}

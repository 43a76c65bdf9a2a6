//! Faults injected into evaluations run by a scripted model: a disk that fills up anywhere in
//! a run (a size-limited tmpfs), SIGINT and SIGTERM between episodes (a child process), a
//! second writer of the folder, a corrupt line in the middle of the trace, and a plugin whose
//! component changed between a run and its resume. After each, the rerun ends with every
//! episode in the trace exactly once.
//!
//! `ONEBRAIN_FUZZ_CASES=N` runs the disk-full campaign with N fill levels (default 4, a few
//! seconds); `ONEBRAIN_FUZZ_SEED` picks them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onebrain_core::{BoxError, DomainAdapter};
use onebrain_durable::{FolderLock, SmallDisk, StopSignal};
use onebrain_eval::{read_trace, run_eval_with, EvalConfig, EvalError, EvalOutcome, PluginRecordError, TraceError};
use onebrain_roles::{Finalizer, Generation, LanguageModel, Role, SamplingConfig, Services, Strategy};
use onebrain_runtime::PluginDigest;

mod common;
use common::{scripted, Native, Toy, TAIL};

/// Writes the right problem, except for the task with seed 4, after `delay` (so that a signal
/// lands while episodes run).
struct Echo {
    delay: Duration,
}
impl LanguageModel for Echo {
    fn generate(&mut self, _: Role, prompt: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        std::thread::sleep(self.delay);
        let text = if prompt.contains("Task 4:") { TAIL.replace("(on a b)", "(on a c)") } else { TAIL.to_string() };
        Ok(scripted(text))
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "echo".into()
    }
}

fn services(plugins: Vec<PluginDigest>) -> Services {
    Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer { reward: None, checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())) },
        plugins,
    }
}

fn digest(sha256: &str) -> PluginDigest {
    PluginDigest { name: "toy-reward".into(), version: "0.1.0".into(), sha256: sha256.into() }
}

/// `tasks` tasks under two strategies, into `out-dir = "out"`.
fn config(tasks: usize) -> EvalConfig {
    EvalConfig::from_toml(&format!(
        "name = \"toy\"\nout-dir = \"out\"\nin-flight = 1\nstrategies = [\"multi-role\", \"llm+p\"]\n\
         [[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = {tasks}\n[episode]\nmode = \"problem\""
    ))
    .unwrap()
}

fn run(base: &Path, tasks: usize, plugins: Vec<PluginDigest>, delay: Duration) -> Result<EvalOutcome, EvalError> {
    let services = services(plugins);
    let mut model = None;
    run_eval_with(
        &config(tasks),
        base,
        &services,
        &mut || Ok(Box::new(Echo { delay }) as Box<dyn LanguageModel>),
        &mut model,
        None,
        &mut |_| {},
    )
}

/// Each (task, strategy) of the trace with how many times it is there and its outcome.
fn episodes(trace: &Path) -> BTreeMap<(String, Strategy), (usize, bool)> {
    let c = read_trace(trace).unwrap();
    assert!(!c.torn_tail, "{}", trace.display());
    let mut out: BTreeMap<(String, Strategy), (usize, bool)> = BTreeMap::new();
    for r in c.records {
        let e = out.entry((r.task_id.clone(), r.strategy)).or_insert((0, r.solved));
        e.0 += 1;
    }
    out
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

// ----------------------------------------------------------------------------- a full disk

/// Inputs per campaign: `ONEBRAIN_FUZZ_CASES`, else `default_cases`.
fn cases(default_cases: usize) -> usize {
    std::env::var("ONEBRAIN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases)
}

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

/// The disk fills up at a random point of a run: before the lock, the plugin record, a trace
/// line (cut back whole) or a report file. The run ends with an error that names the file and
/// says the disk is full; once there is space, the same command finishes the run with every
/// episode exactly once and the outcomes of a run that never met a full disk. Before, a line
/// cut short by the full disk stayed in the trace, and the first record after it made the
/// whole trace unreadable ("line 4: EOF while parsing"), and a report file was left empty.
#[test]
fn fuzz_a_full_disk_anywhere_in_an_evaluation_loses_and_doubles_no_episode() {
    let disk = match SmallDisk::mount(2 << 20) {
        Ok(d) => d,
        Err(why) => return eprintln!("skipping: {why}"),
    };
    let tasks = 3;
    let reference_dir = disk.path().join("reference");
    let free = disk.available();
    let reference = run(&reference_dir, tasks, vec![digest("aaa")], Duration::ZERO).unwrap();
    let want = episodes(&reference.trace_path);
    assert_eq!(want.len(), 2 * tasks);
    // What a whole run takes on this disk, to the page: the fill levels span it, so that the
    // disk fills somewhere in nearly every run.
    let used = free - disk.available();
    let mut next = rng();
    let n = cases(4);
    let (mut filled, mut lost_or_doubled) = (BTreeMap::<String, usize>::new(), 0);
    for case in 0..n {
        let base = disk.path().join(format!("case-{case}"));
        let leave = next() % used;
        disk.fill_to(leave).unwrap();
        match run(&base, tasks, vec![digest("aaa")], Duration::ZERO) {
            Ok(_) => *filled.entry("nothing (room enough)".into()).or_default() += 1,
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(base.to_str().unwrap()), "the error names a file of the run: {msg}");
                assert!(msg.contains("disk is full") || msg.contains("No space left"), "{msg}");
                let file = msg.split(base.to_str().unwrap()).nth(1).unwrap_or("").split([':', ' ', ',']).next().unwrap_or("").to_string();
                *filled.entry(file).or_default() += 1;
            }
        }
        disk.unfill();
        let out = run(&base, tasks, vec![digest("aaa")], Duration::ZERO).unwrap();
        let got = episodes(&out.trace_path);
        if got != want {
            lost_or_doubled += 1;
        }
        assert_eq!(got, want, "case {case}, {leave} bytes left");
        assert!(out.report_paths.markdown.is_file() && out.report_paths.json.is_file());
        std::fs::remove_dir_all(&base).unwrap();
    }
    eprintln!("fuzz disk-full/eval: {n} runs, the disk filled while writing {filled:?}; {lost_or_doubled} episodes lost or doubled (seed {})",
        std::env::var("ONEBRAIN_FUZZ_SEED").unwrap_or_else(|_| "35".into()));
}

// ------------------------------------------------------------------------ a second writer

/// A folder another process writes is refused at once, naming the holder, before anything in
/// it is read or written. Before, two evaluations appended to one trace.
#[test]
fn a_second_writer_of_an_evaluation_folder_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let held = FolderLock::acquire(&dir.path().join("out")).unwrap();
    let err = run(dir.path(), 2, Vec::new(), Duration::ZERO).unwrap_err();
    assert!(matches!(&err, EvalError::Folder(onebrain_durable::Error::Locked { .. })), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("pid {}", std::process::id())) && msg.contains("in use by another onebrain process"), "{msg}");
    assert!(!dir.path().join("out/trace.jsonl").exists());
    drop(held);
    run(dir.path(), 2, Vec::new(), Duration::ZERO).unwrap();
}

// --------------------------------------------------------------- a corrupt middle line

/// A line spoiled in the middle of the trace is an error naming the file and the line, and the
/// rerun writes nothing; only a torn last line is dropped (and reported).
#[test]
fn a_corrupt_line_in_the_middle_of_a_trace_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), 3, Vec::new(), Duration::ZERO).unwrap();
    let text = std::fs::read_to_string(&out.trace_path).unwrap();
    let mut rows: Vec<&str> = text.lines().collect();
    rows.pop(); // one episode to run again, so that the rerun has work
    let half = &rows[2][..rows[2].len() / 2];
    rows[2] = half;
    let spoiled = rows.join("\n") + "\n";
    std::fs::write(&out.trace_path, &spoiled).unwrap();
    let err = run(dir.path(), 3, Vec::new(), Duration::ZERO).unwrap_err();
    assert!(matches!(&err, EvalError::Trace(TraceError::BadLine { line: 3, .. })), "{err}");
    assert!(err.to_string().contains("trace.jsonl, line 3"), "{err}");
    assert_eq!(std::fs::read_to_string(&out.trace_path).unwrap(), spoiled, "nothing written");
}

// ------------------------------------------------------------------ a changed plugin

/// A plugin whose component changed since the folder's run began is refused before anything
/// is written, naming the plugin and both digests; the recorded version resumes. Before, the
/// resumed run mixed the two versions' results in one trace.
#[test]
fn a_plugin_that_changed_since_the_run_began_is_refused_naming_both_digests() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), 3, vec![digest("aaa")], Duration::ZERO).unwrap();
    let text = std::fs::read_to_string(&out.trace_path).unwrap();
    let kept: String = text.lines().take(4).map(|l| format!("{l}\n")).collect();
    std::fs::write(&out.trace_path, &kept).unwrap();
    let err = run(dir.path(), 3, vec![digest("bbb")], Duration::ZERO).unwrap_err();
    assert!(matches!(&err, EvalError::Plugins(PluginRecordError::Changed { .. })), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("plugin `toy-reward` changed") && msg.contains("sha256 aaa") && msg.contains("sha256 bbb"), "{msg}");
    assert_eq!(std::fs::read_to_string(&out.trace_path).unwrap(), kept, "nothing written");
    let out = run(dir.path(), 3, vec![digest("aaa")], Duration::ZERO).unwrap();
    assert_eq!(episodes(&out.trace_path).len(), 6);
}

// ------------------------------------------------------------------------------- signals

const CHILD_ENV: &str = "ONEBRAIN_EVAL_SIGNAL_CHILD";

/// Not a test of its own: the evaluation the signal test runs in a child process (a signal to
/// this process would reach every test). It installs the handlers `onebrain eval` installs, runs
/// into the folder `ONEBRAIN_EVAL_SIGNAL_CHILD` names, and exits as `onebrain` does.
#[test]
fn child_process_of_the_signal_test() {
    let Ok(base) = std::env::var(CHILD_ENV) else { return };
    onebrain_durable::install_stop_handlers().unwrap();
    match run(Path::new(&base), SIGNAL_TASKS, Vec::new(), Duration::from_millis(40)) {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("onebrain: {e}");
            let code = onebrain_durable::stop_requested().map_or(1, |s| i32::from(s.exit_code()));
            std::process::exit(code);
        }
    }
}

const SIGNAL_TASKS: usize = 6;

fn child(base: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_process_of_the_signal_test", "--nocapture", "--test-threads", "1"]).env(CHILD_ENV, base);
    cmd
}

/// SIGINT or SIGTERM while episodes run: the evaluation stops before its next record, exits
/// 130 or 143 saying how many episodes the trace holds, and the same command finishes the run
/// with every episode once. Before, the signal killed the process wherever it was.
#[test]
fn a_signal_stops_an_evaluation_between_episodes_and_the_rerun_finishes_it() {
    let reference = tempfile::tempdir().unwrap();
    let want = episodes(&run(reference.path(), SIGNAL_TASKS, Vec::new(), Duration::ZERO).unwrap().trace_path);
    for signal in [StopSignal::Terminate, StopSignal::Interrupt] {
        let dir = tempfile::tempdir().unwrap();
        let trace: PathBuf = dir.path().join("out/trace.jsonl");
        let proc = child(dir.path()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let started = Instant::now();
        while lines(&trace) < 2 {
            assert!(started.elapsed() < Duration::from_secs(60), "no episode in a minute");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(proc.id() as i32, signal.number()) }, 0);
        let out = proc.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(i32::from(signal.exit_code())), "{stderr}");
        let n = lines(&trace);
        let said = format!("stopped by {signal} after {n} of {} episodes", 2 * SIGNAL_TASKS);
        assert!(stderr.contains(&said) && stderr.contains("run the same command again to resume"), "{said}: {stderr}");
        assert!(n < 2 * SIGNAL_TASKS, "the signal came after the last episode");
        let out = child(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(episodes(&trace), want, "{signal}: every episode once");
    }
}

//! Fast Downward as a subprocess: where it is, how to call it, and how its
//! exit codes map to outcomes.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use onebrain_core::{Outcome, SolverOutput};

use crate::error::VerifierError;

/// Environment variable naming the Fast Downward driver script (`fast-downward.py`).
pub const DRIVER_ENV: &str = "ONEBRAIN_FAST_DOWNWARD";
/// Environment variable naming the Python interpreter that runs the driver.
pub const PYTHON_ENV: &str = "ONEBRAIN_PYTHON";

/// How much of the planner's stdout and stderr is kept, from the end: the
/// error messages sit at the end, and a search log can run to megabytes.
const OUTPUT_CAP: u64 = 64 * 1024;

/// A located Fast Downward installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastDownward {
    python: PathBuf,
    driver: PathBuf,
}

impl FastDownward {
    /// Uses an explicit interpreter and driver script.
    pub fn new(
        python: impl Into<PathBuf>,
        driver: impl Into<PathBuf>,
    ) -> Result<Self, VerifierError> {
        let fd = FastDownward {
            python: python.into(),
            driver: driver.into(),
        };
        for path in [&fd.python, &fd.driver] {
            if !path.is_file() {
                return Err(VerifierError::NotInstalled(format!(
                    "{} does not exist",
                    path.display()
                )));
            }
        }
        Ok(fd)
    }

    /// Finds Fast Downward: `$ONEBRAIN_FAST_DOWNWARD` (+ `$ONEBRAIN_PYTHON`) if set,
    /// else the project's `.venv` in the current directory or any parent of it
    /// or of the running executable (where `scripts/setup.sh` installs it).
    pub fn discover() -> Result<Self, VerifierError> {
        if let Some(driver) = std::env::var_os(DRIVER_ENV) {
            let python = std::env::var_os(PYTHON_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| "python3".into());
            let python = if python.is_absolute() {
                python
            } else {
                which(&python).unwrap_or(python)
            };
            return FastDownward::new(python, driver);
        }
        let mut starts = Vec::new();
        if let Ok(cwd) = std::env::current_dir() {
            starts.push(cwd);
        }
        if let Ok(exe) = std::env::current_exe() {
            starts.push(exe);
        }
        for start in &starts {
            for dir in start.ancestors() {
                let venv = dir.join(".venv");
                if venv.is_dir() {
                    if let Ok(fd) = FastDownward::from_venv(&venv) {
                        return Ok(fd);
                    }
                }
            }
        }
        Err(VerifierError::NotInstalled(
            "no .venv with up-fast-downward found in this directory or its parents; \
             run `scripts/setup.sh` from the repository (or set ONEBRAIN_FAST_DOWNWARD)"
                .into(),
        ))
    }

    /// Uses the `up-fast-downward` package installed in the virtual environment `venv`.
    pub fn from_venv(venv: &Path) -> Result<Self, VerifierError> {
        let python = venv.join("bin").join("python");
        let lib = venv.join("lib");
        let entries = std::fs::read_dir(&lib)
            .map_err(|e| VerifierError::NotInstalled(format!("{}: {e}", lib.display())))?;
        for entry in entries.flatten() {
            let driver = entry
                .path()
                .join("site-packages/up_fast_downward/downward/fast-downward.py");
            if driver.is_file() {
                return FastDownward::new(python, driver);
            }
        }
        Err(VerifierError::NotInstalled(format!(
            "{} has no up_fast_downward package; run `scripts/setup.sh`",
            venv.display()
        )))
    }

    /// The driver script.
    pub fn driver(&self) -> &Path {
        &self.driver
    }

    /// The interpreter that runs the driver.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// Runs the planner on a domain and problem, in a fresh temporary
    /// directory that is removed afterwards, with a wall-clock limit after
    /// which the driver's whole process group (translator, search) is killed.
    pub fn run(
        &self,
        domain: &str,
        problem: &str,
        limits: &SolverLimits,
    ) -> Result<SolverRun, VerifierError> {
        let dir = tempfile::Builder::new()
            .prefix("onebrain-fd-")
            .tempdir()
            .map_err(VerifierError::Io)?;
        let work = dir.path();
        std::fs::write(work.join("domain.pddl"), domain).map_err(VerifierError::Io)?;
        std::fs::write(work.join("problem.pddl"), problem).map_err(VerifierError::Io)?;
        let stdout = File::create(work.join("stdout.log")).map_err(VerifierError::Io)?;
        let stderr = File::create(work.join("stderr.log")).map_err(VerifierError::Io)?;

        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.driver)
            .args(["--plan-file", "plan"])
            .arg("--overall-memory-limit")
            .arg(format!("{}M", limits.memory_mb))
            .args(limits.search.driver_args())
            .args(["domain.pddl", "problem.pddl"])
            .current_dir(work)
            // The planner needs nothing from our environment; a clean one
            // keeps runs reproducible whatever the caller has exported.
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // Its own process group, so one kill reaches the translator and
            // the search binary the driver starts.
            .process_group(0);

        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| VerifierError::Spawn(self.python.clone(), e))?;
        let pgid = child.id() as libc::pid_t;
        // A waiter thread turns the blocking wait into a channel receive with
        // a deadline: no polling, so a fast run pays no sleep granularity.
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let (status, timed_out) = match rx.recv_timeout(limits.timeout) {
            Ok(status) => (status, false),
            Err(_) => {
                kill_group(pgid);
                (
                    rx.recv()
                        .unwrap_or_else(|_| Err(std::io::Error::other("waiter thread vanished"))),
                    true,
                )
            }
        };
        // Reap whatever the driver left running in its group (it can exit on
        // an error while its search child lingers).
        kill_group(pgid);
        let _ = waiter.join();
        let elapsed = started.elapsed();
        let status = status.map_err(VerifierError::Io)?;

        let output = SolverOutput {
            exit_code: status.code(),
            stdout: read_tail(&work.join("stdout.log")),
            stderr: read_tail(&work.join("stderr.log")),
            timed_out,
        };
        let plan = if timed_out { None } else { read_plan(work) };
        Ok(SolverRun {
            outcome: classify(&output, plan.is_some()),
            plan,
            output,
            elapsed,
        })
        // `dir` drops here and removes the directory.
    }
}

/// What the planner may use.
#[derive(Clone, Debug, PartialEq)]
pub struct SolverLimits {
    /// Wall-clock limit for one call (the paper's 60 s).
    pub timeout: Duration,
    /// Address-space limit for the translator and the search, in MiB.
    pub memory_mb: u64,
    /// The search configuration.
    pub search: Search,
}

impl Default for SolverLimits {
    fn default() -> Self {
        SolverLimits {
            timeout: Duration::from_secs(60),
            memory_mb: 4096,
            search: Search::default(),
        }
    }
}

/// A Fast Downward search configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Search {
    /// A driver alias such as `lama-first` (fast, satisficing: the default).
    Alias(String),
    /// A search string such as `astar(lmcut())` (optimal).
    Search(String),
}

impl Default for Search {
    fn default() -> Self {
        Search::Alias("lama-first".into())
    }
}

impl Search {
    /// Reads a config value: anything with a parenthesis is a search string, else an alias.
    pub fn parse(s: &str) -> Search {
        if s.contains('(') {
            Search::Search(s.to_string())
        } else {
            Search::Alias(s.to_string())
        }
    }

    fn driver_args(&self) -> Vec<String> {
        match self {
            Search::Alias(a) => vec!["--alias".into(), a.clone()],
            Search::Search(s) => vec!["--search".into(), s.clone()],
        }
    }
}

/// One planner call's result.
#[derive(Clone, Debug)]
pub struct SolverRun {
    /// How it ended.
    pub outcome: Outcome,
    /// The plan file's text, when a plan was written.
    pub plan: Option<String>,
    /// What the driver printed.
    pub output: SolverOutput,
    /// Wall-clock time of the call.
    pub elapsed: Duration,
}

/// Maps the driver's exit code (see its `driver/returncodes.py`) to an outcome.
fn classify(out: &SolverOutput, has_plan: bool) -> Outcome {
    if out.timed_out {
        return Outcome::Timeout;
    }
    match out.exit_code {
        // SUCCESS and the "plan found, then ran out of memory/time" family.
        Some(0..=3) if has_plan => Outcome::Solved,
        Some(0..=3) => Outcome::SolverError,
        // TRANSLATE_UNSOLVABLE, SEARCH_UNSOLVABLE, SEARCH_UNSOLVED_INCOMPLETE, ..._WITHIN_BOUND.
        Some(10..=13) => Outcome::Unsolvable,
        // TRANSLATE_OUT_OF_MEMORY, SEARCH_OUT_OF_MEMORY, SEARCH_OUT_OF_MEMORY_AND_TIME.
        Some(20 | 22 | 24) => Outcome::OutOfMemory,
        // TRANSLATE_OUT_OF_TIME, SEARCH_OUT_OF_TIME.
        Some(21 | 23) => Outcome::Timeout,
        // TRANSLATE_INPUT_ERROR, SEARCH_INPUT_ERROR, DRIVER_INPUT_ERROR.
        Some(31 | 33 | 36) => Outcome::InputError,
        // Critical errors, unsupported features, signals, anything unknown.
        _ => Outcome::SolverError,
    }
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: killpg only sends a signal; ESRCH (group already gone) is fine.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn read_tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > OUTPUT_CAP {
        let _ = f.seek(SeekFrom::Start(len - OUTPUT_CAP));
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The plan file: `plan`, or the last of `plan.1`, `plan.2`, … that anytime
/// configurations write.
fn read_plan(work: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(work.join("plan")) {
        return Some(text);
    }
    (1..)
        .map(|i| work.join(format!("plan.{i}")))
        .take_while(|p| p.is_file())
        .last()
        .and_then(|p| std::fs::read_to_string(p).ok())
}

fn which(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: Option<i32>) -> SolverOutput {
        SolverOutput {
            exit_code: code,
            ..SolverOutput::default()
        }
    }

    #[test]
    fn exit_codes_map_to_outcomes() {
        assert_eq!(classify(&out(Some(0)), true), Outcome::Solved);
        assert_eq!(classify(&out(Some(0)), false), Outcome::SolverError);
        assert_eq!(classify(&out(Some(2)), true), Outcome::Solved);
        assert_eq!(classify(&out(Some(10)), false), Outcome::Unsolvable);
        assert_eq!(classify(&out(Some(11)), false), Outcome::Unsolvable);
        assert_eq!(classify(&out(Some(12)), false), Outcome::Unsolvable);
        assert_eq!(classify(&out(Some(22)), false), Outcome::OutOfMemory);
        assert_eq!(classify(&out(Some(23)), false), Outcome::Timeout);
        assert_eq!(classify(&out(Some(31)), false), Outcome::InputError);
        assert_eq!(classify(&out(Some(32)), false), Outcome::SolverError);
        assert_eq!(classify(&out(None), false), Outcome::SolverError);
        let timed_out = SolverOutput {
            timed_out: true,
            ..out(None)
        };
        assert_eq!(classify(&timed_out, false), Outcome::Timeout);
    }

    #[test]
    fn search_strings_and_aliases() {
        assert_eq!(
            Search::parse("lama-first"),
            Search::Alias("lama-first".into())
        );
        assert_eq!(
            Search::parse("astar(lmcut())"),
            Search::Search("astar(lmcut())".into())
        );
        assert_eq!(
            Search::parse("astar(lmcut())").driver_args(),
            ["--search", "astar(lmcut())"]
        );
    }

    #[test]
    fn anytime_plans_take_the_last_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_plan(dir.path()), None);
        std::fs::write(dir.path().join("plan.1"), "(a)\n").unwrap();
        std::fs::write(dir.path().join("plan.2"), "(b)\n").unwrap();
        assert_eq!(read_plan(dir.path()).as_deref(), Some("(b)\n"));
    }

    #[test]
    fn output_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut text = "x".repeat(OUTPUT_CAP as usize);
        text.push_str("the error");
        std::fs::write(&path, &text).unwrap();
        let tail = read_tail(&path);
        assert_eq!(tail.len(), OUTPUT_CAP as usize);
        assert!(tail.ends_with("the error"));
    }
}

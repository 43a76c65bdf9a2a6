//! A tiny harness for running the `onebrain` binary (after ripgrep's `TestCommand`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fixture under tests/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures").join(name)
}

/// `../shared/data` beside the repository, if present.
pub fn shared_data() -> Option<PathBuf> {
    let dir = repo().join("../shared/data");
    dir.is_dir().then_some(dir).or_else(|| {
        eprintln!("skipping: ../shared/data is absent");
        None
    })
}

/// Builds the guests once per test binary (the script `scripts/setup.sh` runs;
/// quick when nothing changed) and returns the folder of built components.
pub fn build_plugins() -> PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let ok = Command::new(repo().join("scripts/build-plugins.sh"))
            .status()
            .expect("run scripts/build-plugins.sh")
            .success();
        assert!(ok, "scripts/build-plugins.sh failed");
    });
    repo().join("guests/target/wasm32-wasip2/release")
}

/// Why the model tests cannot run here (`scripts/setup.sh` installs what they need), if so.
pub fn model_ready() -> Option<&'static str> {
    onebrain_roles::test_setup_missing(&repo(), &["blocksworld", "gripper", "paper-rewards"])
}

/// The binary under test, run from the repository root on one compute thread unless the
/// caller's environment names a count (see [`one_compute_thread`]).
pub fn onebrain_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onebrain"));
    cmd.current_dir(repo());
    one_compute_thread(&mut cmd);
    cmd
}

/// Gives `cmd` (and every process it starts) one compute thread (`RAYON_NUM_THREADS=1`,
/// which candle's pool follows), unless the caller's environment names a count. Tests run two
/// at a time, often each with a model process, and candle's pool waits at its barriers by
/// spinning: two processes of two threads on two cores spend most of their time spinning on a
/// descheduled worker. One thread gives the same tokens bit for bit (docs/performance.md).
pub fn one_compute_thread(cmd: &mut Command) -> &mut Command {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        cmd.env("RAYON_NUM_THREADS", "1");
    }
    cmd
}

/// One `onebrain` invocation.
pub struct TestCommand {
    cmd: Command,
}

impl TestCommand {
    pub fn new(args: &[&str]) -> TestCommand {
        let mut cmd = onebrain_command();
        cmd.args(args);
        TestCommand { cmd }
    }

    /// Runs it under `ulimit -v KB` (a virtual-memory limit, as shared clusters set one).
    pub fn address_limit_kb(self, kb: u64) -> Self {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(format!("ulimit -v {kb} && exec \"$0\" \"$@\"")).arg(self.cmd.get_program()).args(self.cmd.get_args());
        if let Some(dir) = self.cmd.get_current_dir() {
            cmd.current_dir(dir);
        }
        TestCommand { cmd }
    }

    pub fn args(self, args: &[&str]) -> Self {
        args.iter().fold(self, |cmd, a| cmd.arg(a))
    }

    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    fn output(mut self) -> (Output, String) {
        let out = self.cmd.output().expect("run onebrain");
        let desc = format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out, desc)
    }

    /// Runs it, asserts exit 0, returns stdout and stderr.
    pub fn output_text(self) -> (String, String) {
        let (out, desc) = self.output();
        assert!(out.status.success(), "{desc}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// Runs it, asserts exit 0, returns stdout.
    pub fn stdout(self) -> String {
        let (out, desc) = self.output();
        assert!(out.status.success(), "{desc}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs it with `--json`, asserts exit 0, parses stdout as one JSON object.
    pub fn json(self) -> serde_json::Value {
        let text = self.arg("--json").stdout();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// Runs it, asserts exit status `code`, returns stdout.
    pub fn stdout_with(self, code: i32) -> String {
        let (out, desc) = self.output();
        assert_eq!(out.status.code(), Some(code), "{desc}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs it with `--json`, asserts exit status `code` (1: a verdict of no), parses stdout
    /// as one JSON object.
    pub fn json_with(self, code: i32) -> serde_json::Value {
        let text = self.arg("--json").stdout_with(code);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// Runs it whatever its exit status; returns stdout and the exit code.
    pub fn output_any(self) -> (String, Option<i32>) {
        let (out, _) = self.output();
        (String::from_utf8(out.stdout).unwrap(), out.status.code())
    }

    /// Runs it, asserts the given non-zero exit code, returns stderr.
    pub fn fails_with(self, code: i32) -> String {
        let (out, desc) = self.output();
        assert_eq!(out.status.code(), Some(code), "{desc}");
        String::from_utf8(out.stderr).unwrap()
    }
}

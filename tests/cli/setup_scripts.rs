//! The set-up scripts `make demo` runs before the binary exists: `scripts/beside.sh` runs the
//! model download beside the builds.

use std::process::Command;

use super::harness::repo;

/// `scripts/beside.sh BACKGROUND FOREGROUND`: its exit status and standard error.
fn beside(background: &str, foreground: &str) -> (i32, String) {
    let out = Command::new(repo().join("scripts/beside.sh"))
        .args([background, foreground])
        .output()
        .expect("run scripts/beside.sh");
    (out.status.code().expect("exited, not killed"), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn beside_runs_the_two_commands_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (started, seen) = (dir.path().join("started"), dir.path().join("seen"));
    // The background writes `started` and waits for `seen`; the foreground waits for
    // `started`, then writes `seen`. Run one after the other, whichever goes first waits out
    // its 10 s and fails.
    let background = format!(
        "touch {s}; for i in $(seq 100); do [ -f {e} ] && exit 0; sleep 0.1; done; exit 1",
        s = started.display(),
        e = seen.display()
    );
    let foreground = format!(
        "for i in $(seq 100); do [ -f {s} ] && touch {e} && exit 0; sleep 0.1; done; exit 1",
        s = started.display(),
        e = seen.display()
    );
    let (code, stderr) = beside(&background, &foreground);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn beside_fails_naming_the_command_that_failed() {
    let (code, stderr) = beside("exit 3", "true");
    assert_ne!(code, 0);
    assert!(stderr.contains("`exit 3` failed (exit 3)"), "{stderr}");
    let (code, stderr) = beside("true", "exit 4");
    assert_ne!(code, 0);
    assert!(stderr.contains("`exit 4` failed (exit 4)") && !stderr.contains("`true`"), "{stderr}");
}

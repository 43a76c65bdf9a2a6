//! A write that fails after N bytes, on any machine: the full-disk tests need root for their
//! tmpfs, so these give each case a child process (this test binary again) whose file-size
//! limit (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored) makes every write past N bytes of a file fail
//! (EFBIG) part way, as a full disk does. A replaced file keeps its old bytes and its partial
//! file goes; a log is cut back to its last whole record and takes the next one whole.

use std::path::{Path, PathBuf};
use std::process::Command;

use onebrain_durable::{partial_path, write_atomic, AppendFile};

const CHILD_ENV: &str = "ONEBRAIN_FILE_SIZE_CHILD";
/// The file-size limit of the child: a file may not grow past it.
const LIMIT: u64 = 16 * 1024;

/// Not a test of its own: runs one case under the limit, in the child, and prints the errors.
#[test]
fn child_process_of_the_file_size_limit_tests() {
    let Ok(case) = std::env::var(CHILD_ENV) else { return };
    let dir = PathBuf::from(std::env::var("ONEBRAIN_FILE_SIZE_DIR").unwrap());
    match case.as_str() {
        "replace" => {
            let err = write_atomic(&dir.join("report.json"), vec![b'x'; 4 * LIMIT as usize]).unwrap_err();
            println!("error: {err}");
            write_atomic(&dir.join("report.json"), b"new").unwrap();
        }
        "append" => {
            let mut log = AppendFile::open(&dir.join("trace.jsonl")).unwrap();
            let big = format!("{{\"n\":2,\"text\":\"{}\"}}\n", "y".repeat(2 * LIMIT as usize));
            let err = log.append(big.as_bytes()).unwrap_err();
            println!("error: {err}");
            log.append(b"{\"n\":3}\n").unwrap();
        }
        other => panic!("no case {other}"),
    }
    std::process::exit(0);
}

/// Runs `case` in a child under the limit, in `dir`: its stdout.
fn run_limited(case: &str, dir: &Path) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_process_of_the_file_size_limit_tests", "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, case)
        .env("ONEBRAIN_FILE_SIZE_DIR", dir);
    // SAFETY: between fork and exec, only async-signal-safe calls (setrlimit, signal).
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: LIMIT, rlim_max: LIMIT };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Ignored dispositions survive exec: a write past the limit fails instead of
            // killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{case}: {}\n{stdout}{}", out.status, String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The error line the child printed (after the harness's own words on that line).
fn said_error(said: &str) -> &str {
    said.split_once("error: ").and_then(|(_, e)| e.lines().next()).unwrap_or_else(|| panic!("no error printed: {said}"))
}

#[test]
fn a_write_cut_short_keeps_the_old_file_names_the_file_and_removes_the_partial_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    write_atomic(&path, b"old").unwrap();
    let said = run_limited("replace", dir.path());
    let error = said_error(&said);
    assert!(error.contains("report.json"), "{error}");
    assert!(!partial_path(&path).exists(), "the partial file is removed");
    // The child's next write, within the limit, replaced it whole.
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
}

#[test]
fn an_append_cut_short_is_cut_back_and_the_log_goes_on_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    std::fs::write(&path, b"{\"n\":1}\n").unwrap();
    let said = run_limited("append", dir.path());
    let error = said_error(&said);
    assert!(error.contains("trace.jsonl"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"n\":1}\n{\"n\":3}\n");
}

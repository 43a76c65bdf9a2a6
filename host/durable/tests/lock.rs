//! Two processes racing for one folder: the second is refused at once, naming the first, and a
//! holder killed with SIGKILL releases the folder at once (a killed run never blocks its own
//! resume).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use onebrain_durable::{Error, FolderLock};

const CHILD_ENV: &str = "ONEBRAIN_LOCK_CHILD";

/// Not a test of its own: the first writer, in a child process of
/// [`a_second_process_is_refused_naming_the_first_and_a_killed_one_releases_the_folder`]. Runs
/// only with `ONEBRAIN_LOCK_CHILD` set to the folder; holds it until it is killed.
#[test]
fn child_process_of_the_lock_test() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let _lock = FolderLock::acquire(std::path::Path::new(&dir)).unwrap();
    println!("locked");
    std::thread::sleep(Duration::from_secs(120));
    std::process::exit(3);
}

#[test]
fn a_second_process_is_refused_naming_the_first_and_a_killed_one_releases_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_of_the_lock_test", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, &run)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("locked") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended before it locked the folder");
    }
    let started = Instant::now();
    let err = FolderLock::acquire(&run).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "refused at once, not after a wait");
    let Error::Locked { holder, .. } = &err else { panic!("{err}") };
    assert!(holder.starts_with(&format!("pid {}: ", child.id())), "{holder}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    FolderLock::acquire(&run).expect("a killed holder releases the folder");
}

//! `onebrain plugins` against hostile plugin folders: `check` is a
//! gate for scripts, plugin text is printed as data, a broken folder is
//! skipped with a warning, and a component outside its folder is not read.

use std::path::{Path, PathBuf};

use crate::harness::{build_plugins, repo, TestCommand};

fn built() -> PathBuf {
    build_plugins()
}

/// Installs the test guest `crate_name` in `dir` as plugin `name`.
fn install(dir: &Path, name: &str, crate_name: &str, world: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    let wasm = built().join(format!("{}.wasm", crate_name.replace('-', "_")));
    std::fs::copy(wasm, p.join(format!("{name}.wasm"))).unwrap();
    std::fs::write(
        p.join("plugin.toml"),
        format!("name = \"{name}\"\nversion = \"0.1.0\"\nworld = \"{world}\"\ncomponent = \"{name}.wasm\"\n"),
    )
    .unwrap();
}

fn plugins(dir: &Path, args: &[&str]) -> TestCommand {
    let mut cmd = TestCommand::new(&["plugins"])
        .arg("--plugins-dir")
        .arg(dir)
        .arg("--cache-dir")
        .arg(dir.join("../cache"));
    for a in args {
        cmd = cmd.arg(a);
    }
    cmd
}

fn no_escape(s: &str) -> bool {
    !s.contains('\x1b') && !s.contains('\x07')
}

#[test]
fn plugins_check_exits_non_zero_when_a_plugin_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(&dir, "flat-reward", "flat-reward", "reward");
    install(&dir, "hostile-reward", "hostile-reward", "reward");

    // One good plugin: exit 0.
    let out = plugins(&dir, &["check", "flat-reward"]).stdout();
    assert!(out.contains("flat-reward 0.1.0 (reward): ok"), "{out}");

    // All of them, human form: the report for each, then exit 1 naming the failure.
    let err = plugins(&dir, &["check"]).fails_with(1);
    assert!(
        err.contains("1 of 2 plugins failed the check: hostile-reward"),
        "{err}"
    );
    let (out, _) = plugins(&dir, &["check", "hostile-reward"]).output_any();
    assert!(
        out.contains("hostile-reward 0.1.0 (reward): FAILED"),
        "{out}"
    );
    assert!(out.contains("the actor reward is NaN"), "{out}");

    // --json: the same reports as JSON, and the same exit code.
    let (out, code) = plugins(&dir, &["check", "--json"]).output_any();
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ok: Vec<(String, bool)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ok,
        [
            ("flat-reward".into(), true),
            ("hostile-reward".into(), false)
        ]
    );
}

#[test]
fn plugins_check_prints_plugin_text_as_data() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    // Its smoke call answers with an error that would erase the FAILED line,
    // print a forged "ok" and retitle the window.
    install(&dir, "hostile", "hostile", "domain-adapter");
    let (out, code) = plugins(&dir, &["check", "hostile"]).output_any();
    assert_eq!(code, Some(1), "{out}");
    assert!(no_escape(&out), "{out:?}");
    assert!(
        out.contains("hostile 0.1.0 (domain-adapter): FAILED"),
        "{out}"
    );
    assert!(
        out.contains("\\u{1b}[2K\\rhostile 0.1.0 (domain-adapter): ok\\u{1b}]0;"),
        "{out}"
    );
}

#[test]
fn a_broken_plugin_folder_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(&dir, "flat-reward", "flat-reward", "reward");
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    std::fs::write(
        dir.join("broken/plugin.toml"),
        "name = \"broken\"\nnot toml at all",
    )
    .unwrap();

    let (out, err) = plugins(&dir, &["list"]).output_text();
    assert!(out.contains("flat-reward"), "{out}");
    assert!(
        err.contains("warning: skipped the plugin folder") && err.contains("plugins/broken"),
        "{err}"
    );
    let v = plugins(&dir, &["list"]).json();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");

    // Checking everything fails the gate; the good plugin still passes alone.
    let err = plugins(&dir, &["check"]).fails_with(1);
    assert!(err.contains("1 plugin folders were skipped"), "{err}");
    plugins(&dir, &["check", "flat-reward"]).stdout();
    // Asking for the broken one by name is an error that says why.
    let err = plugins(&dir, &["check", "broken"]).fails_with(1);
    assert!(err.contains("plugin `broken` cannot be used"), "{err}");
}

#[test]
fn plugins_inspect_does_not_read_outside_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(&dir, "link", "flat-reward", "reward");
    std::fs::remove_file(dir.join("link/link.wasm")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("link/link.wasm")).unwrap();
    std::fs::create_dir_all(dir.join("abs")).unwrap();
    std::fs::write(
        dir.join("abs/plugin.toml"),
        "name = \"abs\"\nversion = \"1\"\nworld = \"reward\"\ncomponent = \"/etc/passwd\"\n",
    )
    .unwrap();

    let out = plugins(&dir, &["inspect", "link"]).stdout();
    assert!(
        out.contains("refused:") && out.contains("symlink out of the plugin folder"),
        "{out}"
    );
    assert!(!out.contains("sha256") && !out.contains("root:"), "{out}");
    let err = plugins(&dir, &["inspect", "abs"]).fails_with(1);
    assert!(err.contains("absolute") && !err.contains("root:"), "{err}");
    let (out, code) = plugins(&dir, &["check", "link"]).output_any();
    assert_eq!(code, Some(1));
    assert!(out.contains("FAILED") && !out.contains("root:"), "{out}");
}

/// `plugins rescore` reads a committed eval trace: through `finished_episode`,
/// `paper-rewards` gives back exactly the rewards recorded at the time, and
/// `grounded-rewards` withholds the Actor's pay from the gamed specs.
#[test]
fn rescore_reproduces_the_recorded_rewards_and_grounded_rewards_pays_less() {
    built();
    let trace = repo().join("results/eval-constrained/trace.jsonl");
    let tmp = tempfile::tempdir().unwrap();
    let out = TestCommand::new(&["plugins", "--json", "--cache-dir"])
        .arg(tmp.path())
        .arg("rescore")
        .arg("--trace")
        .arg(&trace)
        .args(&["--reward", "paper-rewards", "--reward", "grounded-rewards"])
        .json();
    let (paper, grounded) = (&out[0], &out[1]);
    assert_eq!(paper["episodes"], 40, "{out}");
    assert_eq!(paper["actor_differs"], 0, "{out}");
    assert!(paper["errors"].as_array().unwrap().is_empty() && grounded["errors"].as_array().unwrap().is_empty());
    assert!(grounded["actor"].as_f64().unwrap() + 0.5 < paper["actor"].as_f64().unwrap(), "{out}");
}

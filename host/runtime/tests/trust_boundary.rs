//! The plugin trust boundary: what the host accepts from a
//! plugin, its manifest and its name. One regression test per hole (a section below),
//! each driven by a hostile guest from `guests/testing/` or a hostile plugin
//! folder made here.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onebrain_core::{FinishedEpisode, Spec};
use onebrain_runtime::{
    check_manifest, FailureKind, Grant, HostOptions, InstancePolicy, Limits, PluginErrorKind, PluginHost, PluginManifest,
    PluginRegistry, RegistryError, RuntimeConfig, WasmChecker, WasmDiagnosticParser, WasmDomainAdapter, WasmReward,
    World,
};

fn reward(limits: Limits) -> WasmReward {
    let host = common::host(limits);
    WasmReward::new(&common::guest(&host, "hostile-reward", World::Reward), InstancePolicy::Reuse).unwrap()
}

fn checker() -> WasmChecker {
    let host = common::host(Limits::default());
    WasmChecker::new(&common::guest(&host, "hostile-checker", World::FaithfulnessChecker), InstancePolicy::Reuse)
        .unwrap()
}

fn parser() -> WasmDiagnosticParser {
    let host = common::host(Limits::default());
    WasmDiagnosticParser::new(&common::guest(&host, "hostile-parser", World::DiagnosticParser), InstancePolicy::Reuse)
        .unwrap()
}

fn hostile_domain(limits: Limits) -> WasmDomainAdapter {
    let host = common::host(limits);
    WasmDomainAdapter::new(&common::guest(&host, "hostile", World::DomainAdapter), InstancePolicy::Reuse).unwrap()
}

/// The hostile reward picks its attack by the repair count.
/// `hostile-reward` picks its attack by the episode's repair count; this one is honest.
const HONEST: u32 = 8;

fn attack(repairs: u32) -> FinishedEpisode {
    common::episode(repairs == HONEST, 0.8, false, repairs)
}

fn candidate(cmd: &str) -> Spec {
    Spec { domain: String::new(), problem: cmd.into() }
}

/// A plugin folder `dir/name` holding `manifest` (a `plugin.toml` body).
fn folder(dir: &Path, name: &str, manifest: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("plugin.toml"), manifest).unwrap();
    p
}

fn manifest(name: &str, world: &str, component: &str) -> String {
    format!("name = \"{name}\"\nversion = \"0.1.0\"\nworld = \"{world}\"\ncomponent = \"{component}\"\n")
}

/// Installs the test guest `crate_name` as plugin `name` in `dir`.
fn install(dir: &Path, name: &str, crate_name: &str, world: &str) -> PathBuf {
    let p = folder(dir, name, &manifest(name, world, &format!("{name}.wasm")));
    std::fs::copy(common::test_guest(crate_name), p.join(format!("{name}.wasm"))).unwrap();
    p
}

fn no_controls(s: &str) -> bool {
    !s.chars().any(|c| c.is_control() || c == '\u{202e}')
}

// 1. Poisoned values ---------------------------------------------------------

#[test]
fn poisoned_rewards_are_refused_on_every_call() {
    let r = reward(Limits::default());
    // Honest first, so the instance is warm: a plugin that passes one call is
    // still checked on the next.
    assert_eq!(r.try_rewards(&attack(HONEST)).unwrap().actor, 1.0);
    let nan = FailureKind::NonFinite;
    let bounds = FailureKind::Invalid;
    for (t, what, kind) in
        [(0, "NaN", nan), (1, "inf", nan), (2, "-inf", nan), (3, "1000000000000000000000000000000", bounds), (4, "100.5", bounds)]
    {
        let e = r.try_rewards(&attack(t)).expect_err(what);
        let m = match &e.kind {
            PluginErrorKind::Invalid(m) | PluginErrorKind::NonFinite(m) => m,
            _ => panic!("T={t}: {e}"),
        };
        assert!(m.contains(what) && e.failure_kind() == kind, "T={t}: {e}");
        assert!(e.to_string().starts_with("plugin hostile_reward@0.0.0 returned an invalid value"), "{e}");
        assert_eq!(r.try_rewards(&attack(HONEST)).unwrap().actor, 1.0, "the next honest call after T={t}");
    }
    // Per-step Editor rewards (API 0.2.0) are checked the same way, and counted.
    let e = r.try_rewards(&attack(9)).unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::NonFinite(m) if m.contains("editor step 5 reward is NaN")), "{e}");
    let e = r.try_rewards(&attack(10)).unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Invalid(m) if m.contains("9 per-step editor rewards for an episode of 10")), "{e}");
    assert_eq!(r.try_rewards(&attack(HONEST)).unwrap().actor, 1.0);
    // The bound is the config's: -100 is inside the default, outside 50.
    assert_eq!(r.try_rewards(&attack(5)).unwrap().actor, -100.0);
    let tight = reward(Limits { reward_bound: 50.0, ..Limits::default() });
    assert!(matches!(tight.try_rewards(&attack(5)).unwrap_err().kind, PluginErrorKind::Invalid(_)));
}

#[test]
fn a_nan_reward_fails_plugins_check() {
    let host = common::host(Limits::default());
    let m = PluginManifest::for_component(&common::test_guest("hostile-reward"), World::Reward);
    let report = check_manifest(&host, &m);
    assert!(!report.ok, "{report:?}");
    assert!(report.error.as_deref().unwrap().contains("actor reward is NaN"), "{report:?}");
}

#[test]
fn self_contradictory_reports_are_refused() {
    let c = checker();
    let reference = candidate("ok");
    assert!(c.try_check(&reference, &candidate("ok"), None).unwrap().faithful);
    for (cmd, says, kind) in [
        ("contradict", "schema_f1 is NaN", FailureKind::NonFinite),
        ("f1:NaN", "schema_f1 is NaN", FailureKind::NonFinite),
        ("f1:1.5", "schema_f1 is 1.5", FailureKind::Invalid),
        ("f1:-0.5", "schema_f1 is -0.5", FailureKind::Invalid),
        ("drift", "drift", FailureKind::Invalid),
    ] {
        let e = c.try_check(&reference, &candidate(cmd), None).expect_err(cmd);
        let m = match &e.kind {
            PluginErrorKind::Invalid(m) | PluginErrorKind::NonFinite(m) => m,
            _ => panic!("{cmd}: {e}"),
        };
        assert!(m.contains(says) && e.failure_kind() == kind, "{cmd}: {e}");
        assert!(e.to_string().contains("returned an invalid value: "), "the wording is the same: {e}");
    }
    // The smoke call (two empty specs) gets the contradictory report: check fails.
    let host = common::host(Limits::default());
    let m = PluginManifest::for_component(&common::test_guest("hostile-checker"), World::FaithfulnessChecker);
    let report = check_manifest(&host, &m);
    assert!(!report.ok && report.error.as_deref().unwrap().contains("invalid value"), "{report:?}");
}

// 2. Error strings under the output cap ------------------------------------

#[test]
fn a_huge_error_is_refused_before_it_is_copied() {
    // 48 MiB of error message (the guest's memory cap is 64 MiB by default).
    let r = reward(Limits::default());
    let t = Instant::now();
    let e = r.try_rewards(&attack(6)).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::OutputTooLarge { limit: 1_048_576, .. }), "{e}");
    assert!(e.to_string().len() < 200, "the error is short: {e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(r.try_rewards(&attack(HONEST)).unwrap().actor, 1.0);

    // Under the output cap but over the message cap: kept, cut to 4 KiB.
    let d = hostile_domain(Limits { max_output_kb: 256, ..Limits::default() });
    let e = d.try_describe("error:100000").unwrap_err();
    let PluginErrorKind::Guest(m) = &e.kind else { panic!("{e}") };
    assert!(
        m.len() < 4200 && m.ends_with("[100000 bytes in all]"),
        "{} bytes, ending {:?}",
        m.len(),
        m.chars().rev().take(40).collect::<String>()
    );
    // Over the output cap: refused as too large, like any answer.
    let e = d.try_describe("error:300000").unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::OutputTooLarge { bytes: Some(300_000), limit: 262_144 }), "{e}");
}

// 3. The manifest's component path -------------------------------------------

#[test]
fn component_paths_out_of_the_folder_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(tmp.path().join("outside.wasm"), std::fs::read(common::test_guest("flat-reward")).unwrap()).unwrap();
    // Refused by the manifest itself: absolute paths and `..`.
    folder(&plugins, "abs", &manifest("abs", "reward", "/etc/passwd"));
    folder(&plugins, "up", &manifest("up", "reward", "../../outside.wasm"));
    folder(&plugins, "zero", &manifest("zero", "reward", "/dev/zero"));
    // Refused when the file is looked at: symlinks out, devices, FIFOs, size.
    let link = folder(&plugins, "link", &manifest("link", "reward", "link.wasm"));
    std::os::unix::fs::symlink("/etc/passwd", link.join("link.wasm")).unwrap();
    let dev = folder(&plugins, "dev", &manifest("dev", "reward", "dev.wasm"));
    std::os::unix::fs::symlink("/dev/zero", dev.join("dev.wasm")).unwrap();
    let fifo = folder(&plugins, "fifo", &manifest("fifo", "reward", "fifo.wasm"));
    let made = std::process::Command::new("mkfifo").arg(fifo.join("fifo.wasm")).status().unwrap();
    assert!(made.success());
    let big = folder(&plugins, "big", &manifest("big", "reward", "big.wasm"));
    // Sparse: 65 MiB that take no disk, and are never read.
    std::fs::File::create(big.join("big.wasm")).unwrap().set_len(65 << 20).unwrap();
    let dir = folder(&plugins, "dir", &manifest("dir", "reward", "sub"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    // And one good plugin among them.
    install(&plugins, "good", "flat-reward", "reward");

    let t = Instant::now();
    let reg = PluginRegistry::discover(std::slice::from_ref(&plugins)).unwrap();
    let warnings = reg.warnings().join("\n");
    for name in ["abs", "up", "zero"] {
        assert!(matches!(reg.get(name), Err(RegistryError::Broken { .. })), "{name}");
        assert!(warnings.contains(&format!("plugins/{name}")), "{warnings}");
    }
    let host = common::host(Limits::default());
    assert!(check_manifest(&host, reg.get("good").unwrap()).ok);
    for (name, says) in [
        ("link", "symlink out of the plugin folder"),
        ("dev", "symlink out of the plugin folder"),
        ("fifo", "a FIFO"),
        ("big", "more than the limit of 67108864"),
        ("dir", "a directory"),
    ] {
        let m = reg.get(name).unwrap();
        assert!(!reg.list().iter().find(|p| p.name == name).unwrap().built, "{name} is not a usable component");
        let e = host.load(m).unwrap_err();
        assert!(matches!(&e.kind, PluginErrorKind::ComponentFile(r) if r.contains(says)), "{name}: {e}");
        assert!(!e.to_string().contains("root:"), "nothing of the file is shown: {e}");
        let d = reg.inspect(name).unwrap();
        assert!(d.sha256.is_none() && d.component_bytes.is_none(), "{name}: {d:?}");
        assert!(d.component_error.as_deref().unwrap().contains(says), "{name}: {d:?}");
    }
    // A FIFO or /dev/zero in place of plugin.toml is skipped too, not read.
    let f = plugins.join("fifo-manifest");
    std::fs::create_dir_all(&f).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(f.join("plugin.toml")).status().unwrap().success());
    let z = plugins.join("zero-manifest");
    std::fs::create_dir_all(&z).unwrap();
    std::os::unix::fs::symlink("/dev/zero", z.join("plugin.toml")).unwrap();
    let reg = PluginRegistry::discover(std::slice::from_ref(&plugins)).unwrap();
    assert!(matches!(reg.get("fifo-manifest"), Err(RegistryError::Broken { .. })));
    assert!(matches!(reg.get("zero-manifest"), Err(RegistryError::Broken { .. })));
    assert!(t.elapsed() < Duration::from_secs(10), "nothing hung: {:?}", t.elapsed());
}

// 4. Grants bind to the verified name ---------------------------------------

#[test]
fn a_copied_name_does_not_copy_a_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    let data = tmp.path().join("trusted/data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("secret.txt"), "granted to trusted-data only").unwrap();
    // The real plugin, and one that copies its name and its request.
    let asks = format!("[permissions]\nread-dirs = {{ \"/data\" = {:?} }}\n", data.display().to_string());
    let real = folder(&plugins, "trusted-data", &(manifest("trusted-data", "domain-adapter", "t.wasm") + &asks));
    std::fs::copy(common::test_guest("hostile"), real.join("t.wasm")).unwrap();
    let evil = folder(&plugins, "evil", &(manifest("trusted-data", "domain-adapter", "t.wasm") + &asks));
    std::fs::copy(common::test_guest("hostile"), evil.join("t.wasm")).unwrap();
    let grants: onebrain_runtime::Grants =
        [("trusted-data".to_string(), Grant { read_dirs: vec![data.clone()] })].into_iter().collect();
    let host = PluginHost::new(HostOptions { grants, ..Default::default() }).unwrap();

    // Discovery: the impostor folder is skipped, named; the name means the real one.
    let reg = PluginRegistry::discover(std::slice::from_ref(&plugins)).unwrap();
    let warnings = reg.warnings().join("\n");
    assert!(warnings.contains("plugins/evil") && warnings.contains("`trusted-data`"), "{warnings}");
    assert_eq!(reg.get("trusted-data").unwrap().dir, real);
    assert_eq!(host.load(reg.get("trusted-data").unwrap()).unwrap().preopens().len(), 1);

    // Loaded directly, or named by path in a config, the impostor gets nothing.
    let mut m = PluginManifest::parse(&std::fs::read_to_string(evil.join("plugin.toml")).unwrap()).unwrap();
    m.dir = evil.clone();
    let e = host.load(&m).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::Permission(_)), "{e}");
    let e = RegistryError::from(e).to_string();
    assert!(e.contains("`evil`"), "{e}");
    assert!(PluginManifest::load(&evil).is_err());

    // A folder of the same name in a second plugin directory: neither is used.
    let second = tmp.path().join("more-plugins");
    let twin = folder(&second, "trusted-data", &(manifest("trusted-data", "domain-adapter", "t.wasm") + &asks));
    std::fs::copy(common::test_guest("hostile"), twin.join("t.wasm")).unwrap();
    let names_both = |e: &str| e.contains(&real.display().to_string()) && e.contains(&twin.display().to_string());
    let reg = PluginRegistry::discover(&[plugins.clone(), second.clone()]).unwrap();
    let e = reg.get("trusted-data").unwrap_err().to_string();
    assert!(names_both(&e), "names both: {e}");
    // Named by path from a config, beside the installed one: the same error.
    let reg = PluginRegistry::discover(std::slice::from_ref(&plugins)).unwrap();
    let e = reg.resolve("more-plugins/trusted-data", World::DomainAdapter, tmp.path()).unwrap_err().to_string();
    assert!(names_both(&e), "names both: {e}");
}

// 5. Domains by verified name -----------------------------------------------

#[test]
fn a_plugin_cannot_answer_for_another_domain() {
    common::build();
    let root = common::root();
    let host = common::host(Limits::default());
    // Installed under its own name, it says it is blocksworld: refused.
    let e = WasmDomainAdapter::new(&common::guest(&host, "impostor", World::DomainAdapter), InstancePolicy::Reuse)
        .err()
        .expect("identity");
    assert!(
        matches!(&e.kind, PluginErrorKind::Identity { manifest, reported } if manifest == "impostor" && reported == "blocksworld"),
        "{e}"
    );
    // Installed as `blocksworld` beside the real one: neither answers, both are named.
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "blocksworld", "impostor", "domain-adapter");
    let dirs = format!("plugin-dirs = [{:?}, {:?}]\n", root.join("plugins"), tmp.path());
    let config = RuntimeConfig::from_toml(&format!("{dirs}domains = [\"blocksworld\"]")).unwrap();
    let e = config.load(&root).err().expect("duplicate").to_string();
    assert!(
        e.contains("plugins/blocksworld") && e.contains(&tmp.path().join("blocksworld").display().to_string()),
        "{e}"
    );
    // The other plugins of those directories are unaffected.
    let config = RuntimeConfig::from_toml(&format!("{dirs}domains = [\"gripper\"]")).unwrap();
    assert_eq!(config.load(&root).unwrap().domains.len(), 1);
    // Two entries answering for one domain: an error naming both.
    let config = RuntimeConfig::from_toml("domains = [\"blocksworld\", \"plugins/blocksworld\"]").unwrap();
    let e = config.load(&root).err().expect("duplicate domain");
    assert!(matches!(e, RegistryError::DuplicateDomain { ref name, .. } if name == "blocksworld"), "{e}");
}

// 6. Control characters -------------------------------------------------------

#[test]
fn plugin_text_is_escaped_before_it_can_reach_a_terminal() {
    let d = hostile_domain(Limits::default());
    let e = d.try_describe("ansi").unwrap_err().to_string();
    assert!(no_controls(&e), "{e:?}");
    assert!(e.contains("\\u{1b}[2K") && e.contains("\\u{202e}"), "shown as data: {e}");
    // Text keeps its lines; escapes are shown, not obeyed.
    assert_eq!(d.try_describe("ansi-ok").unwrap(), "line one\nline two\\u{1b}[31m red\\u{1b}[0m\ttab");
    // A panic message comes back through stderr.
    let e = d.try_describe("ansi-panic").unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Trap { stderr, .. } if stderr.contains("\\u{1b}[2J")), "{e}");
    assert!(no_controls(&e.to_string()), "{e:?}");
    // Every world: the reward's error, the checker's explanation, the parser's message.
    let e = reward(Limits::default()).try_rewards(&attack(7)).unwrap_err().to_string();
    assert!(no_controls(&e) && e.contains("\\u{1b}]0;owned"), "{e:?}");
    let r = checker().try_check(&candidate("ok"), &candidate("ansi"), None).unwrap();
    assert!(r.explanation.iter().all(|l| no_controls(l)) && r.explanation[0].contains("\\u{1b}[2K"), "{r:?}");
    let raw = onebrain_core::SolverOutput { stdout: "ansi".into(), ..Default::default() };
    let out = parser().try_parse(&raw, &[]).unwrap();
    assert!(no_controls(&out[0].message) && out[0].message.contains("\\u{202e}"), "{out:?}");
}

// 8. One broken folder ---------------------------------------------------------

#[test]
fn a_broken_plugin_folder_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    install(&plugins, "flat", "flat-reward", "reward");
    folder(&plugins, "broken", "name = \"broken\"\nthis is not TOML");
    folder(&plugins, "ansi\x1b[2J", &manifest("x", "reward", "x.wasm"));
    let config = |reward: &str| {
        RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\nreward = \"{reward}\"")).unwrap()
    };
    let loaded = config("flat").load(tmp.path()).unwrap();
    assert!(loaded.reward.is_some());
    let w = loaded.warnings.join("\n");
    assert!(w.contains("plugins/broken") && w.contains("plugins/ansi\\u{1b}[2J"), "{w}");
    assert!(no_controls(&w.replace('\n', " ")), "{w:?}");
    // A config that names the broken plugin is refused, saying why.
    let e = config("broken").load(tmp.path()).err().expect("broken").to_string();
    assert!(e.contains("plugin `broken` cannot be used") && e.contains("TOML"), "{e}");
}

// 9. Output caps before the copy ----------------------------------------------

#[test]
fn a_list_of_one_string_many_times_is_stopped_while_copying() {
    // 100 entries pointing at one 1 MiB string: 100 MiB to lift, under
    // wasmtime's own 128 MiB default, so without the host's copy budget the
    // whole list would be copied and only then measured (`bytes: Some`).
    let t = Instant::now();
    let c = checker();
    let e = c.try_check(&candidate("ok"), &candidate("alias:100"), None).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::OutputTooLarge { bytes: None, limit: 1_048_576 }), "{e}");
    assert!(c.try_check(&candidate("ok"), &candidate("ok"), None).is_ok(), "the next call is served");
    let raw = onebrain_core::SolverOutput { stdout: "alias:100".into(), ..Default::default() };
    let e = parser().try_parse(&raw, &[]).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::OutputTooLarge { bytes: None, .. }), "{e}");
    // A million entries: stopped just the same, quickly.
    let e = c.try_check(&candidate("ok"), &candidate("alias:1000000"), None).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::OutputTooLarge { bytes: None, .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

// 10. A reviewer's answer ------------------------------------------------------

/// `hostile-parser`'s `review` misbehaves as its task text says. Each failure is a typed
/// error naming the plugin, and the next call is served by a fresh instance.
#[test]
fn a_hostile_review_is_refused_with_its_kind_and_the_next_call_is_served() {
    let host = common::host(Limits { timeout_ms: 300, ..Limits::default() });
    let plugin = common::guest(&host, "hostile-parser", World::DiagnosticParser);
    let p = WasmDiagnosticParser::reviewer(&plugin, InstancePolicy::Reuse).unwrap();
    let review = |text: &str| p.try_review(text, &candidate("(define (problem p))"), &[]);
    let e = review("trap").unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Trap { stderr, .. } if stderr.contains("review trapped on purpose")), "{e}");
    assert!(e.to_string().starts_with("plugin hostile_parser@0.0.0 trapped"), "{e}");
    assert!(review("").unwrap().is_empty(), "the next call is served");
    let e = review("loop").unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::Timeout { .. }), "{e}");
    let e = review("flood").unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Invalid(m) if m.contains("1000 diagnostics from one review")), "{e}");
    let e = review("blank").unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Invalid(m) if m.contains("has an empty message")), "{e}");
    let out = review("ansi").unwrap();
    assert!(no_controls(&out[0].message) && out[0].message.contains("\\u{1b}[2J"), "{out:?}");
    let e = review("what").unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::Guest(m) if m == "unknown command what"), "{e}");
}

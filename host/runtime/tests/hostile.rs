//! The hostile-plugin suite: every attack ends in its typed error within its
//! limit, and the same plugin then answers the next call.

mod common;

use std::time::{Duration, Instant};

use onebrain_runtime::{
    Grant, HostOptions, InstancePolicy, Limits, PluginErrorKind, PluginHost, PluginManifest, WasmDomainAdapter, World,
};

fn hostile(limits: Limits) -> WasmDomainAdapter {
    let host = common::host(limits);
    WasmDomainAdapter::new(&common::guest(&host, "hostile", World::DomainAdapter), InstancePolicy::Reuse).unwrap()
}

fn limits() -> Limits {
    Limits { timeout_ms: 300, memory_mb: 32, max_output_kb: 256, ..Limits::default() }
}

/// Runs `cmd`, checks its error with `expect`, that it ended within
/// `within`, and that the plugin still serves the next call.
fn contained(p: &WasmDomainAdapter, cmd: &str, within: Duration, expect: impl Fn(&PluginErrorKind) -> bool) {
    let t = Instant::now();
    let err = p.try_describe(cmd).expect_err(cmd);
    let took = t.elapsed();
    assert!(expect(&err.kind), "{cmd}: unexpected error {err}");
    assert!(took < within, "{cmd}: took {took:?}, limit {within:?}");
    assert_eq!(err.plugin.name, "hostile", "the error names the plugin");
    assert_eq!(p.try_describe("ok").unwrap(), "fine", "{cmd}: the host must serve the next call");
}

#[test]
fn infinite_loop_runs_out_of_fuel() {
    let p = hostile(Limits { fuel: 50_000_000, timeout_ms: 10_000, ..limits() });
    contained(&p, "loop", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::FuelExhausted { .. }));
}

#[test]
fn infinite_loop_hits_the_timeout() {
    let p = hostile(limits());
    contained(&p, "loop", Duration::from_millis(1500), |k| matches!(k, PluginErrorKind::Timeout { .. }));
}

#[test]
fn slow_but_legal_work_hits_the_timeout() {
    let p = hostile(limits());
    contained(&p, "slow", Duration::from_millis(1500), |k| matches!(k, PluginErrorKind::Timeout { .. }));
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let p = hostile(limits());
    contained(&p, "memory", Duration::from_secs(5), |k| {
        matches!(k, PluginErrorKind::MemoryLimit { limit_bytes } if *limit_bytes == 32 << 20)
    });
}

#[test]
fn deep_recursion_is_a_stack_overflow() {
    let p = hostile(limits());
    contained(&p, "recursion", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::StackOverflow));
}

#[test]
fn huge_output_is_refused() {
    let p = hostile(limits());
    contained(&p, "huge:300000", Duration::from_secs(5), |k| {
        matches!(k, PluginErrorKind::OutputTooLarge { bytes: Some(300_000), limit: 262_144 })
    });
    contained(&p, "huge:4000000", Duration::from_secs(5), |k| {
        // Stopped while being copied out (4 MB is past the copy budget of 4 x the cap).
        matches!(k, PluginErrorKind::OutputTooLarge { bytes: None, limit: 262_144 })
    });
}

#[test]
fn panic_is_a_trap_with_its_message() {
    let p = hostile(limits());
    contained(&p, "panic", Duration::from_secs(5), |k| {
        matches!(k, PluginErrorKind::Trap { stderr, .. } if stderr.contains("panicked on purpose"))
    });
}

#[test]
fn stderr_flood_is_capped_not_fatal() {
    let p = hostile(limits());
    assert_eq!(p.try_describe("stderr").unwrap(), "noisy");
}

#[test]
fn no_file_environment_or_network_by_default() {
    let p = hostile(limits());
    for cmd in ["read:/etc/passwd", "read:etc/passwd", "list:/", "list:.", "write:/tmp/onebrain-pwned"] {
        contained(&p, cmd, Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
    }
    assert!(!std::path::Path::new("/tmp/onebrain-pwned").exists());
    assert_eq!(p.try_describe("env").unwrap(), "[]|[]", "no environment, no arguments");
    contained(&p, "net:127.0.0.1:22", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
    contained(&p, "net:1.1.1.1:53", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
}

#[test]
fn a_granted_directory_is_read_only_and_fenced() {
    let tmp = tempfile::tempdir().unwrap();
    let plugin_dir = tmp.path().join("hostile");
    let data = plugin_dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("facts.txt"), "visible").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
    std::fs::copy(common::test_guest("hostile"), plugin_dir.join("hostile.wasm")).unwrap();
    let manifest = PluginManifest::parse(
        "name = \"hostile\"\nversion = \"0.0.1\"\nworld = \"domain-adapter\"\ncomponent = \"hostile.wasm\"\n\
         [permissions]\nread-dirs = { \"/data\" = \"data\" }\n",
    )
    .unwrap();
    let manifest = PluginManifest { dir: plugin_dir.clone(), ..manifest };

    // Asked for but not granted: the plugin does not load.
    let ungranted = PluginHost::new(HostOptions { limits: limits(), ..Default::default() }).unwrap();
    let err = ungranted.load(&manifest).unwrap_err();
    assert!(matches!(err.kind, PluginErrorKind::Permission(_)), "{err}");

    let grants = [("hostile".to_string(), Grant { read_dirs: vec![data.clone()] })].into_iter().collect();
    let host = PluginHost::new(HostOptions { limits: limits(), grants, ..Default::default() }).unwrap();
    let p = WasmDomainAdapter::new(&host.load(&manifest).unwrap(), InstancePolicy::Reuse).unwrap();
    assert_eq!(p.try_describe("read:/data/facts.txt").unwrap(), "visible");
    for cmd in ["read:/data/../secret.txt", "read:/data/../../secret.txt", "read:/secret.txt", "read:/etc/passwd"] {
        contained(&p, cmd, Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
    }
    contained(&p, "write:/data/facts.txt", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
    contained(&p, "write:/data/new.txt", Duration::from_secs(5), |k| matches!(k, PluginErrorKind::Guest(_)));
    assert_eq!(std::fs::read_to_string(data.join("facts.txt")).unwrap(), "visible");
    assert!(!data.join("new.txt").exists());
}

#[test]
fn every_attack_in_a_row_on_one_plugin() {
    // One plugin value, one attack after another: each failure discards the
    // store and the next call gets a fresh one.
    let p = hostile(Limits { fuel: 2_000_000_000, ..limits() });
    for cmd in ["loop", "memory", "recursion", "huge:4000000", "panic", "slow"] {
        assert!(p.try_describe(cmd).is_err(), "{cmd}");
        assert_eq!(p.try_describe("ok").unwrap(), "fine", "after {cmd}");
    }
}

#[test]
fn a_long_sleep_ends_at_the_deadline() {
    // The guest blocks in the host (wasi:clocks), where epochs cannot
    // interrupt it; the host's clock cuts the sleep short at the deadline.
    let p = hostile(limits());
    contained(&p, "sleep:3600", Duration::from_millis(1500), |k| matches!(k, PluginErrorKind::Timeout { .. }));
}

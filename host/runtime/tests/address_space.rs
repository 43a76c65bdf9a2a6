//! The engine's address space follows the plugin memory limit, so plugins load and
//! run under `ulimit -v 8000000`, as shared clusters set it. wasmtime's default reserved
//! 4 GiB + 64 MiB per linear memory whatever the limit ("mmap failed to reserve 0x104000000
//! bytes"): two live plugins did not fit in 8 GB of address space. The sandbox's limits
//! (memory, fuel, time) hold as before.

mod common;

use std::process::Command;
use std::sync::Arc;

use onebrain_runtime::{
    memory_address_space, InstancePolicy, Limits, PluginErrorKind, WasmChecker, WasmDiagnosticParser, WasmDomainAdapter,
    WasmReward, World,
};

/// This process's virtual size (`VmSize`), in bytes.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    kb * 1024
}

/// A live instance of every bundled plugin, each called once; returns what keeps them alive.
fn load_and_call_every_bundled_plugin(limits: Limits) -> Vec<Box<dyn std::any::Any>> {
    let host = common::host(limits);
    let registry = common::registry();
    let mut live: Vec<Box<dyn std::any::Any>> = Vec::new();
    for info in registry.list() {
        let plugin = host.load(registry.get(&info.name).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", info.name));
        match info.world {
            World::DomainAdapter => {
                let d = WasmDomainAdapter::new(&plugin, InstancePolicy::Reuse).unwrap();
                let task = d.try_generate(7, 4).unwrap_or_else(|e| panic!("{}: {e}", info.name));
                let problem = &task.reference.expect("a generated task has its reference").problem;
                assert!(!d.try_describe(problem).unwrap().is_empty());
                live.push(Box::new(d));
            }
            World::Reward => {
                let r = WasmReward::new(&plugin, InstancePolicy::Reuse).unwrap();
                r.try_rewards(&common::episode(true, 0.8, false, 0)).unwrap_or_else(|e| panic!("{}: {e}", info.name));
                live.push(Box::new(r));
            }
            World::DiagnosticParser => {
                let p = WasmDiagnosticParser::new(&plugin, InstancePolicy::Reuse).unwrap();
                let raw = onebrain_core::SolverOutput { exit_code: Some(0), ..Default::default() };
                p.try_parse(&raw, &[]).unwrap_or_else(|e| panic!("{}: {e}", info.name));
                live.push(Box::new(p));
            }
            World::FaithfulnessChecker => {
                let c = WasmChecker::new(&plugin, InstancePolicy::Reuse).unwrap();
                let spec = onebrain_core::Spec::default();
                // An empty spec is refused by the plugin: it ran.
                match c.try_check(&spec, &spec, None) {
                    Ok(_) | Err(onebrain_runtime::PluginError { kind: PluginErrorKind::Guest(_), .. }) => {}
                    Err(e) => panic!("{}: {e}", info.name),
                }
                live.push(Box::new(c));
            }
        }
    }
    assert!(live.len() >= 8, "every bundled plugin: {}", live.len());
    live
}

/// Runs in a child process under the limit (see the test below).
fn under_the_limit() {
    // Every bundled plugin live at once, as `solve` and `eval` keep them.
    let mut live = load_and_call_every_bundled_plugin(Limits::default());
    // Four more live instances under a larger memory limit, on a second engine: 4 x 516 MiB.
    let big = common::host(Limits { memory_mb: 512, ..Limits::default() });
    let blocksworld = common::bundled(&big, "blocksworld");
    for seed in 0..4 {
        let d = WasmDomainAdapter::new(&blocksworld, InstancePolicy::Reuse).unwrap();
        d.try_generate(seed, 4).unwrap();
        live.push(Box::new(d));
    }
    // The sandbox still holds: a memory bomb meets the memory limit, a loop the clock.
    let host = common::host(Limits { timeout_ms: 300, ..Limits::default() });
    let hostile = WasmDomainAdapter::new(&common::guest(&host, "hostile", World::DomainAdapter), InstancePolicy::Reuse).unwrap();
    let e = hostile.try_describe("memory").unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::MemoryLimit { limit_bytes } if limit_bytes == 64 << 20), "{e}");
    let e = hostile.try_describe("loop").unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::Timeout { .. } | PluginErrorKind::FuelExhausted { .. }), "{e}");
    assert_eq!(hostile.try_describe("ok").unwrap(), "fine");
    eprintln!("{} plugins live under the limit, VmSize {} MiB", live.len(), vm_size() >> 20);
}

#[test]
fn plugins_load_and_run_under_ulimit_v_8000000() {
    if std::env::var_os("ONEBRAIN_UNDER_ULIMIT").is_some() {
        return under_the_limit();
    }
    common::build();
    // This very test, again, in a child under the limit (`ulimit -v` is per process).
    let out = Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 8000000 && exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "plugins_load_and_run_under_ulimit_v_8000000", "--nocapture", "--test-threads=1"])
        .env("ONEBRAIN_UNDER_ULIMIT", "1")
        // Built above; the child does not run cargo under the limit.
        .env("ONEBRAIN_PLUGINS_BUILT", "1")
        .output()
        .expect("run bash");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "under ulimit -v 8000000: {:?}\n{text}", out.status);
    assert!(text.contains("plugins live under the limit"), "the child ran the plugins:\n{text}");
}

/// Each live instance adds about its memory limit plus the guard regions to the address
/// space, not 4 GiB.
#[test]
fn address_space_per_live_plugin_follows_the_memory_limit() {
    for memory_mb in [16, 64] {
        let limits = Limits { memory_mb, ..Limits::default() };
        let host = common::host(limits.clone());
        let plugin = common::bundled(&host, "blocksworld");
        // Warm up: the first instance maps the engine's shared pieces.
        let first = WasmDomainAdapter::new(&plugin, InstancePolicy::Reuse).unwrap();
        first.try_generate(1, 3).unwrap();
        let before = vm_size();
        let n = 6;
        let live: Vec<Arc<WasmDomainAdapter>> = (0..n)
            .map(|_| {
                let d = WasmDomainAdapter::new(&plugin, InstancePolicy::Reuse).unwrap();
                d.try_generate(1, 3).unwrap();
                Arc::new(d)
            })
            .collect();
        let per_instance = vm_size().saturating_sub(before) / n;
        let expected = memory_address_space(limits.memory_bytes());
        assert_eq!(expected, limits.address_space_bytes());
        assert_eq!(expected, (memory_mb << 20) + (4 << 20), "the limit plus two 2 MiB guards");
        // Allow 16 MiB for the instance's other pieces (tables, stores, malloc).
        assert!(
            per_instance <= expected + (16 << 20),
            "{memory_mb} MiB limit: {} MiB of address space per live instance, expected about {} MiB",
            per_instance >> 20,
            expected >> 20
        );
        drop(live);
    }
    // A memory limit past what 32-bit wasm addresses reserves no more than 4 GiB.
    assert_eq!(memory_address_space(64 << 30), (4 << 30) + (4 << 20));
}

//! Every constructed case, checked through the `reference-checker` WASM plugin via the plugin
//! host, and compared field by field with the native report.

mod common;

use std::path::Path;

use onebrain_faithful::{check, Limits};
use onebrain_runtime::{HostOptions, InstancePolicy, Limits as CallLimits, PluginHost, PluginRegistry, WasmChecker};

/// The wall clock each call gets. These tests compare verdicts, not speed: the checker's
/// work is bounded by its own node limits and by fuel, both the same on every machine,
/// while the default 2 s clock is not: the 9-block `dropped-goal-fact` case ran past it on
/// CI, and here beside a training run (0.8 s natively, about 2.5x that in the guest).
const CALL_TIMEOUT_MS: u64 = 60_000;

/// Builds and installs the bundled plugins (the runtime's script; quick when nothing changed).
fn checker() -> WasmChecker {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = std::process::Command::new(root.join("scripts/build-plugins.sh")).status().expect("run scripts/build-plugins.sh");
    assert!(status.success(), "scripts/build-plugins.sh failed");
    let registry = PluginRegistry::discover(&[root.join("plugins")]).unwrap();
    let host = PluginHost::new(HostOptions { limits: CallLimits { timeout_ms: CALL_TIMEOUT_MS, ..CallLimits::default() }, ..HostOptions::default() }).unwrap();
    let plugin = host.load(registry.get("reference-checker").expect("plugins/reference-checker is installed")).unwrap();
    WasmChecker::new(&plugin, InstancePolicy::Reuse).unwrap()
}

#[test]
fn constructed_cases_get_their_verdicts_through_the_plugin() {
    let Some(cases) = common::cases() else { return };
    let wasm = checker();
    let mut failures = Vec::new();
    for c in &cases {
        let r = wasm.try_check(&c.reference, &c.candidate, Some(&c.plan)).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let native = check(&c.reference, &c.candidate, Some(&c.plan), true, &Limits::default()).unwrap();
        assert_eq!(r, native, "{}: the plugin and the native checker disagree", c.name);
        if let Err(e) = std::panic::catch_unwind(|| c.assert(&r)) {
            failures.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

#[test]
fn a_bad_reference_is_a_plugin_error_not_a_trap() {
    let wasm = checker();
    let bad = onebrain_core::Spec { domain: "(define".into(), problem: String::new() };
    let e = wasm.try_check(&bad, &bad, None).unwrap_err();
    assert!(e.to_string().contains("reference domain does not parse"), "{e}");
}

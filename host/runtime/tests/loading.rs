//! Loading: the API-version check, the compiled-component cache, world
//! checks, the faithfulness-checker world through a test checker.

mod common;

use onebrain_core::{Checker, Drift, Spec};
use onebrain_runtime::{
    CacheOutcome, HostOptions, InstancePolicy, PluginErrorKind, PluginHost, PluginManifest, WasmChecker, WasmReward,
    World,
};

fn patched(find: &[u8], replace: &[u8]) -> tempfile::TempDir {
    let bytes = std::fs::read(common::test_guest("flat-reward")).unwrap();
    let at = bytes.windows(find.len()).position(|w| w == find).expect("section present");
    let mut out = bytes.clone();
    out[at..at + find.len()].copy_from_slice(replace);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("patched.wasm"), out).unwrap();
    dir
}

#[test]
fn api_version_is_checked_before_instantiating() {
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let old = patched(b"onebrain:api-version0.1.0", b"onebrain:api-version9.9.9");
    let e = host.load_component(&old.path().join("patched.wasm"), World::Reward).unwrap_err();
    assert!(matches!(&e.kind, PluginErrorKind::IncompatibleApiVersion { found, .. } if found == "9.9.9"), "{e}");
    // The message names the plugin, the version it was built for and the versions this host loads.
    let text = e.to_string();
    assert!(text.contains("patched") && text.contains("onebrain:plugin@9.9.9"), "{text}");
    assert!(text.contains("this host loads 0.1.0, 0.2.0"), "{text}");
    let none = patched(b"onebrain:api-version", b"onebrain:api-versioX");
    let e = host.load_component(&none.path().join("patched.wasm"), World::Reward).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::MissingApiVersion), "{e}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.wasm"), b"\0asm junk").unwrap();
    let e = host.load_component(&dir.path().join("junk.wasm"), World::Reward).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::Load(_)), "{e}");
}

#[test]
fn cache_hits_after_the_first_load_and_survives_corruption() {
    let cache = tempfile::tempdir().unwrap();
    let host = PluginHost::new(HostOptions { cache_dir: Some(cache.path().into()), ..Default::default() }).unwrap();
    let wasm = common::test_guest("flat-reward");
    let first = host.load_component(&wasm, World::Reward).unwrap();
    assert_eq!(first.cache, CacheOutcome::Compiled);
    let second = host.load_component(&wasm, World::Reward).unwrap();
    assert_eq!(second.cache, CacheOutcome::Hit);
    let r = WasmReward::new(&second, InstancePolicy::Reuse).unwrap();
    assert_eq!(r.try_rewards(&Default::default()).unwrap().actor, 0.0);
    // A damaged entry is recompiled, not trusted.
    for e in std::fs::read_dir(cache.path()).unwrap() {
        std::fs::write(e.unwrap().path(), b"garbage").unwrap();
    }
    let third = host.load_component(&wasm, World::Reward).unwrap();
    assert_eq!(third.cache, CacheOutcome::Compiled);
    assert!(WasmReward::new(&third, InstancePolicy::Reuse).unwrap().try_rewards(&Default::default()).is_ok());
}

#[test]
fn a_component_of_another_world_is_refused() {
    let host = PluginHost::new(HostOptions::default()).unwrap();
    // The reward component, claimed to be a checker.
    let p = host.load_component(&common::test_guest("flat-reward"), World::FaithfulnessChecker).unwrap();
    let e = WasmChecker::new(&p, InstancePolicy::Reuse).err().expect("world mismatch");
    assert!(matches!(e.kind, PluginErrorKind::WorldMismatch { .. }), "{e}");
    // The right world under a manifest that names another is refused too.
    let p = host.load_component(&common::test_guest("flat-reward"), World::Reward).unwrap();
    assert!(WasmChecker::new(&p, InstancePolicy::Reuse).is_err());
    let m = PluginManifest::for_component(&common::test_guest("flat-reward"), World::Reward);
    assert_eq!(m.name, "flat_reward");
}

#[test]
fn faithfulness_checker_world_runs_a_test_checker() {
    let host = PluginHost::new(HostOptions::default()).unwrap();
    let c = WasmChecker::new(&common::guest(&host, "test-checker", World::FaithfulnessChecker), InstancePolicy::Reuse)
        .unwrap();
    let domain = "(define (domain d) (:predicates (p ?x) (q ?x)) (:action go :parameters (?x) :precondition (p ?x) :effect (q ?x)))";
    let spec = |goal: &str| Spec {
        domain: domain.into(),
        problem: format!("(define (problem t) (:domain d) (:objects a b) (:init (p a) (p b)) (:goal (and {goal})))"),
    };
    let plan = vec!["(go a)".to_string(), "(go b)".to_string()];
    let same = c.check(&spec("(q a) (q b)"), &spec("(q b) (q a)"), Some(&plan)).unwrap();
    assert!(same.faithful && same.goal_preserved && same.solvable, "{same:?}");
    let weaker = c.check(&spec("(q a) (q b)"), &spec("(q a)"), Some(&plan[..1])).unwrap();
    assert!(!weaker.faithful && weaker.solvable);
    assert_eq!(weaker.drift, Some(Drift::GoalWeakening));
    let e = c.check(&spec("(q a)"), &Spec { domain: domain.into(), problem: "(define".into() }, None).unwrap_err();
    assert!(e.to_string().contains("test_checker"), "the error names the plugin: {e}");
}

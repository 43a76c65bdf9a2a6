//! Hot swap and versions: a reward plugin built against API 0.1.0 (`flat-reward`,
//! straight from the frozen WIT), a checker built against 0.2.0 (`checker-v0-2`), a
//! diagnostic parser built against 0.3.0 (`parser-v0-3`) and the bundled 0.4.0 plugins in
//! one host; one config line swaps one reward for the other, same host binary.

mod common;

use onebrain_core::{Decision, Drift, Reward, Rewards, Spec};
use onebrain_runtime::{ApiVersion, CallBudget, InstancePolicy, Limits, RuntimeConfig, WasmChecker, WasmReward, World};

fn config(reward_line: &str) -> RuntimeConfig {
    RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\n{reward_line}\n[limits]\ntimeout-ms = 1000\n"))
        .unwrap()
}

#[test]
fn one_config_line_swaps_a_0_1_0_reward_for_a_0_2_0_one() {
    let root = common::root();
    let flat = common::test_guest("flat-reward");
    let flat = flat.strip_prefix(&root).unwrap().display().to_string();
    let ep = common::episode(false, 0.9, true, 3);

    let old = config(&format!("reward = \"{flat}\"")).load(&root).unwrap().reward.unwrap();
    let new = config("reward = \"paper-rewards\"").load(&root).unwrap().reward.unwrap();
    let a = old.rewards(&ep).unwrap();
    let b = new.rewards(&ep).unwrap();
    assert_eq!(a, Rewards { actor: 0.0, editor: 1.0, judge: 0.0, editor_steps: None });
    assert!((b.actor - 0.27).abs() < 1e-6 && (b.editor - 0.7).abs() < 1e-6 && b.judge == -1.0, "{b:?}");

    // A reference to a plugin of the wrong world is refused before it runs.
    let wrong = config("reward = \"blocksworld\"").load(&root);
    assert!(wrong.is_err());
}

#[test]
fn a_0_1_0_reward_loads_beside_0_4_0_plugins_and_gives_what_it_gave_before() {
    let host = common::host(Limits::default());
    let old = common::guest(&host, "flat-reward", World::Reward);
    let new = common::bundled(&host, "paper-rewards");
    let domain = common::bundled(&host, "blocksworld");
    assert_eq!((old.api_version, new.api_version, domain.api_version), (ApiVersion::V0_1_0, ApiVersion::V0_4_0, ApiVersion::V0_4_0));
    let old = WasmReward::new(&old, InstancePolicy::Reuse).unwrap();
    let new = WasmReward::new(&new, InstancePolicy::Reuse).unwrap();
    // What flat-reward returned under a 0.1.0-only host: R_A = b_0, R_E = b_T, 0, for
    // every shape of episode, read through the summary 0.1.0 sees.
    for (b0, bt, t) in [(true, true, 0), (false, false, 0), (false, true, 1), (false, false, 5), (false, true, 4)] {
        let ep = common::episode(b0, 0.3, bt, t);
        let r = old.try_rewards(&ep).unwrap();
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        assert_eq!(r, Rewards { actor: b(b0), editor: b(bt), judge: 0.0, editor_steps: None }, "{b0} {bt} {t}");
        // Calls alternate between the versions in one host.
        assert!(new.try_rewards(&ep).is_ok());
    }
}

/// 0.3.0 added `undecided` to the checker's report. A 0.2.0 checker still loads,
/// through 0.2.0's bindings, and its reports read as they always did: it cannot say
/// undecided apart from not faithful, so its undecided goal stays "not faithful".
#[test]
fn a_0_2_0_checker_loads_beside_0_4_0_ones_and_reads_as_before() {
    let host = common::host(Limits::default());
    let old = common::guest(&host, "checker-v0-2", World::FaithfulnessChecker);
    let new = common::bundled(&host, "reference-checker");
    assert_eq!((old.api_version, new.api_version), (ApiVersion::V0_2_0, ApiVersion::V0_4_0));
    let old = WasmChecker::new(&old, InstancePolicy::Reuse).unwrap();
    let spec = |p: &str| Spec { domain: String::new(), problem: p.into() };
    let plan = vec!["(noop)".to_string()];
    let r = old.try_check(&spec(""), &spec("faithful"), Some(&plan)).unwrap();
    assert!(r.faithful && r.init_preserved && !r.undecided && r.work == 0, "{r:?}");
    let r = old.try_check(&spec(""), &spec("weaker"), Some(&plan)).unwrap();
    assert_eq!((r.faithful, r.drift, r.undecided), (false, Some(Drift::GoalWeakening), false));
    let r = old.try_check(&spec(""), &spec("undecided"), Some(&plan)).unwrap();
    assert_eq!((r.faithful, r.decision, r.undecided), (false, Decision::Undecided, false));
    // A 0.4.0 checker (0.3.0's world) in the same host.
    let new = WasmChecker::new(&new, InstancePolicy::Reuse).unwrap();
    let e = new.try_check(&spec(""), &spec(""), None).unwrap_err();
    assert!(e.to_string().contains("does not parse"), "{e}");
}

/// 0.4.0 gave the diagnostic-parser world `review`. A 0.3.0 parser still loads,
/// through 0.3.0's bindings, and parses as before; it has no `review`, so it answers none
/// when asked and is refused, saying why, when a config lists it as a reviewer.
#[test]
fn a_0_3_0_parser_still_parses_and_cannot_review() {
    use onebrain_core::{Category, DiagnosticParser, SolverOutput};
    use onebrain_runtime::WasmDiagnosticParser;
    let host = common::host(Limits::default());
    let old = common::guest(&host, "parser-v0-3", World::DiagnosticParser);
    let new = common::bundled(&host, "fd-diagnostics");
    assert_eq!((old.api_version, new.api_version), (ApiVersion::V0_3_0, ApiVersion::V0_4_0));
    let parser = WasmDiagnosticParser::new(&old, InstancePolicy::Reuse).unwrap();
    let raw = SolverOutput { exit_code: Some(11), stdout: "no plan".into(), ..Default::default() };
    let native = [onebrain_core::Diagnostic::warning(Category::PreconditionEffect, "dead action")];
    let d = parser.parse(&raw, &native).unwrap();
    assert_eq!(d[0].message, "0.3.0 parser read `no plan` after 1 native");
    assert!(parser.review("the red block", &Spec::default(), &[]).unwrap().is_empty());

    let e = WasmDiagnosticParser::reviewer(&old, InstancePolicy::Reuse).err().expect("refused").to_string();
    assert!(e.contains("onebrain:plugin@0.3.0") && e.contains("cannot be a diagnostic reviewer"), "{e}");
    let root = common::root();
    let path = common::test_guest("parser-v0-3");
    let path = path.strip_prefix(&root).unwrap().display().to_string();
    let listed = RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\ndiagnostic-reviewers = [\"{path}\"]\n"))
        .unwrap()
        .load(&root);
    let e = listed.err().expect("a 0.3.0 reviewer is refused").to_string();
    assert!(e.contains("rebuild it with onebrain-sdk 0.4.0"), "{e}");
    // The same component as the config's `diagnostic-parser` loads.
    let parser = RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\ndiagnostic-parser = \"{path}\"\n"))
        .unwrap()
        .load(&root)
        .unwrap();
    assert!(parser.diagnostic_parser.is_some() && parser.diagnostic_reviewers.is_empty());
}

/// A checker's manifest `[budget]` sizes each call's fuel and wall clock from the reference
/// task, within the host's ceilings, and the call reports what it took.
#[test]
fn a_checker_budget_follows_the_task_within_the_host_ceiling() {
    let bw = |n: usize| {
        let names: Vec<String> = (0..n).map(|i| format!("b{i}")).collect();
        let init: String = names.iter().map(|b| format!("(ontable {b}) (clear {b}) ")).collect();
        Spec {
            domain: std::fs::read_to_string(common::root().join("guests/blocksworld/domain.pddl")).unwrap(),
            problem: format!(
                "(define (problem p) (:domain blocksworld-4ops) (:objects {}) (:init (handempty) {init}) (:goal (and (on b1 b0))))",
                names.join(" ")
            ),
        }
    };
    let host = common::host(Limits::default());
    let manifest = common::registry().get("reference-checker").unwrap().clone();
    let budget = manifest.budget.clone().expect("the reference checker states its budget");
    let checker = WasmChecker::new(&host.load(&manifest).unwrap(), InstancePolicy::Reuse).unwrap();
    let (small, large) = (checker.limits_for(&bw(4)), checker.limits_for(&bw(20)));
    assert!(large.fuel > small.fuel && large.timeout_ms > small.timeout_ms, "{small:?} {large:?}");
    // The formula, exactly, on the reference's ground actions plus atoms.
    let units = CallBudget::units(&bw(4));
    assert!(units > 40 && units < CallBudget::units(&bw(20)), "{units}");
    assert_eq!(small.fuel, budget.fuel_base + budget.fuel_per_unit * units);
    // A host ceiling below the budget wins.
    let capped = common::host(Limits { max_fuel: small.fuel, max_timeout_ms: 500, ..Limits::default() });
    let capped = WasmChecker::new(&capped.load(&manifest).unwrap(), InstancePolicy::Reuse).unwrap();
    let l = capped.limits_for(&bw(20));
    assert_eq!((l.fuel, l.timeout_ms), (small.fuel, 500));
    // What a call took, against what it was given.
    let r = checker.try_check(&bw(20), &bw(20), Some(&["(pick-up b1)".to_string(), "(stack b1 b0)".to_string()])).unwrap();
    assert!(r.faithful, "{r:?}");
    let cost = checker.last_call().unwrap();
    assert!(cost.fuel > 0 && cost.fuel < cost.fuel_limit && cost.fuel_limit == large.fuel, "{cost:?}");
}

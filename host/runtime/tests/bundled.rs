//! Each bundled plugin through the host (not only natively).

mod common;

use std::collections::{HashSet, VecDeque};

use onebrain_core::{DomainAdapter, Reward};
use onebrain_pddl as pddl;
use onebrain_runtime::{InstancePolicy, Limits, PluginErrorKind, WasmDomainAdapter, WasmReward};

#[test]
fn plugins_list_shows_the_bundled_plugins() {
    let names: Vec<String> = common::registry().list().into_iter().filter(|p| p.built).map(|p| p.name).collect();
    for want in ["blocksworld", "mystery-blocksworld", "logistics", "gripper", "paper-rewards", "fd-diagnostics", "text-diagnostics"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
}

#[test]
fn plugins_check_passes_for_every_bundled_plugin() {
    let reg = common::registry();
    let host = common::host(Limits::default());
    for info in reg.list() {
        let report = reg.check(&host, &info.name).unwrap();
        assert!(report.ok, "{}: {:?}", info.name, report.error);
        assert_eq!(report.api_version.as_deref(), Some("0.4.0"));
        assert!(!report.smoke.is_empty());
    }
    let details = reg.inspect("blocksworld").unwrap();
    assert_eq!(details.api_version.as_deref(), Some("0.4.0"));
    assert_eq!(details.sha256.as_ref().map(String::len), Some(64));
}

#[test]
fn paper_rewards_follow_the_paper() {
    let host = common::host(Limits::default());
    let r = WasmReward::new(&common::bundled(&host, "paper-rewards"), InstancePolicy::Reuse).unwrap();
    let ep = common::episode;
    let close = |a: f32, b: f32| (a - b).abs() < 1e-6;
    // R_A = b0 + 0.3 s_J; the Judge's table at tau = 0.5.
    let x = r.rewards(&ep(true, 0.9, true, 0)).unwrap();
    assert!(close(x.actor, 1.27) && close(x.editor, 0.0) && close(x.judge, 1.0), "{x:?}");
    let x = r.rewards(&ep(false, 0.9, true, 2)).unwrap();
    assert!(close(x.actor, 0.27) && close(x.editor, 0.8) && close(x.judge, -1.0), "{x:?}");
    let x = r.rewards(&ep(false, 0.2, false, 5)).unwrap();
    assert!(close(x.editor, -0.5) && close(x.judge, 0.5), "{x:?}");
    let x = r.rewards(&ep(true, 0.5, true, 0)).unwrap();
    assert!(close(x.judge, -0.5), "s = tau counts as 'not solvable': {x:?}");
    // Weights come from the call.
    let mut weighted = ep(false, 0.5, true, 2);
    (weighted.settings.lambda_judge, weighted.settings.repair_cost) = (1.0, 0.5);
    let x = r.rewards(&weighted).unwrap();
    assert!(close(x.actor, 0.5) && close(x.editor, 0.0), "{x:?}");
    assert_eq!(x.editor_steps, None, "the paper's R_E is terminal");
    // A bad score is the plugin's own typed error, and the plugin goes on.
    let e = r.try_rewards(&ep(true, 1.5, true, 0)).unwrap_err();
    assert!(matches!(e.kind, PluginErrorKind::Guest(_)), "{e}");
    assert!(r.try_rewards(&ep(true, 0.5, true, 0)).is_ok());
}

/// Breadth-first search over the ground task: the generated task is solvable.
fn solvable(domain: &str, problem: &str) -> bool {
    let d = pddl::parse_domain(domain).unwrap();
    let p = pddl::parse_problem(problem).unwrap();
    let task = pddl::ground(&d, &p).unwrap();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([task.init().clone()]);
    while let Some(s) = queue.pop_front() {
        if task.is_goal(&s) {
            return true;
        }
        for a in task.applicable(&s).collect::<Vec<_>>() {
            let next = task.apply(&s, a);
            if seen.insert(next.clone()) {
                queue.push_back(next);
            }
        }
        assert!(seen.len() < 2_000_000, "search too large for a unit test");
    }
    false
}

/// A domain's description is PlanBench's `domain_intro` alone: no key of the YAML file it came
/// from, and no sentence twice (Mystery's once carried its `domain_intro_state_tracking`
/// variant as well, some 330 tokens of every Mystery prompt).
fn assert_description_is_one_text(name: &str, description: &str) {
    let mut seen = HashSet::new();
    for line in description.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let yaml_key = line.ends_with(": |") || line.ends_with(":|");
        assert!(!yaml_key, "{name}: the description holds a YAML key: {line:?}");
        assert!(seen.insert(line), "{name}: the description says this twice: {line:?}");
    }
}

#[test]
fn domain_adapters_generate_and_describe_through_wasm() {
    let host = common::host(Limits::default());
    for (name, sizes) in [
        ("blocksworld", [3u32, 4, 5]),
        ("mystery-blocksworld", [3, 4, 5]),
        ("logistics", [1, 2, 3]),
        ("gripper", [1, 2, 3]),
    ] {
        let d = WasmDomainAdapter::new(&common::bundled(&host, name), InstancePolicy::Reuse).unwrap();
        assert_eq!(d.name(), name);
        let description = d.description().unwrap();
        assert!(description.len() > 200, "{name}: description");
        assert_description_is_one_text(name, &description);
        let domain = d.domain_pddl().unwrap();
        pddl::parse_domain(&domain).unwrap();
        for size in sizes {
            for seed in 0..4 {
                let t = d.generate(seed, size).unwrap();
                assert_eq!(t, d.generate(seed, size).unwrap(), "{name}: deterministic per seed");
                assert_eq!(t.domain, name);
                let spec = t.reference.clone().unwrap();
                assert_eq!(spec.domain, domain);
                let diags = pddl::check_sources(&spec.domain, &spec.problem);
                assert!(!pddl::has_errors(&diags), "{name} seed {seed}: {diags:?}\n{}", spec.problem);
                assert_eq!(d.describe(&spec.problem).unwrap(), t.text, "{name}: text = describe(problem)");
                assert!(solvable(&spec.domain, &spec.problem), "{name} seed {seed} size {size} unsolvable");
            }
            assert_ne!(d.generate(1, size).unwrap().reference, d.generate(2, size).unwrap().reference);
        }
        // The size range ends in a typed guest error, not a trap.
        let e = d.try_generate(0, 1000).unwrap_err();
        assert!(matches!(e.kind, PluginErrorKind::Guest(_)), "{name}: {e}");
        let e = d.try_describe("(define (problem").unwrap_err();
        assert!(matches!(e.kind, PluginErrorKind::Guest(_)), "{name}: {e}");
    }
}

#[test]
fn larger_tasks_generate_within_the_size_range() {
    let host = common::host(Limits::default());
    let bw = WasmDomainAdapter::new(&common::bundled(&host, "blocksworld"), InstancePolicy::Reuse).unwrap();
    for size in 2..=12 {
        let t = bw.generate(size as u64, size).unwrap();
        let p = pddl::parse_problem(&t.reference.unwrap().problem).unwrap();
        assert_eq!(p.objects.len(), size as usize);
    }
    let lg = WasmDomainAdapter::new(&common::bundled(&host, "logistics"), InstancePolicy::Reuse).unwrap();
    let t = lg.generate(3, 20).unwrap();
    assert!(t.text.contains("package_19"));
}

#[test]
fn fd_diagnostics_categorises_translator_output_through_wasm() {
    use onebrain_core::{Category, DiagnosticParser, SolverOutput, SpecFile};
    use onebrain_runtime::WasmDiagnosticParser;
    let host = common::host(Limits::default());
    let p = WasmDiagnosticParser::new(&common::bundled(&host, "fd-diagnostics"), InstancePolicy::Reuse).unwrap();
    // Output as Fast Downward 24 prints it for an undefined object in the goal.
    let stdout = "INFO     Running translator.\nParsing...\nParsing problem\n\t->Parsing goal\n\t->Parsing condition\n\t->Parsing literal\nUndefined object\nGot: zz\ntranslate exit code: 31\n\nDriver aborting after translate\n";
    let raw = SolverOutput { exit_code: Some(31), stdout: stdout.into(), ..Default::default() };
    let d = p.parse(&raw, &[]).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].category, d[0].file), (Category::ObjectType, Some(SpecFile::Problem)));
    let raw = SolverOutput { exit_code: Some(11), stdout: "Task is provably unsolvable.\n".into(), ..Default::default() };
    assert_eq!(p.parse(&raw, &[]).unwrap()[0].category, Category::Unreachable);
    let raw = SolverOutput { exit_code: Some(0), stdout: "Solution found!\n".into(), ..Default::default() };
    assert!(p.parse(&raw, &[]).unwrap().is_empty());
}

//! Every PlanBench domain and instance parses and checks with no error, and every ground-truth
//! plan validates; Planetarium's domains parse too. Reads ../shared/data in place and skips with
//! a message when it is absent.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use onebrain_pddl::{check, ground, parse_domain, parse_plan, parse_problem, validate, Diagnostic};

fn data() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!(
            "SKIP: {} is absent; the PlanBench integration tests did not run",
            p.display()
        );
        None
    }
}

const CONFIGS: &[&str] = &["blocksworld", "mystery_blocksworld", "logistics"];

/// PlanBench writes BlocksWorld ground-truth plans with the blocks' colour names (`red` for
/// object `a`), decoded through `encoded_objects` in the prompt config (a JSON-style flow map).
/// Returns colour → object for configs that encode objects as `"<colour> block"`.
fn colour_names(config_yaml: &str) -> Vec<(String, String)> {
    let Some(start) = config_yaml.find("encoded_objects:") else {
        return Vec::new();
    };
    let rest = &config_yaml[start..];
    let Some(open) = rest.find('{') else {
        return Vec::new();
    };
    // The closing brace is the first one outside a string (values such as "package_{}" hold braces).
    let mut in_str = false;
    let Some(close) = rest.char_indices().skip(open).find_map(|(i, c)| {
        if c == '"' {
            in_str = !in_str;
        }
        (c == '}' && !in_str).then_some(i)
    }) else {
        return Vec::new();
    };
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&rest[open..=close]).unwrap();
    map.iter()
        .filter_map(|(k, v)| {
            v.as_str()?
                .strip_suffix(" block")
                .map(|c| (c.to_string(), k.clone()))
        })
        .collect()
}

fn shown(d: &[Diagnostic]) -> Vec<String> {
    d.iter().map(|d| d.to_string()).collect()
}

#[test]
fn every_planbench_instance_parses_and_checks_clean() {
    let Some(data) = data() else { return };
    let mut n = 0;
    for cfg in CONFIGS {
        let dir = data.join("planbench").join(cfg);
        let domain = parse_domain(&fs::read_to_string(dir.join("domain.pddl")).unwrap()).unwrap();
        let mut slowest = (0f64, String::new());
        for sub in ["instances", "instances_3blocks"] {
            let Ok(entries) = fs::read_dir(dir.join(sub)) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                if path.extension().is_none_or(|x| x != "pddl") {
                    continue;
                }
                let src = fs::read_to_string(&path).unwrap();
                let problem =
                    parse_problem(&src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let t = Instant::now();
                let diags = check(&domain, &problem);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if ms > slowest.0 {
                    slowest = (ms, path.display().to_string());
                }
                // Not even a warning: the benchmark's specs are clean.
                assert!(diags.is_empty(), "{}: {:?}", path.display(), shown(&diags));
                n += 1;
            }
        }
        eprintln!("{cfg}: slowest check {:.2} ms ({})", slowest.0, slowest.1);
    }
    assert!(n > 1000, "only {n} instances found");
}

#[test]
fn every_ground_truth_plan_validates() {
    let Some(data) = data() else { return };
    let mut n = 0;
    for cfg in CONFIGS {
        let dir = data.join("planbench").join(cfg);
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !(name.starts_with("nl_tasks_") && name.ends_with(".jsonl")) {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            let stem = name
                .trim_start_matches("nl_tasks_")
                .trim_end_matches(".jsonl");
            let config =
                fs::read_to_string(dir.join("prompts").join(format!("{stem}_config.yaml")))
                    .unwrap_or_default();
            let colours = colour_names(&config);
            let mut domain_cache: Option<(String, onebrain_pddl::Domain)> = None;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                let dom_rel = row["domain_pddl"].as_str().unwrap().to_string();
                if domain_cache.as_ref().is_none_or(|(p, _)| *p != dom_rel) {
                    let d = parse_domain(&fs::read_to_string(dir.join(&dom_rel)).unwrap()).unwrap();
                    domain_cache = Some((dom_rel.clone(), d));
                }
                let domain = &domain_cache.as_ref().unwrap().1;
                let prob_rel = row["problem_pddl"].as_str().unwrap();
                let problem =
                    parse_problem(&fs::read_to_string(dir.join(prob_rel)).unwrap()).unwrap();
                let mut plan = parse_plan(row["ground_truth_plan"].as_str().unwrap()).unwrap();
                for step in &mut plan.steps {
                    for arg in &mut step.args {
                        if let Some((_, obj)) = colours.iter().find(|(c, _)| c == arg) {
                            *arg = obj.clone();
                        }
                    }
                }
                let r = validate(domain, &problem, &plan);
                assert!(r.valid, "{cfg} {prob_rel}: {r:?}");
                assert_eq!(r.steps, plan.steps.len());
                // The same plan replayed on the ground task reaches the goal too.
                let task = ground(domain, &problem).unwrap();
                let mut s = task.init().clone();
                for step in &plan.steps {
                    let i = task
                        .find_action(&step.action, &step.args)
                        .unwrap_or_else(|| panic!("{prob_rel}: {step} was not grounded"));
                    assert!(task.is_applicable(&s, i), "{prob_rel}: {step}");
                    s = task.apply(&s, i);
                }
                assert!(task.is_goal(&s), "{prob_rel}");
                n += 1;
            }
        }
    }
    assert!(n > 1000, "only {n} plans found");
}

#[test]
fn planetarium_domains_parse_and_round_trip() {
    let Some(data) = data() else { return };
    let dir = data.join("planetarium/domains");
    let mut n = 0;
    for e in fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let d = parse_domain(&fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            parse_domain(&d.to_string()).unwrap(),
            d,
            "{}",
            path.display()
        );
        let diags = onebrain_pddl::check_domain(&d);
        // The IPC rover domains add and delete `(channel_free)` in one effect on purpose; that
        // is a (correct) precondition-effect warning. Nothing else may be reported.
        assert!(
            diags.iter().all(|d| !d.is_error()
                && d.category == onebrain_pddl::Category::PreconditionEffect
                && d.message.contains("both adds and deletes")),
            "{}: {:?}",
            path.display(),
            shown(&diags)
        );
        n += 1;
    }
    assert!(n >= 5);
}

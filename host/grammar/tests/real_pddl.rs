//! The grammars never reject real PDDL: every PlanBench and Planetarium reference problem and
//! domain in `../shared/data`, and every bundled plugin's domain, is a sentence of its grammar,
//! and the staged constraint with its guards lets every one of them through token by token.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_grammar::{
    domain_file, full_continuation, problem_file, ConstraintSpec, Limits, Objects, TokenEnv, Vocabulary,
};

mod common;
use common::{data, read, repo};

/// (domain text, problem texts) of every PlanBench set.
fn planbench(data: &Path) -> Vec<(String, String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    for set in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let dir = data.join("planbench").join(set);
        let domain = read(&dir.join("domain.pddl"));
        let mut problems = Vec::new();
        for sub in ["instances", "instances_3blocks"] {
            let Ok(rd) = std::fs::read_dir(dir.join(sub)) else { continue };
            let mut paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "pddl")).collect();
            paths.sort();
            for p in paths {
                problems.push((p.display().to_string(), read(&p)));
            }
        }
        assert!(!problems.is_empty(), "no PlanBench {set} instances");
        out.push((set.to_string(), domain, problems));
    }
    out
}

/// Every `stride`-th Planetarium row of a domain: (row name, problem).
fn planetarium(data: &Path, domain: &str, stride: usize) -> Vec<(String, String)> {
    let f = std::fs::File::open(data.join(format!("planetarium/{domain}-train.jsonl.gz"))).unwrap();
    let r = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
    let mut out = Vec::new();
    for (i, line) in r.lines().enumerate() {
        if i % stride != 0 {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        out.push((v["name"].as_str().unwrap().to_string(), v["problem_pddl"].as_str().unwrap().to_string()));
    }
    out
}

fn vocab(domain: &str) -> Vocabulary {
    Vocabulary::of(&onebrain_pddl::parse_domain(domain).expect("reference domains parse"))
}

fn objects(problem: &str) -> Vec<(String, String)> {
    onebrain_pddl::parse_problem(problem)
        .expect("reference problems parse")
        .objects
        .iter()
        .map(|o| (o.name.to_ascii_lowercase(), o.ty.to_ascii_lowercase()))
        .collect()
}

/// The problem as `problem` mode writes it: the primer up to `(:objects `, the rest generated.
fn split_at_objects(problem: &str) -> (String, String) {
    let lower = problem.to_ascii_lowercase();
    let at = lower.find(":objects").expect("a problem declares objects") + ":objects".len();
    let rest = &problem[at..];
    let ws = rest.len() - rest.trim_start().len();
    let body = problem[at + ws..].trim_end().to_string();
    (problem[..at + ws].to_string(), body)
}

/// Feeds `body` byte by byte through the live problem constraint, as a model would.
fn through_constraint(env: &Arc<TokenEnv>, domain: &str, name: &str, problem: &str) {
    let (prefix, body) = split_at_objects(problem);
    let prefix = if prefix.ends_with(char::is_whitespace) { prefix } else { format!("{prefix} ") };
    let spec = ConstraintSpec::Problem { domain: domain.to_string(), prefix, limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] };
    let tokens: Vec<u32> = body.bytes().map(u32::from).collect();
    let masks = spec
        .replay(env, 1 << 20, &tokens)
        .unwrap_or_else(|e| panic!("{name}: {e}\n--- answer ---\n{body}"));
    assert_eq!(masks.len(), tokens.len());
    let mut c = spec.build(env, 1 << 20).unwrap();
    for &t in &tokens {
        c.allowed().unwrap();
        c.consume(t).unwrap();
    }
    assert!(c.finished(), "{name}: the grammar is not complete after the problem's last `)`");
    assert_eq!(c.stats().stage_switches, 1, "{name}: one switch, when the objects close");
}

#[test]
fn every_reference_domain_is_a_sentence() {
    let env = TokenEnv::bytes();
    let g = domain_file();
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(repo().join("guests")).unwrap().flatten() {
        let p = entry.path().join("domain.pddl");
        if p.is_file() {
            paths.push(p);
        }
    }
    assert!(paths.len() >= 4, "the bundled domain plugins");
    if let Some(data) = data() {
        for set in ["blocksworld", "mystery_blocksworld", "logistics"] {
            paths.push(data.join("planbench").join(set).join("domain.pddl"));
        }
        for entry in std::fs::read_dir(data.join("planetarium/domains")).unwrap().flatten() {
            paths.push(entry.path());
        }
    }
    for p in &paths {
        let text = read(p);
        // The grammar follows what the verifier reads: a domain it refuses (ADL constructs)
        // is out of scope, and there is none among these.
        onebrain_pddl::parse_domain(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        env.accepts(&g, text.trim()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        domain_through_full_constraint(&env, &p.display().to_string(), text.trim());
    }
}

/// Feeds a domain byte by byte through the live `full` constraint (grammar and domain guard),
/// as a model would write it after the `(define (domain ` primer: every byte is allowed, and
/// the constraint has moved on to the problem at the end.
fn domain_through_full_constraint(env: &Arc<TokenEnv>, name: &str, domain: &str) {
    let lower = domain.to_ascii_lowercase();
    let at = lower.find("(domain").expect("a domain names itself") + "(domain".len();
    let body = domain[at..].trim_start();
    let mut c = ConstraintSpec::Full { limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false }.build(env, 1 << 20).unwrap();
    for (i, b) in body.bytes().enumerate() {
        let m = c.allowed().unwrap();
        assert!(m.is_allowed(u32::from(b)), "{name}: byte {i} ({:?}) refused after\n{}", b as char, &body[..i]);
        c.consume(u32::from(b)).unwrap();
    }
    assert_eq!(c.stats().stage_switches, 1, "{name}: the problem's grammar follows the domain");
    assert_eq!(c.stats().guard_overrides, 0, "{name}");
}

#[test]
fn every_planbench_problem_is_a_sentence_before_and_after_its_objects_are_known() {
    let Some(data) = data() else { return };
    let env = TokenEnv::bytes();
    let limits = Limits::default();
    let mut n = 0;
    for (set, domain, problems) in planbench(&data) {
        let v = vocab(&domain);
        let generic = problem_file(&v, &Objects::Unknown, &limits);
        for (name, p) in &problems {
            env.accepts(&generic, p.trim()).unwrap_or_else(|e| panic!("{set} {name}: {e}"));
            n += 1;
        }
        // The staged constraint (grammar over the declared objects, plus the guard) on a
        // spread of each set: every tenth instance.
        for (name, p) in problems.iter().step_by(10) {
            through_constraint(&env, &domain, name, p.trim());
        }
    }
    assert!(n >= 1400, "PlanBench has 1,485 problems, checked {n}");
}

#[test]
fn planetarium_problems_are_sentences() {
    let Some(data) = data() else { return };
    let env = TokenEnv::bytes();
    let limits = Limits::default();
    for (domain, stride) in [("blocksworld", 400), ("gripper", 250)] {
        let dom = read(&data.join(format!("planetarium/domains/{domain}.pddl")));
        let v = vocab(&dom);
        let generic = problem_file(&v, &Objects::Unknown, &limits);
        let rows = planetarium(&data, domain, stride);
        assert!(rows.len() >= 150, "{domain}: {} rows", rows.len());
        for (name, p) in &rows {
            env.accepts(&generic, p.trim()).unwrap_or_else(|e| panic!("{domain} {name}: {e}"));
            let objs = objects(p);
            let declared = problem_file(&v, &Objects::Declared(&objs), &limits);
            if objs.len() <= limits.max_objects {
                env.accepts(&declared, p.trim()).unwrap_or_else(|e| panic!("{domain} {name} (declared): {e}"));
            }
        }
        for (name, p) in rows.iter().step_by(10) {
            if objects(p).len() <= limits.max_objects {
                through_constraint(&env, &dom, name, p.trim());
            }
        }
    }
}

#[test]
fn a_full_answer_is_one_sentence_and_its_problem_is_held_to_its_domain() {
    let Some(data) = data() else { return };
    let env = TokenEnv::bytes();
    let dir = data.join("planbench/blocksworld");
    let domain = read(&dir.join("domain.pddl"));
    let problem = read(&dir.join("instances/instance-1.pddl"));
    // As the model writes it after the `(define (domain ` primer.
    let after = domain.trim().trim_start_matches("(define (domain ").to_string();
    let answer = format!("{after}\n```\n\n```pddl\n{}", problem.trim());
    let limits = Limits::default();
    env.accepts(&full_continuation(None, &Objects::Unknown, &limits), &answer).unwrap();
    let v = vocab(&domain);
    env.accepts(&full_continuation(Some(&v), &Objects::Unknown, &limits), &answer).unwrap();
    let bad = answer.replace("(on c b)", "(above c b)");
    assert!(env.accepts(&full_continuation(Some(&v), &Objects::Unknown, &limits), &bad).is_err());
    // The live constraint takes the same path and switches twice: domain, then objects.
    let spec = ConstraintSpec::Full { limits, avoid: vec![], forbid_goal_at_init: false };
    let mut c = spec.build(&env, 1 << 20).unwrap();
    for b in answer.bytes() {
        let m = c.allowed().unwrap();
        assert!(m.is_allowed(u32::from(b)), "byte {:?} refused", b as char);
        c.consume(u32::from(b)).unwrap();
    }
    assert!(c.finished());
    assert_eq!(c.stats().stage_switches, 2);
}

//! Everything built from a domain is bounded, and the bounds are far from what real
//! domains need. Every PlanBench and Planetarium domain (read in place from
//! `../shared/data`; skipped with a message where it is absent) and every bundled plugin's
//! domain measures at most a tenth of each bound; the grammars built over their reference
//! problems need at most a tenth of each llguidance limit; the largest domain the `full`
//! grammar can write is inside the bounds; and hostile domains that once exhausted the host
//! are refused at once, with an error that names the domain, the figure and the limit.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onebrain_grammar::{
    domain_file, parser_limits, problem_file, ConstraintSpec, DomainSize, GrammarError, Limits, Objects, ParserFigures,
    TokenEnv, Vocabulary, DOMAIN_BOUNDS, MAX_GRAMMAR_BYTES,
};

mod common;
use common::{data, read, repo};

/// (name, domain text, a few reference problems) of every domain there is.
fn domains() -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("guests")).unwrap().flatten() {
        let p = entry.path().join("domain.pddl");
        if p.is_file() {
            out.push((format!("plugin {}", entry.file_name().to_string_lossy()), read(&p), Vec::new()));
        }
    }
    assert!(out.len() >= 4, "the bundled domain plugins");
    let Some(data) = data() else { return out };
    for set in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let dir = data.join("planbench").join(set);
        let mut problems: Vec<PathBuf> = std::fs::read_dir(dir.join("instances")).unwrap().flatten().map(|e| e.path()).collect();
        problems.sort();
        // The largest instances (by size) and a spread of the rest.
        problems.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));
        let picked: Vec<String> = problems.iter().take(3).chain(problems.iter().step_by(100)).map(|p| read(p)).collect();
        out.push((format!("planbench {set}"), read(&dir.join("domain.pddl")), picked));
    }
    for entry in std::fs::read_dir(data.join("planetarium/domains")).unwrap().flatten() {
        let name = entry.path().file_stem().unwrap().to_string_lossy().into_owned();
        let rows = match name.as_str() {
            "blocksworld" | "gripper" => planetarium_rows(&data, &name, 5_000),
            _ => Vec::new(),
        };
        out.push((format!("planetarium {name}"), read(&entry.path()), rows));
    }
    out
}

/// Every `stride`-th Planetarium problem of a domain that fits the default object limit.
fn planetarium_rows(data: &Path, domain: &str, stride: usize) -> Vec<String> {
    let f = std::fs::File::open(data.join(format!("planetarium/{domain}-train.jsonl.gz"))).unwrap();
    let r = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
    r.lines()
        .step_by(stride)
        .map(|line| serde_json::from_str::<serde_json::Value>(&line.unwrap()).unwrap()["problem_pddl"].as_str().unwrap().to_string())
        .filter(|p| objects(p).len() <= Limits::default().max_objects)
        .collect()
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

/// The figure-by-figure maximum of two sizes.
fn max_size(a: DomainSize, b: DomainSize) -> DomainSize {
    DomainSize {
        types: a.types.max(b.types),
        type_depth: a.type_depth.max(b.type_depth),
        predicates: a.predicates.max(b.predicates),
        arity: a.arity.max(b.arity),
        constants: a.constants.max(b.constants),
        actions: a.actions.max(b.actions),
        action_params: a.action_params.max(b.action_params),
        guard_entries: a.guard_entries.max(b.guard_entries),
    }
}

#[test]
fn every_real_domain_is_far_inside_the_domain_bounds() {
    let b = DOMAIN_BOUNDS;
    let mut most = DomainSize::default();
    let sizes: Vec<(String, DomainSize)> =
        domains().into_iter().map(|(name, text, _)| (name, DomainSize::of(&vocab(&text), &Limits::default()))).collect();
    for (name, size) in &sizes {
        eprintln!("{name}: {size:?}");
        most = max_size(most, *size);
    }
    // "Far inside": at most a tenth of each bound.
    let tenth = onebrain_grammar::DomainBounds {
        types: b.types / 10,
        type_depth: b.type_depth / 10,
        predicates: b.predicates / 10,
        arity: b.arity / 10,
        constants: b.constants / 10,
        actions: b.actions / 10,
        action_params: b.action_params / 10,
        guard_entries: b.guard_entries / 10,
    };
    for (name, size) in &sizes {
        size.check(&tenth, name).unwrap_or_else(|e| panic!("{name} is not far inside the bounds: {e}"));
    }
    eprintln!("largest figures over the real domains: {most:?}\nbounds: {b:?}");
}

#[test]
fn grammars_over_real_problems_need_a_tenth_of_llguidances_limits() {
    let env = TokenEnv::bytes();
    let limits = parser_limits();
    let mut most = ParserFigures::default();
    let mut read = 0;
    for (name, domain, problems) in domains() {
        let v = vocab(&domain);
        for p in &problems {
            // The two grammars a problem meets: before its objects are known, and over them.
            let objs = objects(p);
            for grammar in [problem_file(&v, &Objects::Unknown, &Limits::default()), problem_file(&v, &Objects::Declared(&objs), &Limits::default())] {
                let f = env.figures(&grammar, p.trim()).unwrap_or_else(|e| panic!("{name}: {e}"));
                most = ParserFigures {
                    grammar_bytes: most.grammar_bytes.max(f.grammar_bytes),
                    step_items: most.step_items.max(f.step_items),
                    step_lexer_fuel: most.step_lexer_fuel.max(f.step_lexer_fuel),
                    lexer_states: most.lexer_states.max(f.lexer_states),
                    lexer_fuel: most.lexer_fuel.max(f.lexer_fuel),
                };
                read += 1;
            }
        }
        // The domain itself, as `full` mode's grammar reads it.
        let f = env.figures(&domain_file(), domain.trim()).unwrap_or_else(|e| panic!("{name}: {e}"));
        most.grammar_bytes = most.grammar_bytes.max(f.grammar_bytes);
        most.step_items = most.step_items.max(f.step_items);
        most.step_lexer_fuel = most.step_lexer_fuel.max(f.step_lexer_fuel);
        most.lexer_states = most.lexer_states.max(f.lexer_states);
    }
    eprintln!("{read} problems read; the most any needed: {most:?}\nllguidance limits: {limits:?}");
    assert!(most.grammar_bytes * 10 <= MAX_GRAMMAR_BYTES, "{most:?}");
    assert!(most.step_items * 10 <= limits.step_max_items, "{most:?}");
    assert!(most.step_lexer_fuel * 10 <= limits.step_lexer_fuel, "{most:?}");
    assert!(most.lexer_states * 10 <= limits.max_lexer_states, "{most:?}");
    assert!(most.lexer_fuel * 10 <= limits.initial_lexer_fuel + limits.step_lexer_fuel * read as u64, "{most:?}");
}

/// The largest domain `full` mode's grammar admits: every list at its grammar's bound (64
/// items a type or constant list, where `- parent` is an item; 16 a parameter list; 48
/// predicates; 32 actions), the types in one chain.
fn largest_full_domain() -> String {
    let types: String = (0..31).map(|i| format!("t{} - t{} ", i + 1, i)).collect();
    let constants: String = (0..63).map(|i| format!("c{i} ")).collect::<String>() + "- t0";
    let params: String = (0..15).map(|i| format!("?v{i} ")).collect::<String>() + "?v15";
    let preds: String = (0..48).map(|i| format!("(p{i} {params})")).collect();
    let actions: String = (0..32)
        .map(|i| format!("(:action a{i} :parameters ({params}) :precondition (p0 ?v0 ?v1 ?v2 ?v3 ?v4 ?v5 ?v6 ?v7) :effect (p1 ?v0 ?v1 ?v2 ?v3 ?v4 ?v5 ?v6 ?v7))"))
        .collect();
    format!("(define (domain big) (:requirements :typing) (:types t0 - object {types}) (:constants {constants}) (:predicates {preds}) {actions})")
}

#[test]
fn the_largest_domain_the_full_grammar_writes_is_inside_the_bounds() {
    let text = largest_full_domain();
    TokenEnv::bytes().accepts(&domain_file(), &text).expect("the full grammar admits it");
    let size = DomainSize::of(&vocab(&text), &Limits::default());
    let figures = (size.types, size.type_depth, size.constants, size.predicates, size.arity, size.actions, size.action_params);
    assert_eq!(figures, (32, 32, 63, 48, 16, 32, 16), "{size:?}");
    size.check(&DOMAIN_BOUNDS, "the largest `full` domain").unwrap();
    // 64 types is the most one list holds (no parents written).
    let flat: String = (0..64).map(|i| format!("t{i} ")).collect();
    let text = format!("(define (domain big) (:requirements :typing) (:types {flat}) (:predicates (p ?x - t0)) (:action a :parameters (?x - t0) :precondition (p ?x) :effect (p ?x)))");
    TokenEnv::bytes().accepts(&domain_file(), &text).expect("the full grammar admits it");
    DomainSize::of(&vocab(&text), &Limits::default()).check(&DOMAIN_BOUNDS, "64 types").unwrap();
}

/// Builds the problem constraint over `domain`; returns its error and how long it took.
fn refused(domain: String) -> (GrammarError, Duration) {
    let env = TokenEnv::bytes();
    let spec = ConstraintSpec::Problem {
        domain,
        prefix: "(define (problem p) (:domain big) (:objects ".into(),
        limits: Limits::default(),
        avoid: vec![],
        forbid_goal_at_init: false,
        init_mutex: vec![],
    };
    let started = Instant::now();
    let e = spec.build(&Arc::clone(&env), 1024).err().expect("a domain past the bounds is refused");
    (e, started.elapsed())
}

/// A hostile domain: 300 predicates of arity 8 over a 50-type chain, plus 200 constants.
/// The host passed 6 GB within 9 s.
#[test]
fn a_domain_of_300_predicates_of_arity_8_is_refused_at_once() {
    let types: String = (0..49).map(|i| format!("t{} - t{} ", i + 1, i)).collect();
    let constants: String = (0..200).map(|i| format!("k{i} ")).collect::<String>() + "- t0";
    let args: String = (0..8).map(|i| format!("?a{i} - t{} ", i * 6)).collect();
    let preds: String = (0..300).map(|i| format!("(q{i} {args})")).collect();
    let domain = format!(
        "(define (domain big) (:requirements :typing) (:types t0 - object {types}) (:constants {constants}) (:predicates {preds})
           (:action go :parameters (?x - t0) :precondition (q0 ?x ?x ?x ?x ?x ?x ?x ?x) :effect (not (q0 ?x ?x ?x ?x ?x ?x ?x ?x))))"
    );
    let spec = ConstraintSpec::Problem { domain: domain.clone(), prefix: String::new(), limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] };
    let cheap = spec.check_bounds().expect_err("refused before anything is built").to_string();
    let (e, took) = refused(domain);
    let text = e.to_string();
    assert_eq!(cheap, text);
    assert!(matches!(e, GrammarError::TooLarge { .. }), "{text}");
    assert!(text.contains("`big`") && text.contains("300 predicates") && text.contains("limit of 256"), "{text}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// A hostile deep hierarchy: 1,500 types in a chain.
#[test]
fn a_chain_of_1500_types_is_refused_at_once() {
    let types: String = (0..1499).map(|i| format!("t{} - t{} ", i + 1, i)).collect();
    let domain = format!(
        "(define (domain big) (:requirements :typing) (:types t0 - object {types}) (:predicates (p ?x - t1499))
           (:action go :parameters (?x - t1499) :precondition (p ?x) :effect (not (p ?x))))"
    );
    let (e, took) = refused(domain);
    let text = e.to_string();
    assert!(text.contains("1500 types") && text.contains("limit of 256"), "{text}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // Inside the count, a chain past the depth bound is refused on its depth.
    let types: String = (0..99).map(|i| format!("t{} - t{} ", i + 1, i)).collect();
    let (e, _) = refused(format!("(define (domain big) (:requirements :typing) (:types t0 - object {types}) (:predicates (p ?x - t99)))"));
    assert!(e.to_string().contains("types in one chain, past the limit of 64"), "{e}");
}

/// A domain inside the vocabulary bounds whose guard table would still be large: many
/// predicates of many arguments, with many constants.
#[test]
fn a_guard_table_past_its_bound_is_refused() {
    let constants: String = (0..250).map(|i| format!("k{i} ")).collect();
    let args: String = (0..16).map(|i| format!("?a{i} ")).collect();
    let preds: String = (0..250).map(|i| format!("(q{i} {args})")).collect();
    let (e, _) = refused(format!("(define (domain big) (:constants {constants}) (:predicates {preds}))"));
    assert!(e.to_string().contains("names in the guard's table"), "{e}");
}

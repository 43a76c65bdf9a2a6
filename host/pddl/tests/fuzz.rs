//! Fuzzing with counts: random text and random mutations of valid PDDL never panic
//! or hang the parser, the checks, grounding or the validator, and whatever parses prints back
//! to the same AST. Each property is a campaign (`tests/fuzz/campaign.rs`): a short one in the
//! normal test suite, `ONEBRAIN_FUZZ_CASES=200000` for a long one; each prints its count.
//!
//! Seeds: the blocksworld spec below, the bundled plugins' domains with the CLI fixtures
//! (`tests/fixtures`), and the hand-made corner cases in `tests/fuzz/corpus/pddl`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use onebrain_pddl::{
    check, check_sources, ground, parse_domain, parse_plan, parse_problem, validate,
};
use proptest::prelude::*;

#[path = "../../../tests/fuzz/campaign.rs"]
mod campaign;

const DOMAIN: &str = "(define (domain bw)
  (:requirements :strips :typing :negative-preconditions :equality)
  (:types block - object)
  (:constants table - object)
  (:predicates (on ?x - block ?y - block) (ontable ?x - block) (clear ?x - block) (handempty) (holding ?x - block))
  (:action pick-up :parameters (?x - block)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (ontable ?x)) (not (clear ?x)) (not (handempty))))
  (:action put-down :parameters (?x - block)
    :precondition (and (holding ?x) (not (handempty)))
    :effect (and (ontable ?x) (clear ?x) (handempty) (not (holding ?x))))
  (:action stack :parameters (?x ?y - block)
    :precondition (and (holding ?x) (clear ?y) (not (= ?x ?y)))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
  (:action unstack :parameters (?x ?y - block)
    :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (on ?x ?y)) (not (clear ?x)) (not (handempty)))))";

const PROBLEM: &str = "; three blocks
(define (problem p3) (:domain bw)
  (:objects a b c - block)
  (:init (clear a) (on a b) (ontable b) (clear c) (ontable c) (handempty))
  (:goal (and (on c a) (on a b) (not (holding b)))))";

const PLAN: &str = "(pick-up c)\n(stack c a)\n; cost = 2 (unit cost)\n";

/// Tokens worth inserting: PDDL keywords, names from the spec, brackets, odd characters.
const VOCAB: &[&str] = &[
    "(",
    ")",
    "and",
    "not",
    "or",
    "=",
    "-",
    "?x",
    "?y",
    "?z",
    "a",
    "b",
    "c",
    "d",
    "block",
    "object",
    "either",
    ":action",
    ":parameters",
    ":precondition",
    ":effect",
    ":types",
    ":objects",
    ":init",
    ":goal",
    ":domain",
    "forall",
    "when",
    "exists",
    "on",
    "clear",
    "holding",
    "handempty",
    "ontable",
    "stack",
    "table",
    ";",
    "\n",
    "`",
    "é",
    "\"",
    ":requirements",
    ":strips",
    "(:functions (f))",
    "increase",
    "1.5",
];

#[derive(Clone, Debug)]
enum Edit {
    DeleteToken(usize),
    InsertToken(usize, usize),
    SwapTokens(usize, usize),
    DeleteChar(usize),
    InsertChar(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::DeleteToken),
        (any::<usize>(), 0..VOCAB.len()).prop_map(|(i, v)| Edit::InsertToken(i, v)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::SwapTokens(i, j)),
        any::<usize>().prop_map(Edit::DeleteChar),
        (any::<usize>(), any::<char>()).prop_map(|(i, c)| Edit::InsertChar(i, c)),
    ]
}

/// Splits into tokens (brackets, runs of other non-space characters, whitespace runs).
fn tokens(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in s.chars() {
        let kind = |c: char| {
            if c == '(' || c == ')' {
                0
            } else if c.is_whitespace() {
                1
            } else {
                2
            }
        };
        match out.last_mut() {
            Some(last)
                if kind(c) != 0 && last.chars().next().is_some_and(|l| kind(l) == kind(c)) =>
            {
                last.push(c)
            }
            _ => out.push(c.to_string()),
        }
    }
    out
}

fn mutate(src: &str, edits: &[Edit]) -> String {
    let mut toks = tokens(src);
    for e in edits {
        let n = toks.len().max(1);
        match *e {
            Edit::DeleteToken(i) => {
                if !toks.is_empty() {
                    toks.remove(i % n);
                }
            }
            Edit::InsertToken(i, v) => toks.insert(i % (toks.len() + 1), format!(" {} ", VOCAB[v])),
            Edit::SwapTokens(i, j) => {
                if !toks.is_empty() {
                    toks.swap(i % n, j % n);
                }
            }
            Edit::DeleteChar(i) => {
                let s: String = toks.concat();
                let mut cs: Vec<char> = s.chars().collect();
                if !cs.is_empty() {
                    let k = i % cs.len();
                    cs.remove(k);
                }
                toks = tokens(&cs.into_iter().collect::<String>());
            }
            Edit::InsertChar(i, c) => {
                let s: String = toks.concat();
                let mut cs: Vec<char> = s.chars().collect();
                cs.insert(i % (cs.len() + 1), c);
                toks = tokens(&cs.into_iter().collect::<String>());
            }
        }
    }
    toks.concat()
}

/// Runs everything on the pair and checks the round-trip property for whatever parses.
fn exercise(domain: &str, problem: &str, plan: &str) {
    let _ = check_sources(domain, problem);
    let d = parse_domain(domain);
    let p = parse_problem(problem);
    let pl = parse_plan(plan);
    if let Ok(d) = &d {
        assert_eq!(
            &parse_domain(&d.to_string()).expect("printed domain parses"),
            d
        );
    }
    if let Ok(p) = &p {
        assert_eq!(
            &parse_problem(&p.to_string()).expect("printed problem parses"),
            p
        );
    }
    if let Ok(pl) = &pl {
        assert_eq!(
            &parse_plan(&pl.to_string()).expect("printed plan parses"),
            pl
        );
    }
    if let (Ok(d), Ok(p)) = (d, p) {
        let _ = check(&d, &p);
        if let Ok(t) = ground(&d, &p) {
            let r = t.relaxed_reachability();
            let _ = r.goal_reachable();
            for i in t.applicable(t.init()).take(4) {
                let s = t.apply(t.init(), i);
                let _ = t.is_goal(&s);
            }
        }
        if let Ok(pl) = pl {
            let _ = validate(&d, &p, &pl);
        }
    }
}

#[test]
fn the_unmutated_inputs_are_valid() {
    let (d, p) = (
        parse_domain(DOMAIN).unwrap(),
        parse_problem(PROBLEM).unwrap(),
    );
    assert!(check(&d, &p).is_empty());
    assert!(validate(&d, &p, &parse_plan(PLAN).unwrap()).valid);
}

/// (domain, problem, plan) seeds: the bundled spec, the fixtures and the corpus.
fn seeds() -> &'static [(String, String, String)] {
    static SEEDS: OnceLock<Vec<(String, String, String)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let fixtures = root.join("tests/fixtures");
        let mut out = vec![(DOMAIN.to_string(), PROBLEM.to_string(), PLAN.to_string())];
        out.push((read(fixtures.join("blocks-domain.pddl")), read(fixtures.join("blocks-problem-hard.pddl")), String::new()));
        out.push((read(fixtures.join("gripper-domain.pddl")), read(fixtures.join("gripper-problem.pddl")), "(pick ball1 rooma left)\n(move rooma roomb)\n".into()));
        for name in ["blocksworld", "gripper", "logistics", "mystery-blocksworld"] {
            out.push((read(root.join("guests").join(name).join("domain.pddl")), PROBLEM.to_string(), PLAN.to_string()));
        }
        let corpus = root.join("tests/fuzz/corpus/pddl");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus).unwrap().flatten().map(|e| e.path()).collect();
        files.sort();
        for domain in files.iter().filter(|p| p.to_string_lossy().ends_with("-domain.pddl")) {
            let problem = PathBuf::from(domain.to_string_lossy().replace("-domain.pddl", "-problem.pddl"));
            let plan = PathBuf::from(domain.to_string_lossy().replace("-domain.pddl", "-plan.txt"));
            let plan = if plan.is_file() { read(plan) } else { String::new() };
            out.push((read(domain.clone()), read(problem), plan));
        }
        out
    })
}

/// Which seed, which file of it to mutate, and the edits.
fn mutated_seed() -> impl Strategy<Value = (usize, u8, Vec<Edit>)> {
    (any::<usize>(), 0u8..3, prop::collection::vec(edit(), 1..8))
}

fn exercise_mutated((seed, which, edits): (usize, u8, Vec<Edit>)) -> Result<(), TestCaseError> {
    let seeds = seeds();
    let (d, p, pl) = &seeds[seed % seeds.len()];
    match which {
        0 => exercise(&mutate(d, &edits), p, pl),
        1 => exercise(d, &mutate(p, &edits), pl),
        _ => exercise(d, p, &mutate(pl, &edits)),
    }
    Ok(())
}

/// Regression (found by the corpus's `typed` seed): a type whose parent is `object`
/// printed without its `- object` before a typed group, so it joined the group:
/// `(:types vehicle - object truck - vehicle)` printed as `vehicle truck - vehicle`, which
/// reads as `vehicle` being its own parent.
#[test]
fn an_object_typed_name_before_a_typed_group_keeps_its_type_when_printed() {
    let d = parse_domain("(define (domain t) (:requirements :typing) (:types vehicle - object truck - vehicle place) (:constants home - place depot) (:predicates (at ?v - truck ?p)))").unwrap();
    let printed = d.to_string();
    assert_eq!(parse_domain(&printed).unwrap(), d, "{printed}");
    assert!(printed.contains("vehicle - object truck - vehicle place"), "{printed}");
    let p = parse_problem("(define (problem p) (:domain t) (:objects a - object b - truck c) (:init) (:goal (at b home)))").unwrap();
    assert_eq!(parse_problem(&p.to_string()).unwrap(), p, "{p}");
}

#[test]
fn every_seed_is_exercised_unmutated() {
    for (d, p, pl) in seeds() {
        exercise(d, p, pl);
    }
    assert!(seeds().len() >= 10, "the corpus is read");
}

#[test]
fn fuzz_random_strings() {
    campaign::run("pddl/random-strings", 256, any::<String>(), |s| {
        exercise(&s, &s, &s);
        Ok(())
    });
}

#[test]
fn fuzz_random_pddl_like_text() {
    campaign::run("pddl/pddl-like-text", 256, "[()a-z?:= \\-\n;]{0,300}", |s| {
        exercise(&s, &s, &s);
        Ok(())
    });
}

#[test]
fn fuzz_mutated_specs() {
    campaign::run("pddl/mutated-specs", 512, mutated_seed(), exercise_mutated);
}

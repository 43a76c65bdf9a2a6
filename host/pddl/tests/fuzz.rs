//! Property tests: random text and random mutations of valid PDDL never panic the parser,
//! the checker, grounding or the validator, and whatever parses prints back to the same AST.

use onebrain_pddl::{
    check, check_sources, ground, parse_domain, parse_plan, parse_problem, validate,
};
use proptest::prelude::*;

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

proptest! {
    #[test]
    fn random_strings_never_panic(s in any::<String>()) {
        exercise(&s, &s, &s);
    }

    #[test]
    fn random_pddl_like_text_never_panics(s in "[()a-z?:= \\-\n;]{0,300}") {
        exercise(&s, &s, &s);
    }

    #[test]
    fn mutated_domains_never_panic(edits in prop::collection::vec(edit(), 1..6)) {
        exercise(&mutate(DOMAIN, &edits), PROBLEM, PLAN);
    }

    #[test]
    fn mutated_problems_never_panic(edits in prop::collection::vec(edit(), 1..6)) {
        exercise(DOMAIN, &mutate(PROBLEM, &edits), PLAN);
    }

    #[test]
    fn mutated_plans_never_panic(edits in prop::collection::vec(edit(), 1..6)) {
        exercise(DOMAIN, PROBLEM, &mutate(PLAN, &edits));
    }
}

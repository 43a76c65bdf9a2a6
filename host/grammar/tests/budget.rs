//! Answers end inside their token cap whatever the model prefers: a "rambler" takes, at every
//! position, the first of its favourite bytes the mask allows (filler while it may, a new
//! step or fact whenever it may, blanks wherever they fit), and must still finish, with no
//! guard override, before the cap.

use std::sync::Arc;

use onebrain_grammar::{ConstraintSpec, ConstraintStats, Limits, TokenEnv};

const EOS: u32 = 256;

/// Drives `spec` with byte tokens, preferring `favourites` in order, then the lowest allowed
/// byte. Returns the answer and whether the grammar finished within `max_tokens`.
fn ramble(env: &Arc<TokenEnv>, spec: &ConstraintSpec, max_tokens: usize, favourites: &[u8]) -> (String, bool, u32) {
    let (text, finished, stats) = ramble_stats(env, spec, max_tokens, favourites);
    (text, finished, stats.guard_overrides)
}

/// [`ramble`], returning the constraint's counters.
fn ramble_stats(env: &Arc<TokenEnv>, spec: &ConstraintSpec, max_tokens: usize, favourites: &[u8]) -> (String, bool, ConstraintStats) {
    let mut c = spec.build(env, max_tokens).unwrap();
    let mut out = Vec::new();
    while out.len() < max_tokens && !c.finished() {
        let forced = c.forced();
        let t = match forced.first() {
            Some(&t) => t,
            None => {
                let mask = c.allowed().unwrap();
                let pick = favourites.iter().map(|&b| u32::from(b)).find(|&t| mask.is_allowed(t));
                let lowest = (0..256u32).find(|&t| mask.is_allowed(t));
                match pick.or(lowest) {
                    Some(t) => t,
                    None if mask.is_allowed(EOS) => break,
                    None => panic!("nothing allowed after {:?}", String::from_utf8_lossy(&out)),
                }
            }
        };
        c.consume(t).unwrap();
        out.push(t as u8);
    }
    (String::from_utf8_lossy(&out).into_owned(), c.finished(), c.stats())
}

const BW: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";

/// Regression: under the plan grammar the base model looped steps until the cap (5 of 72
/// `direct` answers). Reasoning and steps now stop while the block can still close.
#[test]
fn a_plan_answer_closes_inside_its_cap_however_long_the_model_would_go_on() {
    let env = TokenEnv::bytes();
    let objects = vec![("a".to_string(), "object".to_string()), ("b".to_string(), "object".to_string())];
    let spec = ConstraintSpec::Plan { domain: BW.into(), objects, limits: Limits::default() };
    for cap in [40, 64, 120, 320] {
        // Filler while it may, then a step whenever one may open.
        let (text, finished, overrides) = ramble(&env, &spec, cap, b"x(\n");
        assert!(finished, "cap {cap}: ran out at {:?}", text);
        assert!(text.contains("```plan") && text.trim_end().ends_with("```"), "{text}");
        assert_eq!(overrides, 0, "{text}");
        // Blanks wherever they fit.
        let (text, finished, _) = ramble(&env, &spec, cap, b" \n(x");
        assert!(finished, "cap {cap}, blanks first: ran out at {text:?}");
    }
}

/// Regression: a self-refine Actor declared 18-token object names and padded its goal with
/// blanks while the fixed 12-token blank reserve allowed, then ran into the cap inside its
/// only goal fact (`planetarium/gripper/156689`).
#[test]
fn a_problem_with_long_object_names_closes_inside_its_cap() {
    let env = TokenEnv::bytes();
    let prefix = "(define (problem p) (:domain bw) (:objects ".to_string();
    let spec = ConstraintSpec::Problem { domain: BW.into(), prefix, limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] };
    for cap in [120, 200, 400] {
        // Long names of `1`s, blanks wherever they fit, a new fact whenever one may open.
        let (text, finished, _) = ramble(&env, &spec, cap, b"g1 \n\t(");
        assert!(finished, "cap {cap}: ran out at {text:?}");
        assert!(text.to_ascii_lowercase().contains(":goal"), "{text}");
    }
}

/// Regression: greedy SmolLM2 in `full` mode listed `:def :defs :defs-list …` as requirements.
/// The grammar took any `:name`, the parser refused the domain, so the problem kept the
/// generic grammar, with no guard and no budget, and ran into the 400-token cap. Whatever the
/// model prefers, the domain a `full` answer writes now parses (the problem is then held to
/// it: one stage switch at least), and the answer closes inside its cap with no guard
/// override. The rambler also found, and this test holds fixed: names that ate the problem's
/// budget (names are now held to the tokens left), a repeated name at the longest length
/// (which could neither grow nor end), the blank budget refusing the blank the grammar
/// needed after `(:action`, and a goal fact over a long predicate or constant that the
/// reserves did not count.
#[test]
fn a_full_answer_writes_a_domain_that_parses_and_closes_inside_its_cap() {
    let env = TokenEnv::bytes();
    let limits = Limits { max_objects: 6, max_init: 8, max_goal: 4, ..Limits::default() };
    let spec = ConstraintSpec::Full { limits, avoid: vec![], forbid_goal_at_init: false };
    // A byte a token is the worst a tokenizer does; below about 800 such tokens a domain and
    // a problem over names spelt that way do not both fit (docs/constrained-decoding.md).
    for cap in [800, 1000, 2000] {
        for favourites in [&b":d-(\n"[..], b"x(", b"(:x", b" \n(x", b"?-x (:"] {
            let (text, finished, stats) = ramble_stats(&env, &spec, cap, favourites);
            let shown = String::from_utf8_lossy(favourites);
            assert!(stats.stage_switches >= 1, "cap {cap}, {shown:?}: the domain did not parse:\n{text}");
            assert!(finished, "cap {cap}, {shown:?}: ran out at\n{text}");
            assert_eq!(stats.guard_overrides, 0, "cap {cap}, {shown:?}:\n{text}");
        }
    }
}

/// Regression: a `full` Editor repair of `planbench/blocksworld/334` declared
/// `on-top-on-top-on-top-on` and every one-character extension of it, then began that
/// 23-character name once more. Every way to finish it was a repeat, so the guard refused
/// every token, was overridden at each (38 to 44 times a repair, in 4 repairs), and the
/// answer looped on repeated names until its 1,024-token cap with `(:objects` never closed.
/// A token may not leave a name at a prefix whose every completion is declared.
#[test]
fn an_object_name_never_reaches_a_prefix_whose_every_completion_is_declared() {
    let env = TokenEnv::bytes();
    let prefix = "(define (problem p) (:domain bw) (:objects ".to_string();
    let spec = ConstraintSpec::Problem { domain: BW.into(), prefix, limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] };
    // Grow a name of `a`s while it may, else with the next name character, as the model grew
    // `on-top-…-on` with `-`, digits and letters; end it only when nothing else may come.
    let favourites = b"a0123456789_-bcdefghijklmnopqrstuvwxyz\n(";
    let (text, finished, stats) = ramble_stats(&env, &spec, 2400, favourites);
    let prefix_23 = "a".repeat(23);
    let declared = text.split_whitespace().filter(|w| w.starts_with(&prefix_23)).count();
    assert!(declared >= 39, "the rambler did not use up the prefix:\n{text}");
    assert!(finished, "ran out at\n{text}");
    assert_eq!(stats.guard_overrides, 0, "{text}");
}

/// Regression: the Actor of `planbench/blocksworld/334`, in `full` mode, declared a
/// 47-character type and then wrote it after an object's `-` when the objects' reserve was
/// nearly spent: the guard refused the rest of the type, the only thing the grammar allowed
/// (override). A type after `-` is the grammar's to bound, and a typed domain's reserve
/// holds the ` - type` that closes a group of names.
#[test]
fn a_long_type_after_an_objects_dash_is_always_finished() {
    let ty = "clear-on-top-on-bottom-on-top-on-bottom-on-top";
    let domain = format!(
        "(define (domain t) (:requirements :typing) (:types {ty} - object)
           (:predicates (at ?x - {ty}) (near ?x ?y - {ty}))
           (:action go :parameters (?x - {ty}) :precondition (at ?x) :effect (not (at ?x))))"
    );
    let env = TokenEnv::bytes();
    let prefix = "(define (problem p) (:domain t) (:objects ".to_string();
    let spec = ConstraintSpec::Problem { domain, prefix, limits: Limits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] };
    // Short names, each closed by ` - ` and the long type as soon as the grammar allows: at
    // some cap, the budget runs low inside a type.
    for cap in (300..700).step_by(11) {
        let (text, finished, stats) = ramble_stats(&env, &spec, cap, b"-x \n(");
        assert!(finished, "cap {cap}: ran out at\n{text}");
        assert_eq!(stats.guard_overrides, 0, "cap {cap}:\n{text}");
    }
}

//! Answers end inside their token cap whatever the model prefers: a "rambler" takes, at every
//! position, the first of its favourite bytes the mask allows (filler while it may, a new
//! step or fact whenever it may, blanks wherever they fit), and must still finish, with no
//! guard override, before the cap.

use std::sync::Arc;

use onebrain_grammar::{ConstraintSpec, Limits, TokenEnv};

const EOS: u32 = 256;

/// Drives `spec` with byte tokens, preferring `favourites` in order, then the lowest allowed
/// byte. Returns the answer and whether the grammar finished within `max_tokens`.
fn ramble(env: &Arc<TokenEnv>, spec: &ConstraintSpec, max_tokens: usize, favourites: &[u8]) -> (String, bool, u32) {
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
    (String::from_utf8_lossy(&out).into_owned(), c.finished(), c.stats().guard_overrides)
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
    let spec = ConstraintSpec::Problem { domain: BW.into(), prefix, limits: Limits::default(), avoid: vec![] };
    for cap in [120, 200, 400] {
        // Long names of `1`s, blanks wherever they fit, a new fact whenever one may open.
        let (text, finished, _) = ramble(&env, &spec, cap, b"g1 \n\t(");
        assert!(finished, "cap {cap}: ran out at {text:?}");
        assert!(text.to_ascii_lowercase().contains(":goal"), "{text}");
    }
}

//! Guards over small BlocksWorld vocabularies, shared by the guard's unit tests.

use std::sync::Arc;

use super::Guard;
use crate::lark::{Limits, Vocabulary};
use crate::mutex::MutexGroup;

pub(super) fn bw() -> Arc<Vocabulary> {
    let d = onebrain_pddl::parse_domain(
        "(define (domain bw) (:predicates (on ?x ?y) (clear ?x) (handempty))
         (:action a :parameters (?x) :precondition (clear ?x) :effect (not (clear ?x))))",
    )
    .unwrap();
    Arc::new(Vocabulary::of(&d))
}

pub(super) fn guard(after: &str) -> Guard {
    let prefix = format!("(define (problem t) (:domain bw) (:objects {after}");
    Guard::new(bw(), Limits::default(), 400, prefix.as_bytes())
}

/// The plugin's BlocksWorld predicates, and the three groups `onebrain_faithful::mutex_groups`
/// proves for its actions (its own test checks them): the arm, each block's support and
/// each block's top.
pub(super) fn blocksworld_with_groups(after: &str) -> Guard {
    let d = onebrain_pddl::parse_domain(
        "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
         (:action a :parameters (?x) :precondition (clear ?x) :effect (not (clear ?x))))",
    )
    .unwrap();
    let prefix = format!("(define (problem t) (:domain bw) (:objects {after}");
    Guard::new(Arc::new(Vocabulary::of(&d)), Limits::default(), 400, prefix.as_bytes())
}

pub(super) fn blocksworld_groups() -> Vec<MutexGroup> {
    let part = |p: &str, params: &[usize], counted: Option<usize>| crate::MutexPart { predicate: p.into(), params: params.to_vec(), counted };
    vec![
        MutexGroup { parts: vec![part("handempty", &[], None), part("holding", &[], Some(0))] },
        MutexGroup { parts: vec![part("holding", &[0], None), part("on", &[0], Some(1)), part("ontable", &[0], None)] },
        MutexGroup { parts: vec![part("clear", &[0], None), part("holding", &[0], None), part("on", &[1], Some(0))] },
    ]
}

//! Helpers shared by the model's integration tests. Each test file compiles its own copy and
//! uses some of them.
#![allow(dead_code)]

use candle_core::{Device, Tensor};
use rand::{rngs::StdRng, Rng};

/// Normal samples from a seeded generator. candle's CPU `randn` cannot be seeded, and
/// with unseeded weights one run in a hundred or so put the end-of-turn token first, so
/// the greedy generation came back empty (CI, session 12); brain.rs's
/// argmax comparisons near a tie had the same exposure.
pub fn seeded_normal(rng: &mut StdRng, std: f32, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            // Box–Muller; 1 − u keeps the logarithm's argument in (0, 1].
            let (u, w): (f32, f32) = (rng.gen(), rng.gen());
            std * (-2.0 * (1.0 - u).ln()).sqrt() * (std::f32::consts::TAU * w).cos()
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// A small BlocksWorld domain for grammar-constrained generation.
pub const DOMAIN: &str = "(define (domain blocksworld)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?x)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (clear ?x)) (not (ontable ?x)) (not (handempty))))
  (:action stack :parameters (?x ?y)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y))))";

/// What a constrained problem answer starts with (the prompt ends with it).
pub const PRIMER: &str = "```pddl\n(define (problem task)\n  (:domain blocksworld)\n  (:objects ";

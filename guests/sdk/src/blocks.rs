//! Random tasks for PlanBench's 4-operator BlocksWorld and its obfuscated
//! twin (Mystery BlocksWorld): the same states under other predicate names.
//!
//! Every task is solvable: any set of towers can be built from any other by
//! putting every block on the table and stacking the goal towers bottom-up,
//! and the goal is the `on` facts of a set of towers.

use crate::{Result, Rng};

/// The four predicate names of a block domain.
pub struct BlockPredicates {
    /// `(on ?x ?y)`: x sits on y.
    pub on: &'static str,
    /// `(ontable ?x)`.
    pub ontable: &'static str,
    /// `(clear ?x)`: nothing on x.
    pub clear: &'static str,
    /// `(handempty)`.
    pub handempty: &'static str,
}

/// PlanBench BlocksWorld (`blocksworld-4ops`).
pub const BLOCKSWORLD: BlockPredicates =
    BlockPredicates { on: "on", ontable: "ontable", clear: "clear", handempty: "handempty" };

/// PlanBench Mystery BlocksWorld (`mystery-4ops`).
pub const MYSTERY: BlockPredicates =
    BlockPredicates { on: "craves", ontable: "planet", clear: "province", handempty: "harmony" };

/// Object names: `a`, `b`, … `t`. PlanBench names twelve colours for `a` to `l`; the rest
/// are there for tasks larger than PlanBench's (the checker's large-task corpus has 20).
pub const MAX_BLOCKS: usize = 20;

fn name(i: usize) -> char {
    (b'a' + i as u8) as char
}

/// `n` blocks in random towers, each listed bottom to top.
pub fn random_towers(rng: &mut Rng, n: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut towers: Vec<Vec<usize>> = Vec::new();
    for b in order {
        // A new tower one time in three: PlanBench's 4-5 block tasks have 1-3 towers.
        match towers.last_mut() {
            Some(t) if rng.below(3) != 0 => t.push(b),
            _ => towers.push(vec![b]),
        }
    }
    towers
}

fn on_pairs(towers: &[Vec<usize>]) -> Vec<(usize, usize)> {
    towers.iter().flat_map(|t| t.windows(2).map(|w| (w[1], w[0]))).collect()
}

/// The problem PDDL, in the layout of PlanBench's instance files.
pub fn problem(p: &BlockPredicates, problem: &str, domain: &str, init: &[Vec<usize>], goal: &[Vec<usize>]) -> String {
    let n: usize = init.iter().map(Vec::len).sum();
    let mut s = format!("(define (problem {problem})\n(:domain {domain})\n(:objects ");
    for i in 0..n {
        s.push(name(i));
        s.push(' ');
    }
    s.push_str(")\n(:init\n");
    s.push_str(&format!("({})\n", p.handempty));
    for t in init {
        s.push_str(&format!("({} {})\n", p.ontable, name(t[0])));
        for w in t.windows(2) {
            s.push_str(&format!("({} {} {})\n", p.on, name(w[1]), name(w[0])));
        }
        s.push_str(&format!("({} {})\n", p.clear, name(*t.last().expect("towers are non-empty"))));
    }
    s.push_str(")\n(:goal\n(and\n");
    let goal = on_pairs(goal);
    for (i, (x, y)) in goal.iter().enumerate() {
        let close = if i + 1 == goal.len() { ")" } else { "" };
        s.push_str(&format!("({} {} {}){close}\n", p.on, name(*x), name(*y)));
    }
    s.push_str(")\n)\n");
    s
}

/// A random solvable task with `size` blocks: random initial towers, and as
/// goal the `on` facts of other random towers, not all true initially.
pub fn generate(p: &BlockPredicates, problem_name: &str, domain: &str, seed: u64, size: u32) -> Result<String> {
    let n = size as usize;
    if !(2..=MAX_BLOCKS).contains(&n) {
        return Err(format!("size must be 2 to {MAX_BLOCKS} blocks, not {size}"));
    }
    let mut rng = Rng::new(seed);
    loop {
        let init = random_towers(&mut rng, n);
        let goal = random_towers(&mut rng, n);
        let held = on_pairs(&init);
        let wanted = on_pairs(&goal);
        if !wanted.is_empty() && wanted.iter().any(|g| !held.contains(g)) {
            return Ok(problem(p, problem_name, domain, &init, &goal));
        }
    }
}

/// PlanBench's BlocksWorld `predicates` templates (its configs/blocksworld.yaml): how the
/// blocksworld plugin words a state.
pub const PLANBENCH_PREDICATES: &[(&str, &str)] = &[
    ("ontable", "the {} is on the table"),
    ("clear", "the {} is clear"),
    ("handempty", "the hand is empty"),
    ("holding", "the hand is currently holding {}"),
    ("on", "the {} is on top of the {}"),
];

/// PlanBench's `encoded_objects`: a, b, c, … in this order; after `l`, colours of our own.
const COLOURS: [&str; 20] = [
    "red", "blue", "orange", "yellow", "white", "magenta", "black", "cyan", "green", "violet", "silver", "gold",
    "pink", "brown", "grey", "purple", "beige", "teal", "navy", "maroon",
];

/// PlanBench's name for an object in its BlocksWorld wording: `a` is the red block.
pub fn planbench_object(name: &str) -> String {
    match name.as_bytes() {
        [c @ b'a'..=b't'] => format!("{} block", COLOURS[(c - b'a') as usize]),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn towers_hold_every_block_once() {
        let mut rng = Rng::new(5);
        let t = random_towers(&mut rng, 8);
        let mut all: Vec<usize> = t.concat();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn generation_is_deterministic_and_parses() {
        let a = generate(&BLOCKSWORLD, "BW-rand-5", "blocksworld-4ops", 9, 5).unwrap();
        assert_eq!(a, generate(&BLOCKSWORLD, "BW-rand-5", "blocksworld-4ops", 9, 5).unwrap());
        assert_ne!(a, generate(&BLOCKSWORLD, "BW-rand-5", "blocksworld-4ops", 10, 5).unwrap());
        let p = crate::pddl::parse_problem(&a).unwrap();
        assert_eq!(p.objects.len(), 5);
        assert!(!p.goal.is_empty());
        assert!(generate(&BLOCKSWORLD, "x", "y", 1, 21).is_err());
        let big = crate::pddl::parse_problem(&generate(&BLOCKSWORLD, "x", "y", 1, 20).unwrap()).unwrap();
        assert_eq!(big.objects.last().map(|o| o.name.as_str()), Some("t"));
    }
}

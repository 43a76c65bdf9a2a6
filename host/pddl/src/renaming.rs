//! Problems that are equal up to a renaming of their objects: a key that a renaming cannot
//! change, and an exact test.
//!
//! A problem is read as a hypergraph. Its nodes are its objects (coloured by their declared
//! type; their names are never read) and the names its facts use without declaring them (the
//! domain's constants, which keep their names). Its hyperedges are its facts: every `:init`
//! atom and every goal literal, tagged with its part (`init` or `goal`), its polarity and its
//! predicate name. Predicate names count: both problems are of one domain.
//!
//! [`ProblemShape::key`] is a hash of the stable colour refinement (1-WL) of that hypergraph:
//! a renaming never changes it, so different keys mean different problems. Equal keys do not
//! prove equality (1-WL cannot tell an 8-cycle from two 4-cycles), so [`ProblemShape::compare`]
//! then searches for the renaming itself, by individualisation and refinement as nauty does:
//! refine the colours of both problems together until stable, give up on a branch where a
//! colour has more objects on one side than on the other, otherwise pin one object of the
//! smallest class to each object of the same colour on the other side in turn and recurse.
//! The first bijection that maps the init facts onto the init facts and the goal onto the
//! goal, as sets, ends the search, so interchangeable objects (Gripper's balls) cost one
//! branch each. A node budget bounds the rest; when it runs out the answer is
//! [`Renaming::Undecided`], never a guess.
//!
//! ```
//! use onebrain_pddl::{parse_problem, same_up_to_renaming, ProblemShape, Renaming, RENAMING_NODE_BUDGET};
//!
//! let a = parse_problem("(define (problem p) (:domain bw) (:objects a b) (:init (on a b) (clear a)) (:goal (on b a)))").unwrap();
//! let b = parse_problem("(define (problem q) (:domain bw) (:objects x y) (:init (clear y) (on y x)) (:goal (on x y)))").unwrap();
//! assert_eq!(ProblemShape::new(&a).key(), ProblemShape::new(&b).key());
//! assert_eq!(same_up_to_renaming(&a, &b, RENAMING_NODE_BUDGET), Renaming::Same);
//! ```

use std::collections::{HashMap, HashSet};

use crate::ast::Problem;

/// Search nodes [`same_up_to_renaming`] is given by callers with no reason to choose: a
/// problem of a few dozen objects needs about one node per object when the two are equal
/// (one pin per class, the first candidate right), so this leaves room for a few hundred
/// failed branches before answering [`Renaming::Undecided`].
pub const RENAMING_NODE_BUDGET: u64 = 10_000;

/// What the exact test found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Renaming {
    /// A bijection of objects maps one problem's init and goal onto the other's.
    Same,
    /// No such bijection exists.
    Different,
    /// The node budget ran out first. Callers that must not miss an equal problem (the
    /// training stream, keeping evaluation tasks out) treat this as [`Renaming::Same`].
    Undecided,
}

impl Renaming {
    /// True unless the problems were proved different: the conservative reading.
    pub fn maybe_same(self) -> bool {
        self != Renaming::Different
    }
}

/// One fact of a shape: its relation (part, polarity and predicate, hashed) and its nodes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ShapeFact {
    relation: u64,
    args: Box<[u32]>,
}

/// A problem with its object names forgotten: what [`ProblemShape::compare`] matches.
#[derive(Clone, Debug)]
pub struct ProblemShape {
    /// Each node's first colour: its type for an object, its name for a constant.
    start: Vec<u64>,
    /// Objects first (`0..objects`), then undeclared names.
    objects: usize,
    /// The facts, sorted and without repeats (init and goal are sets).
    facts: Vec<ShapeFact>,
    key: u64,
}

impl ProblemShape {
    /// The shape of `problem`, with its key computed.
    pub fn new(problem: &Problem) -> ProblemShape {
        let mut nodes: HashMap<&str, u32> = HashMap::new();
        let mut start = Vec::new();
        for o in &problem.objects {
            nodes.entry(o.name.as_str()).or_insert_with(|| {
                start.push(mix(TAG_OBJECT, hash_str(&o.ty)));
                (start.len() - 1) as u32
            });
        }
        let objects = start.len();
        let mut facts = Vec::with_capacity(problem.init.len() + problem.goal.len());
        for atom in &problem.init {
            let args = atom
                .args
                .iter()
                .map(|t| node_of(&mut nodes, &mut start, &t.name))
                .collect();
            facts.push(ShapeFact {
                relation: relation(TAG_INIT, true, &atom.predicate),
                args,
            });
        }
        for lit in &problem.goal {
            let args = lit
                .atom
                .args
                .iter()
                .map(|t| node_of(&mut nodes, &mut start, &t.name))
                .collect();
            facts.push(ShapeFact {
                relation: relation(TAG_GOAL, lit.positive, &lit.atom.predicate),
                args,
            });
        }
        facts.sort();
        facts.dedup();
        let mut shape = ProblemShape {
            start,
            objects,
            facts,
            key: 0,
        };
        shape.key = shape.compute_key();
        shape
    }

    /// A hash of the stable colour refinement: equal for problems that differ only by a
    /// renaming of objects (and by the order or repetition of facts and declarations).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Whether `self` and `other` are equal up to a renaming of objects, searching at most
    /// `budget` nodes.
    pub fn compare(&self, other: &ProblemShape, budget: u64) -> Renaming {
        if self.key != other.key
            || self.start.len() != other.start.len()
            || self.objects != other.objects
            || self.facts.len() != other.facts.len()
        {
            return Renaming::Different;
        }
        let union = Union::new(self, other);
        let mut nodes = Budget {
            used: 0,
            limit: budget,
        };
        let mut colours = self.start.clone();
        colours.extend_from_slice(&other.start);
        match union.search(colours, &mut nodes) {
            Ok(true) => Renaming::Same,
            Ok(false) => Renaming::Different,
            Err(OutOfBudget) => Renaming::Undecided,
        }
    }

    fn compute_key(&self) -> u64 {
        let graph = Graph::new(self.start.len(), self.facts.clone());
        let colours = graph
            .refine(self.start.clone(), None)
            .expect("one side is always balanced");
        let mut nodes = colours.clone();
        nodes.sort_unstable();
        let mut facts: Vec<u64> = self
            .facts
            .iter()
            .map(|f| graph.fact_colour(f, &colours))
            .collect();
        facts.sort_unstable();
        let mut h = mix(self.objects as u64, self.start.len() as u64);
        for c in nodes.into_iter().chain([TAG_FACTS]).chain(facts) {
            h = mix(h, c);
        }
        h
    }
}

/// [`ProblemShape::compare`] on two parsed problems.
pub fn same_up_to_renaming(a: &Problem, b: &Problem, budget: u64) -> Renaming {
    ProblemShape::new(a).compare(&ProblemShape::new(b), budget)
}

// Tags keep the hashed pieces of different kinds apart.
const TAG_OBJECT: u64 = 1;
const TAG_CONSTANT: u64 = 2;
const TAG_INIT: u64 = 3;
const TAG_GOAL: u64 = 4;
const TAG_FACTS: u64 = 5;
const TAG_PIN: u64 = 6;

fn relation(part: u64, positive: bool, predicate: &str) -> u64 {
    mix(mix(part, u64::from(positive)), hash_str(predicate))
}

/// splitmix64's finaliser: every input bit moves every output bit.
fn finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An order-sensitive combination. Written out rather than `std::hash`, whose output may
/// change between Rust releases: the key is meant to be stable.
fn mix(h: u64, x: u64) -> u64 {
    finalise(h.rotate_left(23) ^ finalise(x.wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

/// FNV-1a over the bytes, finalised.
fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    finalise(h)
}

/// The node of `name`: a declared object's, or a new one for a name the problem uses without
/// declaring it (a domain constant), whose first colour is its name: constants are never
/// renamed.
fn node_of<'a>(nodes: &mut HashMap<&'a str, u32>, start: &mut Vec<u64>, name: &'a str) -> u32 {
    *nodes.entry(name).or_insert_with(|| {
        start.push(mix(TAG_CONSTANT, hash_str(name)));
        (start.len() - 1) as u32
    })
}

/// A fact hypergraph: facts and, per node, where it occurs (fact, argument position).
struct Graph {
    facts: Vec<ShapeFact>,
    incident: Vec<Vec<(u32, u32)>>,
}

impl Graph {
    fn new(nodes: usize, facts: Vec<ShapeFact>) -> Graph {
        let mut incident = vec![Vec::new(); nodes];
        for (fi, f) in facts.iter().enumerate() {
            for (pos, &o) in f.args.iter().enumerate() {
                incident[o as usize].push((fi as u32, pos as u32));
            }
        }
        Graph { facts, incident }
    }

    /// A fact's colour: its relation and its arguments' colours, in order.
    fn fact_colour(&self, f: &ShapeFact, colours: &[u64]) -> u64 {
        f.args
            .iter()
            .fold(f.relation, |h, &o| mix(h, colours[o as usize]))
    }

    /// Refines `colours` until the partition they make stops splitting. With `split` (the
    /// first side's node count), `None` as soon as some colour has a different number of
    /// nodes on the two sides: no bijection below this point can map one onto the other.
    ///
    /// Colours are hashes of what a node sees, never numbers handed out in visiting order,
    /// so two problems refined apart get comparable colours (that is what the key needs).
    fn refine(&self, mut colours: Vec<u64>, split: Option<usize>) -> Option<Vec<u64>> {
        let fits = |colours: &[u64]| split.is_none_or(|n| balanced(colours, n));
        let mut classes = distinct(&colours);
        let mut seen = Vec::new();
        loop {
            if !fits(&colours) {
                return None;
            }
            let next: Vec<u64> = (0..colours.len())
                .map(|o| {
                    seen.clear();
                    seen.extend(self.incident[o].iter().map(|&(fi, pos)| {
                        mix(
                            self.fact_colour(&self.facts[fi as usize], &colours),
                            u64::from(pos),
                        )
                    }));
                    seen.sort_unstable();
                    seen.iter().fold(colours[o], |h, &s| mix(h, s))
                })
                .collect();
            // Each new colour hashes the old one, so the partition only ever splits: the
            // same number of classes means the same partition.
            let now = distinct(&next);
            colours = next;
            if now == classes {
                return fits(&colours).then_some(colours);
            }
            classes = now;
        }
    }
}

fn distinct(colours: &[u64]) -> usize {
    colours.iter().collect::<HashSet<_>>().len()
}

/// True when every colour has as many nodes in `colours[..n]` as in `colours[n..]`.
fn balanced(colours: &[u64], n: usize) -> bool {
    let mut count: HashMap<u64, i64> = HashMap::new();
    for (o, &c) in colours.iter().enumerate() {
        *count.entry(c).or_default() += if o < n { 1 } else { -1 };
    }
    count.values().all(|&v| v == 0)
}

struct OutOfBudget;

struct Budget {
    used: u64,
    limit: u64,
}

impl Budget {
    fn tick(&mut self) -> Result<(), OutOfBudget> {
        self.used += 1;
        if self.used > self.limit {
            Err(OutOfBudget)
        } else {
            Ok(())
        }
    }
}

/// Two shapes as one hypergraph: the first's nodes `0..n`, the second's `n..2n`.
struct Union {
    n: usize,
    graph: Graph,
    /// The second shape's facts, sorted: what the first's must map onto.
    target: Vec<ShapeFact>,
    /// The first shape's facts (the union's first `target.len()`).
    first: usize,
}

impl Union {
    fn new(a: &ProblemShape, b: &ProblemShape) -> Union {
        let n = a.start.len();
        let mut facts = a.facts.clone();
        facts.extend(b.facts.iter().map(|f| ShapeFact {
            relation: f.relation,
            args: f.args.iter().map(|&o| o + n as u32).collect(),
        }));
        Union {
            n,
            graph: Graph::new(2 * n, facts),
            target: b.facts.clone(),
            first: a.facts.len(),
        }
    }

    /// True when a bijection extending the pins that `colours` encode maps the first
    /// side's facts onto the second's.
    fn search(&self, colours: Vec<u64>, budget: &mut Budget) -> Result<bool, OutOfBudget> {
        budget.tick()?;
        let Some(colours) = self.graph.refine(colours, Some(self.n)) else {
            return Ok(false);
        };
        let n = self.n;
        let mut size: HashMap<u64, usize> = HashMap::new();
        for &c in &colours[..n] {
            *size.entry(c).or_default() += 1;
        }
        // The smallest class with more than one node: the fewest branches to try.
        let pick = (0..n)
            .filter(|&o| size[&colours[o]] > 1)
            .min_by_key(|&o| (size[&colours[o]], o));
        let Some(a) = pick else {
            return Ok(self.maps_onto_target(&colours));
        };
        let class = colours[a];
        let pinned = mix(class, TAG_PIN);
        for b in (n..2 * n).filter(|&b| colours[b] == class) {
            let mut c = colours.clone();
            c[a] = pinned;
            c[b] = pinned;
            // The first success is enough: one renaming is all the question asks for.
            if self.search(c, budget)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// With a discrete, balanced colouring (each colour one node a side): whether the map it
    /// defines sends the first side's facts exactly onto the second's.
    fn maps_onto_target(&self, colours: &[u64]) -> bool {
        let n = self.n;
        let partner: HashMap<u64, u32> = (n..2 * n).map(|b| (colours[b], (b - n) as u32)).collect();
        let map: Vec<u32> = colours[..n].iter().map(|c| partner[c]).collect();
        let mut image: Vec<ShapeFact> = self.graph.facts[..self.first]
            .iter()
            .map(|f| ShapeFact {
                relation: f.relation,
                args: f.args.iter().map(|&o| map[o as usize]).collect(),
            })
            .collect();
        image.sort();
        image == self.target
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_problem;

    fn problem(objects: &str, init: &str, goal: &str) -> Problem {
        parse_problem(&format!(
            "(define (problem p) (:domain d) (:objects {objects}) (:init {init}) (:goal (and {goal})))"
        ))
        .unwrap()
    }

    fn compare(a: &Problem, b: &Problem) -> Renaming {
        same_up_to_renaming(a, b, RENAMING_NODE_BUDGET)
    }

    /// Renames every word of `text` through `map` (names absent from it stay).
    fn rename(text: &str, map: &[(&str, &str)]) -> String {
        text.split_inclusive([' ', '(', ')'])
            .map(|w| {
                let (name, tail) = w.split_at(w.len() - usize::from(w.ends_with([' ', '(', ')'])));
                map.iter()
                    .find(|(from, _)| *from == name)
                    .map_or(name, |(_, to)| *to)
                    .to_string()
                    + tail
            })
            .collect()
    }

    const BW_INIT: &str =
        "(handempty) (ontable a) (on b a) (on c b) (clear c) (ontable d) (clear d)";
    const BW_GOAL: &str = "(on a d) (on d c) (not (clear b))";

    #[test]
    fn a_renamed_blocksworld_problem_is_the_same() {
        let a = problem("a b c d - block", BW_INIT, BW_GOAL);
        let map = [("a", "k"), ("b", "x"), ("c", "a"), ("d", "q")];
        // Renamed, declared in another order, facts shuffled and one repeated.
        let b = problem(
            "q a x k - block",
            &format!("(clear q) {} (handempty)", rename(BW_INIT, &map)),
            &rename(BW_GOAL, &map),
        );
        assert_eq!(ProblemShape::new(&a).key(), ProblemShape::new(&b).key());
        assert_eq!(compare(&a, &b), Renaming::Same);
    }

    #[test]
    fn a_moved_goal_fact_is_different() {
        let a = problem("a b c d - block", BW_INIT, BW_GOAL);
        let b = problem(
            "a b c d - block",
            BW_INIT,
            "(on a d) (on c d) (not (clear b))",
        );
        assert_eq!(compare(&a, &b), Renaming::Different);
        // The part counts: the same atom in :init is not the same task as in the goal.
        let c = problem(
            "a b c d - block",
            &format!("{BW_INIT} (on a d)"),
            "(on d c) (not (clear b))",
        );
        assert_eq!(compare(&a, &c), Renaming::Different);
        // So do polarity, types and constants' names.
        let d = problem("a b c d - block", BW_INIT, "(on a d) (on d c) (clear b)");
        assert_eq!(compare(&a, &d), Renaming::Different);
        let e = problem("a b c - block d - tower", BW_INIT, BW_GOAL);
        assert_eq!(compare(&a, &e), Renaming::Different);
        let (f, g) = (
            problem("a - block", "(at a t0)", "(at a t1)"),
            problem("a - block", "(at a t1)", "(at a t0)"),
        );
        assert_eq!(compare(&f, &g), Renaming::Different);
        assert_eq!(compare(&f, &f.clone()), Renaming::Same);
    }

    /// `(on x y)` edges around the cycles, alternately in :init and in the goal.
    fn cycles(lengths: &[usize]) -> Problem {
        let (mut objects, mut init, mut goal) = (String::new(), String::new(), String::new());
        let mut first = 0;
        for &len in lengths {
            for i in 0..len {
                let (x, y) = (first + i, first + (i + 1) % len);
                objects += &format!(" v{x}");
                let part = if i % 2 == 0 { &mut init } else { &mut goal };
                *part += &format!(" (on v{x} v{y})");
            }
            first += len;
        }
        problem(&objects, &init, &goal)
    }

    #[test]
    fn equal_colourings_are_told_apart_by_the_search() {
        let (eight, fours) = (cycles(&[8]), cycles(&[4, 4]));
        // 1-WL sees every node alike in both: one init edge out, one goal edge in, or the
        // other way round.
        assert_eq!(
            ProblemShape::new(&eight).key(),
            ProblemShape::new(&fours).key()
        );
        assert_eq!(compare(&eight, &fours), Renaming::Different);
        assert_eq!(compare(&fours, &eight), Renaming::Different);
        let renamed = rename(
            &eight.to_string(),
            &[("v0", "v5"), ("v5", "v0"), ("v2", "v7"), ("v7", "v2")],
        );
        assert_eq!(
            compare(&eight, &parse_problem(&renamed).unwrap()),
            Renaming::Same
        );
        // Without room to search, the equal keys leave it open.
        assert_eq!(same_up_to_renaming(&eight, &fours, 1), Renaming::Undecided);
        assert!(Renaming::Undecided.maybe_same() && !Renaming::Different.maybe_same());
    }

    fn gripper(balls: usize, rename_ball: impl Fn(usize) -> usize) -> Problem {
        let names: Vec<String> = (0..balls)
            .map(|i| format!("ball{}", rename_ball(i)))
            .collect();
        let init: String = names
            .iter()
            .map(|b| format!(" (ball {b}) (at {b} rooma)"))
            .collect();
        let goal: String = names.iter().map(|b| format!(" (at {b} roomb)")).collect();
        problem(
            &format!("rooma roomb left right {}", names.join(" ")),
            &format!("(room rooma) (room roomb) (gripper left) (gripper right) (free left) (free right) (at-robby rooma){init}"),
            &goal,
        )
    }

    #[test]
    fn interchangeable_balls_cost_a_branch_each() {
        let a = gripper(10, |i| i);
        let b = gripper(10, |i| 9 - i);
        // Ten balls alike: 10! bijections, but the first candidate of each class is right, so
        // the search takes one node per pin (the balls, the grippers) and a last one.
        assert_eq!(same_up_to_renaming(&a, &b, 12), Renaming::Same);
        let moved = problem(
            &format!(
                "rooma roomb left right {}",
                (0..10)
                    .map(|i| format!("ball{i}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            &a.init
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            &a.goal[1..]
                .iter()
                .map(|f| f.to_string())
                .chain(["(at ball0 rooma)".into()])
                .collect::<Vec<_>>()
                .join(" "),
        );
        assert_eq!(compare(&a, &moved), Renaming::Different);
    }
}

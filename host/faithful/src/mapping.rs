//! The mapping search: a bijection of predicates (with an argument order each) and of objects
//! under which the candidate's initial state is the reference's.
//!
//! Names never decide. Predicates are paired only within groups of equal invariants (arity,
//! fact count, and per argument position the degrees of the objects found there); for each
//! pairing the objects are matched by individualisation and colour refinement (1-WL on the
//! fact hypergraph), the method of graph-isomorphism tools such as nauty: refine colours until
//! stable, fail if a colour class has different sizes on the two sides, otherwise pick the
//! smallest non-singleton class, pin one candidate object to each reference object of that
//! class in turn, and recurse. A shared node budget bounds the whole search; running out is
//! reported, never guessed past.

use std::collections::HashMap;

use crate::model::{Fact, Model};
use crate::work::Work;

/// A predicate mapping: candidate predicate → (reference predicate, position map), where the
/// candidate's argument `i` goes to the reference's position `perm[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PredMap {
    pub to: Vec<Option<(u32, Box<[u32]>)>>,
}

impl PredMap {
    /// Every predicate of `m` to itself, arguments in order: the map when the candidate's
    /// domain is the reference's own.
    pub fn identity(m: &Model) -> PredMap {
        PredMap { to: m.preds.iter().enumerate().map(|(i, p)| Some((i as u32, (0..p.arity as u32).collect()))).collect() }
    }

    /// True when it sends predicate `p` to `q` with its arguments in order.
    pub fn sends(&self, p: usize, q: u32) -> bool {
        self.to[p].as_ref().is_some_and(|(t, perm)| *t == q && perm.iter().enumerate().all(|(i, &j)| i as u32 == j))
    }

    /// The image of candidate fact `f` under the predicate map and object map `obj`.
    pub fn map_fact(&self, f: &Fact, obj: &[u32]) -> Option<Fact> {
        let (p, perm) = self.to[f.pred as usize].as_ref()?;
        let mut args = vec![0; f.args.len()];
        for (i, &a) in f.args.iter().enumerate() {
            args[perm[i] as usize] = obj[a as usize];
        }
        Some(Fact { pred: *p, args: args.into_boxed_slice() })
    }

    /// As [`PredMap::map_fact`] with a partial object map; `None` if an argument is unmapped.
    pub fn map_fact_partial(&self, f: &Fact, obj: &[Option<u32>]) -> Option<Fact> {
        let (p, perm) = self.to[f.pred as usize].as_ref()?;
        let mut args = vec![0; f.args.len()];
        for (i, &a) in f.args.iter().enumerate() {
            args[perm[i] as usize] = obj[a as usize]?;
        }
        Some(Fact { pred: *p, args: args.into_boxed_slice() })
    }
}

/// The search's node budget, shared by every sub-search of one check, and the check's work
/// meter, which each node's colour refinement is charged to.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    pub nodes: u64,
    pub limit: u64,
    pub work: Work,
}

impl Budget {
    pub fn new(limit: u64, work: Work) -> Budget {
        Budget { nodes: 0, limit, work }
    }

    /// Counts one node; false once the node limit or the work budget is passed.
    fn tick(&mut self) -> bool {
        self.nodes += 1;
        self.work.charge(1) && self.nodes <= self.limit
    }

    pub fn exhausted(&self) -> bool {
        self.nodes > self.limit || self.work.exhausted()
    }
}

/// Why an object search stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Enough solutions were found.
    Enough,
    /// The node budget ran out.
    Budget,
}

/// Finds object bijections `f` (candidate → reference) with `f(facts_a) = facts_b`, where
/// `facts_a` already use reference predicates and argument order, `f(a) = b` for every
/// `(a, b)` in `pins`, and `accept(partial)` holds at every node (it sees the objects pinned
/// so far). Returns up to `max` solutions.
pub(crate) fn object_maps(
    n: usize,
    facts_a: &[Fact],
    facts_b: &[Fact],
    pins: &[(u32, u32)],
    accept: &mut dyn FnMut(&[Option<u32>]) -> bool,
    max: usize,
    budget: &mut Budget,
) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    if facts_a.len() != facts_b.len() || max == 0 {
        return out;
    }
    let mut sorted_b = facts_b.to_vec();
    sorted_b.sort();
    sorted_b.dedup();
    let mut sorted_a = facts_a.to_vec();
    sorted_a.sort();
    sorted_a.dedup();
    if sorted_a.len() != sorted_b.len() {
        return out;
    }
    // One hypergraph over 2n nodes: candidate objects 0..n, reference objects n..2n.
    let mut facts: Vec<Fact> = sorted_a.clone();
    facts.extend(sorted_b.iter().map(|f| Fact { pred: f.pred, args: f.args.iter().map(|&o| o + n as u32).collect() }));
    let mut incident: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 2 * n];
    for (fi, f) in facts.iter().enumerate() {
        for (pos, &o) in f.args.iter().enumerate() {
            incident[o as usize].push((fi as u32, pos as u32));
        }
    }
    let g = Graph { n, facts, incident, target: sorted_b };
    // A pinned pair starts in a colour class of its own.
    let mut colors = vec![0u32; 2 * n];
    for (k, &(a, b)) in pins.iter().enumerate() {
        colors[a as usize] = k as u32 + 1;
        colors[n + b as usize] = k as u32 + 1;
    }
    let _ = g.search(colors, accept, max, budget, &mut out);
    out
}

struct Graph {
    n: usize,
    facts: Vec<Fact>,
    incident: Vec<Vec<(u32, u32)>>,
    /// The reference facts, sorted, for the leaf check.
    target: Vec<Fact>,
}

impl Graph {
    /// Refines `colors` to the stable colouring; `None` if the two sides' class sizes differ.
    fn refine(&self, mut colors: Vec<u32>, work: &Work) -> Option<Vec<u32>> {
        let n2 = 2 * self.n;
        let mut classes = count_classes(&colors);
        // A round reads every fact once per argument, on both sides.
        let round: u64 = self.incident.iter().map(|v| v.len() as u64).sum::<u64>() + n2 as u64;
        loop {
            work.charge(round);
            let mut intern: HashMap<Vec<u32>, u32> = HashMap::new();
            let mut next = vec![0u32; n2];
            let mut tuples: Vec<Vec<u32>> = Vec::new();
            for o in 0..n2 {
                tuples.clear();
                for &(fi, pos) in &self.incident[o] {
                    let f = &self.facts[fi as usize];
                    let mut t = Vec::with_capacity(f.args.len() + 2);
                    t.push(f.pred);
                    t.push(pos);
                    t.extend(f.args.iter().map(|&x| colors[x as usize]));
                    tuples.push(t);
                }
                tuples.sort_unstable();
                let mut sig = vec![colors[o]];
                for t in &tuples {
                    sig.extend_from_slice(t);
                    sig.push(u32::MAX);
                }
                let fresh = intern.len() as u32;
                next[o] = *intern.entry(sig).or_insert(fresh);
            }
            let now = intern.len();
            colors = next;
            // Both sides must have the same number of objects of every colour.
            let mut balance = vec![0i64; now];
            for (o, &c) in colors.iter().enumerate() {
                balance[c as usize] += if o < self.n { 1 } else { -1 };
            }
            if balance.iter().any(|&b| b != 0) {
                return None;
            }
            if now == classes {
                return Some(colors);
            }
            classes = now;
        }
    }

    fn search(
        &self,
        colors: Vec<u32>,
        accept: &mut dyn FnMut(&[Option<u32>]) -> bool,
        max: usize,
        budget: &mut Budget,
        out: &mut Vec<Vec<u32>>,
    ) -> Result<(), Stop> {
        if !budget.tick() {
            return Err(Stop::Budget);
        }
        let Some(colors) = self.refine(colors, &budget.work) else { return Ok(()) };
        if budget.work.exhausted() {
            return Err(Stop::Budget);
        }
        let n = self.n;
        // Objects pinned so far: those alone in their colour class.
        let mut size = vec![0u32; 2 * n];
        for &c in &colors[..n] {
            size[c as usize] += 1;
        }
        let mut partner = vec![u32::MAX; 2 * n];
        for (o, &c) in colors.iter().enumerate().skip(n) {
            partner[c as usize] = (o - n) as u32;
        }
        let partial: Vec<Option<u32>> =
            colors[..n].iter().map(|&c| (size[c as usize] == 1).then(|| partner[c as usize])).collect();
        if !accept(&partial) {
            return Ok(());
        }
        // The smallest class with more than one object.
        let pick = (0..n).filter(|&o| size[colors[o] as usize] > 1).min_by_key(|&o| (size[colors[o] as usize], o));
        let Some(a) = pick else {
            let f: Vec<u32> = partial.iter().map(|x| x.expect("discrete colouring")).collect();
            let mut image: Vec<Fact> = self.facts[..self.target.len()]
                .iter()
                .map(|fa| Fact { pred: fa.pred, args: fa.args.iter().map(|&x| f[x as usize]).collect() })
                .collect();
            image.sort();
            if image == self.target {
                out.push(f);
                if out.len() >= max {
                    return Err(Stop::Enough);
                }
            }
            return Ok(());
        };
        let fresh = colors.iter().max().copied().unwrap_or(0) + 1;
        let class = colors[a];
        for b in n..2 * n {
            if colors[b] != class {
                continue;
            }
            let mut c = colors.clone();
            c[a] = fresh;
            c[b] = fresh;
            self.search(c, accept, max, budget, out)?;
        }
        Ok(())
    }
}

fn count_classes(colors: &[u32]) -> usize {
    let mut v = colors.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// What stage one found.
#[derive(Clone, Debug)]
pub(crate) struct InitMappings {
    /// Each viable predicate map (defined on the candidate's init predicates) with one object map.
    pub found: Vec<(PredMap, Vec<u32>)>,
    /// True when the budget ran out before the search finished.
    pub undecided: bool,
}

/// Invariants of a predicate in a model's initial state that any mapping preserves.
fn pred_key(m: &Model, p: u32, degree: &[u32]) -> (usize, usize, Vec<Vec<u32>>) {
    let arity = m.preds[p as usize].arity;
    let facts: Vec<&Fact> = m.init.iter().filter(|f| f.pred == p).collect();
    let positions = position_profiles(&facts, arity, degree);
    let mut sorted = positions.clone();
    sorted.sort();
    (arity, facts.len(), sorted)
}

/// For each argument position, the sorted degrees of the objects found there.
fn position_profiles(facts: &[&Fact], arity: usize, degree: &[u32]) -> Vec<Vec<u32>> {
    (0..arity)
        .map(|i| {
            let mut d: Vec<u32> = facts.iter().map(|f| degree[f.args[i] as usize]).collect();
            d.sort_unstable();
            d
        })
        .collect()
}

fn degrees(m: &Model) -> Vec<u32> {
    let mut d = vec![0u32; m.objects.len()];
    for f in &m.init {
        for &a in f.args.iter() {
            d[a as usize] += 1;
        }
    }
    d
}

/// All permutations `perm` of `0..k` with `from[i] == to[perm[i]]`.
fn position_perms(from: &[Vec<u32>], to: &[Vec<u32>]) -> Vec<Box<[u32]>> {
    let k = from.len();
    let mut out = Vec::new();
    let mut perm = vec![0u32; k];
    let mut used = vec![false; k];
    fn rec(i: usize, from: &[Vec<u32>], to: &[Vec<u32>], perm: &mut [u32], used: &mut [bool], out: &mut Vec<Box<[u32]>>) {
        if i == from.len() {
            out.push(perm.to_vec().into_boxed_slice());
            return;
        }
        for j in 0..to.len() {
            if !used[j] && from[i] == to[j] {
                used[j] = true;
                perm[i] = j as u32;
                rec(i + 1, from, to, perm, used, out);
                used[j] = false;
            }
        }
    }
    rec(0, from, to, &mut perm, &mut used, &mut out);
    out
}

/// Stage one: predicate maps over the initial-state predicates that admit an object map.
/// `max` bounds how many viable predicate maps are collected.
pub(crate) fn init_mappings(a: &Model, b: &Model, max: usize, budget: &mut Budget) -> InitMappings {
    let mut res = InitMappings { found: Vec::new(), undecided: false };
    let n = a.objects.len();
    if n != b.objects.len() || a.init.len() != b.init.len() {
        return res;
    }
    let (da, db) = (degrees(a), degrees(b));
    let used_a = a.init_preds();
    let used_b = b.init_preds();
    let pa: Vec<u32> = (0..a.preds.len() as u32).filter(|&p| used_a[p as usize]).collect();
    let pb: Vec<u32> = (0..b.preds.len() as u32).filter(|&p| used_b[p as usize]).collect();
    if pa.len() != pb.len() {
        return res;
    }
    let ka: Vec<_> = pa.iter().map(|&p| pred_key(a, p, &da)).collect();
    let kb: Vec<_> = pb.iter().map(|&p| pred_key(b, p, &db)).collect();
    let (mut sa, mut sb) = (ka.clone(), kb.clone());
    sa.sort();
    sb.sort();
    if sa != sb {
        return res;
    }
    // For each candidate predicate: its options (reference predicate, position map).
    let options: Vec<Vec<(u32, Box<[u32]>)>> = pa
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let fa: Vec<&Fact> = a.init.iter().filter(|f| f.pred == p).collect();
            let prof_a = position_profiles(&fa, a.preds[p as usize].arity, &da);
            let mut opts = Vec::new();
            for (j, &q) in pb.iter().enumerate() {
                if ka[i] != kb[j] {
                    continue;
                }
                let fb: Vec<&Fact> = b.init.iter().filter(|f| f.pred == q).collect();
                let prof_b = position_profiles(&fb, b.preds[q as usize].arity, &db);
                for perm in position_perms(&prof_a, &prof_b) {
                    opts.push((q, perm));
                }
            }
            opts
        })
        .collect();
    let mut map = PredMap { to: vec![None; a.preds.len()] };
    let mut taken = vec![false; b.preds.len()];
    let _ = enumerate_preds(0, &pa, &options, &mut map, &mut taken, a, b, max, budget, &mut res);
    res.undecided = budget.exhausted();
    res
}

/// Stage one when the candidate's domain is the reference's own: predicates map to
/// themselves, so only an object map is looked for (keeping `pins`, the constants).
pub(crate) fn identity_mappings(a: &Model, b: &Model, pins: &[(u32, u32)], budget: &mut Budget) -> InitMappings {
    let mut res = InitMappings { found: Vec::new(), undecided: false };
    if a.objects.len() == b.objects.len() && a.preds.len() == b.preds.len() {
        let pm = PredMap::identity(a);
        if let Some(f) = object_maps(a.objects.len(), &a.init, &b.init, pins, &mut |_| true, 1, budget).into_iter().next() {
            res.found.push((pm, f));
        }
    }
    res.undecided = res.found.is_empty() && budget.exhausted();
    res
}

#[allow(clippy::too_many_arguments)]
fn enumerate_preds(
    i: usize,
    pa: &[u32],
    options: &[Vec<(u32, Box<[u32]>)>],
    map: &mut PredMap,
    taken: &mut [bool],
    a: &Model,
    b: &Model,
    max: usize,
    budget: &mut Budget,
    res: &mut InitMappings,
) -> Result<(), Stop> {
    if i == pa.len() {
        if !budget.tick() {
            return Err(Stop::Budget);
        }
        let ident: Vec<u32> = (0..a.objects.len() as u32).collect();
        let facts_a: Vec<Fact> = a.init.iter().map(|f| map.map_fact(f, &ident).expect("init predicate mapped")).collect();
        let found = object_maps(a.objects.len(), &facts_a, &b.init, &[], &mut |_| true, 1, budget);
        if budget.exhausted() {
            return Err(Stop::Budget);
        }
        if let Some(f) = found.into_iter().next() {
            res.found.push((map.clone(), f));
            if res.found.len() >= max {
                return Err(Stop::Enough);
            }
        }
        return Ok(());
    }
    for (q, perm) in &options[i] {
        if taken[*q as usize] {
            continue;
        }
        taken[*q as usize] = true;
        map.to[pa[i] as usize] = Some((*q, perm.clone()));
        let r = enumerate_preds(i + 1, pa, options, map, taken, a, b, max, budget, res);
        map.to[pa[i] as usize] = None;
        taken[*q as usize] = false;
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_pddl::{parse_domain, parse_problem};

    const BW: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y)))";
    const MY: &str = "(define (domain my) (:predicates (province ?x) (planet ?x) (harmony) (pain ?x) (craves ?x ?y)))";

    fn model(d: &str, p: &str) -> Model {
        Model::new(&parse_domain(d).unwrap(), &parse_problem(p).unwrap()).unwrap()
    }

    #[test]
    fn renamed_blocks_map_onto_the_reference() {
        let r = model(BW, "(define (problem p) (:domain bw) (:objects a b c) (:init (handempty) (ontable a) (on b a) (clear b) (ontable c) (clear c)) (:goal (on a b)))");
        let c = model(MY, "(define (problem p) (:domain my) (:objects x y z) (:init (harmony) (planet z) (craves y z) (province y) (planet x) (province x)) (:goal (craves z y)))");
        let mut budget = Budget::new(10_000, Work::new(u64::MAX));
        let m = init_mappings(&c, &r, 8, &mut budget);
        assert!(!m.undecided);
        // The initial state alone cannot tell `clear` from `ontable` here: reading every
        // stack upside down is also an isomorphism. The action schemas decide later.
        assert_eq!(m.found.len(), 2);
        let province = c.preds.iter().position(|p| p.name == "province").unwrap();
        let (pm, f) = m.found.iter().find(|(pm, _)| r.preds[pm.to[province].as_ref().unwrap().0 as usize].name == "clear").unwrap();
        // z is the table-bound block under y: it must be a; y is b; x is c.
        assert_eq!(f, &vec![2, 1, 0]);
        let craves = c.preds.iter().position(|p| p.name == "craves").unwrap();
        assert_eq!(pm.to[craves].as_ref().unwrap().0 as usize, r.preds.iter().position(|p| p.name == "on").unwrap());
    }

    #[test]
    fn symmetric_objects_give_several_maps_and_a_changed_state_none() {
        let r = model(BW, "(define (problem p) (:domain bw) (:objects a b c) (:init (handempty) (ontable a) (ontable b) (ontable c) (clear a) (clear b) (clear c)) (:goal (on a b)))");
        let mut budget = Budget::new(10_000, Work::new(u64::MAX));
        let ident: Vec<u32> = (0..3).collect();
        let maps = object_maps(3, &r.init, &r.init, &[], &mut |_| true, 100, &mut budget);
        assert_eq!(maps.len(), 6);
        assert!(maps.contains(&ident));
        let c = model(BW, "(define (problem p) (:domain bw) (:objects a b c) (:init (handempty) (ontable a) (on b a) (ontable c) (clear b) (clear c)) (:goal (on a b)))");
        assert!(init_mappings(&c, &r, 8, &mut budget).found.is_empty());
    }

    #[test]
    fn a_tiny_budget_is_reported() {
        let r = model(BW, "(define (problem p) (:domain bw) (:objects a b c d) (:init (handempty) (ontable a) (ontable b) (ontable c) (ontable d) (clear a) (clear b) (clear c) (clear d)) (:goal (on a b)))");
        let mut budget = Budget::new(3, Work::new(u64::MAX));
        let m = init_mappings(&r, &r, 8, &mut budget);
        assert!(m.undecided);
    }

    #[test]
    fn reversed_argument_order_is_a_renaming() {
        let r = model(BW, "(define (problem p) (:domain bw) (:objects a b) (:init (handempty) (ontable a) (on b a) (clear b)) (:goal (on a b)))");
        let c = model(
            "(define (domain x) (:predicates (free ?x) (base ?x) (idle) (held ?x) (under ?y ?x)))",
            "(define (problem p) (:domain x) (:objects u v) (:init (idle) (base u) (under u v) (free v)) (:goal (under v u)))",
        );
        let mut budget = Budget::new(10_000, Work::new(u64::MAX));
        let m = init_mappings(&c, &r, 8, &mut budget);
        assert_eq!(m.found.len(), 2, "the stack read either way up");
        let under = c.preds.iter().position(|p| p.name == "under").unwrap();
        let free = c.preds.iter().position(|p| p.name == "free").unwrap();
        let (pm, _) = m.found.iter().find(|(pm, _)| r.preds[pm.to[free].as_ref().unwrap().0 as usize].name == "clear").unwrap();
        assert_eq!(&*pm.to[under].as_ref().unwrap().1, &[1, 0]);
    }
}

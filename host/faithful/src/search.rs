//! A bounded search for a reachable state that satisfies a conjunction of literals: the
//! witness that one goal does not imply a fact.
//!
//! Greedy best-first search with the additive heuristic h_add (Bonet & Geffner, Planning as
//! heuristic search, AIJ 2001) over the ground task. States whose positive targets are
//! unreachable even with deletes ignored are dead ends and pruned, which keeps an exhausted
//! search a proof that no such state exists.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use onebrain_pddl::{AtomId, GroundTask, State};

use crate::work::Work;

/// What a search found.
pub(crate) enum Found {
    /// A reachable state satisfying the target (returned).
    State(State),
    /// No reachable state satisfies it: the search space was exhausted.
    Exhausted,
    /// The node limit was reached first.
    Limit,
}

/// h_add over one ground task, with the indices it needs built once.
pub(crate) struct Hadd {
    /// For each atom, the actions with it as a positive precondition.
    by_pre: Vec<Vec<u32>>,
    /// Actions without positive preconditions.
    free: Vec<u32>,
    npre: Vec<u32>,
}

const INF: u32 = u32::MAX;

impl Hadd {
    pub fn new(task: &GroundTask) -> Hadd {
        let mut by_pre = vec![Vec::new(); task.num_atoms()];
        let mut free = Vec::new();
        let mut npre = Vec::with_capacity(task.actions().len());
        for (i, a) in task.actions().iter().enumerate() {
            let mut pre = a.pre_pos.clone();
            pre.sort();
            pre.dedup();
            for &p in &pre {
                by_pre[p.0 as usize].push(i as u32);
            }
            if pre.is_empty() {
                free.push(i as u32);
            }
            npre.push(pre.len() as u32);
        }
        Hadd { by_pre, free, npre }
    }

    /// The sum of the cheapest relaxed costs of `pos` from `s`, plus one per atom of `neg`
    /// that holds; `None` when some atom of `pos` is unreachable even ignoring deletes.
    fn eval(&self, task: &GroundTask, s: &State, pos: &[AtomId], neg: &[AtomId], cost: &mut [u32], acc: &mut Vec<(u32, u32)>) -> Option<u32> {
        cost.fill(INF);
        acc.clear();
        acc.extend(self.npre.iter().map(|&n| (n, 0)));
        let mut heap: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
        for a in s.iter() {
            cost[a.0 as usize] = 0;
            heap.push(Reverse((0, a.0)));
        }
        let actions = task.actions();
        let apply = |ai: u32, c: u32, cost: &mut [u32], heap: &mut BinaryHeap<Reverse<(u32, u32)>>| {
            for &x in &actions[ai as usize].add {
                if c < cost[x.0 as usize] {
                    cost[x.0 as usize] = c;
                    heap.push(Reverse((c, x.0)));
                }
            }
        };
        for &ai in &self.free {
            apply(ai, 1, cost, &mut heap);
        }
        let mut left = pos.iter().filter(|a| !s.contains(**a)).count();
        let mut done = vec![false; cost.len()];
        while let Some(Reverse((c, x))) = heap.pop() {
            if done[x as usize] || c > cost[x as usize] {
                continue;
            }
            done[x as usize] = true;
            if c > 0 && pos.contains(&AtomId(x)) {
                left -= 1;
                if left == 0 {
                    break;
                }
            }
            for &ai in &self.by_pre[x as usize] {
                let e = &mut acc[ai as usize];
                e.0 -= 1;
                e.1 = e.1.saturating_add(c);
                if e.0 == 0 {
                    let total = e.1.saturating_add(1);
                    apply(ai, total, cost, &mut heap);
                }
            }
        }
        let mut h = 0u32;
        for a in pos {
            let c = cost[a.0 as usize];
            if c == INF {
                return None;
            }
            h = h.saturating_add(c);
        }
        Some(h + neg.iter().filter(|a| s.contains(**a)).count() as u32)
    }

    /// Greedy best-first search from the initial state for a state where every atom of
    /// `pos` holds and none of `neg`, expanding at most `max_nodes` states, and stopping at
    /// the limit too when `work` runs out.
    pub fn find(&self, task: &GroundTask, pos: &[AtomId], neg: &[AtomId], max_nodes: usize, work: &Work) -> Found {
        let sat = |s: &State| pos.iter().all(|&a| s.contains(a)) && !neg.iter().any(|&a| s.contains(a));
        let mut cost = vec![INF; task.num_atoms()];
        let mut acc = Vec::new();
        let start = task.init().clone();
        if sat(&start) {
            return Found::State(start);
        }
        // An evaluation resets a cost per atom and a count per action; an expansion scans
        // every action for the applicable ones.
        let (eval, scan) = ((task.num_atoms() + task.actions().len()) as u64, task.actions().len() as u64);
        if !work.charge(eval) {
            return Found::Limit;
        }
        let Some(h0) = self.eval(task, &start, pos, neg, &mut cost, &mut acc) else { return Found::Exhausted };
        let mut seen: HashSet<State> = HashSet::new();
        let mut store = vec![start.clone()];
        let mut heap = BinaryHeap::new();
        heap.push(Reverse((h0, 0usize)));
        seen.insert(start);
        let mut expanded = 0;
        while let Some(Reverse((_, i))) = heap.pop() {
            expanded += 1;
            if expanded > max_nodes || !work.charge(scan) {
                return Found::Limit;
            }
            let s = store[i].clone();
            for a in task.applicable(&s).collect::<Vec<_>>() {
                let t = task.apply(&s, a);
                if !seen.insert(t.clone()) {
                    continue;
                }
                if sat(&t) {
                    return Found::State(t);
                }
                if !work.charge(eval) {
                    return Found::Limit;
                }
                if let Some(h) = self.eval(task, &t, pos, neg, &mut cost, &mut acc) {
                    heap.push(Reverse((h, store.len())));
                    store.push(t);
                }
            }
        }
        Found::Exhausted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_pddl::{ground, parse_domain, parse_problem};

    #[test]
    fn finds_a_state_and_proves_an_impossible_one_absent() {
        let d = parse_domain(
            "(define (domain d) (:predicates (at ?x) (road ?x ?y) (seen ?x))
              (:action go :parameters (?x ?y) :precondition (and (at ?x) (road ?x ?y)) :effect (and (at ?y) (seen ?y) (not (at ?x)))))",
        )
        .unwrap();
        let p = parse_problem("(define (problem p) (:domain d) (:objects a b c e) (:init (at a) (road a b) (road b c) (road c a)) (:goal (at c)))").unwrap();
        let t = ground(&d, &p).unwrap();
        let h = Hadd::new(&t);
        let id = |s: &str, x: &str| t.atom_id(s, &[x]).unwrap();
        let w = Work::new(u64::MAX);
        let Found::State(s) = h.find(&t, &[id("seen", "b"), id("at", "a")], &[], 100, &w) else { panic!("a state exists") };
        assert!(s.contains(id("seen", "c")));
        // At a and at b together: never (one place at a time), and the search space is small.
        assert!(matches!(h.find(&t, &[id("at", "a"), id("at", "b")], &[], 100, &w), Found::Exhausted));
        // Out of work: the limit, never a proof.
        assert!(matches!(h.find(&t, &[id("at", "a"), id("at", "b")], &[], 100, &Work::new(3)), Found::Limit));
        // e is unreachable: a dead end for h_add, without search.
        assert!(t.atom_id("at", &["e"]).is_none());
    }
}

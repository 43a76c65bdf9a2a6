//! Invariants of the reference task, proved, and the conclusions they allow.
//!
//! A *group* is a set of ground atoms of which at most one holds in every reachable state
//! ("each block has at most one support"), or exactly one ("each block is on the table, held,
//! or on exactly one block"). Candidates are read off the action schemas as in Helmert's
//! invariant synthesis (Concise finite-domain representations for PDDL planning tasks, AIJ
//! 2009): start from one predicate with at most one argument left free ("counted"), and
//! whenever an action adds an atom of the group without deleting one that its precondition
//! requires, try to add the predicate of such a delete effect to the group. Every candidate
//! is then *verified* on the ground task, instance by instance, by induction over the ground
//! actions: the initial state has at most (exactly) one atom of the group, and no action can
//! make that two (zero). Only verified instances are kept, so nothing below rests on the
//! candidate generation being right.
//!
//! With the groups, [`Invariants::unreachable`] proves that no reachable state satisfies a
//! conjunction of literals: by unit propagation over the groups (a conflict is a proof), or
//! else by showing that the conjunction's negation is itself inductive: the initial state
//! violates it, and every action that could complete it needs a predecessor state that the
//! groups rule out (one step of regression). The second catches what pairwise exclusions
//! cannot, such as a cycle of blocks each on the next.

use std::collections::{HashMap, HashSet, VecDeque};

use onebrain_pddl::{AtomId, GroundAction, GroundTask};

use crate::model::{Arg, Model, PredRef, Role, SchemaLit};
use crate::work::Work;

/// Candidate groups generated per check, at most. BlocksWorld needs 3, Logistics and
/// Gripper about as many; the cap bounds the work on odd domains.
const MAX_CANDIDATES: usize = 256;

/// Predicates of higher arity are left out of candidates (a group of them is rarely useful
/// and their instances are many).
const MAX_ARITY: usize = 4;

/// A value in a partial assignment: unknown, true or false.
const UNKNOWN: i8 = 0;
const TRUE: i8 = 1;
const FALSE: i8 = -1;

/// One predicate's share of a candidate group: which argument positions hold the group's
/// parameters (in the group's order), and which one, if any, is counted (free).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Part {
    pub(crate) pred: u32,
    pub(crate) params: Vec<u8>,
    pub(crate) counted: Option<u8>,
}

/// A verified group instance.
#[derive(Clone, Debug)]
struct Group {
    atoms: Vec<AtomId>,
    /// Exactly one holds (else at most one).
    exactly_one: bool,
}

/// The verified groups of one ground task, and indices over its actions.
#[derive(Clone, Debug)]
pub(crate) struct Invariants {
    groups: Vec<Group>,
    /// For each atom, the groups it belongs to.
    of_atom: Vec<Vec<u32>>,
    /// For each atom, the actions that add it, and those that delete it.
    adders: Vec<Vec<u32>>,
    deleters: Vec<Vec<u32>>,
    /// The check's work meter: propagation and regression are charged to it.
    work: Work,
}

/// A partial assignment with an undo trail, reused across proofs.
struct Scratch {
    vals: Vec<i8>,
    trail: Vec<u32>,
    queue: Vec<u32>,
}

impl Scratch {
    fn new(n: usize) -> Scratch {
        Scratch { vals: vec![UNKNOWN; n], trail: Vec::new(), queue: Vec::new() }
    }

    fn reset(&mut self) {
        for &a in &self.trail {
            self.vals[a as usize] = UNKNOWN;
        }
        self.trail.clear();
        self.queue.clear();
    }

    /// Sets `a` to `v`; false on a conflict with its current value.
    fn set(&mut self, a: u32, v: i8) -> bool {
        match self.vals[a as usize] {
            UNKNOWN => {
                self.vals[a as usize] = v;
                self.trail.push(a);
                self.queue.push(a);
                true
            }
            cur => cur == v,
        }
    }
}

impl Invariants {
    /// Synthesises and verifies the groups of `task`, the grounding of `model`. When `work`
    /// runs out, the candidates not yet verified are left out: fewer groups prove less, and
    /// what they prove still holds.
    pub fn new(model: &Model, task: &GroundTask, work: Work) -> Invariants {
        let n = task.num_atoms();
        let atoms = atom_index(model, task);
        let mut found: HashMap<Vec<AtomId>, bool> = HashMap::new();
        // Verifying a candidate reads every atom and every action once.
        let per = (n + task.actions().len()) as u64;
        for cand in candidates(model) {
            if !work.charge(per) {
                break;
            }
            verify(task, &atoms, &cand, &mut found);
        }
        let mut groups: Vec<Group> = found.into_iter().map(|(atoms, exactly_one)| Group { atoms, exactly_one }).collect();
        // A fixed order, so that every run propagates alike.
        groups.sort_by(|a, b| a.atoms.cmp(&b.atoms));
        let mut of_atom = vec![Vec::new(); n];
        for (g, grp) in groups.iter().enumerate() {
            for &a in &grp.atoms {
                of_atom[a.0 as usize].push(g as u32);
            }
        }
        let (mut adders, mut deleters) = (vec![Vec::new(); n], vec![Vec::new(); n]);
        for (i, a) in task.actions().iter().enumerate() {
            for &x in &a.add {
                adders[x.0 as usize].push(i as u32);
            }
            for &x in &a.del {
                deleters[x.0 as usize].push(i as u32);
            }
        }
        Invariants { groups, of_atom, adders, deleters, work }
    }

    /// How many verified groups there are (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.groups.len()
    }

    /// Unit propagation of the scratch's queue over the groups; false on a conflict.
    fn propagate(&self, s: &mut Scratch) -> bool {
        while let Some(a) = s.queue.pop() {
            for &g in &self.of_atom[a as usize] {
                let grp = &self.groups[g as usize];
                self.work.charge(grp.atoms.len() as u64);
                let (mut t, mut unknown, mut last) = (0, 0, 0u32);
                for &b in &grp.atoms {
                    match s.vals[b.0 as usize] {
                        TRUE => t += 1,
                        UNKNOWN => {
                            unknown += 1;
                            last = b.0;
                        }
                        _ => {}
                    }
                }
                if t >= 2 {
                    return false;
                }
                if t == 1 {
                    if unknown > 0 {
                        for &b in &grp.atoms {
                            if s.vals[b.0 as usize] == UNKNOWN {
                                s.set(b.0, FALSE);
                            }
                        }
                    }
                } else if grp.exactly_one {
                    if unknown == 0 {
                        return false;
                    }
                    if unknown == 1 {
                        s.set(last, TRUE);
                    }
                }
            }
        }
        true
    }

    /// Assigns `lits` and propagates; false on a conflict.
    fn assign(&self, s: &mut Scratch, lits: &[(AtomId, bool)]) -> bool {
        for &(a, pos) in lits {
            if !s.set(a.0, if pos { TRUE } else { FALSE }) {
                return false;
            }
        }
        self.propagate(s)
    }

    /// The literals `lits` imply in every reachable state (themselves included), or `None`
    /// when no reachable state satisfies them by propagation alone.
    pub fn consequences(&self, num_atoms: usize, lits: &[(AtomId, bool)]) -> Option<Vec<(AtomId, bool)>> {
        self.work.charge(num_atoms as u64);
        let mut s = Scratch::new(num_atoms);
        if !self.assign(&mut s, lits) {
            return None;
        }
        let mut out: Vec<(AtomId, bool)> = s.trail.iter().map(|&a| (AtomId(a), s.vals[a as usize] == TRUE)).collect();
        out.sort();
        Some(out)
    }

    /// A quick refutation of the predecessor of `act` for S (`in_s`): a precondition that an
    /// S literal the action leaves alone contradicts, directly or through one group.
    fn clashes(&self, act: &GroundAction, in_s: &[i8]) -> bool {
        let kept_true = |q: AtomId| in_s[q.0 as usize] == TRUE && !act.add.contains(&q);
        for &p in &act.pre_pos {
            if in_s[p.0 as usize] == FALSE && !act.del.contains(&p) {
                return true;
            }
            for &g in &self.of_atom[p.0 as usize] {
                if self.groups[g as usize].atoms.iter().any(|&q| q != p && kept_true(q)) {
                    return true;
                }
            }
        }
        act.pre_neg.iter().any(|&p| kept_true(p))
    }

    /// True when no reachable state of `task` satisfies every literal of `lits` (a proof);
    /// false when this could not be shown (which proves nothing).
    pub fn unreachable(&self, task: &GroundTask, lits: &[(AtomId, bool)]) -> bool {
        let n = task.num_atoms();
        let Some(closed) = self.consequences(n, lits) else { return true };
        if self.work.exhausted() {
            return false;
        }
        // The set S whose joint truth is to be ruled out: the literals and what they imply
        // (a reachable state satisfying `lits` satisfies all of them). Literals whose
        // achievers cannot be refuted are dropped until what is left is inductive.
        let mut in_s = vec![UNKNOWN; n];
        for &(a, pos) in &closed {
            in_s[a.0 as usize] = if pos { TRUE } else { FALSE };
        }
        let init = task.init();
        let actions = task.actions();
        let mut scratch = Scratch::new(n);
        let mut seeds: Vec<(AtomId, bool)> = Vec::new();
        loop {
            let members: Vec<u32> = (0..n as u32).filter(|&a| in_s[a as usize] != UNKNOWN).collect();
            if members.iter().all(|&a| (in_s[a as usize] == TRUE) == init.contains(AtomId(a))) {
                // The initial state satisfies what is left: nothing proved.
                return false;
            }
            let mut touching: Vec<u32> = Vec::new();
            for &a in &members {
                let by = if in_s[a as usize] == TRUE { &self.adders[a as usize] } else { &self.deleters[a as usize] };
                touching.extend_from_slice(by);
            }
            touching.sort_unstable();
            touching.dedup();
            // Each action's predecessor lists the members it leaves alone; out of work, the
            // proof is not made (which proves nothing either way).
            if !self.work.charge(n as u64 / 64 + touching.len() as u64 * (members.len() as u64 + 16)) {
                return false;
            }
            let mut dropped = false;
            for &ai in &touching {
                let act = &actions[ai as usize];
                let val = |x: &AtomId| in_s[x.0 as usize];
                // An action that makes an S literal false cannot complete S.
                if act.add.iter().any(|x| val(x) == FALSE) || act.del.iter().any(|x| val(x) == TRUE && !act.add.contains(x)) {
                    continue;
                }
                let adds_pos = act.add.iter().any(|x| val(x) == TRUE);
                let dels_neg = act.del.iter().any(|x| val(x) == FALSE);
                if !adds_pos && !dels_neg {
                    continue;
                }
                if self.clashes(act, &in_s) {
                    continue; // refuted without propagation
                }
                // The predecessor: the precondition, and every S literal the action leaves alone.
                seeds.clear();
                seeds.extend(act.pre_pos.iter().map(|&x| (x, true)));
                seeds.extend(act.pre_neg.iter().map(|&x| (x, false)));
                for &m in &members {
                    let x = AtomId(m);
                    match in_s[m as usize] {
                        TRUE if !act.add.contains(&x) => seeds.push((x, true)),
                        FALSE if !act.del.contains(&x) => seeds.push((x, false)),
                        _ => {}
                    }
                }
                scratch.reset();
                if !self.assign(&mut scratch, &seeds) {
                    continue; // refuted
                }
                for x in &act.add {
                    if in_s[x.0 as usize] == TRUE {
                        in_s[x.0 as usize] = UNKNOWN;
                        dropped = true;
                    }
                }
                for x in &act.del {
                    if in_s[x.0 as usize] == FALSE {
                        in_s[x.0 as usize] = UNKNOWN;
                        dropped = true;
                    }
                }
            }
            if !dropped {
                return true;
            }
        }
    }
}

/// For each ground atom of `task`, its predicate and arguments as `model` indices.
pub(crate) fn atom_index(model: &Model, task: &GroundTask) -> Vec<Option<(u32, Vec<u32>)>> {
    let mut preds: HashMap<&str, u32> = HashMap::new();
    for (i, p) in model.preds.iter().enumerate() {
        if !p.is_type {
            preds.entry(p.name.as_str()).or_insert(i as u32);
        }
    }
    let objects: HashMap<&str, u32> = model.objects.iter().enumerate().map(|(i, o)| (o.as_str(), i as u32)).collect();
    (0..task.num_atoms() as u32)
        .map(|id| {
            let (p, args) = task.atom_parts(AtomId(id));
            let p = *preds.get(p)?;
            let args = args.iter().map(|a| objects.get(a).copied()).collect::<Option<Vec<u32>>>()?;
            Some((p, args))
        })
        .collect()
}

/// Candidate groups from the action schemas (see the module docs).
pub(crate) fn candidates(model: &Model) -> Vec<Vec<Part>> {
    let usable = |p: u32| {
        let pred = &model.preds[p as usize];
        pred.fluent && !pred.is_type && !pred.trivial && pred.arity <= MAX_ARITY
    };
    let mut seen: HashSet<Vec<Part>> = HashSet::new();
    let mut queue: VecDeque<Vec<Part>> = VecDeque::new();
    for p in 0..model.preds.len() as u32 {
        if !usable(p) {
            continue;
        }
        let a = model.preds[p as usize].arity as u8;
        let mut seeds = vec![Part { pred: p, params: (0..a).collect(), counted: None }];
        for c in 0..a {
            seeds.push(Part { pred: p, params: (0..a).filter(|&i| i != c).collect(), counted: Some(c) });
        }
        for part in seeds {
            let cand = vec![part];
            if seen.insert(cand.clone()) {
                queue.push_back(cand);
            }
        }
    }
    let mut out = Vec::new();
    while let Some(cand) = queue.pop_front() {
        for action in &model.actions {
            let in_pre = |l: &SchemaLit| action.lits.iter().any(|m| m.role == Role::Pre && m.positive && m.pred == l.pred && m.args == l.args);
            let dels: Vec<&SchemaLit> = action.lits.iter().filter(|l| l.role == Role::Del && in_pre(l)).collect();
            for add in action.lits.iter().filter(|l| l.role == Role::Add) {
                let PredRef::Pred(p) = add.pred else { continue };
                let Some(pa) = cand.iter().find(|x| x.pred == p) else { continue };
                if in_pre(add) {
                    continue;
                }
                let terms: Vec<Arg> = pa.params.iter().map(|&i| add.args[i as usize]).collect();
                let balanced = dels.iter().any(|d| {
                    matches!(d.pred, PredRef::Pred(q) if cand.iter().any(|x| x.pred == q
                        && x.params.iter().map(|&i| d.args[i as usize]).eq(terms.iter().copied())))
                });
                if balanced {
                    continue;
                }
                for d in &dels {
                    let PredRef::Pred(q) = d.pred else { continue };
                    let arity = model.preds[q as usize].arity;
                    if !usable(q) || cand.iter().any(|x| x.pred == q) || arity < terms.len() || arity > terms.len() + 1 {
                        continue;
                    }
                    for params in placements(&terms, &d.args) {
                        let counted = (0..arity as u8).find(|i| !params.contains(i));
                        let mut next = cand.clone();
                        next.push(Part { pred: q, params, counted });
                        next.sort();
                        if seen.len() < MAX_CANDIDATES && seen.insert(next.clone()) {
                            queue.push_back(next);
                        }
                    }
                }
            }
        }
        out.push(cand);
    }
    out
}

/// Every injective choice of positions `pos` in `args` with `args[pos[i]] == terms[i]`.
fn placements(terms: &[Arg], args: &[Arg]) -> Vec<Vec<u8>> {
    fn rec(i: usize, terms: &[Arg], args: &[Arg], cur: &mut Vec<u8>, out: &mut Vec<Vec<u8>>) {
        if i == terms.len() {
            out.push(cur.clone());
            return;
        }
        for (j, a) in args.iter().enumerate() {
            if *a == terms[i] && !cur.contains(&(j as u8)) {
                cur.push(j as u8);
                rec(i + 1, terms, args, cur, out);
                cur.pop();
            }
        }
    }
    let mut out = Vec::new();
    rec(0, terms, args, &mut Vec::new(), &mut out);
    out
}

/// The ground instances of a candidate group on one task, and per instance whether the
/// induction step holds: no action can make two of its atoms true (`amo`), or none (`eo`).
/// The base case (the initial state) is the caller's.
pub(crate) struct Instances {
    pub(crate) atoms: Vec<Vec<AtomId>>,
    /// For each ground atom, its instance.
    pub(crate) of_atom: Vec<Option<u32>>,
    pub(crate) amo: Vec<bool>,
    pub(crate) eo: Vec<bool>,
}

/// Verifies every ground instance of `cand` on `task` and records those that hold (at most
/// one, or exactly one) in `found`, keyed by their atoms.
fn verify(task: &GroundTask, atoms: &[Option<(u32, Vec<u32>)>], cand: &[Part], found: &mut HashMap<Vec<AtomId>, bool>) {
    let Instances { atoms: inst_atoms, of_atom: inst_of, mut amo, mut eo } = induction(task, atoms, cand);
    let m = inst_atoms.len();
    let mut init_count = vec![0u32; m];
    for a in task.init().iter() {
        if let Some(i) = inst_of[a.0 as usize] {
            init_count[i as usize] += 1;
        }
    }
    for i in 0..m {
        amo[i] &= init_count[i] <= 1;
        eo[i] &= init_count[i] == 1;
    }
    for i in 0..m {
        if amo[i] && inst_atoms[i].len() >= 2 {
            let mut g = inst_atoms[i].clone();
            g.sort();
            *found.entry(g).or_insert(false) |= eo[i];
        }
    }
}

/// The instances of `cand` on `task` with the induction step checked for each (see
/// [`Instances`]).
pub(crate) fn induction(task: &GroundTask, atoms: &[Option<(u32, Vec<u32>)>], cand: &[Part]) -> Instances {
    // Instances: the atoms that share the group parameters' values.
    let mut keys: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut inst_atoms: Vec<Vec<AtomId>> = Vec::new();
    let mut inst_of: Vec<Option<u32>> = vec![None; atoms.len()];
    for (id, a) in atoms.iter().enumerate() {
        let Some((p, args)) = a else { continue };
        let Some(part) = cand.iter().find(|x| x.pred == *p) else { continue };
        let key: Vec<u32> = part.params.iter().map(|&i| args[i as usize]).collect();
        let next = inst_atoms.len() as u32;
        let inst = *keys.entry(key).or_insert(next);
        if inst == next {
            inst_atoms.push(Vec::new());
        }
        inst_atoms[inst as usize].push(AtomId(id as u32));
        inst_of[id] = Some(inst);
    }
    let m = inst_atoms.len();
    let mut amo = vec![true; m];
    let mut eo = vec![true; m];
    // Per action: (instance, kind, atom); kinds 0 pre_pos, 1 pre_neg, 2 add, 3 del.
    let mut touch: Vec<(u32, u8, AtomId)> = Vec::new();
    for act in task.actions() {
        touch.clear();
        for (kind, list) in [(0u8, &act.pre_pos), (1, &act.pre_neg), (2, &act.add), (3, &act.del)] {
            for &x in list {
                if let Some(i) = inst_of[x.0 as usize] {
                    touch.push((i, kind, x));
                }
            }
        }
        touch.sort_unstable();
        touch.dedup();
        let mut k = 0;
        while k < touch.len() {
            let inst = touch[k].0;
            let end = k + touch[k..].iter().take_while(|t| t.0 == inst).count();
            let run = &touch[k..end];
            k = end;
            let of = |kind: u8| run.iter().filter(move |t| t.1 == kind).map(|t| t.2);
            let pre: Vec<AtomId> = of(0).collect();
            let adds: Vec<AtomId> = of(2).collect();
            let dels: Vec<AtomId> = of(3).collect();
            let i = inst as usize;
            // Requiring two atoms of the group: never applicable while it holds.
            if pre.len() >= 2 {
                continue;
            }
            let deleted_or_false = |x: AtomId| dels.contains(&x) || of(1).any(|y| y == x);
            if !adds.is_empty() {
                let ok = adds.len() == 1 && {
                    let x = adds[0];
                    match pre.first() {
                        // The atom that holds is the precondition: it must be x or go.
                        Some(&p) => p == x || dels.contains(&p),
                        // Unknown which holds: every other one must go (or be known false).
                        None => inst_atoms[i].iter().all(|&y| y == x || deleted_or_false(y)),
                    }
                };
                if !ok {
                    amo[i] = false;
                }
            } else if !dels.is_empty() {
                // Nothing added: the atom that holds must survive.
                let ok = match pre.first() {
                    Some(&p) => !dels.contains(&p),
                    None => dels.iter().all(|&d| of(1).any(|y| y == d)),
                };
                if !ok {
                    eo[i] = false;
                }
            }
        }
    }
    Instances { atoms: inst_atoms, of_atom: inst_of, amo, eo }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_pddl::{ground, parse_domain, parse_problem};

    const BW: &str = "(define (domain blocksworld) (:predicates (clear ?x) (on-table ?x) (arm-empty) (holding ?x) (on ?x ?y))
      (:action pickup :parameters (?ob) :precondition (and (clear ?ob) (on-table ?ob) (arm-empty))
        :effect (and (holding ?ob) (not (clear ?ob)) (not (on-table ?ob)) (not (arm-empty))))
      (:action putdown :parameters (?ob) :precondition (holding ?ob)
        :effect (and (clear ?ob) (arm-empty) (on-table ?ob) (not (holding ?ob))))
      (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
        :effect (and (arm-empty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob))))
      (:action unstack :parameters (?ob ?underob) :precondition (and (on ?ob ?underob) (clear ?ob) (arm-empty))
        :effect (and (holding ?ob) (clear ?underob) (not (on ?ob ?underob)) (not (clear ?ob)) (not (arm-empty)))))";

    fn setup(problem: &str) -> (Model, GroundTask, Invariants) {
        let d = parse_domain(BW).unwrap();
        let p = parse_problem(problem).unwrap();
        let m = Model::new(&d, &p).unwrap();
        let t = ground(&d, &p).unwrap();
        let inv = Invariants::new(&m, &t, Work::new(u64::MAX));
        (m, t, inv)
    }

    fn lit(t: &GroundTask, s: &str, pos: bool) -> (AtomId, bool) {
        let parts: Vec<&str> = s.split_whitespace().collect();
        (t.atom_id(parts[0], &parts[1..]).unwrap_or_else(|| panic!("{s}")), pos)
    }

    const FOUR: &str = "(define (problem p) (:domain blocksworld) (:objects a b c d)
      (:init (arm-empty) (on-table a) (on b a) (on c b) (on d c) (clear d)) (:goal (arm-empty)))";

    #[test]
    fn blocksworld_groups_are_found_and_verified() {
        let (_, t, inv) = setup(FOUR);
        // The arm (1), each block's support (4) and each block's top (4), all exactly-one.
        assert_eq!(inv.len(), 9, "{:?}", inv.groups);
        assert!(inv.groups.iter().all(|g| g.exactly_one), "{:?}", inv.groups);
        let arm = inv.groups.iter().find(|g| g.atoms.contains(&lit(&t, "arm-empty", true).0)).unwrap();
        assert_eq!(arm.atoms.len(), 5);
    }

    #[test]
    fn implied_facts_are_proved_and_others_are_not() {
        let (_, t, inv) = setup(FOUR);
        // A tower d on c on b on a on the table, with the arm empty: d is clear.
        let tower = [lit(&t, "on-table a", true), lit(&t, "on b a", true), lit(&t, "on c b", true), lit(&t, "on d c", true), lit(&t, "arm-empty", true)];
        let mut with = tower.to_vec();
        with.push(lit(&t, "clear d", false));
        assert!(inv.unreachable(&t, &with));
        // Even without the arm: every block has its support, so none is held and none is on d.
        let mut without = tower[..4].to_vec();
        without.push(lit(&t, "clear d", false));
        assert!(inv.unreachable(&t, &without));
        // With d left free, c need not be clear (d may be on it): nothing is proved.
        let mut free = tower[..3].to_vec();
        free.push(lit(&t, "clear c", false));
        assert!(!inv.unreachable(&t, &free));
    }

    #[test]
    fn a_cycle_of_blocks_is_ruled_out_by_regression() {
        let (_, t, inv) = setup(FOUR);
        // b on a, c on b, a on c: no pairwise exclusion forbids it, but no action completes it.
        let cycle = [lit(&t, "on b a", true), lit(&t, "on c b", true), lit(&t, "on a c", true)];
        assert!(inv.consequences(t.num_atoms(), &cycle).is_some(), "propagation alone cannot see a cycle");
        assert!(inv.unreachable(&t, &cycle));
        // A chain is reachable: not proved unreachable.
        assert!(!inv.unreachable(&t, &[lit(&t, "on b a", true), lit(&t, "on c b", true), lit(&t, "on a d", true)]));
    }
}

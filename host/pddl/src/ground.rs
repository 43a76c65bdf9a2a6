//! Grounding by a delete-relaxed fixed point, states as bit sets, simulation and relaxed
//! reachability.
//!
//! Grounding never enumerates all object tuples: an action is instantiated only for bindings
//! that satisfy its positive preconditions over atoms already known to be relaxed-reachable,
//! joined precondition by precondition through a (predicate, position, object) index, as Fast
//! Downward's translator does with its Datalog program. Static predicates (never in an effect)
//! are compiled away, and equality and static negative preconditions prune bindings.

use std::fmt;

use crate::ast::{Domain, Problem};
use crate::error::GroundError;
use crate::world::{instantiate, resolve, Arg, CAction, FxHashMap, FxHashSet, Interner, World};

/// Grounding gives up beyond this many join steps: a spec that needs more is far larger than
/// any benchmark task (PlanBench Logistics needs a few thousand) and is almost surely a
/// modelling error, such as an action with no preconditions over many objects.
pub const MAX_JOIN_STEPS: u64 = 5_000_000;

/// Grounding gives up beyond this many ground actions, for the same reason.
pub const MAX_GROUND_ACTIONS: usize = 250_000;


/// An interned ground atom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AtomId(pub u32);

/// A state: the set of true ground atoms, as a bit set over [`AtomId`]s (closed world).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct State {
    words: Box<[u64]>,
}

impl State {
    fn empty(num_atoms: usize) -> State {
        State {
            words: vec![0; num_atoms.div_ceil(64)].into_boxed_slice(),
        }
    }

    fn insert(&mut self, a: AtomId) {
        self.words[(a.0 / 64) as usize] |= 1 << (a.0 % 64);
    }

    fn remove(&mut self, a: AtomId) {
        self.words[(a.0 / 64) as usize] &= !(1 << (a.0 % 64));
    }

    /// True if atom `a` holds.
    pub fn contains(&self, a: AtomId) -> bool {
        self.words
            .get((a.0 / 64) as usize)
            .is_some_and(|w| w & (1 << (a.0 % 64)) != 0)
    }

    /// How many atoms hold.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True if no atom holds.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The atoms that hold, in id order.
    pub fn iter(&self) -> impl Iterator<Item = AtomId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u32)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| AtomId(i as u32 * 64 + b))
        })
    }
}

/// A ground action. Static preconditions (true in every reachable state) are compiled away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroundAction {
    /// The schema's name.
    pub name: String,
    /// Index of the schema in [`Domain::actions`].
    pub schema: usize,
    /// The objects bound to the schema's parameters, in order.
    pub args: Vec<String>,
    /// Atoms that must hold.
    pub pre_pos: Vec<AtomId>,
    /// Atoms that must not hold.
    pub pre_neg: Vec<AtomId>,
    /// Atoms made true.
    pub add: Vec<AtomId>,
    /// Atoms made false (before the adds, as PDDL says).
    pub del: Vec<AtomId>,
}

/// `(stack a b)`.
impl fmt::Display for GroundAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}", self.name)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        f.write_str(")")
    }
}

/// A grounded planning task: interned atoms, initial state, goal and ground actions.
#[derive(Clone, Debug)]
pub struct GroundTask {
    objects: Vec<String>,
    preds: Vec<String>,
    schemas: Vec<String>,
    atoms: Interner,
    init: State,
    goal_pos: Vec<AtomId>,
    goal_neg: Vec<AtomId>,
    /// False when a goal equality is false, so no state is a goal state.
    goal_possible: bool,
    actions: Vec<GroundAction>,
}

/// The result of the delete-relaxed fixed point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachability {
    reached: Vec<bool>,
    /// Positive goal atoms that no sequence of actions can make true, even ignoring deletes.
    pub unreachable_goals: Vec<AtomId>,
    /// Atoms of negative goals `(not p)` where `p` holds initially and no reachable action
    /// deletes it.
    pub undeletable_goals: Vec<AtomId>,
    /// Action schemas with no applicable instance in the relaxation, in domain order.
    pub dead_schemas: Vec<String>,
    /// False when a goal equality between distinct objects (or a negated one between equal
    /// objects) makes the goal impossible.
    pub goal_possible: bool,
}

impl Reachability {
    /// True if atom `a` is relaxed-reachable (in the initial state or added by a reachable action).
    pub fn is_reachable(&self, a: AtomId) -> bool {
        self.reached.get(a.0 as usize).copied().unwrap_or(false)
    }

    /// True if the relaxation does not rule the goal out.
    pub fn goal_reachable(&self) -> bool {
        self.goal_possible && self.unreachable_goals.is_empty() && self.undeletable_goals.is_empty()
    }
}

impl GroundTask {
    /// `(on a b)`.
    pub fn atom_name(&self, id: AtomId) -> String {
        let key = self.atoms.key(id.0);
        let mut s = String::with_capacity(16);
        s.push('(');
        s.push_str(&self.preds[key[0] as usize]);
        for &o in &key[1..] {
            s.push(' ');
            s.push_str(&self.objects[o as usize]);
        }
        s.push(')');
        s
    }

    /// The predicate name and object names of atom `id`.
    pub fn atom_parts(&self, id: AtomId) -> (&str, Vec<&str>) {
        let key = self.atoms.key(id.0);
        (
            &self.preds[key[0] as usize],
            key[1..]
                .iter()
                .map(|&o| self.objects[o as usize].as_str())
                .collect(),
        )
    }

    /// The atom `(predicate args...)`, if it was interned (every atom that can ever hold is).
    pub fn atom_id(&self, predicate: &str, args: &[&str]) -> Option<AtomId> {
        let mut key = Vec::with_capacity(args.len() + 1);
        key.push(self.preds.iter().position(|p| p == predicate)? as u32);
        for a in args {
            key.push(self.objects.iter().position(|o| o == a)? as u32);
        }
        self.atoms.get(&key).map(AtomId)
    }

    /// How many atoms are interned; every [`AtomId`] is below this.
    pub fn num_atoms(&self) -> usize {
        self.atoms.len()
    }

    /// All objects (domain constants first), as declared.
    pub fn objects(&self) -> &[String] {
        &self.objects
    }

    /// The initial state.
    pub fn init(&self) -> &State {
        &self.init
    }

    /// Goal atoms that must hold.
    pub fn goal_pos(&self) -> &[AtomId] {
        &self.goal_pos
    }

    /// Goal atoms that must not hold.
    pub fn goal_neg(&self) -> &[AtomId] {
        &self.goal_neg
    }

    /// True if `s` satisfies the goal.
    pub fn is_goal(&self, s: &State) -> bool {
        self.goal_possible
            && self.goal_pos.iter().all(|&a| s.contains(a))
            && !self.goal_neg.iter().any(|&a| s.contains(a))
    }

    /// The ground actions: every instance whose preconditions are relaxed-reachable.
    pub fn actions(&self) -> &[GroundAction] {
        &self.actions
    }

    /// The index of the ground action `(name args...)`, if it was grounded (every action that
    /// is applicable in some reachable state is).
    pub fn find_action(&self, name: &str, args: &[String]) -> Option<usize> {
        self.actions
            .iter()
            .position(|a| a.name == name && a.args == args)
    }

    /// True if action `action` is applicable in `s`.
    pub fn is_applicable(&self, s: &State, action: usize) -> bool {
        let a = &self.actions[action];
        a.pre_pos.iter().all(|&p| s.contains(p)) && !a.pre_neg.iter().any(|&p| s.contains(p))
    }

    /// Indices of the actions applicable in `s`.
    pub fn applicable<'a>(&'a self, s: &'a State) -> impl Iterator<Item = usize> + 'a {
        (0..self.actions.len()).filter(move |&i| self.is_applicable(s, i))
    }

    /// The successor of `s` under action `action`: deletes first, then adds. Does not check
    /// applicability.
    pub fn apply(&self, s: &State, action: usize) -> State {
        let a = &self.actions[action];
        let mut next = s.clone();
        for &d in &a.del {
            next.remove(d);
        }
        for &p in &a.add {
            next.insert(p);
        }
        next
    }

    /// The atoms of `s` as strings like `(on a b)`.
    pub fn state_atoms(&self, s: &State) -> Vec<String> {
        s.iter().map(|a| self.atom_name(a)).collect()
    }

    /// The delete-relaxed fixed point from the initial state over the ground actions.
    pub fn relaxed_reachability(&self) -> Reachability {
        let n = self.atoms.len();
        let mut reached = vec![false; n];
        let mut queue: Vec<AtomId> = self.init.iter().collect();
        for &a in &queue {
            reached[a.0 as usize] = true;
        }
        let mut waiting: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut remaining: Vec<usize> = Vec::with_capacity(self.actions.len());
        let mut fired = vec![false; self.actions.len()];
        let mut ready = Vec::new();
        for (i, a) in self.actions.iter().enumerate() {
            remaining.push(a.pre_pos.len());
            for &p in &a.pre_pos {
                waiting[p.0 as usize].push(i as u32);
            }
            if a.pre_pos.is_empty() {
                ready.push(i);
            }
        }
        loop {
            while let Some(i) = ready.pop() {
                fired[i] = true;
                for &p in &self.actions[i].add {
                    if !reached[p.0 as usize] {
                        reached[p.0 as usize] = true;
                        queue.push(p);
                    }
                }
            }
            let Some(atom) = queue.pop() else { break };
            for &i in &waiting[atom.0 as usize] {
                let r = &mut remaining[i as usize];
                *r -= 1;
                if *r == 0 {
                    ready.push(i as usize);
                }
            }
        }
        let mut deletable = vec![false; n];
        for (i, a) in self.actions.iter().enumerate() {
            if fired[i] {
                for &d in &a.del {
                    deletable[d.0 as usize] = true;
                }
            }
        }
        let mut live = vec![false; self.schemas.len()];
        for (i, a) in self.actions.iter().enumerate() {
            if fired[i] {
                live[a.schema] = true;
            }
        }
        Reachability {
            unreachable_goals: self
                .goal_pos
                .iter()
                .copied()
                .filter(|a| !reached[a.0 as usize])
                .collect(),
            undeletable_goals: self
                .goal_neg
                .iter()
                .copied()
                .filter(|a| self.init.contains(*a) && !deletable[a.0 as usize])
                .collect(),
            dead_schemas: self
                .schemas
                .iter()
                .zip(&live)
                .filter(|(_, &l)| !l)
                .map(|(s, _)| s.clone())
                .collect(),
            goal_possible: self.goal_possible,
            reached,
        }
    }
}

/// Indexes of relaxed-reachable atoms for the join.
struct Reached {
    flag: Vec<bool>,
    by_pred: Vec<Vec<u32>>,
    /// (predicate, argument position, object) → atoms.
    by_arg: FxHashMap<(u32, u32, u32), Vec<u32>>,
}

impl Reached {
    fn add(&mut self, id: u32, key: &[u32]) -> bool {
        if self.flag.len() <= id as usize {
            self.flag.resize(id as usize + 1, false);
        }
        if self.flag[id as usize] {
            return false;
        }
        self.flag[id as usize] = true;
        self.by_pred[key[0] as usize].push(id);
        for (pos, &o) in key[1..].iter().enumerate() {
            self.by_arg
                .entry((key[0], pos as u32, o))
                .or_default()
                .push(id);
        }
        true
    }

    fn contains(&self, id: u32) -> bool {
        self.flag.get(id as usize).copied().unwrap_or(false)
    }
}

const UNBOUND: u32 = u32::MAX;

/// One schema's join over the reached atoms, collecting complete bindings.
struct Join<'a> {
    world: &'a World<'a>,
    schema: &'a CAction,
    /// Positive preconditions (indices into `schema.pre`) in join order.
    order: &'a [usize],
    reached: &'a Reached,
    atoms: &'a Interner,
    binding: Vec<u32>,
    found: Vec<Box<[u32]>>,
    steps: &'a mut u64,
}

impl Join<'_> {
    fn tick(&mut self) -> Result<(), GroundError> {
        *self.steps += 1;
        if *self.steps > MAX_JOIN_STEPS {
            return Err(GroundError::TooLarge {
                limit: format!("{MAX_JOIN_STEPS} join steps"),
            });
        }
        Ok(())
    }

    fn fits(&self, var: usize, obj: u32) -> bool {
        self.world.types.is_subtype(
            self.world.object_type[obj as usize],
            self.schema.params[var],
        )
    }

    fn join(&mut self, k: usize) -> Result<(), GroundError> {
        self.tick()?;
        let Some(&pi) = self.order.get(k) else {
            return self.free(0);
        };
        let atom = &self.schema.pre[pi].1;
        // Candidates: the shortest index list among bound positions, else all atoms of the predicate.
        let mut cands: &[u32] = &self.reached.by_pred[atom.pred as usize];
        let mut narrowed = false;
        for (pos, arg) in atom.args.iter().enumerate() {
            let obj = resolve_partial(*arg, &self.binding);
            if obj != UNBOUND {
                let list = self
                    .reached
                    .by_arg
                    .get(&(atom.pred, pos as u32, obj))
                    .map_or(&[][..], |v| v.as_slice());
                if !narrowed || list.len() < cands.len() {
                    cands = list;
                    narrowed = true;
                }
            }
        }
        let mut newly = Vec::with_capacity(atom.args.len());
        for &id in cands {
            self.tick()?;
            let key = self.atoms.key(id);
            newly.clear();
            let mut ok = true;
            for (pos, arg) in atom.args.iter().enumerate() {
                let o = key[pos + 1];
                match *arg {
                    Arg::Obj(c) => ok = c == o,
                    Arg::Var(v) => {
                        if self.binding[v] == UNBOUND {
                            if self.fits(v, o) {
                                self.binding[v] = o;
                                newly.push(v);
                            } else {
                                ok = false;
                            }
                        } else {
                            ok = self.binding[v] == o;
                        }
                    }
                }
                if !ok {
                    break;
                }
            }
            if ok {
                self.join(k + 1)?;
            }
            for &v in &newly {
                self.binding[v] = UNBOUND;
            }
        }
        Ok(())
    }

    /// Binds the parameters no positive precondition mentions, over their type's objects.
    fn free(&mut self, from: usize) -> Result<(), GroundError> {
        let Some(v) = (from..self.binding.len()).find(|&v| self.binding[v] == UNBOUND) else {
            let eq_ok = self.schema.eq.iter().all(|&(pos, a, b)| {
                (resolve(a, &self.binding) == resolve(b, &self.binding)) == pos
            });
            if eq_ok {
                if self.found.len() >= MAX_GROUND_ACTIONS {
                    return Err(GroundError::TooLarge {
                        limit: format!("{MAX_GROUND_ACTIONS} ground actions"),
                    });
                }
                self.found.push(self.binding.clone().into_boxed_slice());
            }
            return Ok(());
        };
        let ty = self.schema.params[v] as usize;
        for i in 0..self.world.objects_of_type[ty].len() {
            self.tick()?;
            self.binding[v] = self.world.objects_of_type[ty][i];
            self.free(v + 1)?;
        }
        self.binding[v] = UNBOUND;
        Ok(())
    }
}

fn resolve_partial(arg: Arg, binding: &[u32]) -> u32 {
    match arg {
        Arg::Var(i) => binding[i],
        Arg::Obj(o) => o,
    }
}

/// A static join order: at each step the precondition with the most already-bound arguments,
/// static predicates (usually type predicates, which filter hardest) before fluent ones, then
/// the one with fewest arguments.
fn join_order(schema: &CAction, fluent: &[bool]) -> Vec<usize> {
    let mut todo: Vec<usize> = (0..schema.pre.len()).filter(|&i| schema.pre[i].0).collect();
    let mut bound = vec![false; schema.params.len()];
    let mut order = Vec::with_capacity(todo.len());
    while !todo.is_empty() {
        let score = |i: usize| {
            let a = &schema.pre[i].1;
            let b = a
                .args
                .iter()
                .filter(|x| matches!(x, Arg::Obj(_)) || matches!(x, Arg::Var(v) if bound[*v]))
                .count();
            (b, !fluent[a.pred as usize], usize::MAX - a.args.len())
        };
        let (pos, &best) = todo
            .iter()
            .enumerate()
            .max_by_key(|&(_, &i)| score(i))
            .expect("non-empty");
        todo.swap_remove(pos);
        for a in &schema.pre[best].1.args {
            if let Arg::Var(v) = a {
                bound[*v] = true;
            }
        }
        order.push(best);
    }
    order
}

/// Grounds `problem` over `domain` (see the module docs for the method).
pub fn ground(domain: &Domain, problem: &Problem) -> Result<GroundTask, GroundError> {
    let world = World::new(domain, problem)?;
    if domain
        .actions
        .iter()
        .any(|a| a.params.len() > 64 || a.precondition.len() > 512)
    {
        return Err(GroundError::TooLarge {
            limit: "64 parameters or 512 preconditions in one action".into(),
        });
    }
    let mut fluent = vec![false; world.preds.len()];
    for a in &world.actions {
        for e in a.add.iter().chain(&a.del) {
            fluent[e.pred as usize] = true;
        }
    }
    let mut atoms = Interner::default();
    let mut reached = Reached {
        flag: Vec::new(),
        by_pred: vec![Vec::new(); world.preds.len()],
        by_arg: FxHashMap::default(),
    };
    let mut key = Vec::new();
    let mut init_ids = Vec::with_capacity(problem.init.len());
    for a in &problem.init {
        let pred = world.ground_atom(a, &mut key)?;
        key.insert(0, pred);
        let (id, _) = atoms.intern(&key);
        reached.add(id, &key);
        init_ids.push(id);
    }
    let orders: Vec<Vec<usize>> = world
        .actions
        .iter()
        .map(|a| join_order(a, &fluent))
        .collect();
    // Bindings already instantiated, per schema: the fixed point re-finds them every round.
    let mut seen: Vec<FxHashSet<Box<[u32]>>> = vec![FxHashSet::default(); world.actions.len()];
    let mut actions: Vec<GroundAction> = Vec::new();
    let mut steps = 0u64;
    loop {
        let mut changed = false;
        for (si, schema) in world.actions.iter().enumerate() {
            let found = {
                let mut j = Join {
                    world: &world,
                    schema,
                    order: &orders[si],
                    reached: &reached,
                    atoms: &atoms,
                    binding: vec![UNBOUND; schema.params.len()],
                    found: Vec::new(),
                    steps: &mut steps,
                };
                j.join(0)?;
                j.found
            };
            'binding: for b in found {
                if seen[si].contains(&b) {
                    continue;
                }
                let mut ga = GroundAction {
                    name: domain.actions[si].name.clone(),
                    schema: si,
                    args: b
                        .iter()
                        .map(|&o| world.objects[o as usize].to_string())
                        .collect(),
                    pre_pos: Vec::new(),
                    pre_neg: Vec::new(),
                    add: Vec::new(),
                    del: Vec::new(),
                };
                for (pos, atom) in &schema.pre {
                    instantiate(atom, &b, &mut key);
                    if fluent[atom.pred as usize] {
                        let (id, _) = atoms.intern(&key);
                        if *pos {
                            ga.pre_pos.push(AtomId(id))
                        } else {
                            ga.pre_neg.push(AtomId(id))
                        }
                    } else if !*pos && atoms.get(&key).is_some_and(|id| reached.contains(id)) {
                        continue 'binding; // a static atom that holds, required false
                    }
                }
                for atom in &schema.del {
                    instantiate(atom, &b, &mut key);
                    ga.del.push(AtomId(atoms.intern(&key).0));
                }
                for atom in &schema.add {
                    instantiate(atom, &b, &mut key);
                    let (id, _) = atoms.intern(&key);
                    ga.add.push(AtomId(id));
                    changed |= reached.add(id, &key);
                }
                seen[si].insert(b);
                actions.push(ga);
                if actions.len() > MAX_GROUND_ACTIONS {
                    return Err(GroundError::TooLarge {
                        limit: format!("{MAX_GROUND_ACTIONS} ground actions"),
                    });
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut goal_pos = Vec::new();
    let mut goal_neg = Vec::new();
    let mut goal_possible = true;
    for l in &problem.goal {
        if l.atom.is_equality() {
            let (a, b) = world.equality(&l.atom)?;
            goal_possible &= (a == b) == l.positive;
            continue;
        }
        let pred = world.ground_atom(&l.atom, &mut key)?;
        key.insert(0, pred);
        let id = AtomId(atoms.intern(&key).0);
        if l.positive {
            goal_pos.push(id)
        } else {
            goal_neg.push(id)
        }
    }
    let mut init = State::empty(atoms.len());
    for id in init_ids {
        init.insert(AtomId(id));
    }
    Ok(GroundTask {
        objects: world.objects.iter().map(|s| s.to_string()).collect(),
        preds: world.preds.iter().map(|s| s.to_string()).collect(),
        schemas: domain.actions.iter().map(|a| a.name.clone()).collect(),
        atoms,
        init,
        goal_pos,
        goal_neg,
        goal_possible,
        actions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{parse_domain, parse_problem};

    const BW: &str = "(define (domain bw) (:types block)
  (:predicates (on ?x - block ?y - block) (ontable ?x - block) (clear ?x - block) (handempty) (holding ?x - block))
  (:action pick-up :parameters (?x - block) :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (ontable ?x)) (not (clear ?x)) (not (handempty))))
  (:action put-down :parameters (?x - block) :precondition (holding ?x)
    :effect (and (ontable ?x) (clear ?x) (handempty) (not (holding ?x))))
  (:action stack :parameters (?x ?y - block) :precondition (and (holding ?x) (clear ?y) (not (= ?x ?y)))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
  (:action unstack :parameters (?x ?y - block) :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (on ?x ?y)) (not (clear ?x)) (not (handempty)))))";

    fn task(domain: &str, problem: &str) -> GroundTask {
        ground(
            &parse_domain(domain).unwrap(),
            &parse_problem(problem).unwrap(),
        )
        .unwrap()
    }

    fn bw3() -> GroundTask {
        task(BW, "(define (problem p) (:domain bw) (:objects a b c - block)
            (:init (clear a) (on a b) (ontable b) (clear c) (ontable c) (handempty)) (:goal (and (on c a) (on a b))))")
    }

    #[test]
    fn grounds_blocksworld_with_equality_pruning() {
        let t = bw3();
        let count = |n: &str| t.actions().iter().filter(|a| a.name == n).count();
        // 3 pick-up, 3 put-down, 6 stack (x ≠ y), 6 unstack (every (on x y) with x ≠ y is reachable).
        assert_eq!(
            (
                count("pick-up"),
                count("put-down"),
                count("stack"),
                count("unstack")
            ),
            (3, 3, 6, 6)
        );
        assert!(t
            .actions()
            .iter()
            .all(|a| a.name != "stack" || a.args[0] != a.args[1]));
        let names: Vec<String> = t.state_atoms(t.init());
        assert_eq!(names.len(), 6);
        assert!(names.contains(&"(on a b)".to_string()));
        assert!(!t.is_goal(t.init()));
    }

    #[test]
    fn simulation_applies_deletes_then_adds() {
        let t = bw3();
        let find = |s: &str| t.actions().iter().position(|a| a.to_string() == s).unwrap();
        assert_eq!(
            t.find_action("stack", &["c".into(), "a".into()]),
            Some(find("(stack c a)"))
        );
        assert_eq!(t.find_action("stack", &["c".into(), "c".into()]), None);
        let s0 = t.init().clone();
        let app: Vec<String> = t
            .applicable(&s0)
            .map(|i| t.actions()[i].to_string())
            .collect();
        assert_eq!(app.len(), 2, "{app:?}"); // pick-up c, unstack a b
        let s1 = t.apply(&s0, find("(pick-up c)"));
        assert!(s1.contains(t.atom_id("holding", &["c"]).unwrap()));
        assert!(!s1.contains(t.atom_id("handempty", &[]).unwrap()));
        let s2 = t.apply(&s1, find("(stack c a)"));
        assert!(t.is_goal(&s2));
        assert_eq!(s2.len(), 5);

        // An action that deletes and adds the same atom leaves it true.
        let t = task(
            "(define (domain d) (:predicates (p) (q)) (:action a :parameters () :precondition (q) :effect (and (not (p)) (p))))",
            "(define (problem x) (:domain d) (:init (q)) (:goal (p)))",
        );
        let s = t.apply(t.init(), 0);
        assert!(t.is_goal(&s));
    }

    #[test]
    fn static_predicates_prune_and_compile_away() {
        let t = task(
            "(define (domain d) (:predicates (road ?a ?b) (at ?x) (closed ?a))
               (:action drive :parameters (?a ?b) :precondition (and (at ?a) (road ?a ?b) (not (closed ?b)))
                 :effect (and (at ?b) (not (at ?a)))))",
            "(define (problem x) (:domain d) (:objects l1 l2 l3 l4 l5)
               (:init (at l1) (road l1 l2) (road l2 l3) (road l1 l4) (closed l4) (road l4 l5)) (:goal (at l3)))",
        );
        let drives: Vec<String> = t.actions().iter().map(|a| a.to_string()).collect();
        // Only roads from reachable places to open places: l1→l2, l2→l3 (l4 is closed, so l5 is unreachable).
        assert_eq!(drives, ["(drive l1 l2)", "(drive l2 l3)"]);
        assert!(t
            .actions()
            .iter()
            .all(|a| a.pre_pos.len() == 1 && a.pre_neg.is_empty()));
        let r = t.relaxed_reachability();
        assert!(r.goal_reachable());
        assert!(r.is_reachable(t.atom_id("at", &["l3"]).unwrap()));
        assert!(t.atom_id("at", &["l5"]).is_none());
    }

    #[test]
    fn relaxed_reachability_names_unreachable_goals_and_dead_schemas() {
        let t = task(
            "(define (domain d) (:predicates (p ?x) (q ?x) (r ?x) (s))
               (:action pq :parameters (?x) :precondition (p ?x) :effect (q ?x))
               (:action rs :parameters (?x) :precondition (r ?x) :effect (s)))",
            "(define (problem x) (:domain d) (:objects a b) (:init (p a) (s)) (:goal (and (q a) (q b) (not (s)))))",
        );
        let r = t.relaxed_reachability();
        let names = |ids: &[AtomId]| ids.iter().map(|&i| t.atom_name(i)).collect::<Vec<_>>();
        assert_eq!(names(&r.unreachable_goals), ["(q b)"]);
        assert_eq!(names(&r.undeletable_goals), ["(s)"]);
        assert_eq!(r.dead_schemas, ["rs"]);
        assert!(!r.goal_reachable());
    }

    #[test]
    fn typed_objects_restrict_parameters_including_subtypes() {
        let t = task(
            "(define (domain d) (:types vehicle - object truck car - vehicle place)
               (:predicates (at ?v - vehicle ?p - place) (washed ?v - vehicle))
               (:action wash :parameters (?v - vehicle) :precondition () :effect (washed ?v)))",
            "(define (problem x) (:domain d) (:objects t1 - truck c1 - car p1 - place o) (:init) (:goal (washed t1)))",
        );
        let args: Vec<&str> = t.actions().iter().map(|a| a.args[0].as_str()).collect();
        assert_eq!(args, ["t1", "c1"]);
    }

    #[test]
    fn huge_groundings_are_refused() {
        let objs: Vec<String> = (0..40).map(|i| format!("o{i}")).collect();
        let e = ground(
            &parse_domain("(define (domain d) (:predicates (p ?a ?b ?c ?d ?e ?f)) (:action a :parameters (?a ?b ?c ?d ?e ?f) :effect (p ?a ?b ?c ?d ?e ?f)))").unwrap(),
            &parse_problem(&format!("(define (problem x) (:domain d) (:objects {}) (:init) (:goal (p o1 o1 o1 o1 o1 o1)))", objs.join(" "))).unwrap(),
        )
        .unwrap_err();
        assert!(matches!(e, GroundError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn hand_built_equalities_of_the_wrong_arity_are_errors() {
        let mut d = parse_domain(BW).unwrap();
        let mut p = parse_problem(
            "(define (problem x) (:domain bw) (:objects a - block) (:init) (:goal (= a a)))",
        )
        .unwrap();
        p.goal[0].atom.args.pop();
        assert!(matches!(
            ground(&d, &p),
            Err(GroundError::Arity {
                expected: 2,
                found: 1,
                ..
            })
        ));
        let diags = crate::check(&d, &p);
        assert!(
            diags
                .iter()
                .any(|x| x.message.contains("`=` takes 2 arguments")),
            "{diags:?}"
        );
        let plan = crate::parse_plan("").unwrap();
        assert!(!crate::validate(&d, &p, &plan).valid);
        let x = crate::Term {
            name: "?x".into(),
            span: Default::default(),
        };
        d.actions[2].precondition[2].atom.args.push(x);
        let a = p.goal[0].atom.args[0].clone();
        p.goal[0].atom.args.push(a);
        assert!(matches!(
            ground(&d, &p),
            Err(GroundError::Arity { found: 3, .. })
        ));
        let _ = crate::check(&d, &p);
    }

    #[test]
    fn ill_formed_tasks_are_errors_not_panics() {
        let d = parse_domain(BW).unwrap();
        let p = |s: &str| parse_problem(s).unwrap();
        let e = ground(&d, &p("(define (problem x) (:domain bw) (:objects a - block) (:init (clear z)) (:goal (clear a)))")).unwrap_err();
        assert!(
            matches!(e, GroundError::UnknownObject { ref name, .. } if name == "z"),
            "{e}"
        );
        let e = ground(&d, &p("(define (problem x) (:domain bw) (:objects a - block) (:init (clear a a)) (:goal (clear a)))")).unwrap_err();
        assert!(
            matches!(
                e,
                GroundError::Arity {
                    expected: 1,
                    found: 2,
                    ..
                }
            ),
            "{e}"
        );
        let e = ground(
            &d,
            &p("(define (problem x) (:domain bw) (:objects a - blk) (:init) (:goal (clear a)))"),
        )
        .unwrap_err();
        assert!(matches!(e, GroundError::UnknownType { .. }), "{e}");
        assert!(e.to_string().contains("line 1"), "{e}");
    }
}

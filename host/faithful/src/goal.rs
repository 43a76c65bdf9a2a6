//! Goal preservation: is the candidate goal, mapped into the reference's names, equivalent to
//! the reference goal in the reference model?
//!
//! Two goals are equivalent when the same reachable states satisfy them; a goal may leave out
//! facts its other facts imply (the top block of a stack is clear), so the test is semantic.
//! When the reference's reachable states fit under [`crate::Limits::max_states`] they are all
//! enumerated and the two goal-state sets compared (`Decision::Exact`). Otherwise each goal
//! literal the other goal does not state is decided on its own (`Decision::Closure`):
//!
//! - **implied**, when the invariants proved for the reference task (see
//!   [`crate::invariant`]) rule out every reachable state that satisfies the one goal and
//!   violates the literal, or a search exhausts them;
//! - **not implied**, when a search finds a reachable state that does (a witness);
//! - **undecided** otherwise, and then so is the goal ([`Decision::Undecided`]).
//!
//! Nothing is taken from the goal states a search happened to find: a closure under them
//! would add facts the goal does not imply (with 11 blocks, a bounded search that never
//! stacks one tower on the other "finds" that a tower's bottom block is on the table).
//!
//! Among several init-preserving object maps (symmetric blocks), the one that aligns the goals
//! is looked for by the same refinement search, pruned by the goal states in the pool: a map
//! must send every candidate goal literal to one that holds in every reference goal state
//! found, and back. That pruning only rejects (a pool state is a real reachable state), so it
//! is sound.

use std::collections::{HashMap, HashSet};

use onebrain_core::Decision;
use onebrain_pddl::{AtomId, GroundTask, Plan, State};

use crate::invariant::Invariants;
use crate::mapping::{object_maps, Budget, PredMap};
use crate::model::{Fact, GoalLit, Model};
use crate::search::{Found, Hadd};
use crate::work::Work;
use crate::Limits;

/// A goal literal compiled against the reference's ground task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ev {
    /// Decided without a state (static facts, atoms that can never hold).
    Const(bool),
    /// `positive` ⇔ the atom must hold.
    Atom(AtomId, bool),
}

impl Ev {
    fn negate(self) -> Ev {
        match self {
            Ev::Const(b) => Ev::Const(!b),
            Ev::Atom(a, pos) => Ev::Atom(a, !pos),
        }
    }
}

fn holds(ev: Ev, s: &State) -> bool {
    match ev {
        Ev::Const(b) => b,
        Ev::Atom(a, pos) => s.contains(a) == pos,
    }
}

fn sat(g: &[Ev], s: &State) -> bool {
    g.iter().all(|&e| holds(e, s))
}

/// The atom literals of `g` (constants dropped: callers check for `Const(false)` first).
fn atom_lits(g: &[Ev]) -> Vec<(AtomId, bool)> {
    let mut v: Vec<(AtomId, bool)> = g.iter().filter_map(|e| if let Ev::Atom(a, p) = *e { Some((a, p)) } else { None }).collect();
    v.sort();
    v.dedup();
    v
}

/// The reference model with its ground task and, where small enough, its reachable states.
pub(crate) struct Space<'a> {
    pub model: &'a Model,
    task: GroundTask,
    /// Reachable states: all of them if `complete`, else those found (the pool). Filled by
    /// [`Space::explore`], which a goal that is literally the reference's never needs.
    states: Vec<State>,
    pub complete: bool,
    max_states: usize,
    /// States a replayed plan passed through, for the pool.
    walked: Vec<State>,
    cache: HashMap<GoalLit, Ev>,
    init_set: HashSet<Fact>,
    max_search_nodes: usize,
    /// Built on first use: only goals that are not literally equal need them.
    invariants: Option<Invariants>,
    hadd: Option<Hadd>,
    /// Unreachability proofs tried, by target (symmetric object maps ask the same ones).
    proofs: HashMap<Vec<(AtomId, bool)>, bool>,
    /// The check's work meter.
    work: Work,
}

impl<'a> Space<'a> {
    pub fn new(model: &'a Model, task: GroundTask, limits: &Limits, work: Work) -> Space<'a> {
        Space {
            model,
            task,
            states: Vec::new(),
            complete: false,
            max_states: limits.max_states,
            walked: Vec::new(),
            cache: HashMap::new(),
            init_set: model.init.iter().cloned().collect(),
            max_search_nodes: limits.max_search_nodes,
            invariants: None,
            hadd: None,
            proofs: HashMap::new(),
            work,
        }
    }

    /// Enumerates the reachable states, up to the limit; once. When that is not all of them,
    /// the states a replayed plan passed through join the pool, at its end, where the likeliest
    /// witnesses are looked for first.
    fn explore(&mut self) {
        if self.states.is_empty() {
            (self.states, self.complete) = explore(&self.task, self.max_states, &self.work);
            if !self.complete {
                self.states.append(&mut self.walked);
            }
        }
    }

    /// Follows `plan` (reference actions and objects) from the initial state while its steps
    /// apply, and keeps the states it passes through: each one reachable, the last one the
    /// plan's goal state.
    pub fn walk(&mut self, plan: &Plan) {
        let mut s = self.task.init().clone();
        for step in &plan.steps {
            // Finding a ground action scans them all.
            if !self.work.charge(self.task.actions().len() as u64) {
                return;
            }
            let Some(a) = self.task.find_action(&step.action, &step.args) else { return };
            if !self.task.is_applicable(&s, a) {
                return;
            }
            s = self.task.apply(&s, a);
            self.walked.push(s.clone());
        }
    }

    /// Charges a scan of the pool: one unit per state.
    fn charge_scan(&self) -> bool {
        self.work.charge(self.states.len() as u64)
    }

    fn ev(&mut self, g: &GoalLit) -> Ev {
        if let Some(&e) = self.cache.get(g) {
            return e;
        }
        let p = &self.model.preds[g.fact.pred as usize];
        let e = if p.is_type || !p.fluent {
            Ev::Const(self.init_set.contains(&g.fact) == g.positive)
        } else {
            let args: Vec<&str> = g.fact.args.iter().map(|&o| self.model.objects[o as usize].as_str()).collect();
            match self.task.atom_id(&p.name, &args) {
                Some(id) => Ev::Atom(id, g.positive),
                // Every atom that can ever hold is interned: this one never does.
                None => Ev::Const(!g.positive),
            }
        };
        self.cache.insert(g.clone(), e);
        e
    }

    fn compile(&mut self, goal: &[GoalLit]) -> Vec<Ev> {
        goal.iter().map(|g| self.ev(g)).collect()
    }

    /// The reference task's proved invariants, built on first use.
    fn invariants(&mut self) -> &Invariants {
        if self.invariants.is_none() {
            self.invariants = Some(Invariants::new(self.model, &self.task, self.work.clone()));
        }
        self.invariants.as_ref().expect("just built")
    }

    /// A reachable state satisfying `g`: from the pool, or by a search of at most
    /// `max_nodes` expansions (whose find joins the pool, so later closures and searches see it).
    fn find(&mut self, g: &[Ev], max_nodes: usize) -> Found {
        if !self.charge_scan() {
            return Found::Limit;
        }
        if let Some(s) = self.states.iter().rev().find(|s| sat(g, s)) {
            return Found::State(s.clone());
        }
        if self.complete || g.contains(&Ev::Const(false)) {
            return Found::Exhausted;
        }
        self.search(&atom_lits(g), max_nodes)
    }

    /// The bounded search for a state with every literal of `lits`.
    fn search(&mut self, lits: &[(AtomId, bool)], max_nodes: usize) -> Found {
        if self.hadd.is_none() {
            self.work.charge(self.task.actions().len() as u64);
            self.hadd = Some(Hadd::new(&self.task));
        }
        let pos: Vec<AtomId> = lits.iter().filter(|l| l.1).map(|l| l.0).collect();
        let neg: Vec<AtomId> = lits.iter().filter(|l| !l.1).map(|l| l.0).collect();
        let found = self.hadd.as_ref().expect("just built").find(&self.task, &pos, &neg, max_nodes, &self.work);
        if let Found::State(s) = &found {
            self.states.push(s.clone());
        }
        found
    }
}

/// Breadth-first enumeration of reachable states, up to `max` of them; incomplete too when
/// `work` runs out first.
fn explore(task: &GroundTask, max: usize, work: &Work) -> (Vec<State>, bool) {
    let mut seen: HashSet<State> = HashSet::new();
    let mut states = vec![task.init().clone()];
    seen.insert(task.init().clone());
    // Expanding a state scans every ground action; each successor is hashed, a word per 64 atoms.
    let (scan, succ) = (task.actions().len() as u64, 1 + task.num_atoms() as u64 / 64);
    let mut i = 0;
    while i < states.len() {
        let s = states[i].clone();
        let applicable = task.applicable(&s).collect::<Vec<_>>();
        if !work.charge(scan + succ * applicable.len() as u64) {
            return (states, false);
        }
        for a in applicable {
            let t = task.apply(&s, a);
            if !seen.contains(&t) {
                if states.len() >= max {
                    return (states, false);
                }
                seen.insert(t.clone());
                states.push(t);
            }
        }
        i += 1;
    }
    (states, true)
}

/// Facts true in every goal state of the pool (`all`), and in some (`any`).
struct Closure {
    all: Vec<bool>,
    any: Vec<bool>,
    /// No goal state in the pool: everything is (vacuously) implied.
    empty: bool,
}

impl Closure {
    fn of(space: &Space, g: &[Ev]) -> Closure {
        let n = space.task.num_atoms();
        let mut c = Closure { all: vec![true; n], any: vec![false; n], empty: true };
        // Only pruning rests on a closure, so it is always completed; its cost is still counted.
        space.charge_scan();
        for s in space.states.iter().filter(|s| sat(g, s)) {
            space.work.charge(n as u64);
            c.empty = false;
            for (i, (all, any)) in c.all.iter_mut().zip(c.any.iter_mut()).enumerate() {
                let h = s.contains(AtomId(i as u32));
                *all &= h;
                *any |= h;
            }
        }
        c
    }

    fn implies(&self, e: Ev) -> bool {
        match e {
            Ev::Const(b) => b,
            _ if self.empty => true,
            Ev::Atom(a, true) => self.all[a.0 as usize],
            Ev::Atom(a, false) => !self.any[a.0 as usize],
        }
    }
}

/// The outcome of the goal test.
#[derive(Clone, Debug)]
pub(crate) struct GoalVerdict {
    pub preserved: bool,
    /// The candidate goal is strictly weaker (more states satisfy it).
    pub weaker: bool,
    pub decision: Decision,
    /// The object map chosen (candidate → reference).
    pub objects: Vec<u32>,
    pub explanation: Vec<String>,
}

/// The candidate goal in reference names under (`pm`, `f`); `Err` names a literal that has no
/// image (its predicate has no counterpart).
pub(crate) fn map_goal(cand: &Model, pm: &PredMap, f: &[u32]) -> Result<Vec<GoalLit>, String> {
    let mut out = Vec::with_capacity(cand.goal.len());
    for g in &cand.goal {
        let fact = pm.map_fact(&g.fact, f).ok_or_else(|| cand.goal_name(g))?;
        out.push(GoalLit { positive: g.positive, fact });
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Outcome of one implication test "does `from` imply literal `l`?".
enum Implied {
    /// Yes; `closure` when it took the invariants or a search rather than the literal goal
    /// or the enumerated state space.
    Yes { closure: bool },
    /// No: a reachable state satisfies `from` and violates `l`.
    No,
    /// Neither proved nor refuted within the bounds.
    Unknown,
}

/// Outcome of one equivalence test.
enum Equiv {
    Yes { closure: bool },
    No,
    /// Why it is undecided, in words.
    Unknown(String),
}

/// Decides goal preservation. `m0` is an init-preserving object map under `pm`; `pins`
/// are object pairs every map must keep (domain constants when the domain is the reference's).
pub(crate) fn compare(
    space: &mut Space,
    cand: &Model,
    pm: &PredMap,
    m0: &[u32],
    pins: &[(u32, u32)],
    limits: &Limits,
    budget: &mut Budget,
) -> GoalVerdict {
    let reference = space.model;
    let mut verdict =
        GoalVerdict { preserved: false, weaker: false, decision: Decision::Exact, objects: m0.to_vec(), explanation: Vec::new() };
    let g0 = match map_goal(cand, pm, m0) {
        Ok(g) => g,
        Err(lit) => {
            verdict.explanation.push(format!("candidate goal literal {lit} uses a predicate with no counterpart in the reference"));
            return verdict;
        }
    };
    if cand.goal_impossible != reference.goal_impossible {
        verdict.explanation.push(if cand.goal_impossible {
            "the candidate goal can never hold (a false equality or negated type)".to_string()
        } else {
            "the reference goal can never hold".to_string()
        });
        return verdict;
    }
    let n = cand.objects.len();
    let ident: Vec<u32> = (0..n as u32).collect();
    let init_a: Vec<Fact> = cand.init.iter().map(|f| pm.map_fact(f, &ident).expect("init predicates are mapped")).collect();

    // 1. The same goal, literally, under some init-preserving map.
    let np = reference.preds.len() as u32;
    let tag = |g: &GoalLit| Fact { pred: g.fact.pred + if g.positive { np } else { 2 * np }, args: g.fact.args.clone() };
    let cand_goal_a = map_goal(cand, pm, &ident).expect("checked above");
    let mut fa = init_a.clone();
    fa.extend(cand_goal_a.iter().map(tag));
    let mut fb = reference.init.clone();
    fb.extend(reference.goal.iter().map(tag));
    if let Some(f) = object_maps(n, &fa, &fb, pins, &mut |_| true, 1, budget).into_iter().next() {
        verdict.preserved = true;
        verdict.objects = f;
        return verdict;
    }
    if budget.exhausted() {
        verdict.decision = Decision::Undecided;
        verdict.explanation.extend(alignment_note(budget));
        return verdict;
    }

    // 2. Semantic comparison over the reachable states, in two rounds. First every candidate
    // map is decided by proofs alone (cheap); only when none is proved equivalent does a
    // second round search for witnesses, so that a right map found by proof spares the
    // searches that would refute the wrong ones.
    space.explore();
    let er = space.compile(&reference.goal);
    let e0 = space.compile(&g0);
    let mut undecided: Option<String> = None;
    let mut refuted: HashSet<Vec<u32>> = HashSet::new();
    let mut maps = aligned_maps(space, cand, pm, m0, pins, &init_a, &er, &e0, limits.max_mappings, budget);
    for search in [false, true] {
        if search && !space.complete && maps.len() > 1 {
            // Several maps compete: put a goal state of each goal in the pool, so that the
            // pruning says something. Only pruning rests on it, so a tenth of the search
            // budget will do.
            let nodes = space.max_search_nodes / 10;
            let _ = space.find(&er, nodes);
            let _ = space.find(&e0, nodes);
            maps = aligned_maps(space, cand, pm, m0, pins, &init_a, &er, &e0, limits.max_mappings, budget);
        }
        for f in &maps {
            if refuted.contains(f) {
                continue;
            }
            let g = map_goal(cand, pm, f).expect("checked above");
            match equivalent(space, &g, search) {
                Equiv::Yes { closure } => {
                    verdict.preserved = true;
                    verdict.objects = f.clone();
                    if closure {
                        verdict.decision = Decision::Closure;
                    }
                    return verdict;
                }
                Equiv::No => {
                    refuted.insert(f.clone());
                }
                Equiv::Unknown(why) if search => {
                    undecided.get_or_insert(why);
                }
                Equiv::Unknown(_) => {}
            }
        }
    }
    if budget.exhausted() {
        verdict.decision = Decision::Undecided;
        verdict.explanation.extend(alignment_note(budget));
        return verdict;
    }
    if let Some(why) = undecided {
        verdict.decision = Decision::Undecided;
        verdict.explanation.push(why);
        return verdict;
    }
    let cl_r = Closure::of(space, &er);

    // 3. Not equivalent under any map tried: is it weaker under some map? Only the first
    // condition prunes now.
    let weaker_maps = {
        let cand_goal = &cand.goal;
        let mut accept = |partial: &[Option<u32>]| -> bool {
            cand_goal.iter().all(|g| match pm.map_fact_partial(&g.fact, partial) {
                Some(fact) => cl_r.implies(space.ev(&GoalLit { positive: g.positive, fact })),
                None => true,
            })
        };
        object_maps(n, &init_a, &reference.init, pins, &mut accept, limits.max_mappings, budget)
    };
    let mut chosen = m0.to_vec();
    for f in &weaker_maps {
        let g = map_goal(cand, pm, f).expect("checked above");
        let er = space.compile(&reference.goal);
        // Proofs only: the choice of map shapes the explanation, not the verdict.
        if g.iter().all(|l| matches!(implies(space, &er, &reference.goal, l, false), Implied::Yes { .. })) {
            verdict.weaker = true;
            chosen = f.clone();
            break;
        }
    }
    verdict.objects = chosen.clone();
    let g = map_goal(cand, pm, &chosen).expect("checked above");
    let eg = space.compile(&g);
    for r in &reference.goal {
        if let Implied::No = implies(space, &eg, &g, r, true) {
            verdict.explanation.push(format!(
                "reference goal fact {} is not implied by the candidate goal (dropped or changed)",
                reference.goal_name(r)
            ));
        }
    }
    if !verdict.weaker {
        let er = space.compile(&reference.goal);
        for (l, c) in g.iter().zip(&cand.goal_sorted_by_image(pm, &chosen)) {
            if let Implied::No = implies(space, &er, &reference.goal, l, true) {
                verdict.explanation.push(format!(
                    "candidate goal fact {} (reference {}) is not implied by the reference goal",
                    cand.goal_name(c),
                    reference.goal_name(l)
                ));
            }
        }
    }
    if verdict.explanation.is_empty() {
        verdict.explanation.push("the goals are not equivalent under any object mapping tried".into());
    }
    if !space.complete {
        verdict.decision = Decision::Closure;
    }
    verdict
}

/// Why the goal alignment stopped, when its node limit did it (the work budget has its line
/// at the top of the report).
fn alignment_note(budget: &Budget) -> Option<String> {
    (budget.nodes > budget.limit).then(|| format!("undecided: the goal-alignment search exceeded {} nodes", budget.limit))
}

/// Object maps (up to `max`) that preserve the init and send each goal into the other's
/// closure over the pool's goal states: a map under which some candidate goal literal fails
/// in a reference goal state of the pool (or the reverse) cannot make the goals equivalent.
#[allow(clippy::too_many_arguments)]
fn aligned_maps(
    space: &mut Space,
    cand: &Model,
    pm: &PredMap,
    m0: &[u32],
    pins: &[(u32, u32)],
    init_a: &[Fact],
    er: &[Ev],
    e0: &[Ev],
    max: usize,
    budget: &mut Budget,
) -> Vec<Vec<u32>> {
    let reference = space.model;
    let n = cand.objects.len();
    let cl_r = Closure::of(space, er);
    let cl_0 = Closure::of(space, e0);
    let mut accept = |partial: &[Option<u32>]| -> bool {
        for g in &cand.goal {
            if let Some(fact) = pm.map_fact_partial(&g.fact, partial) {
                if !cl_r.implies(space.ev(&GoalLit { positive: g.positive, fact })) {
                    return false;
                }
            }
        }
        let mut inv = vec![None; n];
        for (a, b) in partial.iter().enumerate() {
            if let Some(b) = b {
                inv[*b as usize] = Some(m0[a]);
            }
        }
        for g in &reference.goal {
            let args: Option<Box<[u32]>> = g.fact.args.iter().map(|&o| inv[o as usize]).collect();
            if let Some(args) = args {
                let l = GoalLit { positive: g.positive, fact: Fact { pred: g.fact.pred, args } };
                if !cl_0.implies(space.ev(&l)) {
                    return false;
                }
            }
        }
        true
    };
    object_maps(n, init_a, &reference.init, pins, &mut accept, max, budget)
}

/// Is `g` (reference names) equivalent to the reference goal? Without `search`, only what
/// the invariants prove or the pool shows is decided.
fn equivalent(space: &mut Space, g: &[GoalLit], search: bool) -> Equiv {
    let reference = space.model;
    let er = space.compile(&reference.goal);
    let eg = space.compile(g);
    if space.complete {
        // Every reachable state is in hand: the comparison decides, whatever the budget.
        space.charge_scan();
        let same = space.states.iter().all(|s| sat(&er, s) == sat(&eg, s));
        return if same { Equiv::Yes { closure: false } } else { Equiv::No };
    }
    let mut closure = false;
    let mut unknown: Option<String> = None;
    let limit = space.max_search_nodes;
    for l in g {
        match implies(space, &er, &reference.goal, l, search) {
            Implied::Yes { closure: c } => closure |= c,
            Implied::No => return Equiv::No,
            Implied::Unknown => {
                unknown.get_or_insert_with(|| {
                    format!(
                        "undecided: within {limit} search nodes, neither a proof nor a counterexample that the reference goal implies the candidate's goal fact {} (in reference names)",
                        reference.goal_name(l)
                    )
                });
            }
        }
    }
    for r in &reference.goal {
        match implies(space, &eg, g, r, search) {
            Implied::Yes { closure: c } => closure |= c,
            Implied::No => return Equiv::No,
            Implied::Unknown => {
                unknown.get_or_insert_with(|| {
                    format!(
                        "undecided: within {limit} search nodes, neither a proof nor a counterexample that the candidate goal implies reference goal fact {}",
                        reference.goal_name(r)
                    )
                });
            }
        }
    }
    match unknown {
        Some(why) => Equiv::Unknown(why),
        None => Equiv::Yes { closure },
    }
}

/// Does every reachable state satisfying `from` (compiled `ev`, literals `lits`) satisfy `l`?
/// Without `search`, `Unknown` where a search would be needed.
fn implies(space: &mut Space, ev: &[Ev], lits: &[GoalLit], l: &GoalLit, search: bool) -> Implied {
    if lits.contains(l) {
        return Implied::Yes { closure: false };
    }
    let mut target = ev.to_vec();
    target.push(space.ev(l).negate());
    if target.contains(&Ev::Const(false)) {
        return Implied::Yes { closure: false };
    }
    if space.complete {
        return match space.find(&target, 0) {
            Found::State(_) => Implied::No,
            Found::Exhausted => Implied::Yes { closure: false },
            // The work budget ran out before the scan: nothing is known.
            Found::Limit => Implied::Unknown,
        };
    }
    let lits = atom_lits(&target);
    let n = space.task.num_atoms();
    space.invariants();
    let inv = space.invariants.as_ref().expect("built above");
    let proved = match space.proofs.get(&lits) {
        Some(&p) => p,
        None => {
            let p = inv.unreachable(&space.task, &lits);
            space.proofs.insert(lits.clone(), p);
            p
        }
    };
    if proved {
        return Implied::Yes { closure: true };
    }
    let guided = inv.consequences(n, &lits).unwrap_or(lits);
    // A witness already in the pool settles it at once; the states searches found are at
    // its end and the likeliest, so it is scanned from there.
    if !space.charge_scan() {
        return Implied::Unknown;
    }
    if space.states.iter().rev().any(|s| sat(&target, s)) {
        return Implied::No;
    }
    if !search {
        return Implied::Unknown;
    }
    // Search for a witness, told what the target implies: adding implied literals loses no
    // witness and guides the heuristic to a full description of one.
    match space.search(&guided, space.max_search_nodes) {
        Found::State(_) => Implied::No,
        Found::Exhausted => Implied::Yes { closure: true },
        Found::Limit => Implied::Unknown,
    }
}

impl Model {
    /// The candidate's goal literals in the order of their images under (`pm`, `f`), so they
    /// zip with [`map_goal`]'s output.
    fn goal_sorted_by_image(&self, pm: &PredMap, f: &[u32]) -> Vec<GoalLit> {
        let mut pairs: Vec<(GoalLit, GoalLit)> = self
            .goal
            .iter()
            .filter_map(|g| pm.map_fact(&g.fact, f).map(|fact| (GoalLit { positive: g.positive, fact }, g.clone())))
            .collect();
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        pairs.into_iter().map(|(_, g)| g).collect()
    }
}

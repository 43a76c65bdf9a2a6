//! A name-free view of one (domain, problem) pair: predicates, objects, facts and action
//! schemas as indices, with types turned into unary facts.
//!
//! Types become predicates because specs disagree on how to say them: PlanBench Logistics
//! writes `(TRUCK t0)` in the initial state, a typed Logistics writes `t0 - truck`. As unary
//! facts (with every ancestor type, and a parameter's type as a precondition) both say the
//! same thing, and the mapping search treats them alike. A static unary predicate that holds
//! for every object (the single type `block`) carries no information; it is dropped on both
//! sides so that typing an untyped domain is not a difference.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use onebrain_pddl::{Atom, Domain, Literal, Problem, OBJECT};

/// Why a parsed spec could not be read as a model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// An atom names a predicate that is not declared.
    #[error("unknown predicate `{0}` in {1}")]
    UnknownPredicate(String, String),
    /// An atom has the wrong number of arguments.
    #[error("predicate `{0}` takes {1} arguments, found {2} in {3}")]
    Arity(String, usize, usize, String),
    /// A ground atom names an object that is not declared.
    #[error("unknown object `{0}` in {1}")]
    UnknownObject(String, String),
    /// A schema atom names a variable that is not a parameter.
    #[error("`{0}` is not a parameter of action `{1}`")]
    UnknownVariable(String, String),
    /// A type that is not declared, or a cycle in the type hierarchy.
    #[error("bad type `{0}`: {1}")]
    BadType(String, String),
}

/// A predicate of the model: declared, or made from a type.
#[derive(Clone, Debug)]
pub(crate) struct Pred {
    /// The declared name, or the type's name for a type predicate.
    pub name: String,
    pub arity: usize,
    /// True when the predicate stands for a declared type.
    pub is_type: bool,
    /// True when some action adds or deletes it.
    pub fluent: bool,
    /// Static, unary and true of every object: dropped from facts and schemas.
    pub trivial: bool,
}

/// A ground atom by indices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Fact {
    pub pred: u32,
    pub args: Box<[u32]>,
}

/// A ground goal literal; equality goals are resolved when the model is built.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GoalLit {
    pub positive: bool,
    pub fact: Fact,
}

/// The role of a literal in an action schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Role {
    Pre,
    Add,
    Del,
}

impl Role {
    pub fn word(self) -> &'static str {
        match self {
            Role::Pre => "precondition",
            Role::Add => "add effect",
            Role::Del => "delete effect",
        }
    }
}

/// A schema argument: a parameter position or a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Arg {
    Param(u32),
    Const(u32),
}

/// A predicate in a schema literal: a model predicate, or equality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PredRef {
    Pred(u32),
    Eq,
}

/// One literal of an action schema.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SchemaLit {
    pub role: Role,
    pub positive: bool,
    pub pred: PredRef,
    pub args: Vec<Arg>,
}

/// An action schema.
#[derive(Clone, Debug)]
pub(crate) struct Schema {
    pub name: String,
    pub params: Vec<String>,
    /// Sorted and deduplicated.
    pub lits: Vec<SchemaLit>,
}

/// The model of one spec.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub preds: Vec<Pred>,
    pub objects: Vec<String>,
    /// True for domain constants.
    pub constant: Vec<bool>,
    /// Sorted, deduplicated, trivial predicates left out.
    pub init: Vec<Fact>,
    /// Sorted, deduplicated; literals over trivial predicates are left out (positive ones
    /// always hold; a negative one makes `goal_impossible`).
    pub goal: Vec<GoalLit>,
    /// An equality goal between distinct objects, or a negated trivial fact.
    pub goal_impossible: bool,
    pub actions: Vec<Schema>,
}

impl Model {
    /// Builds the model of `domain` + `problem`.
    pub fn new(domain: &Domain, problem: &Problem) -> Result<Model, ModelError> {
        let mut preds: Vec<Pred> = domain
            .predicates
            .iter()
            .map(|p| Pred { name: p.name.clone(), arity: p.params.len(), is_type: false, fluent: false, trivial: false })
            .collect();
        let mut pred_index: HashMap<&str, u32> = HashMap::new();
        for (i, p) in domain.predicates.iter().enumerate() {
            pred_index.entry(p.name.as_str()).or_insert(i as u32);
        }

        // Types: each declared type (not `object`) becomes a unary predicate.
        let mut parent: HashMap<&str, &str> = HashMap::new();
        for t in &domain.types {
            if t.name != OBJECT {
                parent.insert(t.name.as_str(), t.ty.as_str());
            }
        }
        let mut type_pred: HashMap<&str, u32> = HashMap::new();
        for t in &domain.types {
            if t.name != OBJECT && !type_pred.contains_key(t.name.as_str()) {
                type_pred.insert(t.name.as_str(), preds.len() as u32);
                preds.push(Pred { name: t.name.clone(), arity: 1, is_type: true, fluent: false, trivial: false });
            }
        }
        let ancestors = |ty: &str| -> Result<Vec<u32>, ModelError> {
            let mut out = Vec::new();
            let mut cur = ty;
            while cur != OBJECT {
                let Some(&p) = type_pred.get(cur) else {
                    return Err(ModelError::BadType(cur.to_string(), "not declared".into()));
                };
                if out.contains(&p) || out.len() > type_pred.len() {
                    return Err(ModelError::BadType(cur.to_string(), "the hierarchy has a cycle".into()));
                }
                out.push(p);
                cur = parent.get(cur).copied().unwrap_or(OBJECT);
            }
            Ok(out)
        };

        let mut objects = Vec::new();
        let mut constant = Vec::new();
        let mut object_index: HashMap<&str, u32> = HashMap::new();
        let mut init: BTreeSet<Fact> = BTreeSet::new();
        for (o, is_const) in domain.constants.iter().map(|o| (o, true)).chain(problem.objects.iter().map(|o| (o, false))) {
            if object_index.contains_key(o.name.as_str()) {
                continue;
            }
            let idx = objects.len() as u32;
            object_index.insert(o.name.as_str(), idx);
            objects.push(o.name.clone());
            constant.push(is_const);
            for p in ancestors(&o.ty)? {
                init.insert(Fact { pred: p, args: Box::new([idx]) });
            }
        }

        let arities: Vec<usize> = preds.iter().map(|p| p.arity).collect();
        let mut fluent = vec![false; preds.len()];
        let ground = |a: &Atom, ctx: &str| -> Result<Fact, ModelError> {
            let &p = pred_index.get(a.predicate.as_str()).ok_or_else(|| ModelError::UnknownPredicate(a.predicate.clone(), ctx.into()))?;
            let arity = arities[p as usize];
            if a.args.len() != arity {
                return Err(ModelError::Arity(a.predicate.clone(), arity, a.args.len(), ctx.into()));
            }
            let args = a
                .args
                .iter()
                .map(|t| object_index.get(t.name.as_str()).copied().ok_or_else(|| ModelError::UnknownObject(t.name.clone(), ctx.into())))
                .collect::<Result<Vec<u32>, _>>()?;
            Ok(Fact { pred: p, args: args.into_boxed_slice() })
        };
        for a in &problem.init {
            if a.is_equality() {
                continue;
            }
            init.insert(ground(a, "the initial state")?);
        }

        // Action schemas.
        let mut actions = Vec::with_capacity(domain.actions.len());
        for a in &domain.actions {
            let params: Vec<String> = a.params.iter().map(|p| p.name.clone()).collect();
            let mut lits = BTreeSet::new();
            for (i, p) in a.params.iter().enumerate() {
                for tp in ancestors(&p.ty)? {
                    lits.insert(SchemaLit { role: Role::Pre, positive: true, pred: PredRef::Pred(tp), args: vec![Arg::Param(i as u32)] });
                }
            }
            let lit = |l: &Literal, role: Role| -> Result<SchemaLit, ModelError> {
                let pred = if l.atom.is_equality() {
                    PredRef::Eq
                } else {
                    let &p = pred_index
                        .get(l.atom.predicate.as_str())
                        .ok_or_else(|| ModelError::UnknownPredicate(l.atom.predicate.clone(), format!("action `{}`", a.name)))?;
                    let arity = arities[p as usize];
                    if l.atom.args.len() != arity {
                        return Err(ModelError::Arity(l.atom.predicate.clone(), arity, l.atom.args.len(), format!("action `{}`", a.name)));
                    }
                    PredRef::Pred(p)
                };
                let args = l
                    .atom
                    .args
                    .iter()
                    .map(|t| {
                        if t.is_variable() {
                            params
                                .iter()
                                .position(|p| *p == t.name)
                                .map(|i| Arg::Param(i as u32))
                                .ok_or_else(|| ModelError::UnknownVariable(t.name.clone(), a.name.clone()))
                        } else {
                            object_index
                                .get(t.name.as_str())
                                .map(|&o| Arg::Const(o))
                                .ok_or_else(|| ModelError::UnknownObject(t.name.clone(), format!("action `{}`", a.name)))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(SchemaLit { role, positive: l.positive, pred, args })
            };
            for l in &a.precondition {
                lits.insert(lit(l, Role::Pre)?);
            }
            for l in &a.effect {
                let role = if l.positive { Role::Add } else { Role::Del };
                let mut s = lit(l, role)?;
                s.positive = true;
                if let PredRef::Pred(p) = s.pred {
                    fluent[p as usize] = true;
                }
                lits.insert(s);
            }
            actions.push(Schema { name: a.name.clone(), params, lits: lits.into_iter().collect() });
        }

        // Goal: equalities are decided here.
        let mut goal = BTreeSet::new();
        let mut goal_impossible = false;
        for l in &problem.goal {
            if l.atom.is_equality() {
                let obj = |i: usize| {
                    l.atom.args.get(i).and_then(|t| object_index.get(t.name.as_str()).copied()).ok_or_else(|| {
                        ModelError::UnknownObject(l.atom.args.get(i).map_or(String::new(), |t| t.name.clone()), "the goal".into())
                    })
                };
                if (obj(0)? == obj(1)?) != l.positive {
                    goal_impossible = true;
                }
                continue;
            }
            goal.insert(GoalLit { positive: l.positive, fact: ground(&l.atom, "the goal")? });
        }

        for (p, f) in preds.iter_mut().zip(fluent) {
            p.fluent = f;
        }
        // Trivial predicates: static, unary, true of every object.
        let n = objects.len();
        for (p, pred) in preds.iter_mut().enumerate() {
            if pred.arity == 1 && !pred.fluent && n > 0 {
                let count = init.iter().filter(|f| f.pred == p as u32).count();
                pred.trivial = count == n;
            }
        }
        init.retain(|f| !preds[f.pred as usize].trivial);
        let mut kept = BTreeSet::new();
        for g in goal {
            if preds[g.fact.pred as usize].trivial {
                goal_impossible |= !g.positive;
            } else {
                kept.insert(g);
            }
        }
        for a in &mut actions {
            a.lits.retain(|l| !matches!(l.pred, PredRef::Pred(p) if preds[p as usize].trivial && l.role == Role::Pre && l.positive));
        }

        Ok(Model { preds, objects, constant, init: init.into_iter().collect(), goal: kept.into_iter().collect(), goal_impossible, actions })
    }

    /// Predicates used in the initial state.
    pub fn init_preds(&self) -> Vec<bool> {
        let mut used = vec![false; self.preds.len()];
        for f in &self.init {
            used[f.pred as usize] = true;
        }
        used
    }

    /// `(on a b)`.
    pub fn fact_name(&self, f: &Fact) -> String {
        let mut s = format!("({}", self.preds[f.pred as usize].name);
        for &a in f.args.iter() {
            s.push(' ');
            s.push_str(&self.objects[a as usize]);
        }
        s.push(')');
        s
    }

    /// `(on a b)` or `(not (on a b))`.
    pub fn goal_name(&self, g: &GoalLit) -> String {
        let f = self.fact_name(&g.fact);
        if g.positive {
            f
        } else {
            format!("(not {f})")
        }
    }

    /// A schema literal with the action's parameter names: `(clear ?y)`, `(not (= ?x ?y))`.
    pub fn lit_name(&self, action: &Schema, l: &SchemaLit) -> String {
        let mut s = match l.pred {
            PredRef::Pred(p) => format!("({}", self.preds[p as usize].name),
            PredRef::Eq => "(=".to_string(),
        };
        for a in &l.args {
            s.push(' ');
            match *a {
                Arg::Param(i) => s.push_str(&action.params[i as usize]),
                Arg::Const(o) => s.push_str(&self.objects[o as usize]),
            }
        }
        s.push(')');
        if l.positive {
            s
        } else {
            format!("(not {s})")
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_pddl::{parse_domain, parse_problem};

    fn model(d: &str, p: &str) -> Model {
        Model::new(&parse_domain(d).unwrap(), &parse_problem(p).unwrap()).unwrap()
    }

    #[test]
    fn types_become_unary_facts_and_preconditions() {
        let m = model(
            "(define (domain g) (:types ball room - object big - ball)
               (:predicates (at ?b - ball ?r - room))
               (:action move :parameters (?b - big ?from ?to - room) :precondition (at ?b ?from)
                 :effect (and (at ?b ?to) (not (at ?b ?from)))))",
            "(define (problem p) (:domain g) (:objects b1 - big b2 - ball r1 r2 - room) (:init (at b1 r1) (at b2 r1)) (:goal (at b1 r2)))",
        );
        let names: Vec<String> = m.init.iter().map(|f| m.fact_name(f)).collect();
        // Declared predicates first, then the types in declaration order.
        assert_eq!(names, ["(at b1 r1)", "(at b2 r1)", "(ball b1)", "(ball b2)", "(room r1)", "(room r2)", "(big b1)"]);
        let a = &m.actions[0];
        let lits: Vec<String> = a.lits.iter().map(|l| format!("{} {}", l.role, m.lit_name(a, l))).collect();
        assert!(lits.contains(&"precondition (big ?b)".to_string()), "{lits:?}");
        assert!(lits.contains(&"precondition (ball ?b)".to_string()), "{lits:?}");
        assert!(lits.contains(&"delete effect (at ?b ?from)".to_string()), "{lits:?}");
    }

    #[test]
    fn a_type_covering_every_object_is_dropped() {
        let m = model(
            "(define (domain b) (:types block) (:predicates (clear ?x - block))
               (:action c :parameters (?x - block) :precondition () :effect (clear ?x)))",
            "(define (problem p) (:domain b) (:objects a b - block) (:init (clear a)) (:goal (clear b)))",
        );
        assert!(m.preds[1].trivial);
        assert_eq!(m.init.len(), 1);
        assert_eq!(m.actions[0].lits.len(), 1);
    }

    #[test]
    fn bad_names_are_errors() {
        let d = parse_domain("(define (domain b) (:predicates (p ?x)))").unwrap();
        let p = parse_problem("(define (problem p) (:domain b) (:objects a) (:init (q a)) (:goal (p a)))").unwrap();
        assert!(matches!(Model::new(&d, &p), Err(ModelError::UnknownPredicate(..))));
        let p = parse_problem("(define (problem p) (:domain b) (:objects a) (:init (p z)) (:goal (p a)))").unwrap();
        assert!(matches!(Model::new(&d, &p), Err(ModelError::UnknownObject(..))));
        let p = parse_problem("(define (problem p) (:domain b) (:objects a) (:init (p a a)) (:goal (p a)))").unwrap();
        assert!(matches!(Model::new(&d, &p), Err(ModelError::Arity(..))));
    }
}

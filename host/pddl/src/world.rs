//! Name resolution shared by grounding and validation: types, objects and predicates as dense
//! ids, action schemas compiled against them, and an atom interner.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::ast::{Action, Atom, Domain, Problem, OBJECT};
use crate::diag::Span;
use crate::error::GroundError;

/// The type hierarchy as parent pointers. `object` is id 0 and its own parent.
///
/// Construction is tolerant (first declaration wins, unknown parents and cycles are cut back to
/// `object`) so the checker can keep going and report every problem; [`World::new`] turns the
/// recorded problems into errors.
pub(crate) struct TypeTable {
    index: HashMap<String, u32>,
    names: Vec<String>,
    parent: Vec<u32>,
    /// Types whose declared parent is unknown: (type, parent, span of the parent).
    pub unknown_parents: Vec<(String, String, Span)>,
    /// Types on a cycle of the hierarchy, with the span of their declaration.
    pub cyclic: Vec<(String, Span)>,
}

impl TypeTable {
    pub fn new(domain: &Domain) -> TypeTable {
        let mut t = TypeTable {
            index: HashMap::new(),
            names: vec![OBJECT.to_string()],
            parent: vec![0],
            unknown_parents: Vec::new(),
            cyclic: Vec::new(),
        };
        t.index.insert(OBJECT.to_string(), 0);
        for decl in &domain.types {
            if !t.index.contains_key(&decl.name) {
                t.index.insert(decl.name.clone(), t.names.len() as u32);
                t.names.push(decl.name.clone());
                t.parent.push(0);
            }
        }
        let mut parent_set = vec![false; t.names.len()];
        for decl in &domain.types {
            let id = t.index[&decl.name] as usize;
            if id == 0 || parent_set[id] {
                continue; // `object` stays the root; later duplicate declarations are ignored
            }
            parent_set[id] = true;
            match t.index.get(&decl.ty) {
                Some(&p) => t.parent[id] = p,
                None => t.unknown_parents.push((
                    decl.name.clone(),
                    decl.ty.clone(),
                    decl.type_span.unwrap_or(decl.span),
                )),
            }
        }
        // Record one type per cycle (the first declared), then cut the cycle there.
        let mut on_reported = vec![false; t.names.len()];
        for decl in &domain.types {
            let id = t.index[&decl.name];
            if id == 0 || on_reported[id as usize] || !t.on_cycle(id) {
                continue;
            }
            let mut cur = id;
            loop {
                on_reported[cur as usize] = true;
                cur = t.parent[cur as usize];
                if cur == id {
                    break;
                }
            }
            t.cyclic.push((decl.name.clone(), decl.span));
            t.parent[id as usize] = 0;
        }
        t
    }

    fn on_cycle(&self, start: u32) -> bool {
        let mut cur = start;
        for _ in 0..self.names.len() {
            cur = self.parent[cur as usize];
            if cur == start {
                return true;
            }
            if cur == 0 {
                return false;
            }
        }
        false // the chain runs into a cycle that `start` is not on
    }

    pub fn id(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if `a` is `b` or a descendant of it.
    pub fn is_subtype(&self, a: u32, b: u32) -> bool {
        let mut cur = a;
        for _ in 0..=self.names.len() {
            if cur == b {
                return true;
            }
            if cur == 0 {
                return false;
            }
            cur = self.parent[cur as usize];
        }
        false
    }
}

/// An argument of a compiled atom: a parameter index or an object id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    Var(usize),
    Obj(u32),
}

/// An atom with predicate and names resolved.
#[derive(Clone, Debug)]
pub(crate) struct CAtom {
    pub pred: u32,
    pub args: Vec<Arg>,
}

/// An action schema with every name resolved.
#[derive(Clone, Debug)]
pub(crate) struct CAction {
    pub params: Vec<u32>,
    /// Positive and negative precondition atoms (no equalities).
    pub pre: Vec<(bool, CAtom)>,
    /// `(positive, lhs, rhs)` equality preconditions.
    pub eq: Vec<(bool, Arg, Arg)>,
    pub add: Vec<CAtom>,
    pub del: Vec<CAtom>,
}

/// Objects, predicates and schemas of one (domain, problem) pair as dense ids.
pub(crate) struct World<'a> {
    pub types: TypeTable,
    pub objects: Vec<&'a str>,
    pub object_index: HashMap<&'a str, u32>,
    pub object_type: Vec<u32>,
    pub preds: Vec<&'a str>,
    pub pred_index: HashMap<&'a str, u32>,
    /// Declared parameter types of each predicate.
    pub pred_params: Vec<Vec<u32>>,
    pub actions: Vec<CAction>,
    /// Objects of each type, subtypes included.
    pub objects_of_type: Vec<Vec<u32>>,
}

impl<'a> World<'a> {
    /// Resolves every name; the first unresolvable one is the error.
    pub fn new(domain: &'a Domain, problem: &'a Problem) -> Result<World<'a>, GroundError> {
        let types = TypeTable::new(domain);
        if let Some((name, parent, span)) = types.unknown_parents.first() {
            return Err(GroundError::UnknownType {
                name: parent.clone(),
                context: format!("parent of type `{name}`"),
                span: *span,
            });
        }
        if let Some((name, span)) = types.cyclic.first() {
            return Err(GroundError::TypeCycle {
                name: name.clone(),
                span: *span,
            });
        }
        let ty = |name: &str, span: Span, context: &str| {
            types.id(name).ok_or_else(|| GroundError::UnknownType {
                name: name.to_string(),
                context: context.to_string(),
                span,
            })
        };
        let mut objects = Vec::new();
        let mut object_index = HashMap::new();
        let mut object_type = Vec::new();
        for o in domain.constants.iter().chain(&problem.objects) {
            let t = ty(
                &o.ty,
                o.type_span.unwrap_or(o.span),
                &format!("type of object `{}`", o.name),
            )?;
            if !object_index.contains_key(o.name.as_str()) {
                object_index.insert(o.name.as_str(), objects.len() as u32);
                objects.push(o.name.as_str());
                object_type.push(t);
            }
        }
        let mut preds = Vec::new();
        let mut pred_index = HashMap::new();
        let mut pred_params = Vec::new();
        for p in &domain.predicates {
            if pred_index.contains_key(p.name.as_str()) {
                continue;
            }
            let mut ps = Vec::with_capacity(p.params.len());
            for a in &p.params {
                ps.push(ty(
                    &a.ty,
                    a.type_span.unwrap_or(a.span),
                    &format!("parameter `{}` of predicate `{}`", a.name, p.name),
                )?);
            }
            pred_index.insert(p.name.as_str(), preds.len() as u32);
            preds.push(p.name.as_str());
            pred_params.push(ps);
        }
        let mut objects_of_type = vec![Vec::new(); types.len()];
        for (o, &t) in object_type.iter().enumerate() {
            for (tid, list) in objects_of_type.iter_mut().enumerate() {
                if types.is_subtype(t, tid as u32) {
                    list.push(o as u32);
                }
            }
        }
        let mut w = World {
            types,
            objects,
            object_index,
            object_type,
            preds,
            pred_index,
            pred_params,
            actions: Vec::new(),
            objects_of_type,
        };
        let mut actions = Vec::with_capacity(domain.actions.len());
        for a in &domain.actions {
            actions.push(w.compile(a)?);
        }
        w.actions = actions;
        Ok(w)
    }

    /// The two objects of a ground equality `(= a b)`.
    pub fn equality(&self, a: &Atom) -> Result<(u32, u32), GroundError> {
        let [x, y] = &a.args[..] else {
            return Err(eq_arity(a));
        };
        Ok((self.object(&x.name, x.span)?, self.object(&y.name, y.span)?))
    }

    pub fn object(&self, name: &str, span: Span) -> Result<u32, GroundError> {
        self.object_index
            .get(name)
            .copied()
            .ok_or_else(|| GroundError::UnknownObject {
                name: name.to_string(),
                span,
            })
    }

    /// Resolves a ground atom (of :init or the goal); equalities are not allowed here.
    pub fn ground_atom(&self, a: &Atom, out: &mut Vec<u32>) -> Result<u32, GroundError> {
        let pred = self.pred(a)?;
        out.clear();
        for t in &a.args {
            out.push(self.object(&t.name, t.span)?);
        }
        Ok(pred)
    }

    fn pred(&self, a: &Atom) -> Result<u32, GroundError> {
        let &pred = self.pred_index.get(a.predicate.as_str()).ok_or_else(|| {
            GroundError::UnknownPredicate {
                name: a.predicate.clone(),
                span: a.span,
            }
        })?;
        let expected = self.pred_params[pred as usize].len();
        if expected != a.args.len() {
            return Err(GroundError::Arity {
                predicate: a.predicate.clone(),
                expected,
                found: a.args.len(),
                span: a.span,
            });
        }
        Ok(pred)
    }

    fn compile(&self, action: &Action) -> Result<CAction, GroundError> {
        let mut params = Vec::with_capacity(action.params.len());
        for p in &action.params {
            params.push(
                self.types
                    .id(&p.ty)
                    .ok_or_else(|| GroundError::UnknownType {
                        name: p.ty.clone(),
                        context: format!("parameter `{}` of action `{}`", p.name, action.name),
                        span: p.type_span.unwrap_or(p.span),
                    })?,
            );
        }
        let arg = |t: &crate::ast::Term| -> Result<Arg, GroundError> {
            if t.is_variable() {
                action
                    .params
                    .iter()
                    .position(|p| p.name == t.name)
                    .map(Arg::Var)
                    .ok_or_else(|| GroundError::UndeclaredVariable {
                        name: t.name.clone(),
                        action: action.name.clone(),
                        span: t.span,
                    })
            } else {
                self.object(&t.name, t.span).map(Arg::Obj)
            }
        };
        let atom = |a: &Atom| -> Result<CAtom, GroundError> {
            let pred = self.pred(a)?;
            let args = a.args.iter().map(arg).collect::<Result<Vec<_>, _>>()?;
            Ok(CAtom { pred, args })
        };
        let mut c = CAction {
            params,
            pre: Vec::new(),
            eq: Vec::new(),
            add: Vec::new(),
            del: Vec::new(),
        };
        for l in &action.precondition {
            if l.atom.is_equality() {
                let [x, y] = &l.atom.args[..] else {
                    return Err(eq_arity(&l.atom));
                };
                c.eq.push((l.positive, arg(x)?, arg(y)?));
            } else {
                c.pre.push((l.positive, atom(&l.atom)?));
            }
        }
        for l in &action.effect {
            let a = atom(&l.atom)?;
            if l.positive {
                c.add.push(a);
            } else {
                c.del.push(a);
            }
        }
        Ok(c)
    }
}

/// The multiply-rotate hash of rustc's `FxHasher`. Atom keys are short `u32` slices hashed
/// millions of times while grounding and simulating; std's DoS-resistant SipHash costs several
/// times more per key, and these maps never hold attacker-chosen keys worth flooding.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A `HashSet` with [`FxHasher`].
pub(crate) type FxHashSet<K> = std::collections::HashSet<K, BuildHasherDefault<FxHasher>>;

/// `=` with other than two arguments (the parser never builds one; a hand-built AST might).
fn eq_arity(a: &Atom) -> GroundError {
    GroundError::Arity {
        predicate: "=".into(),
        expected: 2,
        found: a.args.len(),
        span: a.span,
    }
}

/// Interned ground atoms: `[pred, arg...]` keys to dense ids.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    keys: Vec<Box<[u32]>>,
    index: FxHashMap<Box<[u32]>, u32>,
}

impl Interner {
    /// The id of `key` (`[pred, args...]`), interning it if new; the flag says whether it was new.
    pub fn intern(&mut self, key: &[u32]) -> (u32, bool) {
        if let Some(&id) = self.index.get(key) {
            return (id, false);
        }
        let id = self.keys.len() as u32;
        let boxed: Box<[u32]> = key.into();
        self.keys.push(boxed.clone());
        self.index.insert(boxed, id);
        (id, true)
    }

    pub fn get(&self, key: &[u32]) -> Option<u32> {
        self.index.get(key).copied()
    }

    pub fn key(&self, id: u32) -> &[u32] {
        &self.keys[id as usize]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// `(pred a b)` for a key `[pred, a, b]`.
pub(crate) fn key_name(world_preds: &[&str], objects: &[&str], key: &[u32]) -> String {
    let mut s = String::with_capacity(16);
    s.push('(');
    s.push_str(world_preds[key[0] as usize]);
    for &o in &key[1..] {
        s.push(' ');
        s.push_str(objects[o as usize]);
    }
    s.push(')');
    s
}

/// Instantiates a compiled atom under a binding into `out` as an interner key.
pub(crate) fn instantiate(a: &CAtom, binding: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.push(a.pred);
    for arg in &a.args {
        out.push(match *arg {
            Arg::Var(i) => binding[i],
            Arg::Obj(o) => o,
        });
    }
}

pub(crate) fn resolve(arg: Arg, binding: &[u32]) -> u32 {
    match arg {
        Arg::Var(i) => binding[i],
        Arg::Obj(o) => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_domain;

    #[test]
    fn type_table_subtypes_and_cycles() {
        let d = parse_domain("(define (domain d) (:types c - a a - b b - a truck - vehicle vehicle - object x - nope))").unwrap();
        let t = TypeTable::new(&d);
        assert_eq!(t.cyclic.len(), 1, "one cycle, reported once");
        assert_eq!(t.unknown_parents.len(), 1);
        let (truck, vehicle) = (t.id("truck").unwrap(), t.id("vehicle").unwrap());
        assert!(
            t.is_subtype(truck, vehicle) && t.is_subtype(truck, 0) && !t.is_subtype(vehicle, truck)
        );
        // After the cut every chain reaches `object`.
        for ty in ["a", "b", "c", "x"] {
            assert!(t.is_subtype(t.id(ty).unwrap(), 0), "{ty}");
        }
    }
}

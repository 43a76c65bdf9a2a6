//! The PDDL abstract syntax tree, with spans, and printing back to PDDL.
//!
//! Names are stored lower-case. Equality between nodes ignores spans: two specs that say the
//! same thing compare equal wherever their tokens sit, which is what round-trip tests and the
//! faithfulness checker want.

use std::fmt;

use crate::diag::Span;

/// Implements `PartialEq`/`Eq` over the listed fields only, leaving spans out.
macro_rules! eq_ignoring_spans {
    ($ty:ident { $($field:ident),* }) => {
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                true $(&& self.$field == other.$field)*
            }
        }
        impl Eq for $ty {}
    };
}

/// The root of the type hierarchy; untyped objects and parameters have this type.
pub const OBJECT: &str = "object";

/// A name or variable in an atom. Variables keep their leading `?`.
#[derive(Clone, Debug)]
pub struct Term {
    /// `?x` for a variable, `a` for an object or constant.
    pub name: String,
    /// Where the term is.
    pub span: Span,
}
eq_ignoring_spans!(Term { name });

impl Term {
    /// True for `?x`.
    pub fn is_variable(&self) -> bool {
        self.name.starts_with('?')
    }
}

/// `(pred t1 t2 ...)`, or `(= t1 t2)` when `predicate` is `"="`.
#[derive(Clone, Debug)]
pub struct Atom {
    /// The predicate name, or `"="` for equality.
    pub predicate: String,
    /// The arguments.
    pub args: Vec<Term>,
    /// Where the atom's `(` is.
    pub span: Span,
}
eq_ignoring_spans!(Atom { predicate, args });

impl Atom {
    /// True for `(= a b)`.
    pub fn is_equality(&self) -> bool {
        self.predicate == "="
    }
}

/// An atom or its negation.
#[derive(Clone, Debug)]
pub struct Literal {
    /// False for `(not ...)`.
    pub positive: bool,
    /// The atom.
    pub atom: Atom,
    /// Where the literal starts (the `(not` for negative literals).
    pub span: Span,
}
eq_ignoring_spans!(Literal { positive, atom });

/// `name - type` in a typed list: a parameter, object, constant, or a type and its parent.
#[derive(Clone, Debug)]
pub struct TypedName {
    /// The name (`?x` for parameters).
    pub name: String,
    /// Its type (or, for a type declaration, its parent type); [`OBJECT`] when none was written.
    pub ty: String,
    /// Where the name is.
    pub span: Span,
    /// Where the type name is, when one was written.
    pub type_span: Option<Span>,
}
eq_ignoring_spans!(TypedName { name, ty });

/// A predicate declaration.
#[derive(Clone, Debug)]
pub struct Predicate {
    /// Its name.
    pub name: String,
    /// Its typed parameters.
    pub params: Vec<TypedName>,
    /// Where the name is.
    pub span: Span,
}
eq_ignoring_spans!(Predicate { name, params });

/// An action schema. Preconditions and effects are flat conjunctions of literals.
#[derive(Clone, Debug)]
pub struct Action {
    /// Its name.
    pub name: String,
    /// Its typed parameters.
    pub params: Vec<TypedName>,
    /// Conjunction of literals (atoms, negated atoms, equalities).
    pub precondition: Vec<Literal>,
    /// Add effects (positive) and delete effects (negative).
    pub effect: Vec<Literal>,
    /// Where the name is.
    pub span: Span,
}
eq_ignoring_spans!(Action {
    name,
    params,
    precondition,
    effect
});

/// A parsed domain file.
#[derive(Clone, Debug)]
pub struct Domain {
    /// The domain's name.
    pub name: String,
    /// Requirement keywords with their colon, e.g. `":strips"`; empty when none were written.
    pub requirements: Vec<String>,
    /// Declared types; `ty` holds the parent type.
    pub types: Vec<TypedName>,
    /// Constants, usable in actions and problems.
    pub constants: Vec<TypedName>,
    /// Predicate declarations.
    pub predicates: Vec<Predicate>,
    /// Action schemas.
    pub actions: Vec<Action>,
    /// Where the domain's name is.
    pub span: Span,
}
eq_ignoring_spans!(Domain {
    name,
    requirements,
    types,
    constants,
    predicates,
    actions
});

impl Domain {
    /// The predicate declaration called `name`.
    pub fn predicate(&self, name: &str) -> Option<&Predicate> {
        self.predicates.iter().find(|p| p.name == name)
    }

    /// The action schema called `name`.
    pub fn action(&self, name: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.name == name)
    }
}

/// A parsed problem file.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The problem's name.
    pub name: String,
    /// The domain named in `(:domain X)`.
    pub domain_name: String,
    /// Requirement keywords, if the problem repeats them.
    pub requirements: Vec<String>,
    /// Declared objects.
    pub objects: Vec<TypedName>,
    /// The initial state: ground atoms (closed world).
    pub init: Vec<Atom>,
    /// The goal: a conjunction of ground literals.
    pub goal: Vec<Literal>,
    /// Where the problem's name is.
    pub span: Span,
    /// Where the domain name in `(:domain X)` is.
    pub domain_span: Span,
    /// Where `(:goal` is.
    pub goal_span: Span,
}
eq_ignoring_spans!(Problem {
    name,
    domain_name,
    requirements,
    objects,
    init,
    goal
});

/// One step of a plan: `(action arg ...)`.
#[derive(Clone, Debug)]
pub struct PlanStep {
    /// The action's name, lower-case.
    pub action: String,
    /// The object names, lower-case.
    pub args: Vec<String>,
    /// Where the step's `(` is.
    pub span: Span,
}
eq_ignoring_spans!(PlanStep { action, args });

/// A sequential plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}", self.predicate)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.positive {
            write!(f, "{}", self.atom)
        } else {
            write!(f, "(not {})", self.atom)
        }
    }
}

impl fmt::Display for PlanStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}", self.action)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.steps {
            writeln!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Writes `a b - t c` with runs of equal types grouped. `object` is left implicit only at the
/// end of the list: anywhere else the names would join the next group (fuzzing found
/// `vehicle - object truck - vehicle` printed as `vehicle truck - vehicle`).
struct TypedList<'a>(&'a [TypedName]);

impl fmt::Display for TypedList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = self.0;
        for (i, t) in items.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(&t.name)?;
            let next = items.get(i + 1);
            let last_of_run = next.is_none_or(|n| n.ty != t.ty);
            if last_of_run && (t.ty != OBJECT || next.is_some()) {
                write!(f, " - {}", t.ty)?;
            }
        }
        Ok(())
    }
}

/// Writes a conjunction as `(and l1 l2 ...)`.
struct Conjunction<'a>(&'a [Literal]);

impl fmt::Display for Conjunction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(and")?;
        for l in self.0 {
            write!(f, " {l}")?;
        }
        f.write_str(")")
    }
}

fn write_requirements(f: &mut fmt::Formatter<'_>, reqs: &[String]) -> fmt::Result {
    if !reqs.is_empty() {
        writeln!(f, "  (:requirements {})", reqs.join(" "))?;
    }
    Ok(())
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "(define (domain {})", self.name)?;
        write_requirements(f, &self.requirements)?;
        if !self.types.is_empty() {
            writeln!(f, "  (:types {})", TypedList(&self.types))?;
        }
        if !self.constants.is_empty() {
            writeln!(f, "  (:constants {})", TypedList(&self.constants))?;
        }
        if !self.predicates.is_empty() {
            f.write_str("  (:predicates")?;
            for p in &self.predicates {
                write!(f, "\n    ({}", p.name)?;
                if !p.params.is_empty() {
                    write!(f, " {}", TypedList(&p.params))?;
                }
                f.write_str(")")?;
            }
            f.write_str(")\n")?;
        }
        for a in &self.actions {
            writeln!(f, "  (:action {}", a.name)?;
            writeln!(f, "    :parameters ({})", TypedList(&a.params))?;
            if !a.precondition.is_empty() {
                writeln!(f, "    :precondition {}", Conjunction(&a.precondition))?;
            }
            writeln!(f, "    :effect {})", Conjunction(&a.effect))?;
        }
        f.write_str(")\n")
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "(define (problem {})", self.name)?;
        writeln!(f, "  (:domain {})", self.domain_name)?;
        write_requirements(f, &self.requirements)?;
        writeln!(f, "  (:objects {})", TypedList(&self.objects))?;
        f.write_str("  (:init")?;
        for a in &self.init {
            write!(f, "\n    {a}")?;
        }
        f.write_str(")\n")?;
        writeln!(f, "  (:goal {})", Conjunction(&self.goal))?;
        f.write_str(")\n")
    }
}

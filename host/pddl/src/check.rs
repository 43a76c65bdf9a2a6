//! Semantic checks of a (domain, problem) pair, producing the paper's diagnostic categories.
//!
//! Every name is resolved against the declarations and every problem is reported (not just
//! the first), each at the span of the offending token. When no error was found, the task is
//! grounded and the delete-relaxed analysis names goal literals that can never hold and action
//! schemas that can never fire.

use std::collections::HashMap;

use crate::ast::{Action, Atom, Domain, Literal, Problem, Term, TypedName};
use crate::diag::{has_errors, Category, Diagnostic, SpecFile, Span};
use crate::ground::{ground, GroundError};
use crate::parser::{parse_domain, parse_problem};
use crate::world::TypeTable;

/// All native checks of a (domain, problem) pair: semantic checks, then (if they found no
/// error) grounding and delete-relaxed reachability. Ordered by file (domain first) and position.
pub fn check(domain: &Domain, problem: &Problem) -> Vec<Diagnostic> {
    let mut c = Checker::new(domain);
    c.domain();
    c.problem(problem);
    let mut diags = c.diags;
    if !has_errors(&diags) {
        reachability(domain, problem, &mut diags);
    }
    sort(&mut diags);
    diags
}

/// The checks that need only the domain.
pub fn check_domain(domain: &Domain) -> Vec<Diagnostic> {
    let mut c = Checker::new(domain);
    c.domain();
    let mut diags = c.diags;
    sort(&mut diags);
    diags
}

/// Parses both sources and [`check`]s them; a parse error becomes one `syntax` diagnostic in
/// the right file (both files are parsed, so both can report one).
pub fn check_sources(domain_src: &str, problem_src: &str) -> Vec<Diagnostic> {
    let d = parse_domain(domain_src);
    let p = parse_problem(problem_src);
    match (d, p) {
        (Ok(d), Ok(p)) => check(&d, &p),
        (d, p) => {
            let mut out = Vec::new();
            if let Err(e) = d {
                out.push(e.to_diagnostic(SpecFile::Domain));
            }
            if let Err(e) = p {
                out.push(e.to_diagnostic(SpecFile::Problem));
            }
            out
        }
    }
}

fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by_key(|d| (d.file, d.line.unwrap_or(u32::MAX), d.column.unwrap_or(u32::MAX)));
}

/// Symbol tables and the diagnostics found so far.
struct Checker<'a> {
    d: &'a Domain,
    types: TypeTable,
    constants: HashMap<&'a str, &'a TypedName>,
    predicates: HashMap<&'a str, &'a crate::ast::Predicate>,
    objects: HashMap<&'a str, &'a TypedName>,
    diags: Vec<Diagnostic>,
}

impl<'a> Checker<'a> {
    fn new(d: &'a Domain) -> Checker<'a> {
        Checker { d, types: TypeTable::new(d), constants: HashMap::new(), predicates: HashMap::new(), objects: HashMap::new(), diags: Vec::new() }
    }

    fn err(&mut self, file: SpecFile, span: Span, cat: Category, msg: String) {
        self.diags.push(Diagnostic::error(cat, msg).at(file, span));
    }

    fn warn(&mut self, file: SpecFile, span: Span, cat: Category, msg: String) {
        self.diags.push(Diagnostic::warning(cat, msg).at(file, span));
    }

    /// Reports an undeclared type at `span`; true if the type is known.
    fn known_type(&mut self, file: SpecFile, ty: &str, span: Span, what: &str) -> bool {
        if self.types.id(ty).is_some() {
            return true;
        }
        self.err(file, span, Category::ObjectType, format!("undefined type `{ty}` {what}"));
        false
    }

    fn domain(&mut self) {
        let f = SpecFile::Domain;
        let d = self.d;
        // Types.
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for t in &d.types {
            if let Some(first) = seen.get(t.name.as_str()) {
                self.err(f, t.span, Category::ObjectType, format!("type `{}` is declared twice (first at {first})", t.name));
            } else {
                seen.insert(&t.name, t.span);
            }
        }
        for (ty, parent, span) in self.types.unknown_parents.clone() {
            self.err(f, span, Category::ObjectType, format!("undefined parent type `{parent}` of type `{ty}`"));
        }
        for (ty, span) in self.types.cyclic.clone() {
            self.err(f, span, Category::ObjectType, format!("type `{ty}` is its own ancestor: the type hierarchy has a cycle"));
        }
        // Constants.
        for c in &d.constants {
            self.known_type(f, &c.ty, c.type_span.unwrap_or(c.span), &format!("of constant `{}`", c.name));
            if let Some(first) = self.constants.get(c.name.as_str()) {
                let msg = format!("constant `{}` is declared twice (first at {})", c.name, first.span);
                self.err(f, c.span, Category::ObjectType, msg);
            } else {
                self.constants.insert(&c.name, c);
            }
        }
        // Predicates.
        for p in &d.predicates {
            if let Some(first) = self.predicates.get(p.name.as_str()) {
                let msg = format!("predicate `{}` is declared twice (first at {})", p.name, first.span);
                self.err(f, p.span, Category::PredicateSchema, msg);
            } else {
                self.predicates.insert(&p.name, p);
            }
            self.params(&p.params, &format!("predicate `{}`", p.name));
        }
        // Actions.
        let mut actions: HashMap<&str, Span> = HashMap::new();
        for a in &d.actions {
            if let Some(first) = actions.get(a.name.as_str()) {
                self.err(f, a.span, Category::PredicateSchema, format!("action `{}` is declared twice (first at {first})", a.name));
            } else {
                actions.insert(&a.name, a.span);
            }
            self.action(a);
        }
    }

    /// Duplicate parameter names and undefined parameter types.
    fn params(&mut self, params: &[TypedName], owner: &str) {
        let f = SpecFile::Domain;
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name == p.name) {
                self.err(f, p.span, Category::PredicateSchema, format!("parameter `{}` of {owner} is declared twice", p.name));
            }
            self.known_type(f, &p.ty, p.type_span.unwrap_or(p.span), &format!("of parameter `{}` of {owner}", p.name));
        }
    }

    fn action(&mut self, a: &'a Action) {
        let f = SpecFile::Domain;
        self.params(&a.params, &format!("action `{}`", a.name));
        let owner = format!("action `{}`", a.name);
        for l in a.precondition.iter().chain(&a.effect) {
            self.atom(f, &l.atom, Some(a), &owner);
        }
        // Contradictory preconditions: p and (not p), or an equality that cannot hold.
        for (i, l) in a.precondition.iter().enumerate() {
            if a.precondition[..i].iter().any(|m| m.atom == l.atom && m.positive != l.positive) {
                self.warn(
                    f,
                    l.span,
                    Category::PreconditionEffect,
                    format!("precondition of action `{}` requires both {} and its negation: the action can never fire", a.name, l.atom),
                );
            }
            if l.atom.is_equality() {
                let (x, y) = (&l.atom.args[0], &l.atom.args[1]);
                let same = x.name == y.name;
                let distinct_constants = !x.is_variable() && !y.is_variable() && !same;
                if (same && !l.positive) || (distinct_constants && l.positive) {
                    self.warn(f, l.span, Category::PreconditionEffect, format!("precondition {l} of action `{}` can never hold: the action can never fire", a.name));
                }
            }
        }
        // Contradictory effects: the same atom added and deleted.
        for (i, l) in a.effect.iter().enumerate() {
            if a.effect[..i].iter().any(|m| m.atom == l.atom && m.positive != l.positive) {
                self.warn(
                    f,
                    l.span,
                    Category::PreconditionEffect,
                    format!(
                        "effect of action `{}` both adds and deletes {}; PDDL applies deletes first, so the atom ends up true",
                        a.name, l.atom
                    ),
                );
            }
        }
    }

    /// The type of a term, or `None` (after reporting) if it does not resolve.
    fn term_type(&mut self, file: SpecFile, t: &Term, action: Option<&'a Action>, owner: &str) -> Option<&'a str> {
        if t.is_variable() {
            let Some(a) = action else { return None };
            match a.params.iter().find(|p| p.name == t.name) {
                Some(p) => Some(&p.ty),
                None => {
                    self.err(file, t.span, Category::PredicateSchema, format!("`{}` is not a parameter of {owner}", t.name));
                    None
                }
            }
        } else if let Some(o) = self.objects.get(t.name.as_str()).or_else(|| self.constants.get(t.name.as_str())) {
            Some(&o.ty)
        } else {
            let msg = if file == SpecFile::Domain {
                format!("undefined constant `{}` in {owner}", t.name)
            } else {
                format!("undefined object `{}` in {owner}", t.name)
            };
            self.err(file, t.span, Category::ObjectType, msg);
            None
        }
    }

    /// Predicate, arity, and argument names and types of one atom.
    fn atom(&mut self, file: SpecFile, atom: &Atom, action: Option<&'a Action>, owner: &str) {
        if atom.is_equality() {
            for t in &atom.args {
                self.term_type(file, t, action, owner);
            }
            return;
        }
        let Some(&p) = self.predicates.get(atom.predicate.as_str()) else {
            self.err(file, atom.span, Category::PredicateSchema, format!("undefined predicate `{}` in {owner}", atom.predicate));
            for t in &atom.args {
                self.term_type(file, t, action, owner);
            }
            return;
        };
        if p.params.len() != atom.args.len() {
            self.err(
                file,
                atom.span,
                Category::PredicateSchema,
                format!("predicate `{}` takes {} arguments, but {atom} in {owner} has {}", p.name, p.params.len(), atom.args.len()),
            );
        }
        for (i, t) in atom.args.iter().enumerate() {
            let Some(ty) = self.term_type(file, t, action, owner) else { continue };
            let Some(param) = p.params.get(i) else { continue };
            let (Some(have), Some(want)) = (self.types.id(ty), self.types.id(&param.ty)) else { continue };
            if self.types.is_subtype(have, want) {
                continue;
            }
            let what = if t.is_variable() { "parameter" } else if file == SpecFile::Domain { "constant" } else { "object" };
            let msg = format!(
                "{what} `{}` of type `{ty}` is argument {} of {atom} in {owner}, but `{}` expects type `{}`",
                t.name,
                i + 1,
                p.name,
                param.ty
            );
            if t.is_variable() && self.types.is_subtype(want, have) {
                // A parameter of a supertype: the planner grounds it anyway, only instances of
                // the right type can match, so this is sloppy rather than wrong.
                self.warn(file, t.span, Category::ObjectType, msg);
            } else {
                self.err(file, t.span, Category::ObjectType, msg);
            }
        }
    }

    fn problem(&mut self, p: &'a Problem) {
        let f = SpecFile::Problem;
        if p.domain_name != self.d.name {
            self.err(
                f,
                p.domain_span,
                Category::PredicateSchema,
                format!("problem is for domain `{}`, but the domain is called `{}`", p.domain_name, self.d.name),
            );
        }
        for o in &p.objects {
            self.known_type(f, &o.ty, o.type_span.unwrap_or(o.span), &format!("of object `{}`", o.name));
            if let Some(first) = self.objects.get(o.name.as_str()) {
                let msg = format!("object `{}` is declared twice (first at {})", o.name, first.span);
                self.err(f, o.span, Category::ObjectType, msg);
                continue;
            }
            if let Some(c) = self.constants.get(o.name.as_str()) {
                if c.ty == o.ty {
                    self.warn(f, o.span, Category::ObjectType, format!("object `{}` is already a constant of the domain", o.name));
                } else {
                    let msg = format!("object `{}` of type `{}` is already a constant of the domain with type `{}`", o.name, o.ty, c.ty);
                    self.err(f, o.span, Category::ObjectType, msg);
                }
                continue;
            }
            self.objects.insert(&o.name, o);
        }
        for a in &p.init {
            self.atom(f, a, None, ":init");
        }
        for l in &p.goal {
            self.atom(f, &l.atom, None, "the goal");
        }
        for (i, l) in p.goal.iter().enumerate() {
            if p.goal[..i].iter().any(|m| m.atom == l.atom && m.positive != l.positive) {
                self.err(f, l.span, Category::GoalConstraint, format!("the goal requires both {} and its negation", l.atom));
            }
            if l.atom.is_equality() && (l.atom.args[0].name == l.atom.args[1].name) != l.positive {
                self.err(f, l.span, Category::GoalConstraint, format!("goal {l} can never hold"));
            }
        }
    }
}

/// Grounds the task and reports what the delete relaxation proves impossible.
fn reachability(domain: &Domain, problem: &Problem, diags: &mut Vec<Diagnostic>) {
    let task = match ground(domain, problem) {
        Ok(t) => t,
        Err(GroundError::TooLarge { limit }) => {
            diags.push(Diagnostic::warning(
                Category::Unreachable,
                format!("reachability analysis skipped: grounding exceeded {limit}"),
            ));
            return;
        }
        Err(e) => {
            // The checks above should have caught this; report it rather than stay silent.
            diags.push(Diagnostic::error(Category::ObjectType, e.to_string()));
            return;
        }
    };
    let r = task.relaxed_reachability();
    let added: Vec<&str> =
        domain.actions.iter().flat_map(|a| a.effect.iter().filter(|l| l.positive).map(|l| l.atom.predicate.as_str())).collect();
    let deleted: Vec<&str> =
        domain.actions.iter().flat_map(|a| a.effect.iter().filter(|l| !l.positive).map(|l| l.atom.predicate.as_str())).collect();
    for l in problem.goal.iter().filter(|l| !l.atom.is_equality()) {
        let Some(id) = task.atom_id(&l.atom.predicate, &l.atom.args.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()) else {
            continue;
        };
        let msg = if l.positive && r.unreachable_goals.contains(&id) {
            if added.contains(&l.atom.predicate.as_str()) {
                format!("goal {l} can never be true: it is not in :init and no reachable action adds it (even ignoring delete effects)")
            } else {
                format!("goal {l} can never be true: it is not in :init and no action has `{}` in its add effects", l.atom.predicate)
            }
        } else if !l.positive && r.undeletable_goals.contains(&id) {
            if deleted.contains(&l.atom.predicate.as_str()) {
                format!("goal {l} can never be true: {} holds in :init and no reachable action deletes it", l.atom)
            } else {
                format!("goal {l} can never be true: {} holds in :init and no action deletes `{}`", l.atom, l.atom.predicate)
            }
        } else {
            continue;
        };
        diags.push(Diagnostic::error(Category::GoalConstraint, msg).at(SpecFile::Problem, l.span));
    }
    // Dead schemas, with the preconditions that no reachable atom matches.
    let mut reachable_preds: Vec<&str> = Vec::new();
    for i in 0..task.num_atoms() {
        let id = crate::ground::AtomId(i as u32);
        if r.is_reachable(id) {
            let (p, _) = task.atom_parts(id);
            if !reachable_preds.contains(&p) {
                reachable_preds.push(p);
            }
        }
    }
    for name in &r.dead_schemas {
        let Some(a) = domain.actions.iter().find(|a| &a.name == name) else { continue };
        let missing: Vec<String> = a
            .precondition
            .iter()
            .filter(|l| l.positive && !l.atom.is_equality() && !reachable_preds.contains(&l.atom.predicate.as_str()))
            .map(Literal::to_string)
            .collect();
        let empty_types: Vec<String> = a
            .params
            .iter()
            .filter(|p| !domain.constants.iter().chain(&problem.objects).any(|o| type_fits(domain, &o.ty, &p.ty)))
            .map(|p| format!("`{}` (no object of type `{}`)", p.name, p.ty))
            .collect();
        let why = if !empty_types.is_empty() {
            format!("no object can fill parameter {}", empty_types.join(", "))
        } else if !missing.is_empty() {
            format!("no reachable state satisfies {}", missing.join(", "))
        } else {
            "no combination of objects satisfies all its preconditions in any reachable state".to_string()
        };
        diags.push(
            Diagnostic::warning(
                Category::PreconditionEffect,
                format!("action `{}` can never be applied, even ignoring delete effects: {why}", a.name),
            )
            .at(SpecFile::Domain, a.span),
        );
    }
}

fn type_fits(domain: &Domain, have: &str, want: &str) -> bool {
    let t = TypeTable::new(domain);
    match (t.id(have), t.id(want)) {
        (Some(h), Some(w)) => t.is_subtype(h, w),
        _ => false,
    }
}

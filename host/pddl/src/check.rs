//! Semantic checks of a (domain, problem) pair, producing the paper's diagnostic categories.
//!
//! Every name is resolved against the declarations and every problem is reported (not just
//! the first), each at the span of the offending token. When no error was found, the task is
//! grounded and the delete-relaxed analysis names goal literals that can never hold and action
//! schemas that can never fire.

use std::collections::HashMap;

use crate::ast::{Action, Atom, Domain, Literal, Problem, Term, TypedName};
use crate::diag::{has_errors, Category, Diagnostic, Span, SpecFile};
use crate::error::GroundError;
use crate::ground::ground;
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
    diags.sort_by_key(|d| {
        (
            d.file,
            d.line.unwrap_or(u32::MAX),
            d.column.unwrap_or(u32::MAX),
        )
    });
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
        Checker {
            d,
            types: TypeTable::new(d),
            constants: HashMap::new(),
            predicates: HashMap::new(),
            objects: HashMap::new(),
            diags: Vec::new(),
        }
    }

    fn err(&mut self, file: SpecFile, span: Span, cat: Category, msg: String) {
        self.diags.push(Diagnostic::error(cat, msg).at(file, span));
    }

    fn warn(&mut self, file: SpecFile, span: Span, cat: Category, msg: String) {
        self.diags
            .push(Diagnostic::warning(cat, msg).at(file, span));
    }

    /// Reports an undeclared type at `span`; true if the type is known.
    fn known_type(&mut self, file: SpecFile, ty: &str, span: Span, what: &str) -> bool {
        if self.types.id(ty).is_some() {
            return true;
        }
        // `a b c - blok` shares one type token: report it once.
        if self.diags.iter().any(|d| {
            d.file == Some(file) && (d.line, d.column) == (Some(span.line), Some(span.column))
        }) {
            return false;
        }
        self.err(
            file,
            span,
            Category::ObjectType,
            format!("undefined type `{ty}` {what}"),
        );
        false
    }

    fn domain(&mut self) {
        let f = SpecFile::Domain;
        let d = self.d;
        // Types.
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for t in &d.types {
            if let Some(first) = seen.get(t.name.as_str()) {
                self.err(
                    f,
                    t.span,
                    Category::ObjectType,
                    format!("type `{}` is declared twice (first at {first})", t.name),
                );
            } else {
                seen.insert(&t.name, t.span);
            }
        }
        for (ty, parent, span) in self.types.unknown_parents.clone() {
            self.err(
                f,
                span,
                Category::ObjectType,
                format!("undefined parent type `{parent}` of type `{ty}`"),
            );
        }
        for (ty, span) in self.types.cyclic.clone() {
            self.err(
                f,
                span,
                Category::ObjectType,
                format!("type `{ty}` is its own ancestor: the type hierarchy has a cycle"),
            );
        }
        // Constants.
        for c in &d.constants {
            self.known_type(
                f,
                &c.ty,
                c.type_span.unwrap_or(c.span),
                &format!("of constant `{}`", c.name),
            );
            if let Some(first) = self.constants.get(c.name.as_str()) {
                let msg = format!(
                    "constant `{}` is declared twice (first at {})",
                    c.name, first.span
                );
                self.err(f, c.span, Category::ObjectType, msg);
            } else {
                self.constants.insert(&c.name, c);
            }
        }
        // Predicates.
        for p in &d.predicates {
            if let Some(first) = self.predicates.get(p.name.as_str()) {
                let msg = format!(
                    "predicate `{}` is declared twice (first at {})",
                    p.name, first.span
                );
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
                self.err(
                    f,
                    a.span,
                    Category::PredicateSchema,
                    format!("action `{}` is declared twice (first at {first})", a.name),
                );
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
                self.err(
                    f,
                    p.span,
                    Category::PredicateSchema,
                    format!("parameter `{}` of {owner} is declared twice", p.name),
                );
            }
            self.known_type(
                f,
                &p.ty,
                p.type_span.unwrap_or(p.span),
                &format!("of parameter `{}` of {owner}", p.name),
            );
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
            if a.precondition[..i]
                .iter()
                .any(|m| m.atom == l.atom && m.positive != l.positive)
            {
                self.warn(
                    f,
                    l.span,
                    Category::PreconditionEffect,
                    format!("precondition of action `{}` requires both {} and its negation: the action can never fire", a.name, l.atom),
                );
            }
            if l.atom.is_equality() {
                let [x, y] = &l.atom.args[..] else { continue };
                let same = x.name == y.name;
                let distinct_constants = !x.is_variable() && !y.is_variable() && !same;
                if (same && !l.positive) || (distinct_constants && l.positive) {
                    self.warn(f, l.span, Category::PreconditionEffect, format!("precondition {l} of action `{}` can never hold: the action can never fire", a.name));
                }
            }
        }
        // Contradictory effects: the same atom added and deleted.
        for (i, l) in a.effect.iter().enumerate() {
            if a.effect[..i]
                .iter()
                .any(|m| m.atom == l.atom && m.positive != l.positive)
            {
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
    fn term_type(
        &mut self,
        file: SpecFile,
        t: &Term,
        action: Option<&'a Action>,
        owner: &str,
    ) -> Option<&'a str> {
        if t.is_variable() {
            let a = action?;
            match a.params.iter().find(|p| p.name == t.name) {
                Some(p) => Some(&p.ty),
                None => {
                    self.err(
                        file,
                        t.span,
                        Category::PredicateSchema,
                        format!("`{}` is not a parameter of {owner}", t.name),
                    );
                    None
                }
            }
        } else if let Some(o) = self
            .objects
            .get(t.name.as_str())
            .or_else(|| self.constants.get(t.name.as_str()))
        {
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
            if atom.args.len() != 2 {
                let msg = format!(
                    "`=` takes 2 arguments, but {atom} in {owner} has {}",
                    atom.args.len()
                );
                self.err(file, atom.span, Category::PredicateSchema, msg);
            }
            for t in &atom.args {
                self.term_type(file, t, action, owner);
            }
            return;
        }
        let Some(&p) = self.predicates.get(atom.predicate.as_str()) else {
            self.err(
                file,
                atom.span,
                Category::PredicateSchema,
                format!("undefined predicate `{}` in {owner}", atom.predicate),
            );
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
                format!(
                    "predicate `{}` takes {} arguments, but {atom} in {owner} has {}",
                    p.name,
                    p.params.len(),
                    atom.args.len()
                ),
            );
        }
        for (i, t) in atom.args.iter().enumerate() {
            let Some(ty) = self.term_type(file, t, action, owner) else {
                continue;
            };
            let Some(param) = p.params.get(i) else {
                continue;
            };
            let (Some(have), Some(want)) = (self.types.id(ty), self.types.id(&param.ty)) else {
                continue;
            };
            if self.types.is_subtype(have, want) {
                continue;
            }
            let what = if t.is_variable() {
                "parameter"
            } else if file == SpecFile::Domain {
                "constant"
            } else {
                "object"
            };
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
                format!(
                    "problem is for domain `{}`, but the domain is called `{}`",
                    p.domain_name, self.d.name
                ),
            );
        }
        for o in &p.objects {
            self.known_type(
                f,
                &o.ty,
                o.type_span.unwrap_or(o.span),
                &format!("of object `{}`", o.name),
            );
            if let Some(first) = self.objects.get(o.name.as_str()) {
                let msg = format!(
                    "object `{}` is declared twice (first at {})",
                    o.name, first.span
                );
                self.err(f, o.span, Category::ObjectType, msg);
                continue;
            }
            if let Some(c) = self.constants.get(o.name.as_str()) {
                if c.ty == o.ty {
                    self.warn(
                        f,
                        o.span,
                        Category::ObjectType,
                        format!("object `{}` is already a constant of the domain", o.name),
                    );
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
            if p.goal[..i]
                .iter()
                .any(|m| m.atom == l.atom && m.positive != l.positive)
            {
                self.err(
                    f,
                    l.span,
                    Category::GoalConstraint,
                    format!("the goal requires both {} and its negation", l.atom),
                );
            }
            if let (true, [x, y]) = (l.atom.is_equality(), &l.atom.args[..]) {
                if (x.name == y.name) == l.positive {
                    continue;
                }
                self.err(
                    f,
                    l.span,
                    Category::GoalConstraint,
                    format!("goal {l} can never hold"),
                );
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
    let added: Vec<&str> = domain
        .actions
        .iter()
        .flat_map(|a| {
            a.effect
                .iter()
                .filter(|l| l.positive)
                .map(|l| l.atom.predicate.as_str())
        })
        .collect();
    let deleted: Vec<&str> = domain
        .actions
        .iter()
        .flat_map(|a| {
            a.effect
                .iter()
                .filter(|l| !l.positive)
                .map(|l| l.atom.predicate.as_str())
        })
        .collect();
    for l in problem.goal.iter().filter(|l| !l.atom.is_equality()) {
        let Some(id) = task.atom_id(
            &l.atom.predicate,
            &l.atom
                .args
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
        ) else {
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
                format!(
                    "goal {l} can never be true: {} holds in :init and no action deletes `{}`",
                    l.atom, l.atom.predicate
                )
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
        let Some(a) = domain.actions.iter().find(|a| &a.name == name) else {
            continue;
        };
        let missing: Vec<String> = a
            .precondition
            .iter()
            .filter(|l| {
                l.positive
                    && !l.atom.is_equality()
                    && !reachable_preds.contains(&l.atom.predicate.as_str())
            })
            .map(Literal::to_string)
            .collect();
        let empty_types: Vec<String> = a
            .params
            .iter()
            .filter(|p| {
                !domain
                    .constants
                    .iter()
                    .chain(&problem.objects)
                    .any(|o| type_fits(domain, &o.ty, &p.ty))
            })
            .map(|p| format!("`{}` (no object of type `{}`)", p.name, p.ty))
            .collect();
        let why = if !empty_types.is_empty() {
            format!("no object can fill parameter {}", empty_types.join(", "))
        } else if !missing.is_empty() {
            format!("no reachable state satisfies {}", missing.join(", "))
        } else {
            "no combination of objects satisfies all its preconditions in any reachable state"
                .to_string()
        };
        diags.push(
            Diagnostic::warning(
                Category::PreconditionEffect,
                format!(
                    "action `{}` can never be applied, even ignoring delete effects: {why}",
                    a.name
                ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Severity;

    const DOMAIN: &str = "(define (domain bw)
  (:requirements :strips :typing :negative-preconditions :equality)
  (:types block)
  (:predicates (on ?x - block ?y - block) (ontable ?x - block) (clear ?x - block) (handempty) (holding ?x - block))
  (:action pick-up :parameters (?x - block)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (ontable ?x)) (not (clear ?x)) (not (handempty))))
  (:action put-down :parameters (?x - block)
    :precondition (holding ?x)
    :effect (and (ontable ?x) (clear ?x) (handempty) (not (holding ?x))))
  (:action stack :parameters (?x ?y - block)
    :precondition (and (holding ?x) (clear ?y) (not (= ?x ?y)))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
  (:action unstack :parameters (?x ?y - block)
    :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (on ?x ?y)) (not (clear ?x)) (not (handempty)))))";

    const PROBLEM: &str = "(define (problem p) (:domain bw)
  (:objects a b c - block)
  (:init (clear a) (on a b) (ontable b) (clear c) (ontable c) (handempty))
  (:goal (and (on c a) (on a b))))";

    fn run(domain: &str, problem: &str) -> Vec<Diagnostic> {
        check_sources(domain, problem)
    }

    /// The single diagnostic of `cat`, asserting there is exactly one.
    fn only(diags: &[Diagnostic], cat: Category) -> Diagnostic {
        let of: Vec<_> = diags.iter().filter(|d| d.category == cat).collect();
        assert_eq!(of.len(), 1, "expected one {cat} diagnostic in {diags:#?}");
        of[0].clone()
    }

    #[test]
    fn a_good_spec_has_no_diagnostics() {
        assert_eq!(run(DOMAIN, PROBLEM), vec![]);
    }

    #[test]
    fn syntax_errors_name_their_file() {
        let d = run("(define (domain bw)", PROBLEM);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].category, d[0].file),
            (Category::Syntax, Some(SpecFile::Domain))
        );
        let d = run(
            DOMAIN,
            "(define (problem p) (:domain bw) (:goal (on a b))) )",
        );
        assert_eq!(
            (d[0].category, d[0].file, d[0].line, d[0].column),
            (Category::Syntax, Some(SpecFile::Problem), Some(1), Some(52))
        );
    }

    #[test]
    fn object_type_undefined_object_and_wrong_type() {
        let p = PROBLEM.replace("(clear c)", "(clear z)");
        let d = only(&run(DOMAIN, &p), Category::ObjectType);
        assert!(d.message.contains("undefined object `z`"), "{d}");
        assert_eq!(
            (d.file, d.line, d.column, d.severity),
            (Some(SpecFile::Problem), Some(3), Some(48), Severity::Error)
        );

        let dom = DOMAIN.replace("(:types block)", "(:types block table)");
        let p = PROBLEM.replace(
            "(:objects a b c - block)",
            "(:objects a b - block c - table)",
        );
        let diags = run(&dom, &p);
        assert!(
            diags
                .iter()
                .all(|d| d.category == Category::ObjectType && d.is_error()),
            "{diags:#?}"
        );
        assert!(
            diags
                .iter()
                .any(|d| d.message.contains("object `c` of type `table`")
                    && d.message.contains("expects type `block`")),
            "{diags:#?}"
        );

        let d = only(
            &run(DOMAIN, &PROBLEM.replace("a b c - block", "a b c - blok")),
            Category::ObjectType,
        );
        assert!(d.message.contains("undefined type `blok`"), "{d}");
        let d = only(
            &run(DOMAIN, &PROBLEM.replace("a b c - block", "a b c a - block")),
            Category::ObjectType,
        );
        assert!(d.message.contains("declared twice"), "{d}");
        let d = only(
            &run(
                &DOMAIN.replace("(:types block)", "(:types block - thing)"),
                PROBLEM,
            ),
            Category::ObjectType,
        );
        assert!(d.message.contains("undefined parent type `thing`"), "{d}");
        let d = only(
            &run(
                &DOMAIN.replace("(:types block)", "(:types block - a a - block)"),
                PROBLEM,
            ),
            Category::ObjectType,
        );
        assert!(d.message.contains("cycle"), "{d}");
    }

    #[test]
    fn object_type_parameter_of_a_supertype_is_a_warning() {
        let dom = DOMAIN.replace(
            "(:action put-down :parameters (?x - block)",
            "(:action put-down :parameters (?x)",
        );
        let diags = run(&dom, PROBLEM);
        assert!(
            !diags.is_empty()
                && diags
                    .iter()
                    .all(|d| d.category == Category::ObjectType && !d.is_error()),
            "{diags:#?}"
        );
    }

    #[test]
    fn predicate_schema_findings() {
        let cases = [
            (
                DOMAIN.replace("(holding ?x)\n", "(holdin ?x)\n"),
                PROBLEM.to_string(),
                "undefined predicate `holdin`",
            ),
            (
                DOMAIN.replace("(holding ?x)\n", "(holding ?x ?x)\n"),
                PROBLEM.to_string(),
                "takes 1 arguments",
            ),
            (
                DOMAIN.replace("(holding ?x)\n", "(holding ?y)\n"),
                PROBLEM.to_string(),
                "`?y` is not a parameter of action `put-down`",
            ),
            (
                DOMAIN.replace("(:action put-down", "(:action pick-up"),
                PROBLEM.to_string(),
                "action `pick-up` is declared twice",
            ),
            (
                DOMAIN.replace("(handempty) (holding", "(handempty) (handempty) (holding"),
                PROBLEM.to_string(),
                "predicate `handempty` is declared twice",
            ),
            (
                DOMAIN.to_string(),
                PROBLEM.replace("(:domain bw)", "(:domain blocks)"),
                "problem is for domain `blocks`",
            ),
            (
                DOMAIN.to_string(),
                PROBLEM.replace("(on c a)", "(on-top c a)"),
                "undefined predicate `on-top` in the goal",
            ),
        ];
        for (d, p, msg) in cases {
            let diag = only(&run(&d, &p), Category::PredicateSchema);
            assert!(diag.message.contains(msg), "{diag}");
            assert!(diag.is_error() && diag.line.is_some());
        }
        let diag = only(
            &run(DOMAIN, &PROBLEM.replace("(:domain bw)", "(:domain blocks)")),
            Category::PredicateSchema,
        );
        assert_eq!((diag.line, diag.column), (Some(1), Some(30)));
    }

    #[test]
    fn precondition_effect_contradictions_and_dead_actions_are_warnings() {
        let dom = DOMAIN.replace("(holding ?x)\n", "(and (holding ?x) (not (holding ?x)))\n");
        let diags = run(&dom, PROBLEM);
        assert!(!has_errors(&diags), "{diags:#?}");
        let d = diags
            .iter()
            .find(|d| d.message.contains("its negation"))
            .expect("contradiction reported");
        assert_eq!(d.category, Category::PreconditionEffect);

        let dom = DOMAIN.replace(
            "(not (holding ?x))))\n  (:action stack",
            "(not (holding ?x)) (not (ontable ?x))))\n  (:action stack",
        );
        let d = only(&run(&dom, PROBLEM), Category::PreconditionEffect);
        assert!(
            d.message.contains("both adds and deletes (ontable ?x)") && !d.is_error(),
            "{d}"
        );

        // Nothing can ever be held if the hand is never empty: every action is dead.
        let p = PROBLEM
            .replace("(handempty))", ")")
            .replace("(:goal (and (on c a) (on a b)))", "(:goal (on a b))");
        let diags = run(DOMAIN, &p);
        let dead: Vec<_> = diags
            .iter()
            .filter(|d| d.category == Category::PreconditionEffect)
            .collect();
        assert_eq!(dead.len(), 4, "{diags:#?}");
        assert!(dead
            .iter()
            .all(|d| !d.is_error() && d.file == Some(SpecFile::Domain)));
        assert!(
            dead[0]
                .message
                .contains("action `pick-up` can never be applied"),
            "{}",
            dead[0]
        );
        assert!(dead[0].message.contains("(handempty)"), "{}", dead[0]);
        assert!(dead[1].message.contains("(holding ?x)"), "{}", dead[1]);
    }

    #[test]
    fn goal_constraint_unreachable_and_contradictory_goals() {
        let p = PROBLEM.replace("(handempty))", ")");
        let d = only(&run(DOMAIN, &p), Category::GoalConstraint);
        assert!(
            d.is_error() && d.message.contains("goal (on c a) can never be true"),
            "{d}"
        );
        assert_eq!((d.line, d.column), (Some(4), Some(15)));

        let dom = DOMAIN
            .replace("(:action stack", "(:action stack-never")
            .replace(
                "(and (on ?x ?y) (clear ?x) (handempty) (not (holding",
                "(and (clear ?x) (handempty) (not (holding",
            );
        let p = PROBLEM.replace("(and (on c a) (on a b))", "(on b a)");
        let d = only(&run(&dom, &p), Category::GoalConstraint);
        assert!(
            d.message.contains("no action has `on` in its add effects"),
            "{d}"
        );

        let p = PROBLEM.replace("(and (on c a) (on a b))", "(and (on c a) (not (on c a)))");
        let d = only(&run(DOMAIN, &p), Category::GoalConstraint);
        assert!(d.message.contains("both (on c a) and its negation"), "{d}");
        let p = PROBLEM.replace("(and (on c a) (on a b))", "(and (on c a) (= a b))");
        assert!(only(&run(DOMAIN, &p), Category::GoalConstraint)
            .message
            .contains("(= a b) can never hold"));

        // A negative goal on a static fact that holds initially.
        let dom = DOMAIN.replace(
            "(handempty) (holding ?x - block))",
            "(handempty) (holding ?x - block) (heavy ?x - block))",
        );
        let p = PROBLEM
            .replace("(handempty))", "(handempty) (heavy a))")
            .replace("(on a b)))", "(not (heavy a))))");
        let d = only(&run(&dom, &p), Category::GoalConstraint);
        assert!(
            d.message
                .contains("(heavy a) holds in :init and no action deletes `heavy`"),
            "{d}"
        );
    }

    #[test]
    fn diagnostics_come_in_file_order() {
        let dom = DOMAIN.replace("(holding ?x)\n", "(holdin ?x)\n");
        let p = PROBLEM
            .replace("(clear c)", "(clear z)")
            .replace("(:domain bw)", "(:domain x)");
        let d = run(&dom, &p);
        let keys: Vec<_> = d.iter().map(|d| (d.file, d.line, d.column)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(d.len(), 3, "{d:#?}");
    }
}

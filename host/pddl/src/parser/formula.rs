//! Formulas inside actions and problems: atoms, conditions (preconditions and goals) and
//! effects, each flattened into literals.

use super::syntax::{head, is_name, list, malformed, nth, sym, unsupported, Result};
use crate::ast::{Atom, Literal, Term};
use crate::sexpr::{List, SExpr, Sym};

/// Where variables may appear in a condition.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctx {
    Precondition,
    Goal,
}

/// An atom `(p t1 ...)` or `(= t1 t2)`.
pub(super) fn atom(l: &List, vars_allowed: bool, where_: &str) -> Result<Atom> {
    let h = sym(nth(l, 0, "a predicate name")?, "a predicate name")?;
    if h.text != "=" && !is_name(&h.text) {
        return malformed(
            h.span,
            format!("`{}` is not a valid predicate name", h.text),
        );
    }
    let mut args = Vec::with_capacity(l.items.len() - 1);
    for e in &l.items[1..] {
        let s = match e {
            SExpr::Sym(s) => s,
            SExpr::List(inner) => {
                return unsupported(inner.span, "function terms (numeric or object fluents)");
            }
        };
        if s.text.starts_with('?') {
            if !vars_allowed {
                return malformed(
                    s.span,
                    format!(
                        "variable `{}` in {where_}: only action schemas may use variables",
                        s.text
                    ),
                );
            }
            if !is_name(&s.text[1..]) {
                return malformed(s.span, format!("`{}` is not a valid variable", s.text));
            }
        } else if !is_name(&s.text) {
            return malformed(s.span, format!("`{}` is not a valid object name", s.text));
        }
        args.push(Term {
            name: s.text.clone(),
            span: s.span,
        });
    }
    if h.text == "=" && args.len() != 2 {
        return malformed(
            h.span,
            format!("`=` takes 2 arguments, found {}", args.len()),
        );
    }
    Ok(Atom {
        predicate: h.text.clone(),
        args,
        span: l.span,
    })
}

/// Rejects the heads of constructs that are valid PDDL but unsupported, naming them.
pub(super) fn reject_unsupported_condition(h: &Sym) -> Result<()> {
    match h.text.as_str() {
        "or" => unsupported(h.span, "disjunctive conditions (or)"),
        "imply" => unsupported(h.span, "implications (imply)"),
        "forall" => unsupported(h.span, "universally quantified conditions (forall)"),
        "exists" => unsupported(h.span, "existentially quantified conditions (exists)"),
        "when" => unsupported(h.span, "conditional effects (when)"),
        "preference" => unsupported(h.span, "preferences (preference)"),
        "<" | ">" | "<=" | ">=" => {
            unsupported(h.span, &format!("numeric comparisons ({})", h.text))
        }
        _ => Ok(()),
    }
}

/// A condition (precondition or goal), flattened into a conjunction of literals.
pub(super) fn condition(e: &SExpr, ctx: Ctx, out: &mut Vec<Literal>) -> Result<()> {
    let where_ = if ctx == Ctx::Goal {
        "the goal"
    } else {
        "a precondition"
    };
    let l = list(e, "a condition like (pred ...) or (and ...)")?;
    let Some(h) = head(l) else {
        if l.items.is_empty() {
            return Ok(()); // `()` is the empty conjunction
        }
        return malformed(
            l.span,
            "expected a predicate name or `and`/`not` at the start of a condition",
        );
    };
    reject_unsupported_condition(h)?;
    let vars = ctx == Ctx::Precondition;
    match h.text.as_str() {
        "and" => {
            for c in &l.items[1..] {
                condition(c, ctx, out)?;
            }
            Ok(())
        }
        "not" => {
            if l.items.len() != 2 {
                return malformed(
                    h.span,
                    format!(
                        "`not` takes exactly one condition, found {}",
                        l.items.len() - 1
                    ),
                );
            }
            let inner = list(&l.items[1], "an atom inside `not`")?;
            if let Some(ih) = head(inner) {
                reject_unsupported_condition(ih)?;
                match ih.text.as_str() {
                    "and" => {
                        return unsupported(
                            ih.span,
                            "negated conjunctions (not (and ...)), which are disjunctions",
                        )
                    }
                    "not" => return unsupported(ih.span, "nested negation (not (not ...))"),
                    _ => {}
                }
            }
            let a = atom(inner, vars, where_)?;
            out.push(Literal {
                positive: false,
                atom: a,
                span: l.span,
            });
            Ok(())
        }
        _ => {
            let a = atom(l, vars, where_)?;
            out.push(Literal {
                positive: true,
                atom: a,
                span: l.span,
            });
            Ok(())
        }
    }
}

/// An effect, flattened into add (positive) and delete (negative) literals.
pub(super) fn effect(e: &SExpr, out: &mut Vec<Literal>) -> Result<()> {
    let l = list(e, "an effect like (pred ...) or (and ...)")?;
    let Some(h) = head(l) else {
        if l.items.is_empty() {
            return Ok(());
        }
        return malformed(
            l.span,
            "expected a predicate name or `and`/`not` at the start of an effect",
        );
    };
    match h.text.as_str() {
        "when" => return unsupported(h.span, "conditional effects (when)"),
        "forall" => return unsupported(h.span, "universally quantified effects (forall)"),
        "increase" | "decrease" | "assign" | "scale-up" | "scale-down" => {
            return unsupported(h.span, &format!("numeric effects ({})", h.text))
        }
        "or" | "exists" | "imply" => {
            return malformed(h.span, format!("`{}` is not allowed in an effect", h.text))
        }
        "=" => return malformed(h.span, "`=` is not allowed in an effect"),
        _ => {}
    }
    match h.text.as_str() {
        "and" => {
            for c in &l.items[1..] {
                effect(c, out)?;
            }
            Ok(())
        }
        "not" => {
            if l.items.len() != 2 {
                return malformed(
                    h.span,
                    format!("`not` takes exactly one atom, found {}", l.items.len() - 1),
                );
            }
            let inner = list(&l.items[1], "an atom inside `not`")?;
            if let Some(ih) = head(inner) {
                if matches!(ih.text.as_str(), "and" | "not" | "when" | "forall" | "=") {
                    return malformed(
                        ih.span,
                        format!("`(not ({} ...))` is not a valid effect", ih.text),
                    );
                }
            }
            let a = atom(inner, true, "an effect")?;
            out.push(Literal {
                positive: false,
                atom: a,
                span: l.span,
            });
            Ok(())
        }
        _ => {
            let a = atom(l, true, "an effect")?;
            out.push(Literal {
                positive: true,
                atom: a,
                span: l.span,
            });
            Ok(())
        }
    }
}

//! Readers for the S-expression shapes every PDDL section uses: symbols, lists, names, typed
//! lists, and the two error kinds the parser raises.

use crate::ast::{TypedName, OBJECT};
use crate::diag::Span;
use crate::error::{ParseError, ParseErrorKind};
use crate::sexpr::{List, SExpr, Sym};

pub(super) type Result<T> = std::result::Result<T, ParseError>;

pub(super) fn malformed<T>(span: Span, msg: impl Into<String>) -> Result<T> {
    Err(ParseError::new(ParseErrorKind::Malformed, msg, span))
}

pub(super) fn unsupported<T>(span: Span, construct: &str) -> Result<T> {
    Err(ParseError::new(
        ParseErrorKind::Unsupported,
        format!("unsupported PDDL construct: {construct}"),
        span,
    ))
}

pub(super) fn sym<'a>(e: &'a SExpr, what: &str) -> Result<&'a Sym> {
    match e {
        SExpr::Sym(s) => Ok(s),
        SExpr::List(l) => malformed(l.span, format!("expected {what}, found a list")),
    }
}

pub(super) fn list<'a>(e: &'a SExpr, what: &str) -> Result<&'a List> {
    match e {
        SExpr::List(l) => Ok(l),
        SExpr::Sym(s) => malformed(s.span, format!("expected {what}, found `{}`", s.text)),
    }
}

/// The list's first item as a symbol, if it is one.
pub(super) fn head(l: &List) -> Option<&Sym> {
    match l.items.first() {
        Some(SExpr::Sym(s)) => Some(s),
        _ => None,
    }
}

pub(super) fn is_name(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A name (of a domain, type, object, predicate or action), checked for legal characters.
pub(super) fn name(e: &SExpr, what: &str) -> Result<(String, Span)> {
    let s = sym(e, what)?;
    if s.text.starts_with('?') {
        return malformed(
            s.span,
            format!("expected {what}, found variable `{}`", s.text),
        );
    }
    if !is_name(&s.text) {
        return malformed(s.span, format!("`{}` is not a valid {what}", s.text));
    }
    Ok((s.text.clone(), s.span))
}

/// The item after a list's head, or an error at the closing bracket naming what is missing.
pub(super) fn nth<'a>(l: &'a List, i: usize, what: &str) -> Result<&'a SExpr> {
    match l.items.get(i) {
        Some(e) => Ok(e),
        None => malformed(l.end, format!("expected {what} before ')'")),
    }
}

pub(super) fn describe(e: &SExpr) -> String {
    match e {
        SExpr::Sym(s) => s.text.clone(),
        SExpr::List(_) => "(...)".to_string(),
    }
}

pub(super) fn once(seen: &mut Vec<String>, kw: &Sym) -> Result<()> {
    if seen.contains(&kw.text) {
        return malformed(
            kw.span,
            format!("section {} appears more than once", kw.text),
        );
    }
    seen.push(kw.text.clone());
    Ok(())
}

/// `a b - t c ?x - u`: names (or variables when `vars`) with optional types; untyped ones are
/// `object`.
pub(super) fn typed_list(items: &[SExpr], vars: bool, what: &str) -> Result<Vec<TypedName>> {
    let mut out: Vec<TypedName> = Vec::new();
    let mut pending = 0usize; // how many trailing entries of `out` still await a type
    let mut i = 0;
    while i < items.len() {
        let e = &items[i];
        if let SExpr::Sym(s) = e {
            if s.text == "-" {
                if pending == 0 {
                    return malformed(s.span, format!("`-` with no {what} before it"));
                }
                let Some(t) = items.get(i + 1) else {
                    return malformed(s.span, "expected a type name after `-`");
                };
                if let SExpr::List(tl) = t {
                    if head(tl).is_some_and(|h| h.text == "either") {
                        return unsupported(tl.span, "`either` types");
                    }
                }
                let (ty, ty_span) = name(t, "type name")?;
                let n = out.len();
                for tn in &mut out[n - pending..] {
                    tn.ty = ty.clone();
                    tn.type_span = Some(ty_span);
                }
                pending = 0;
                i += 2;
                continue;
            }
        }
        let s = sym(e, what)?;
        let text = &s.text;
        if vars {
            if !(text.starts_with('?') && is_name(&text[1..])) {
                return malformed(
                    s.span,
                    format!("expected a variable like ?x, found `{text}`"),
                );
            }
        } else if !is_name(text) {
            return malformed(s.span, format!("`{text}` is not a valid {what}"));
        }
        out.push(TypedName {
            name: text.clone(),
            ty: OBJECT.to_string(),
            span: s.span,
            type_span: None,
        });
        pending += 1;
        i += 1;
    }
    Ok(out)
}

//! Lexer and S-expression reader: text → a tree of lower-cased symbols and lists, with spans.
//!
//! Reading the whole file into a tree first keeps the PDDL parser a plain walk over lists, and
//! lets bracket errors be reported once, here, with the position of the unmatched bracket.

use crate::diag::Span;
use crate::error::{ParseError, ParseErrorKind};

/// Deeper nesting than this is rejected: real PDDL nests a handful of levels, and a bound keeps
/// every recursive walk over the tree safe from stack overflow on hostile input.
pub(crate) const MAX_DEPTH: usize = 64;

/// A symbol: a name, variable (`?x`), keyword (`:action`) or number, lower-cased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sym {
    pub text: String,
    pub span: Span,
}

/// A parenthesised list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct List {
    pub items: Vec<SExpr>,
    /// Where the `(` is.
    pub span: Span,
    /// Where the `)` is.
    pub end: Span,
}

/// A node of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SExpr {
    Sym(Sym),
    List(List),
}

impl SExpr {
    pub fn span(&self) -> Span {
        match self {
            SExpr::Sym(s) => s.span,
            SExpr::List(l) => l.span,
        }
    }
}

/// Characters PDDL never uses outside comments. Rejecting them here gives a precise error for
/// markdown fences, quotes and commas that language models leave in their output.
fn is_forbidden(c: char) -> bool {
    !c.is_ascii()
        || c.is_ascii_control()
        || matches!(
            c,
            '`' | '"' | ',' | '{' | '}' | '[' | ']' | '\\' | '\'' | '|'
        )
}

/// Reads every top-level expression of `src`.
pub(crate) fn read(src: &str) -> Result<Vec<SExpr>, ParseError> {
    let mut line = 1u32;
    let mut col = 1u32;
    // Open lists under construction; the bottom entry collects top-level items.
    let mut stack: Vec<(Vec<SExpr>, Span)> = vec![(Vec::new(), Span::new(0, 0))];
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        let here = Span::new(line, col);
        match c {
            '\n' => {
                line += 1;
                col = 1;
                continue;
            }
            ';' => {
                // Comment to end of line; the newline itself is handled above.
                while let Some(&n) = chars.peek() {
                    if n == '\n' {
                        break;
                    }
                    chars.next();
                }
                continue;
            }
            c if c.is_whitespace() => {}
            '(' => {
                if stack.len() > MAX_DEPTH {
                    return Err(ParseError::new(
                        ParseErrorKind::TooDeep,
                        format!("expressions nested more than {MAX_DEPTH} levels deep"),
                        here,
                    ));
                }
                stack.push((Vec::new(), here));
            }
            ')' => {
                if stack.len() == 1 {
                    return Err(ParseError::new(
                        ParseErrorKind::Unbalanced,
                        "unmatched ')'",
                        here,
                    ));
                }
                let (items, span) = stack.pop().expect("stack has an open list");
                let list = SExpr::List(List {
                    items,
                    span,
                    end: here,
                });
                stack.last_mut().expect("bottom entry").0.push(list);
            }
            c if is_forbidden(c) => {
                return Err(ParseError::new(
                    ParseErrorKind::InvalidCharacter,
                    format!("invalid character {c:?}"),
                    here,
                ));
            }
            c => {
                let mut text = String::new();
                text.push(c.to_ascii_lowercase());
                while let Some(&n) = chars.peek() {
                    if n == '(' || n == ')' || n == ';' || n.is_whitespace() {
                        break;
                    }
                    if is_forbidden(n) {
                        return Err(ParseError::new(
                            ParseErrorKind::InvalidCharacter,
                            format!("invalid character {n:?}"),
                            Span::new(line, col + text.chars().count() as u32),
                        ));
                    }
                    text.push(n.to_ascii_lowercase());
                    chars.next();
                }
                let n = text.chars().count() as u32;
                stack
                    .last_mut()
                    .expect("bottom entry")
                    .0
                    .push(SExpr::Sym(Sym { text, span: here }));
                col += n;
                continue;
            }
        }
        col += 1;
    }
    if stack.len() > 1 {
        let (_, open) = stack.pop().expect("open list");
        return Err(ParseError::new(
            ParseErrorKind::UnexpectedEof,
            format!("unexpected end of input: '(' at {open} is never closed"),
            Span::new(line, col),
        ));
    }
    Ok(stack.pop().expect("bottom entry").0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(e: &SExpr) -> &str {
        match e {
            SExpr::Sym(s) => &s.text,
            _ => panic!("not a symbol"),
        }
    }

    #[test]
    fn reads_nested_lists_lowercased_with_spans() {
        let t = read("; c\n(Define (Domain X))  ; trailing\n").unwrap();
        assert_eq!(t.len(), 1);
        let SExpr::List(l) = &t[0] else { panic!() };
        assert_eq!(l.span, Span::new(2, 1));
        assert_eq!(sym(&l.items[0]), "define");
        let SExpr::List(inner) = &l.items[1] else {
            panic!()
        };
        assert_eq!(inner.span, Span::new(2, 9));
        assert_eq!(sym(&inner.items[1]), "x");
        assert_eq!(inner.items[1].span(), Span::new(2, 17));
    }

    #[test]
    fn bracket_errors_carry_positions() {
        let e = read("(a\n  (b c)").unwrap_err();
        assert_eq!(e.kind(), ParseErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("line 1, column 1"), "{e}");
        let e = read("(a))").unwrap_err();
        assert_eq!(
            (e.kind(), e.span()),
            (ParseErrorKind::Unbalanced, Span::new(1, 4))
        );
        let e = read("```pddl").unwrap_err();
        assert_eq!(
            (e.kind(), e.span()),
            (ParseErrorKind::InvalidCharacter, Span::new(1, 1))
        );
        let e = read("(ab,c)").unwrap_err();
        assert_eq!(e.span(), Span::new(1, 4));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = "(".repeat(100_000);
        assert_eq!(read(&src).unwrap_err().kind(), ParseErrorKind::TooDeep);
    }
}

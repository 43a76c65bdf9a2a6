//! Parse errors: what went wrong and where.

use crate::diag::{Category, Diagnostic, Span, SpecFile};

/// What kind of parse error happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseErrorKind {
    /// A character PDDL never uses (quotes, commas, backticks, non-ASCII).
    InvalidCharacter,
    /// A `)` with no matching `(`.
    Unbalanced,
    /// The input ended inside a list or before the expected definition.
    UnexpectedEof,
    /// Lists nested deeper than any real PDDL does.
    TooDeep,
    /// The text is well-bracketed but is not the PDDL expected here.
    Malformed,
    /// A valid PDDL construct this toolkit does not support (quantifiers, conditional effects, ...).
    Unsupported,
}

/// A parse error with its 1-based position. Displays as `line L, column C: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {}, column {}: {message}", span.line, span.column)]
pub struct ParseError {
    kind: ParseErrorKind,
    message: String,
    span: Span,
}

impl ParseError {
    pub(crate) fn new(kind: ParseErrorKind, message: impl Into<String>, span: Span) -> ParseError {
        ParseError {
            kind,
            message: message.into(),
            span,
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ParseErrorKind {
        self.kind
    }

    /// The message without the position.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where the offending token is.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The error as a `syntax` diagnostic in `file`. Unsupported constructs are `syntax` too:
    /// the planner pipeline cannot take them, whatever their meaning.
    pub fn to_diagnostic(&self, file: SpecFile) -> Diagnostic {
        Diagnostic::error(Category::Syntax, self.message.clone()).at(file, self.span)
    }
}

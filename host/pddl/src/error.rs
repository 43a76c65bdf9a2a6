//! Parse and grounding errors: what went wrong and where.

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

/// Why a (domain, problem) pair could not be grounded. [`crate::check`] reports all of these
/// as diagnostics first; grounding stops at the first.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroundError {
    /// A type name that is not declared.
    #[error("{span}: unknown type `{name}` ({context})")]
    UnknownType {
        /// The unknown type.
        name: String,
        /// Where it was used, in words.
        context: String,
        /// Where it was written.
        span: Span,
    },
    /// The type hierarchy has a cycle through this type.
    #[error("{span}: type `{name}` is its own ancestor")]
    TypeCycle {
        /// A type on the cycle.
        name: String,
        /// Where it is declared.
        span: Span,
    },
    /// An object or constant that is not declared.
    #[error("{span}: unknown object `{name}`")]
    UnknownObject {
        /// The unknown name.
        name: String,
        /// Where it was used.
        span: Span,
    },
    /// A predicate that is not declared.
    #[error("{span}: unknown predicate `{name}`")]
    UnknownPredicate {
        /// The unknown name.
        name: String,
        /// Where it was used.
        span: Span,
    },
    /// A predicate used with the wrong number of arguments.
    #[error("{span}: predicate `{predicate}` takes {expected} arguments, found {found}")]
    Arity {
        /// The predicate.
        predicate: String,
        /// Its declared arity.
        expected: usize,
        /// How many arguments were given.
        found: usize,
        /// Where the atom is.
        span: Span,
    },
    /// A variable that is not a parameter of its action.
    #[error("{span}: `{name}` is not a parameter of action `{action}`")]
    UndeclaredVariable {
        /// The variable.
        name: String,
        /// The action.
        action: String,
        /// Where it was used.
        span: Span,
    },
    /// The task is too large to ground (see [`MAX_JOIN_STEPS`] and [`MAX_GROUND_ACTIONS`]).
    #[error("grounding exceeded {limit}")]
    TooLarge {
        /// Which limit was hit, in words.
        limit: String,
    },
}

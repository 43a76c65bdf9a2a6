//! Diagnostics: the structured d of the verifier's E(y) → (b, d).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A 1-based line and column in a source file; columns count characters.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Span {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column number, in characters.
    pub column: u32,
}

impl Span {
    /// A span at `line`, `column` (both 1-based).
    pub const fn new(line: u32, column: u32) -> Span {
        Span { line, column }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The diagnostic categories of the paper, plus `solver-error` for crashes of the planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// The file does not lex or parse, or uses an unsupported PDDL construct.
    Syntax,
    /// Undefined or duplicate types, objects or constants; arguments of the wrong type.
    ObjectType,
    /// Undefined predicates, wrong arity, undeclared parameters, duplicate schemas, domain-name mismatch.
    PredicateSchema,
    /// Contradictory preconditions or effects; actions that can never fire.
    PreconditionEffect,
    /// Goal literals that can never hold, or that contradict each other.
    GoalConstraint,
    /// The planner's search (or the relaxed analysis) proves the goal unreachable, or runs out of time or memory.
    Unreachable,
    /// The planner crashed or answered in a way that could not be understood.
    SolverError,
}

impl Category {
    /// Every category, in the paper's order.
    pub const ALL: [Category; 7] = [
        Category::Syntax,
        Category::ObjectType,
        Category::PredicateSchema,
        Category::PreconditionEffect,
        Category::GoalConstraint,
        Category::Unreachable,
        Category::SolverError,
    ];

    /// The kebab-case name used in JSON and on the command line, e.g. `"object-type"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Category::Syntax => "syntax",
            Category::ObjectType => "object-type",
            Category::PredicateSchema => "predicate-schema",
            Category::PreconditionEffect => "precondition-effect",
            Category::GoalConstraint => "goal-constraint",
            Category::Unreachable => "unreachable",
            Category::SolverError => "solver-error",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Category {
    type Err = String;

    fn from_str(s: &str) -> Result<Category, String> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown diagnostic category `{s}`"))
    }
}

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The task is ill-formed or cannot be solved: the verifier does not call the planner.
    Error,
    /// Suspicious, but the planner still runs.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// Which of the three files a diagnostic points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecFile {
    /// The domain file.
    Domain,
    /// The problem file.
    Problem,
    /// The plan file.
    Plan,
}

impl fmt::Display for SpecFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpecFile::Domain => "domain",
            SpecFile::Problem => "problem",
            SpecFile::Plan => "plan",
        })
    }
}

/// One finding about a spec: category, severity, a precise message and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The paper's category.
    pub category: Category,
    /// Error (blocks the planner) or warning.
    pub severity: Severity,
    /// What is wrong, naming the offending token.
    pub message: String,
    /// The file it points into, if any.
    pub file: Option<SpecFile>,
    /// 1-based line, if known.
    pub line: Option<u32>,
    /// 1-based column, if known.
    pub column: Option<u32>,
}

impl Diagnostic {
    /// An error with no location yet.
    pub fn error(category: Category, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            category,
            severity: Severity::Error,
            message: message.into(),
            file: None,
            line: None,
            column: None,
        }
    }

    /// A warning with no location yet.
    pub fn warning(category: Category, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(category, message)
        }
    }

    /// The same diagnostic, located at `span` in `file`.
    pub fn at(mut self, file: SpecFile, span: Span) -> Diagnostic {
        self.file = Some(file);
        self.line = Some(span.line);
        self.column = Some(span.column);
        self
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// `problem:12:5: error[object-type]: ...`, the form the Editor's prompt shows.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = self.file {
            write!(f, "{file}:")?;
        }
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{l}:{c}: ")?,
            (Some(l), None) => write!(f, "{l}: ")?,
            _ if self.file.is_some() => f.write_str(" ")?,
            _ => {}
        }
        write!(f, "{}[{}]: {}", self.severity, self.category, self.message)
    }
}

/// True if any diagnostic is an [`Severity::Error`].
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(Diagnostic::is_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_names_round_trip_through_serde_and_from_str() {
        for c in Category::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(c.as_str().parse::<Category>().unwrap(), c);
        }
        assert!("nope".parse::<Category>().is_err());
    }

    #[test]
    fn diagnostic_serialises_with_lowercase_fields() {
        let d =
            Diagnostic::warning(Category::ObjectType, "m").at(SpecFile::Problem, Span::new(3, 7));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["category"], "object-type");
        assert_eq!(json["severity"], "warning");
        assert_eq!(json["file"], "problem");
        assert_eq!(json["line"], 3);
        assert_eq!(d.to_string(), "problem:3:7: warning[object-type]: m");
        assert!(!has_errors(std::slice::from_ref(&d)));
        assert!(has_errors(&[d, Diagnostic::error(Category::Syntax, "x")]));
    }
}

//! Finding the domain and problem PDDL in what a model wrote.
//!
//! Small models wrap PDDL in code fences, or not; write prose around it; repeat the given
//! domain before the problem; or stop mid-form when `max_tokens` runs out. The extractor
//! scans for every `(define (domain …` / `(define (problem …` form, reads it with balanced
//! parentheses (skipping `;` comments and strings), and keeps the first complete form of each
//! kind. An unterminated form is kept as written, never closed by guessing: the verifier then
//! reports the syntax error with its line and column, which is what the Editor needs to see.

use onebrain_core::{Category, Diagnostic, Outcome, Spec, Verdict};
use serde::{Deserialize, Serialize};

/// What the model is asked to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The model writes the domain and the problem (the paper's setting).
    #[default]
    Full,
    /// The domain is given by the domain plugin; the model writes the problem (as LLM+P does).
    Problem,
}

impl Mode {
    /// The name used in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Problem => "problem",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "full" => Ok(Mode::Full),
            "problem" => Ok(Mode::Problem),
            other => Err(format!("unknown mode `{other}` (expected full or problem)")),
        }
    }
}

/// One `(define …)` form found in model output.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Form {
    kind: Kind,
    text: String,
    complete: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Domain,
    Problem,
}

/// The outcome of [`extract_spec`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// The spec to verify; `None` when the output holds no usable PDDL.
    pub spec: Option<Spec>,
    /// A form was cut off before its closing parenthesis (kept as written).
    pub unterminated: bool,
    /// In `problem` mode, the model also wrote a domain, which was ignored.
    pub ignored_domain: bool,
    /// `define` forms found, of any kind.
    pub forms_found: usize,
    /// Why no spec could be formed (the message of the `syntax` failure verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Extraction {
    /// The verdict for output with no usable PDDL: a `syntax` failure, with no solver call.
    pub fn failure_verdict(&self) -> Option<Verdict> {
        let message = self.failure.as_ref()?;
        Some(Verdict {
            solved: false,
            outcome: Outcome::Rejected,
            plan: Vec::new(),
            diagnostics: vec![Diagnostic::error(Category::Syntax, message.clone())],
            time_ms: 0,
            solver_time_ms: 0,
            solver_output: None,
        })
    }
}

/// Extracts the spec from `output`. In [`Mode::Problem`] the domain is `given_domain` and only
/// a problem is looked for; in [`Mode::Full`] both must be present.
pub fn extract_spec(output: &str, mode: Mode, given_domain: Option<&str>) -> Extraction {
    let forms = find_forms(output);
    let pick = |kind| {
        forms
            .iter()
            .filter(|f| f.kind == kind)
            .find(|f| f.complete)
            .or_else(|| forms.iter().find(|f| f.kind == kind))
    };
    let problem = pick(Kind::Problem);
    let domain = pick(Kind::Domain);
    let mut ex = Extraction {
        forms_found: forms.len(),
        ..Default::default()
    };
    let domain_text = match mode {
        Mode::Problem => {
            ex.ignored_domain = domain.is_some();
            match given_domain {
                Some(d) => Some(d.to_string()),
                None => {
                    ex.failure = Some("problem mode needs the domain plugin's domain".into());
                    return ex;
                }
            }
        }
        Mode::Full => domain.map(|d| d.text.clone()),
    };
    let missing = match (&domain_text, problem) {
        (Some(_), Some(_)) => None,
        (None, Some(_)) => Some("`(define (domain ...))` form"),
        (Some(_), None) => Some("`(define (problem ...))` form"),
        (None, None) if mode == Mode::Full => {
            Some("PDDL (no `(define (domain ...))` or `(define (problem ...))` form)")
        }
        (None, None) => Some("`(define (problem ...))` form"),
    };
    if let Some(what) = missing {
        ex.failure = Some(format!("the output holds no {what}"));
        return ex;
    }
    let problem = problem.expect("checked above");
    ex.unterminated =
        !problem.complete || (mode == Mode::Full && domain.is_some_and(|d| !d.complete));
    ex.spec = Some(Spec {
        domain: domain_text.expect("checked above"),
        problem: problem.text.clone(),
    });
    ex
}

/// Every `(define (domain|problem …` form, in order.
fn find_forms(text: &str) -> Vec<Form> {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    // `(` and `define` may have blanks between them, as in any Lisp reader (Fast Downward's
    // and ours): the `full` grammar allows them, so the extractor must too (regression: a
    // Gripper answer wrote `(  define (problem` and every step was called a syntax failure).
    while let Some(rel) = lower[at..].find('(') {
        let start = at + rel;
        let Some(after_define) = lower[start + 1..].trim_start().strip_prefix("define") else {
            at = start + 1;
            continue;
        };
        if in_comment(bytes, start) {
            at = start + 1;
            continue;
        }
        let kind = match header_kind(after_define) {
            Some(k) => k,
            None => {
                at = start + 1;
                continue;
            }
        };
        let (end, complete) = form_end(bytes, start);
        out.push(Form {
            kind,
            text: text[start..end].trim_end().to_string(),
            complete,
        });
        at = end.max(start + 1);
    }
    out
}

/// True when position `i` sits after a `;` on its line.
fn in_comment(bytes: &[u8], i: usize) -> bool {
    let line_start = bytes[..i]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    bytes[line_start..i].contains(&b';')
}

/// `… (domain name)` or `… (problem name)` right after `(define`, whitespace allowed.
fn header_kind(after_define: &str) -> Option<Kind> {
    let rest = after_define.trim_start();
    let rest = rest.strip_prefix('(')?.trim_start();
    if rest.starts_with("domain") {
        Some(Kind::Domain)
    } else if rest.starts_with("problem") {
        Some(Kind::Problem)
    } else {
        None
    }
}

/// Where the form opened at `start` ends: just after its closing parenthesis (complete), or at
/// a closing code fence or the end of the text (unterminated).
fn form_end(bytes: &[u8], start: usize) -> (usize, bool) {
    let mut depth = 0usize;
    let mut i = start;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b';' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return (i + 1, true);
                    }
                }
                b'`' if bytes[i..].starts_with(b"```") => return (i, false),
                _ => {}
            }
        }
        i += 1;
    }
    (bytes.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: &str = "(define (domain d) (:predicates (p ?x)) (:action a :parameters (?x) :precondition (p ?x) :effect (not (p ?x))))";
    const PROBLEM: &str =
        "(define (problem q) (:domain d) (:objects o) (:init (p o)) (:goal (not (p o))))";

    #[test]
    fn fenced_blocks_with_prose() {
        let out = format!("Here is the domain:\n```pddl\n{DOMAIN}\n```\nAnd the problem:\n```lisp\n{PROBLEM}\n```\nDone.");
        let ex = extract_spec(&out, Mode::Full, None);
        let spec = ex.spec.unwrap();
        assert_eq!(spec.domain, DOMAIN);
        assert_eq!(spec.problem, PROBLEM);
        assert!(!ex.unterminated);
        assert_eq!(ex.forms_found, 2);
    }

    #[test]
    fn bare_forms_case_and_whitespace() {
        let out = format!(
            "{}\n\n( DEFINE  ( PROBLEM q) (:domain d))",
            DOMAIN.replace("(define", "(define\n ")
        );
        // Blanks may sit between `(` and `define`, as between `(` and `problem`.
        let ex = extract_spec(&out, Mode::Full, None);
        let spec = ex.spec.unwrap();
        assert_eq!(ex.forms_found, 2);
        assert!(spec.domain.starts_with("(define\n  (domain d)"));
        assert_eq!(spec.problem, "( DEFINE  ( PROBLEM q) (:domain d))");
        let ex = extract_spec(&out.replace("( DEFINE  ( PROBLEM", "(DEFINE  ( PROBLEM"), Mode::Full, None);
        assert_eq!(ex.spec.unwrap().problem, "(DEFINE  ( PROBLEM q) (:domain d))");
        // `(defined (problem` is not one.
        let ex = extract_spec(&out.replace("( DEFINE  ( PROBLEM", "(defined (problem"), Mode::Full, None);
        assert_eq!((ex.forms_found, ex.spec.is_none()), (1, true));
    }

    #[test]
    fn comments_and_strings_do_not_unbalance() {
        let problem = "(define (problem q) ; a comment with ) and (define (domain x)\n (:domain d) (:objects o) (:init (p o)) (:goal (p o)))";
        let ex = extract_spec(&format!("{DOMAIN}\n{problem}"), Mode::Full, None);
        let spec = ex.spec.unwrap();
        assert_eq!(spec.problem, problem);
        assert_eq!(ex.forms_found, 2, "the commented define is not a form");
    }

    #[test]
    fn unterminated_output_is_kept_as_written() {
        let cut = &PROBLEM[..PROBLEM.len() - 10];
        let ex = extract_spec(&format!("```pddl\n{cut}"), Mode::Problem, Some(DOMAIN));
        assert!(ex.unterminated);
        assert_eq!(ex.spec.unwrap().problem, cut);
        // A closing fence ends an unbalanced form.
        let ex = extract_spec(
            &format!("```pddl\n{cut}\n```\nThat is all."),
            Mode::Problem,
            Some(DOMAIN),
        );
        assert_eq!(ex.spec.unwrap().problem, cut);
    }

    #[test]
    fn problem_mode_uses_the_given_domain() {
        let ex = extract_spec(
            &format!("{DOMAIN}\n{PROBLEM}"),
            Mode::Problem,
            Some("(define (domain given))"),
        );
        assert!(ex.ignored_domain);
        assert_eq!(ex.spec.unwrap().domain, "(define (domain given))");
        let ex = extract_spec(PROBLEM, Mode::Problem, None);
        assert!(ex.spec.is_none() && ex.failure.is_some());
    }

    #[test]
    fn a_complete_form_wins_over_an_earlier_broken_one() {
        let out = format!("(define (problem broken) (:init\n```\n{PROBLEM}");
        let ex = extract_spec(&out, Mode::Problem, Some(DOMAIN));
        assert_eq!(ex.spec.unwrap().problem, PROBLEM);
        assert!(!ex.unterminated);
    }

    #[test]
    fn no_pddl_is_a_syntax_failure_not_a_crash() {
        for out in [
            "",
            "I cannot help with that.",
            "(define",
            "(define (foo))",
            "((((",
            ")))",
            "```",
            "(define (domain",
            "é(define (problem ü",
        ] {
            for mode in [Mode::Full, Mode::Problem] {
                let ex = extract_spec(out, mode, Some(DOMAIN));
                if let Some(v) = ex.failure_verdict() {
                    assert!(!v.solved);
                    assert_eq!(v.dominant_category(), Some(Category::Syntax));
                    assert!(ex.spec.is_none());
                } else {
                    assert!(ex.spec.is_some(), "{out:?} {mode:?}");
                }
            }
        }
        let ex = extract_spec("Sure! Here is my answer.", Mode::Full, None);
        assert!(
            ex.failure.unwrap().contains("no PDDL"),
            "full mode with no form at all"
        );
        let ex = extract_spec(DOMAIN, Mode::Full, None);
        assert!(ex.failure.unwrap().contains("problem"));
    }
}

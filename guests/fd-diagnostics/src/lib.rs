//! Reads Fast Downward's output (driver exit code, translator and search
//! logs) into the paper's diagnostic categories.
//!
//! The translator stops at the first error it finds and prints where it was
//! (`Parsing domain` / `Parsing problem`, then `->Parsing goal` …), a one-line
//! message and `Got: <the offending text>`. The exit codes are the driver's
//! documented ones (10/11/12 unsolvable or unsolved, 2x out of resources,
//! 3x errors).

use onebrain_sdk::{Category, DiagnosticParser, Diagnostic, Result, Severity, SolverOutput, SpecFile};

#[derive(Default)]
pub struct FdDiagnostics;

fn diag(category: Category, message: String, file: Option<SpecFile>) -> Diagnostic {
    Diagnostic { category, severity: Severity::Error, message, file, line: None, column: None }
}

/// The category of a translator parse message, and whether `Got:` names a
/// token (a word) rather than a whole block.
fn classify(message: &str, got: Option<&str>) -> Category {
    let m = message.to_ascii_lowercase();
    let word = got.is_some_and(|g| !g.starts_with('('));
    if m.contains("undefined object") || m.contains("duplicate object") || m.contains("type") && !m.contains("expected") {
        Category::ObjectType
    } else if m.contains("arity") || m.contains("undefined predicate") || m.contains("predicate name") && word {
        Category::PredicateSchema
    } else {
        Category::Syntax
    }
}

/// The translator's error: the lines after its last `Parsing …` context.
fn translator_error(out: &str) -> Option<Diagnostic> {
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with("INFO") && !l.starts_with("[t=")).collect();
    let end = lines.iter().position(|l| l.starts_with("translate exit code"))?;
    let mut file = None;
    let mut message = None;
    let mut got = None;
    for l in &lines[..end] {
        let t = l.trim();
        match t {
            "Parsing domain" => file = Some(SpecFile::Domain),
            "Parsing problem" => file = Some(SpecFile::Problem),
            _ if t.starts_with("Got: ") => got = Some(t[5..].to_string()),
            _ if t.is_empty() || t.starts_with("->") || t.starts_with("Parsing") || t.starts_with("Syntax:") => {}
            _ => message = Some(t.to_string()),
        }
    }
    let message = message?;
    let category = classify(&message, got.as_deref());
    let text = match &got {
        Some(g) => format!("Fast Downward's translator: {message} (got `{g}`)"),
        None => format!("Fast Downward's translator: {message}"),
    };
    Some(diag(category, text, file))
}

impl DiagnosticParser for FdDiagnostics {
    fn parse(&self, raw: &SolverOutput, native: &[Diagnostic]) -> Result<Vec<Diagnostic>> {
        if raw.timed_out {
            return Ok(vec![diag(Category::SolverError, "the planner ran out of wall-clock time".into(), None)]);
        }
        let found = match raw.exit_code {
            None => Some(diag(Category::SolverError, "the planner was killed by a signal".into(), None)),
            Some(0..=9) => None,
            Some(10) => Some(diag(Category::Unreachable, "the translator proved the goal unreachable (the task simplified to an unsolvable one)".into(), None)),
            Some(11) => Some(diag(Category::Unreachable, "the search explored every reachable state and found no plan: the goal is unreachable".into(), None)),
            Some(12) => Some(diag(Category::Unreachable, "the search ended without a plan (incomplete search)".into(), None)),
            Some(c @ 20..=24) => Some(diag(Category::SolverError, format!("the planner ran out of resources (exit code {c})"), None)),
            Some(c @ (31 | 33 | 36)) => translator_error(&raw.stdout)
                .or_else(|| Some(diag(Category::Syntax, format!("the planner rejected its input (exit code {c})"), None))),
            Some(c) => Some(diag(Category::SolverError, format!("the planner failed (exit code {c}): {}", raw.stderr.lines().last().unwrap_or("")), None)),
        };
        // Say nothing the native checks already said in the same category.
        Ok(found.into_iter().filter(|d| !native.iter().any(|n| n.category == d.category && n.severity == Severity::Error)).collect())
    }
}

onebrain_sdk::export_diagnostic_parser!(FdDiagnostics);

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: i32, stdout: &str) -> Vec<Diagnostic> {
        let raw = SolverOutput { exit_code: Some(code), stdout: stdout.into(), ..Default::default() };
        FdDiagnostics.parse(&raw, &[]).unwrap()
    }

    #[test]
    fn translator_messages_get_categories_and_files() {
        let undefined = "Parsing...\nParsing problem\n\t->Parsing goal\n\t->Parsing literal\nUndefined object\nGot: zz\ntranslate exit code: 31\n";
        let d = run(31, undefined);
        assert_eq!((d[0].category, d[0].file), (Category::ObjectType, Some(SpecFile::Problem)));
        assert!(d[0].message.contains("`zz`"));
        let pred = "Parsing domain\n\t->Parsing condition\nExpected logical operator or predicate name\nGot: holdin\ntranslate exit code: 31\n";
        assert_eq!(run(31, pred)[0].category, Category::PredicateSchema);
        assert_eq!(run(31, pred)[0].file, Some(SpecFile::Domain));
        let arity = "Parsing problem\nPredicate 'on' of arity 2 used with 3 arguments.\nGot: (on c a b)\ntranslate exit code: 31\n";
        assert_eq!(run(31, arity)[0].category, Category::PredicateSchema);
        let block = "Parsing problem\nExpected a non-empty block starting with any of the following words: :goal\nSyntax: (:goal GOAL)\nGot: (:goall (and (on c a)))\ntranslate exit code: 31\n";
        assert_eq!(run(31, block)[0].category, Category::Syntax);
        let dup = "Parsing...\n\nFound the following duplicate objects: a\ntranslate exit code: 31\n";
        assert_eq!(run(31, dup)[0].category, Category::ObjectType);
    }

    #[test]
    fn exit_codes_map_to_outcomes() {
        assert!(run(0, "Solution found!").is_empty());
        assert_eq!(run(11, "Task is provably unsolvable.")[0].category, Category::Unreachable);
        assert_eq!(run(23, "")[0].category, Category::SolverError);
        assert_eq!(run(31, "garbage")[0].category, Category::Syntax);
        let native = [diag(Category::Unreachable, "native".into(), None)];
        let raw = SolverOutput { exit_code: Some(11), ..Default::default() };
        assert!(FdDiagnostics.parse(&raw, &native).unwrap().is_empty());
    }
}

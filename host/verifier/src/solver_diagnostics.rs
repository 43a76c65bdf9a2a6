//! The built-in reading of Fast Downward's output, used when no
//! `diagnostic-parser` plugin is configured (or when the plugin fails).

use std::time::Duration;

use onebrain_core::{Category, Diagnostic, Outcome, Severity, SolverOutput};

/// Diagnostics for a planner run that did not solve the task.
pub fn diagnose(
    outcome: Outcome,
    out: &SolverOutput,
    timeout: Duration,
    memory_mb: u64,
) -> Vec<Diagnostic> {
    let (category, message) = match outcome {
        Outcome::Solved | Outcome::Rejected => return Vec::new(),
        Outcome::Unsolvable => (
            Category::Unreachable,
            if out.exit_code == Some(10) {
                "Fast Downward's translator proved the goal unreachable: no sequence of actions achieves it from the initial state".to_string()
            } else {
                "Fast Downward explored the whole reachable state space and found no plan: the goal is unreachable from the initial state".to_string()
            },
        ),
        Outcome::Timeout => (
            Category::Unreachable,
            format!(
                "Fast Downward found no plan within the {} s time limit (search timed out)",
                timeout.as_secs_f64()
            ),
        ),
        Outcome::OutOfMemory => (
            Category::Unreachable,
            format!("Fast Downward ran out of memory ({memory_mb} MiB) before finding a plan"),
        ),
        Outcome::InputError => {
            let excerpt = error_excerpt(out);
            (
                input_error_category(&excerpt),
                format!("Fast Downward rejected the input: {excerpt}"),
            )
        }
        Outcome::SolverError => (
            Category::SolverError,
            format!(
                "Fast Downward failed (exit code {}): {}",
                out.exit_code
                    .map_or("none: killed by a signal".to_string(), |c| c.to_string()),
                error_excerpt(out)
            ),
        ),
    };
    vec![Diagnostic {
        category,
        severity: Severity::Error,
        message,
        file: None,
        line: None,
        column: None,
    }]
}

/// The lines of the driver's output that explain an error: the translator's
/// and the search's own messages, without the driver's INFO chatter.
pub fn error_excerpt(out: &SolverOutput) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        let line = line.trim();
        let noise = line.is_empty()
            || line.starts_with("INFO")
            || line.starts_with("Parsing")
            || line.starts_with("->")
            || line.contains("exit code")
            || line.starts_with("Driver aborting")
            || line.starts_with("Remove intermediate");
        if !noise {
            lines.push(line);
        }
    }
    let start = lines.len().saturating_sub(4);
    let text = lines[start..].join(" / ");
    if text.is_empty() {
        "no message".to_string()
    } else {
        text
    }
}

/// The closest diagnostic category for a translator input error.
fn input_error_category(message: &str) -> Category {
    let m = message.to_ascii_lowercase();
    if m.contains("predicate") || m.contains("arity") || m.contains("parameter") {
        Category::PredicateSchema
    } else if m.contains("type") || m.contains("object") || m.contains("constant") {
        Category::ObjectType
    } else {
        Category::Syntax
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str) -> SolverOutput {
        SolverOutput {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: String::new(),
            timed_out: false,
        }
    }

    #[test]
    fn translator_messages_are_kept_and_categorised() {
        let log = "INFO     Running translator.\nParsing...\n\t->Parsing goal\nExpected logical operator or predicate name\nGot: onn\ntranslate exit code: 31\n\nDriver aborting after translate\n";
        let d = diagnose(
            Outcome::InputError,
            &out(31, log),
            Duration::from_secs(60),
            4096,
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].category, Category::PredicateSchema);
        assert!(
            d[0].message
                .contains("Expected logical operator or predicate name / Got: onn"),
            "{}",
            d[0].message
        );
        let log = "Parsing...\nError: Could not parse problem file: syn.pddl\nReason: Missing ')'\ntranslate exit code: 31\n";
        let d = diagnose(
            Outcome::InputError,
            &out(31, log),
            Duration::from_secs(60),
            4096,
        );
        assert_eq!(d[0].category, Category::Syntax);
        assert!(d[0].message.contains("Missing ')'"));
    }

    #[test]
    fn unsolvable_timeout_and_memory_are_unreachable() {
        for outcome in [Outcome::Unsolvable, Outcome::Timeout, Outcome::OutOfMemory] {
            let d = diagnose(outcome, &out(11, ""), Duration::from_secs(1), 512);
            assert_eq!(d[0].category, Category::Unreachable);
        }
        let d = diagnose(Outcome::Timeout, &out(23, ""), Duration::from_secs(1), 512);
        assert!(d[0].message.contains("1 s time limit"));
        assert!(diagnose(Outcome::Solved, &out(0, ""), Duration::from_secs(1), 512).is_empty());
    }

    #[test]
    fn crashes_are_solver_errors() {
        let d = diagnose(
            Outcome::SolverError,
            &SolverOutput::default(),
            Duration::from_secs(1),
            512,
        );
        assert_eq!(d[0].category, Category::SolverError);
        assert!(d[0].message.contains("killed by a signal"));
    }
}

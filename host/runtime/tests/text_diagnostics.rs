//! `text-diagnostics` through the real plugin host: the component built from
//! guests/text-diagnostics, loaded from plugins/text-diagnostics as a config's diagnostic
//! reviewer. Its `review` crosses the WASM boundary with the task text and the spec, and
//! answers what it answers natively.

mod common;

use onebrain_core::{Category, DiagnosticParser, Severity, Spec, SpecFile};
use onebrain_runtime::{InstancePolicy, Limits, RuntimeConfig, WasmDiagnosticParser};

/// The reviewer a config lists: `diagnostic-reviewers = ["text-diagnostics"]`.
fn reviewer() -> std::sync::Arc<WasmDiagnosticParser> {
    common::build();
    let config = RuntimeConfig::from_toml("plugin-dirs = [\"plugins\"]\ndiagnostic-reviewers = [\"text-diagnostics\"]\n").unwrap();
    let mut plugins = config.load(&common::root()).unwrap();
    assert_eq!(plugins.diagnostic_reviewers.len(), 1);
    assert!(plugins.diagnostic_parser.is_none(), "a reviewer is not the planner-output parser");
    plugins.diagnostic_reviewers.pop().unwrap()
}

#[test]
fn review_crosses_the_boundary_with_the_text_and_the_spec() {
    let Some(data) = common::data_dir() else { return };
    let (text, reference, _) = common::planbench_rows(&data, "blocksworld").into_iter().next().unwrap();
    let problem = reference.problem.replacen("(:objects a b c d", "(:objects a b c d table", 1).replacen("(ontable b)", "(on b table)", 1);
    let spec = Spec { problem, ..reference.clone() };
    let reviewer = reviewer();
    let found = [onebrain_core::Diagnostic::error(Category::Unreachable, "the goal is unreachable")];
    let got = reviewer.review(&text, &spec, &found).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0].category, got[0].severity, got[0].file, got[0].line, got[0].column, got[0].message.as_str()),
        (Category::ObjectType, Severity::Warning, Some(SpecFile::Problem), Some(5), Some(19), "object \"table\" is not named in the task text")
    );
    assert_eq!(
        (got[1].category, got[1].file, got[1].message.as_str()),
        (Category::GoalConstraint, None, "the text states (ontable b), the problem does not")
    );
    // The reference itself: nothing to say. No text at all: nothing either.
    assert!(reviewer.review(&text, &reference, &found).unwrap().is_empty());
    assert!(reviewer.review("", &spec, &[]).unwrap().is_empty());
    // `parse` is not served: the built-in reading of the planner's output stays in charge.
    assert!(reviewer.parse(&onebrain_core::SolverOutput::default(), &[]).unwrap().is_empty());
}

#[test]
fn the_sandbox_answers_what_the_guest_answers_natively() {
    let Some(data) = common::data_dir() else { return };
    let host = common::host(Limits::default());
    let reviewer = WasmDiagnosticParser::reviewer(&common::bundled(&host, "text-diagnostics"), InstancePolicy::Reuse).unwrap();
    let mut compared = 0;
    for folder in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let rows = common::planbench_rows(&data, folder);
        // Every 7th row against the next row's spec: the most findings, the cap included.
        for i in (0..rows.len()).step_by(7) {
            let (text, _, _) = &rows[i];
            let (other_text, other, _) = &rows[(i + 1) % rows.len()];
            if other_text == text {
                continue;
            }
            let wasm = reviewer.try_review(text, other, &[]).unwrap();
            assert_eq!(wasm, text_diagnostics::review(text, other), "{folder} row {i}");
            assert!(!wasm.is_empty() && wasm.len() <= text_diagnostics::MAX_DIAGNOSTICS, "{folder} row {i}: {wasm:?}");
            compared += 1;
        }
    }
    assert!(compared > 200, "{compared}");
}

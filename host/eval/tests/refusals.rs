//! Errors that are not answers: requests the model refused, and plugin failures, reported
//! apart from the answers.

mod common;

use std::path::Path;
use std::sync::Arc;

use onebrain_core::{BoxError, Category, DomainAdapter, FaithfulnessReport};
use onebrain_eval::{read_trace, run_eval_with, EvalConfig, Report};
use onebrain_roles::{
    EpisodeRecord, Finalizer, Generation, LanguageModel, Role, SamplingConfig, Services, Strategy,
};

use common::*;

/// [`Echo`]'s answers, but every request whose prompt contains one of `refused` is refused
/// as the memory budget refuses one.
struct Refuses(Vec<&'static str>);
impl LanguageModel for Refuses {
    fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
        if self.0.iter().any(|r| prompt.contains(r)) {
            return Err(REFUSAL.into());
        }
        Echo(Default::default()).generate(role, prompt, s)
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "refuses".into()
    }
}

/// Three toy tasks (seeds 1 to 3) under multi-role, the model refusing the prompts that
/// contain one of `refused`.
fn run_refusing(dir: &Path, refused: Vec<&'static str>) -> onebrain_eval::EvalOutcome {
    let cfg = EvalConfig::from_toml(
        "name = \"toy\"\nout-dir = \"out\"\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 3\n[episode]\nmode = \"problem\"",
    )
    .unwrap();
    let services = Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer { reward: None, checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())) },
        plugins: Vec::new(),
    };
    let mut model = None;
    let mut load = || Ok(Box::new(Refuses(refused.clone())) as Box<dyn LanguageModel>);
    run_eval_with(&cfg, dir, &services, &mut load, &mut model, None, &mut |_| {}).unwrap()
}

/// Regression: a request the memory budget refused was counted as an unsolved answer and
/// checked as "the model wrote no PDDL", so a run whose every request was refused reported
/// 0 % solved. Such an episode is an error: in the trace with no faithfulness report, and in
/// the report apart from the answers, in no rate's denominator.
#[test]
fn a_refused_request_is_an_error_apart_from_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_refusing(dir.path(), vec!["Task 2:"]);
    assert_eq!((out.ran, out.episodes, out.unanswered), (3, 3, 1));
    assert!(out.no_answers().is_none(), "two episodes answered");
    let records = read_trace(&out.trace_path).unwrap().records;
    let refused = records.iter().find(|r| r.task_text.starts_with("Task 2:")).unwrap();
    assert_eq!(refused.error.as_deref(), Some(format!("model error (actor): {REFUSAL}").as_str()));
    assert_eq!(refused.stop_error(), refused.error.as_deref());
    assert!(refused.faithfulness.is_none(), "no answer to check: {:?}", refused.faithfulness);
    assert!(records.iter().filter(|r| r.task_id != refused.task_id).all(|r| r.stop_error().is_none() && r.solved));

    // 2 of 2 answers solved and faithful, the refusal on a line of its own.
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&out.report_paths.json).unwrap()).unwrap();
    let x = &report.strategies[0];
    assert_eq!((x.n, x.unanswered, x.errors), (3, 1, 1));
    assert_eq!((x.success["toy"].k, x.success["toy"].n), (2, 2));
    assert_eq!((x.faithful["toy"].k, x.faithful["toy"].n), (2, 2));
    assert_eq!(x.faithfulness.as_ref().unwrap().n, 2);
    assert_eq!(x.csr[0], 1.0);
    assert_eq!(x.unanswered_error.as_deref(), refused.error.as_deref());
    assert!(out.summary.contains("| multi-role | 100.0 (2/2) | 100.0 |"), "{}", out.summary);
    assert!(
        out.summary.contains("**multi-role: 1 of 3 episodes stopped on an error before their answer**")
            && out.summary.contains(REFUSAL),
        "{}",
        out.summary
    );
    let md = std::fs::read_to_string(&out.report_paths.markdown).unwrap();
    assert!(md.contains("3 episodes, 1 of them stopped on an error before their answer"), "{md}");
    assert!(md.contains("| multi-role | model | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 1 |"), "the failure table: {md}");
}

/// A run whose every request was refused has no answer; `no_answers` gives the
/// error `onebrain eval` exits with, naming the refusal. The report shows no 0 %.
#[test]
fn a_run_with_every_request_refused_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_refusing(dir.path(), vec!["Task"]);
    assert_eq!((out.episodes, out.unanswered), (3, 3));
    let err = out.no_answers().expect("no episode answered").to_string();
    assert!(err.starts_with("none of the 3 episode(s) in "), "{err}");
    assert!(err.contains(&format!("the first: model error (actor): {REFUSAL}")), "{err}");
    assert!(err.contains("remove it to run them again"), "{err}");
    assert!(out.summary.contains("| multi-role | – | – |"), "{}", out.summary);
    assert!(!out.summary.contains("0.0"), "{}", out.summary);
    for r in read_trace(&out.trace_path).unwrap().records {
        assert!(r.faithfulness.is_none() && r.stop_error().is_some(), "{r:?}");
    }
}

/// A trace from an older build, whose refused episodes carry the checker's "the model
/// wrote no PDDL", reports them apart as well; a record without an error reads and writes
/// back byte for byte, as a resumed run compares it.
#[test]
fn an_old_trace_with_refused_episodes_reports_them_apart() {
    let mut old = record("a/1", "A", Strategy::MultiRole, &[Some(Category::Syntax)], None, Some(FaithfulnessReport {
        explanation: vec!["the model wrote no PDDL".into()],
        ..Default::default()
    }));
    old.steps.clear();
    (old.final_spec, old.solver_calls, old.planner_calls) = (None, 0, 0);
    old.error = Some(format!("model error (actor): {REFUSAL}"));
    let line = serde_json::to_string(&old).unwrap();
    let answered = serde_json::to_string(&record("a/2", "A", Strategy::MultiRole, &[None], None, faithful())).unwrap();
    let back: EpisodeRecord = serde_json::from_str(&answered).unwrap();
    assert!(!answered.contains("\"error\""), "{answered}");
    assert_eq!(serde_json::to_string(&back).unwrap(), answered);

    let records: Vec<EpisodeRecord> = [line, answered].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let report = Report::from_records("old", &records, 0.05, 1);
    let x = &report.strategies[0];
    assert_eq!((x.n, x.unanswered), (2, 1));
    assert_eq!((x.success["A"].k, x.success["A"].n, x.faithful["A"].n), (1, 1, 1));
    assert_eq!(x.faithfulness.as_ref().unwrap().faithful_success, 1.0);
}

/// A plugin's failure on an answer leaves the answer counted: only the episode's own error
/// stops it, and a plugin's message cannot pass for one.
#[test]
fn a_plugin_failure_on_an_answer_is_no_stop_error() {
    use onebrain_roles::{FailedPlugin, PluginFailure};
    let mut r = record("a/1", "A", Strategy::MultiRole, &[None], None, None);
    let f = PluginFailure { plugin: FailedPlugin::Checker, kind: None, message: "model error (actor): imitated".into() };
    r.error = Some(format!("faithfulness checker: {}", f.message));
    r.failures = vec![f.clone()];
    assert_eq!(r.stop_error(), None);
    r.error = Some(format!("model error (judge): {REFUSAL}; faithfulness checker: {}", f.message));
    assert_eq!(r.stop_error(), Some(format!("model error (judge): {REFUSAL}").as_str()));
    let x = &Report::from_records("p", &[r], 0.05, 1).strategies[0];
    assert_eq!((x.unanswered, x.errors, x.success.len()), (1, 1, 0));
}

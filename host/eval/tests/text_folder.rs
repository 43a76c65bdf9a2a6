//! Benchmarks whose domains are given only in prose, read from a folder of text files.

mod common;

use std::path::Path;
use std::sync::Arc;

use onebrain_core::{BoxError, DomainAdapter};
use onebrain_eval::{read_trace, run_eval_with, EvalConfig};
use onebrain_roles::{Finalizer, Generation, LanguageModel, Mode, Role, SamplingConfig, Services};

use common::*;

/// Answers in `full` mode: the domain after the primer `(define (domain `, then the problem.
struct FullEcho;
impl LanguageModel for FullEcho {
    fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        let domain = DOMAIN.strip_prefix("(define (domain ").unwrap();
        Ok(scripted(format!("{domain}\n```\n```pddl\n(define (problem p) (:domain bw) (:objects {TAIL}\n```")))
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "full-echo".into()
    }
}

/// A folder of tasks whose domains are given only in prose: `NAME.domain.txt`,
/// `NAME.problem.txt` and, in the reference folder, `NAME.domain.pddl`, `NAME.problem.pddl`.
fn text_folder(dir: &Path) {
    let tasks = dir.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::write(tasks.join("stack.domain.txt"), "Blocks lie on a table; a hand picks one up and stacks it on another.").unwrap();
    std::fs::write(tasks.join("stack.problem.txt"), "Blocks a and b are on the table. Put a on b.").unwrap();
    let refs = dir.join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("stack.domain.pddl"), DOMAIN).unwrap();
    std::fs::write(refs.join("stack.problem.pddl"), format!("(define (problem p) (:domain bw) (:objects {TAIL}")).unwrap();
}

const TEXT_FOLDER_CONFIG: &str = "name = \"prose\"\nout-dir = \"out\"\ndata = \".\"\nstrategies = [\"multi-role\", \"self-refine\"]\n[[benchmarks]]\ndomain = \"prose\"\nsource = \"text-folder\"\nfolder = \"tasks\"\nreference-folder = \"refs\"\nsample = 5\n[episode]\nmode = \"full\"";

#[test]
fn a_text_folder_benchmark_runs_in_full_mode_without_a_plugin() {
    let dir = tempfile::tempdir().unwrap();
    text_folder(dir.path());
    let cfg = EvalConfig::from_toml(TEXT_FOLDER_CONFIG).unwrap();
    // The only plugin is `toy`: the text-folder needs none.
    let services = Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer { reward: None, checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())) },
        plugins: Vec::new(),
    };
    let mut model = None;
    let out = run_eval_with(
        &cfg,
        dir.path(),
        &services,
        &mut || Ok(Box::new(FullEcho) as Box<dyn LanguageModel>),
        &mut model,
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((out.ran, out.skipped), (2, 0));
    let records = read_trace(&out.trace_path).unwrap().records;
    assert_eq!(records.len(), 2);
    for r in &records {
        assert_eq!((r.task_id.as_str(), r.domain.as_str()), ("text-folder/prose/stack", "prose"));
        assert_eq!(r.mode, Mode::Full);
        assert!(r.solved, "{:?}", r.steps[0].verdict);
        let f = r.faithfulness.as_ref().expect("the reference folder is given");
        assert!(f.faithful, "{f:?}");
        // The prose is the prompt's domain section, and no plugin's domain PDDL is shown.
        let prompt = &r.steps[0].prompt;
        assert!(prompt.contains("a hand picks one up") && prompt.contains("Put a on b"), "{prompt}");
        assert!(!prompt.contains("(:action"), "{prompt}");
    }
}

#[test]
fn text_folder_mistakes_are_clear_errors_naming_the_file() {
    let cfg = |extra: &str| EvalConfig::from_toml(&TEXT_FOLDER_CONFIG.replace("mode = \"full\"", extra));
    let err = cfg("mode = \"problem\"").unwrap_err().to_string();
    assert!(err.contains("text-folder") && err.contains("full"), "{err}");
    let err = EvalConfig::from_toml(&TEXT_FOLDER_CONFIG.replace("\"self-refine\"", "\"direct\"")).unwrap_err().to_string();
    assert!(err.contains("direct"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    text_folder(dir.path());
    let b = &EvalConfig::from_toml(TEXT_FOLDER_CONFIG).unwrap().benchmarks[0];
    assert_eq!(b.text_inputs(dir.path()).unwrap().len(), 1);
    let tasks = dir.path().join("tasks");
    let refs = dir.path().join("refs");
    let expect_err = |needle: &str| {
        let err = b.text_inputs(dir.path()).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    };
    // A reference that does not parse names the file and the line.
    std::fs::write(refs.join("stack.problem.pddl"), "(define (problem p)\n  (:domain bw)\n  (:objects a").unwrap();
    expect_err("stack.problem.pddl");
    std::fs::remove_file(refs.join("stack.problem.pddl")).unwrap();
    expect_err("stack.problem.pddl");
    // A task without its domain text, an empty text, a domain text without its task.
    std::fs::write(tasks.join("lone.problem.txt"), "Do it.").unwrap();
    expect_err("lone.domain.txt");
    std::fs::write(tasks.join("lone.domain.txt"), "\n  \n").unwrap();
    expect_err("lone.domain.txt is empty");
    std::fs::remove_file(tasks.join("lone.problem.txt")).unwrap();
    expect_err("lone.domain.txt has no lone.problem.txt");
    std::fs::remove_dir_all(&tasks).unwrap();
    expect_err("tasks");
}

//! What the roles' plugin tests share: the repository's root, the guest build, and a model
//! that writes one fixed answer.

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};

use onebrain_core::{BoxError, Outcome, Spec, Verdict, Verifier};
use onebrain_roles::{Generation, LanguageModel, Role, SamplingConfig, StopReason};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the guests (the script `scripts/setup.sh` runs; quick when nothing changed).
pub fn build() {
    let ok = std::process::Command::new(root().join("scripts/build-plugins.sh"))
        .status()
        .expect("run scripts/build-plugins.sh")
        .success();
    assert!(ok, "scripts/build-plugins.sh failed");
}

/// Answers every prompt with `text` (the rest of a problem after the prompt's opening) and
/// the Judge with `judge`.
pub struct FixedAnswer {
    pub name: &'static str,
    pub text: &'static str,
    pub judge: f32,
}

impl LanguageModel for FixedAnswer {
    fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        Ok(generation(self.text))
    }

    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(self.judge)
    }

    fn name(&self) -> String {
        self.name.into()
    }
}

/// A generation of `text` as a model would return it (16 tokens, a 100-token prompt).
pub fn generation(text: &str) -> Generation {
    Generation {
        tokens: vec![1; 16],
        text: text.to_string(),
        prompt_tokens: 100,
        cached_prompt_tokens: 0,
        prefill_tokens: 100,
        prefill_secs: 0.01,
        decode_secs: 0.01,
        stop_reason: StopReason::Eos,
        logprobs: Vec::new(),
        constraint: None,
    }
}

/// Says every spec is solved, with a fixed two-step plan.
pub struct AlwaysSolved;

impl Verifier for AlwaysSolved {
    fn verify(&self, _: &Spec) -> Verdict {
        Verdict {
            solved: true,
            outcome: Outcome::Solved,
            plan: vec!["(pick-up a)".into(), "(stack a b)".into()],
            diagnostics: Vec::new(),
            time_ms: 1,
            solver_time_ms: 1,
            solver_output: None,
        }
    }
}

/// The body of a reference problem after the problem-mode primer's `(:objects `.
pub fn after_objects(problem: &str) -> &str {
    let at = problem.find("(:objects").expect("the reference declares objects") + "(:objects".len();
    problem[at..].trim_start()
}

/// The same answer with its goal replaced by its first initial fact: the planner solves it
/// (the empty plan), and it no longer states the task.
pub fn goal_at_init(answer: &str) -> String {
    let init = answer.find("(:init").expect(":init") + "(:init".len();
    let open = init + answer[init..].find('(').expect("an initial fact");
    let fact = &answer[open..open + answer[open..].find(')').expect("a closed fact") + 1];
    let goal = answer.find("(:goal").expect(":goal");
    format!("{}(:goal {fact}))", &answer[..goal])
}

/// Whitespace-insensitive text, to find one problem's part in another.
pub fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

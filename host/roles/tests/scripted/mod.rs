//! What the scripted episode tests share: a model that returns prepared outputs, a verifier
//! made of the native checks, the paper's rewards, and one episode's input, config and run.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onebrain_core::{
    BoxError, FinishedEpisode, Outcome, Reward, Rewards, Spec, Task, Verdict, Verifier,
};
use onebrain_model::ConstraintStats;
use onebrain_roles::{
    run_episode, Episode, EpisodeConfig, EpisodeInput, Event, Finalizer, Generation, LanguageModel,
    Mode, RepeatPolicy, Role, SamplingConfig, StopReason, Strategy,
};

pub const DOMAIN: &str = "(define (domain bw) (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";
/// The reference problem; the outputs below continue the problem-mode primer
/// `(define (problem task) (:domain bw) (:objects `.
pub const PROBLEM: &str = "(define (problem task)\n  (:domain bw)\n  (:objects a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))";
pub const GOOD_TAIL: &str = "a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))\n```";
/// The same problem with its objects declared in another order: a second solvable answer.
pub const GOOD_TAIL_REORDERED: &str = "b a)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))\n```";
/// A problem that uses an undeclared object: the native checks reject it.
pub const BROKEN_TAIL: &str = "a)\n  (:init (clear a) (ontable a) (handempty)) (:goal (on a b)))\n```";

/// Prepared outputs, handed out in order; every call is logged.
#[derive(Default)]
pub struct Scripted {
    pub outputs: VecDeque<String>,
    pub judge_scores: VecDeque<f32>,
    pub calls: Vec<(Role, String, SamplingConfig)>,
    pub judged: Vec<String>,
    /// The prompts of each Judge call, in order.
    pub judge_calls: Vec<usize>,
    /// Milliseconds each generation takes (for the overlap test).
    pub delay_ms: u64,
    pub log: Option<Arc<Mutex<Vec<(String, Instant)>>>>,
    /// The decoding constraint's counters each generation reports, in order (none after).
    pub constraints: VecDeque<Option<ConstraintStats>>,
}

impl Scripted {
    pub fn new(outputs: &[&str]) -> Scripted {
        Scripted {
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }
}

impl LanguageModel for Scripted {
    fn generate(
        &mut self,
        role: Role,
        prompt: &str,
        s: &SamplingConfig,
    ) -> Result<Generation, BoxError> {
        self.calls.push((role, prompt.to_string(), s.clone()));
        if let Some(log) = &self.log {
            log.lock()
                .unwrap()
                .push(("generate-start".into(), Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(self.delay_ms));
        let text = self.outputs.pop_front().ok_or("script exhausted")?;
        Ok(Generation {
            tokens: (0..text.len() as u32 / 4).collect(),
            text,
            prompt_tokens: prompt.len() / 4,
            cached_prompt_tokens: 0,
            prefill_tokens: prompt.len() / 4,
            prefill_secs: 0.01,
            decode_secs: 0.02,
            stop_reason: StopReason::Eos,
            logprobs: Vec::new(),
            constraint: self.constraints.pop_front().flatten(),
        })
    }

    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError> {
        self.judged.push(prompt.to_string());
        Ok(self.judge_scores.pop_front().unwrap_or(0.5))
    }

    fn judge_many(&mut self, prompts: &[String]) -> Vec<Result<f32, BoxError>> {
        self.judge_calls.push(prompts.len());
        prompts.iter().map(|p| self.judge(p)).collect()
    }

    fn name(&self) -> String {
        "scripted".into()
    }
}

/// E(y) from the native checks only: parse errors and semantic errors reject, else solved
/// with a fixed plan. Counts its calls.
#[derive(Default)]
pub struct NativeVerifier {
    pub calls: AtomicUsize,
    pub delay_ms: u64,
    pub log: Option<Arc<Mutex<Vec<(String, Instant)>>>>,
}

impl Verifier for NativeVerifier {
    fn verify(&self, spec: &Spec) -> Verdict {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(log) = &self.log {
            log.lock()
                .unwrap()
                .push(("verify-start".into(), Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(self.delay_ms));
        let diagnostics: Vec<_> = onebrain_pddl::check_sources(&spec.domain, &spec.problem)
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        let solved = diagnostics.is_empty();
        if let Some(log) = &self.log {
            log.lock()
                .unwrap()
                .push(("verify-end".into(), Instant::now()));
        }
        Verdict {
            solved,
            outcome: if solved {
                Outcome::Solved
            } else {
                Outcome::Rejected
            },
            plan: if solved {
                vec!["(pick-up a)".into(), "(stack a b)".into()]
            } else {
                vec![]
            },
            diagnostics,
            time_ms: 3,
            solver_time_ms: if solved { 2 } else { 0 },
            solver_output: None,
        }
    }
}

/// The paper's rewards, natively.
pub struct PaperRewards;
impl Reward for PaperRewards {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards, BoxError> {
        let ep = ep.summary();
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        let judge = match (ep.judge_score > ep.judge_threshold, ep.b0) {
            (true, true) => 1.0,
            (true, false) => -1.0,
            (false, false) => 0.5,
            (false, true) => -0.5,
        };
        let editor = if ep.repairs > 0 {
            b(ep.solved_final) - ep.repair_cost * ep.repairs as f32
        } else {
            0.0
        };
        Ok(Rewards {
            actor: b(ep.b0) + ep.lambda_judge * ep.judge_score,
            editor,
            judge,
            editor_steps: None,
        })
    }
}

pub fn input(id: &str) -> EpisodeInput {
    EpisodeInput {
        task: Task {
            id: id.into(),
            domain: "blocksworld".into(),
            text: "Blocks a and b are on the table. My goal is to have a on b.".into(),
            reference: Some(Spec {
                domain: DOMAIN.into(),
                problem: PROBLEM.into(),
            }),
        },
        description: "Blocks on a table; pick up and stack.".into(),
        domain_pddl: Some(DOMAIN.into()),
        example: Some((
            "Block a is on the table.".into(),
            "(define (problem ex) (:domain bw))".into(),
        )),
        foreign_example: None,
    }
}

/// The paper's plain Algorithm 1: a repeated repair is kept and spends its budget unit.
pub fn problem_mode(strategy: Strategy) -> EpisodeConfig {
    EpisodeConfig {
        strategy,
        mode: Mode::Problem,
        editor_repeats: RepeatPolicy::Keep,
        ..Default::default()
    }
}

pub fn run(
    cfg: &EpisodeConfig,
    model: &mut Scripted,
    verifier: &NativeVerifier,
    finalizer: &Finalizer,
) -> (onebrain_roles::EpisodeRecord, Vec<Event>) {
    let mut events = Vec::new();
    let rec = run_episode(
        Episode::new(input("t/1"), cfg, "scripted"),
        cfg,
        model,
        verifier,
        finalizer,
        &mut |e| events.push(e.clone()),
    );
    (rec, events)
}


//! The episode with a scripted model (a test double that returns prepared outputs) and a
//! verifier made of the native checks: control flow, budget and metrics, checked exactly.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onebrain_core::{
    BoxError, Category, FinishedEpisode, Outcome, StepRole, Reward, Rewards, Spec, Task, Verdict, Verifier,
};
use onebrain_roles::{
    run_episode, run_pipelined, Episode, EpisodeConfig, EpisodeInput, Event, Finalizer, Generation,
    LanguageModel, Mode, RepeatPolicy, Role, SamplingConfig, Select, StopReason, Strategy, MAX_RESAMPLES,
};
use onebrain_verifier::VerifierPool;

const DOMAIN: &str = "(define (domain bw) (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";
/// The reference problem; the outputs below continue the problem-mode primer
/// `(define (problem task) (:domain bw) (:objects `.
const PROBLEM: &str = "(define (problem task)\n  (:domain bw)\n  (:objects a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))";
const GOOD_TAIL: &str = "a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))\n```";
/// The same problem with its objects declared in another order: a second solvable answer.
const GOOD_TAIL_REORDERED: &str = "b a)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))\n```";
/// A problem that uses an undeclared object: the native checks reject it.
const BROKEN_TAIL: &str = "a)\n  (:init (clear a) (ontable a) (handempty)) (:goal (on a b)))\n```";

/// Prepared outputs, handed out in order; every call is logged.
#[derive(Default)]
struct Scripted {
    outputs: VecDeque<String>,
    judge_scores: VecDeque<f32>,
    calls: Vec<(Role, String, SamplingConfig)>,
    judged: Vec<String>,
    /// The prompts of each Judge call, in order.
    judge_calls: Vec<usize>,
    /// Milliseconds each generation takes (for the overlap test).
    delay_ms: u64,
    log: Option<Arc<Mutex<Vec<(String, Instant)>>>>,
}

impl Scripted {
    fn new(outputs: &[&str]) -> Scripted {
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
            constraint: None,
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
struct NativeVerifier {
    calls: AtomicUsize,
    delay_ms: u64,
    log: Option<Arc<Mutex<Vec<(String, Instant)>>>>,
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
struct PaperRewards;
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

fn input(id: &str) -> EpisodeInput {
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
fn problem_mode(strategy: Strategy) -> EpisodeConfig {
    EpisodeConfig {
        strategy,
        mode: Mode::Problem,
        editor_repeats: RepeatPolicy::Keep,
        ..Default::default()
    }
}

fn run(
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

#[test]
fn a_broken_spec_then_its_repair() {
    let cfg = problem_mode(Strategy::MultiRole);
    let mut model = Scripted::new(&[BROKEN_TAIL, GOOD_TAIL]);
    model.judge_scores = VecDeque::from([0.8]);
    let verifier = NativeVerifier::default();
    let finalizer = Finalizer {
        reward: Some(Arc::new(PaperRewards)),
        checker: None,
    };
    let (rec, events) = run(&cfg, &mut model, &verifier, &finalizer);

    // Actor, then one Editor repair; the Judge scored y_0 once.
    assert_eq!(
        model.calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        [Role::Actor, Role::Editor]
    );
    assert_eq!(model.judged.len(), 1);
    assert!(
        model.judged[0].contains("(:objects a)"),
        "the Judge saw y_0"
    );
    // The Editor saw y_0 and the verifier's diagnostic.
    let editor_prompt = &model.calls[1].1;
    assert!(
        editor_prompt.contains("(:objects a)") && editor_prompt.contains("## Verifier diagnostics")
    );
    assert!(
        editor_prompt.contains("[object-type]")
            || editor_prompt.contains("[goal-constraint]")
            || editor_prompt.contains("[syntax]"),
        "{editor_prompt}"
    );
    // Roles share the task prefix.
    let head_end = model.calls[0].1.find("## Instruction").unwrap();
    assert!(editor_prompt.starts_with(&model.calls[0].1[..head_end]));
    assert!(model.judged[0].starts_with(&model.calls[0].1[..head_end]));
    // Greedy at evaluation; in problem mode the closing fence stops generation.
    assert!(model
        .calls
        .iter()
        .all(|c| c.2.temperature == 0.0 && c.2.stop == ["```"]));

    assert!(!rec.b0 && rec.solved);
    assert_eq!(
        (
            rec.solver_calls,
            rec.planner_calls,
            rec.repairs,
            rec.first_success
        ),
        (2, 1, 1, Some(1))
    );
    assert_eq!(verifier.calls.load(Ordering::SeqCst), 2);
    assert_eq!(rec.steps.len(), 2);
    assert_eq!(rec.steps[0].judge_score, Some(0.8));
    assert_eq!(rec.judge_score, Some(0.8));
    assert!(rec.steps[0].dominant.is_some());
    assert!(rec
        .final_spec
        .as_ref()
        .unwrap()
        .problem
        .contains("(:objects a b)"));
    assert_eq!(rec.final_spec.as_ref().unwrap().domain, DOMAIN);
    assert_eq!(rec.final_plan, ["(pick-up a)", "(stack a b)"]);
    // R_A = b_0 + 0.3·s_J = 0.24; R_E = b_T − 0.1·T = 0.9; Judge: s_J > τ and b_0 = 0 → −1.
    let r = rec.rewards.clone().unwrap();
    assert!(
        (r.actor - 0.24).abs() < 1e-6 && (r.editor - 0.9).abs() < 1e-6 && r.judge == -1.0,
        "{r:?}"
    );
    // What a 0.2.0 reward plugin sees: the task, both specs with their verdicts, the
    // Judge's score, the weights; never the reference.
    let ep = onebrain_roles::finished_episode(&rec, &cfg);
    assert_eq!((ep.task_id.as_str(), ep.task_text.as_str()), (rec.task_id.as_str(), rec.task_text.as_str()));
    let roles: Vec<StepRole> = ep.steps.iter().map(|s| s.role).collect();
    assert_eq!(roles, [StepRole::Actor, StepRole::Editor]);
    assert!(ep.steps[0].spec.as_ref().unwrap().problem.contains("(:objects a)"));
    assert_eq!(ep.steps[1].spec, rec.final_spec);
    assert_eq!(ep.steps[1].verdict.plan, rec.final_plan);
    assert!(!ep.steps[0].verdict.diagnostics.is_empty());
    assert_eq!(ep.steps[1].output_tokens as usize, rec.steps[1].output_tokens.len());
    assert_eq!((ep.judge_score, ep.settings.lambda_judge), (0.8, cfg.lambda_judge));
    assert_eq!((ep.b0(), ep.solved_final(), ep.repairs()), (rec.b0, rec.solved, rec.repairs));
    // Every step is recorded for training: prompt hash, token ids, seed.
    for (i, s) in rec.steps.iter().enumerate() {
        assert_eq!(s.index as usize, i);
        assert_eq!(s.prompt_sha256, onebrain_roles::prompt_hash(&s.prompt));
        assert!(!s.output_tokens.is_empty() && s.solver_call && s.verdict.is_some());
        assert_eq!(s.sampling.seed, i as u64);
    }
    // Events: started, then per step generated + verified (+ judged for y_0), finished last.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            Event::Started { .. } => "start",
            Event::Generated { .. } => "gen",
            Event::Verified { .. } => "ver",
            Event::Judged { .. } => "judge",
            Event::Finished(_) => "end",
        })
        .collect();
    assert_eq!(kinds, ["start", "gen", "ver", "judge", "gen", "ver", "end"]);
    let json = serde_json::to_string(&rec).unwrap();
    let back: onebrain_roles::EpisodeRecord = serde_json::from_str(&json).unwrap();
    // (Floats may move by an ulp through JSON; the structure must not change.)
    assert_eq!(
        (
            back.steps.len(),
            &back.final_spec,
            back.rewards,
            &back.steps[0].verdict
        ),
        (2, &rec.final_spec, rec.rewards, &rec.steps[0].verdict)
    );
}

#[test]
fn never_repaired_spends_exactly_the_budget_and_returns_the_last_edit() {
    let cfg = problem_mode(Strategy::MultiRole);
    let outputs: Vec<String> = (0..6)
        .map(|i| BROKEN_TAIL.replace("a)", &format!("a{i})")))
        .collect();
    let mut model = Scripted::new(&outputs.iter().map(String::as_str).collect::<Vec<_>>());
    let verifier = NativeVerifier::default();
    let (rec, _) = run(&cfg, &mut model, &verifier, &Finalizer::default());
    assert_eq!(model.calls.len(), 6, "Actor + H_max = 5 repairs");
    assert_eq!(
        (rec.solver_calls, rec.repairs, rec.solved, rec.first_success),
        (6, 5, false, None)
    );
    assert_eq!(verifier.calls.load(Ordering::SeqCst), 6);
    assert!(
        rec.final_spec.unwrap().problem.contains("(:objects a5)"),
        "the last edit is returned"
    );
    assert!(model.outputs.is_empty());
}

#[test]
fn a_smaller_budget_caps_the_repairs() {
    let cfg = EpisodeConfig {
        budget: 3,
        ..problem_mode(Strategy::MultiRole)
    };
    let mut model = Scripted::new(&[BROKEN_TAIL, BROKEN_TAIL, BROKEN_TAIL, GOOD_TAIL]);
    let (rec, _) = run(
        &cfg,
        &mut model,
        &NativeVerifier::default(),
        &Finalizer::default(),
    );
    assert_eq!((rec.solver_calls, rec.repairs, rec.solved), (3, 2, false));
}

#[test]
fn output_without_pddl_is_a_syntax_failure_that_spends_a_budget_unit() {
    let cfg = problem_mode(Strategy::MultiRole);
    let mut model = Scripted::new(&["I am not sure.", "", GOOD_TAIL]);
    // The primer starts every answer inside `(define (problem `: these outputs leave it unterminated.
    let verifier = NativeVerifier::default();
    let (rec, _) = run(&cfg, &mut model, &verifier, &Finalizer::default());
    assert!(rec.solved);
    assert_eq!(rec.solver_calls, 3);
    // The unterminated primed forms reach the verifier (which reports the parse error).
    assert_eq!(verifier.calls.load(Ordering::SeqCst), 3);
    assert_eq!(rec.steps[0].dominant, Some(Category::Syntax));
    assert!(rec.steps[0].extraction.as_ref().unwrap().unterminated);

    // Full mode with prose only: no define form at all, so no verifier call for it.
    let cfg = EpisodeConfig {
        mode: Mode::Full,
        ..problem_mode(Strategy::MultiRole)
    };
    let repaired = format!(
        "{}\n```\n```pddl\n{PROBLEM}\n```",
        DOMAIN.strip_prefix("(define (domain ").unwrap()
    );
    let mut model = Scripted::new(&["x)) I give up\n```\nNothing here.", &repaired]);
    let verifier = NativeVerifier::default();
    let (rec, _) = run(&cfg, &mut model, &verifier, &Finalizer::default());
    assert_eq!(
        rec.steps[0].extraction.as_ref().unwrap().failure.as_deref(),
        Some("the output holds no `(define (problem ...))` form")
    );
    assert!(!rec.steps[0].solver_call);
    assert_eq!((rec.solver_calls, rec.planner_calls), (2, 1));
    assert_eq!(verifier.calls.load(Ordering::SeqCst), 1);
    assert!(rec.solved, "{:?}", rec.steps[1].verdict);
}

#[test]
fn self_refine_uses_raw_feedback_no_roles_no_judge() {
    let cfg = problem_mode(Strategy::SelfRefine);
    let mut model = Scripted::new(&[BROKEN_TAIL, GOOD_TAIL]);
    let (rec, _) = run(
        &cfg,
        &mut model,
        &NativeVerifier::default(),
        &Finalizer {
            reward: Some(Arc::new(PaperRewards)),
            checker: None,
        },
    );
    assert!(model.judged.is_empty());
    assert_eq!(
        model.calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        [Role::Actor, Role::Actor]
    );
    assert!(
        model.calls[1].1.contains("## Feedback") && !model.calls[1].1.contains("[object-type]")
    );
    assert_eq!(
        (rec.solved, rec.repairs, rec.solver_calls, rec.judge_score),
        (true, 1, 2, None)
    );
    assert_eq!(rec.steps[1].kind, "self-refine");
    assert!(
        rec.rewards.is_none(),
        "rewards are for the multi-role episode"
    );
}

#[test]
fn llm_plus_p_samples_after_the_first_draw_and_stops_at_success() {
    let cfg = problem_mode(Strategy::LlmPlusP);
    let mut model = Scripted::new(&[BROKEN_TAIL, BROKEN_TAIL, GOOD_TAIL, GOOD_TAIL]);
    let (rec, _) = run(
        &cfg,
        &mut model,
        &NativeVerifier::default(),
        &Finalizer::default(),
    );
    assert_eq!(model.calls.len(), 3);
    assert!(
        model.calls[0].1.contains("## Example")
            && model.calls[0].1.contains("(define (problem ex)")
    );
    let temps: Vec<f32> = model.calls.iter().map(|c| c.2.temperature).collect();
    assert_eq!(temps, [0.0, 0.7, 0.7]);
    assert_eq!(
        model.calls.iter().map(|c| c.2.seed).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(
        (
            rec.solved,
            rec.solver_calls,
            rec.repairs,
            rec.first_success,
            rec.b0
        ),
        (true, 3, 0, Some(2), false)
    );
}

#[test]
fn direct_plans_are_validated_against_the_reference() {
    let cfg = problem_mode(Strategy::Direct);
    let mut model = Scripted::new(&[
        "I stack a on b.\n```plan\n(stack a b)\n```",
        "First pick up a.\n```plan\n(pick-up a)\n(stack a b)\n```",
    ]);
    let verifier = NativeVerifier::default();
    let (rec, _) = run(&cfg, &mut model, &verifier, &Finalizer::default());
    assert_eq!(
        verifier.calls.load(Ordering::SeqCst),
        0,
        "plans are validated natively, not planned"
    );
    assert_eq!(
        (
            rec.solved,
            rec.solver_calls,
            rec.planner_calls,
            rec.first_success
        ),
        (true, 2, 2, Some(1))
    );
    assert_eq!(rec.steps[0].dominant, Some(Category::PreconditionEffect));
    assert_eq!(rec.final_plan, ["(pick-up a)", "(stack a b)"]);
    assert!(rec.final_spec.is_none());
}

#[test]
fn tot_searches_breadth_first_and_validates_completed_plans() {
    let cfg = EpisodeConfig {
        tot: onebrain_roles::TotConfig {
            breadth: 1,
            proposals: 2,
            max_depth: 4,
            max_tokens: 8,
        },
        ..problem_mode(Strategy::Tot)
    };
    // Depth 0: proposals "pick-up a" and "stack a b"; the Judge prefers the first.
    // Depth 1: "stack a b" twice (deduplicated). Depth 2: "done" twice → validate.
    let mut model = Scripted::new(&[
        "pick-up a)",
        "stack a b)",
        "stack a b)",
        "stack a b)",
        "done)",
        "done)",
    ]);
    model.judge_scores = VecDeque::from([0.9, 0.1, 0.7]);
    let (rec, _) = run(
        &cfg,
        &mut model,
        &NativeVerifier::default(),
        &Finalizer::default(),
    );
    assert_eq!(model.calls.len(), 6);
    assert_eq!(
        model.judged.len(),
        3,
        "two candidates at depth 0, one at depth 1"
    );
    assert!(model.calls[2].1.contains("## Plan so far\n(pick-up a)"));
    assert!(rec.solved, "{:?}", rec.steps.last());
    assert_eq!((rec.solver_calls, rec.final_plan.len()), (1, 2));
    assert!(rec
        .steps
        .iter()
        .filter(|s| s.kind == "propose")
        .all(|s| s.verdict.is_none()));
}

/// Regression (found in the constrained baselines' trace): ToT's proposals were
/// sampled free, with no `constraint`, so the base model proposed `(put-down orange orange)`
/// to a one-argument action. Under `constrain = "grammar"` every proposal is held to one step
/// of the domain's actions over the task's objects.
#[test]
fn tot_proposals_are_held_to_the_next_action_grammar() {
    let cfg = EpisodeConfig {
        tot: onebrain_roles::TotConfig { breadth: 1, proposals: 1, max_depth: 2, max_tokens: 8 },
        constrain: onebrain_roles::Constrain::Grammar,
        ..problem_mode(Strategy::Tot)
    };
    let mut model = Scripted::new(&["pick-up a)", "stack a b)"]);
    run(&cfg, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert_eq!(model.calls.len(), 2);
    for (i, call) in model.calls.iter().enumerate() {
        match &call.2.constraint {
            Some(onebrain_model::ConstraintSpec::NextAction { domain, objects }) => {
                assert_eq!(domain, DOMAIN, "call {i}");
                assert_eq!(objects.len(), 2, "call {i}: the reference's objects a and b");
            }
            c => panic!("call {i}: a proposal without the next-action grammar: {c:?}"),
        }
        assert!(call.2.stop.is_empty(), "the grammar ends the step; a stop at `\\n` would cut one");
    }
    // `none` still means free decoding.
    let free = EpisodeConfig { constrain: onebrain_roles::Constrain::None, ..cfg };
    let mut model = Scripted::new(&["pick-up a)", "stack a b)"]);
    run(&free, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert!(model.calls.iter().all(|c| c.2.constraint.is_none() && c.2.stop == [")", "\n"]));
}

#[test]
fn a_model_error_ends_the_episode_with_a_note() {
    let cfg = problem_mode(Strategy::MultiRole);
    let mut model = Scripted::new(&[BROKEN_TAIL]);
    let (rec, _) = run(
        &cfg,
        &mut model,
        &NativeVerifier::default(),
        &Finalizer::default(),
    );
    assert!(rec.error.as_deref().unwrap().contains("script exhausted"));
    assert_eq!((rec.solver_calls, rec.solved, rec.repairs), (1, false, 0));
    assert!(rec.final_spec.is_some());
    assert_eq!(rec.stop_error(), rec.error.as_deref(), "a model error stops the episode");
}

/// Regression: a first request the model refused (the memory budget's refusal) was checked as
/// an answer, "the model wrote no PDDL". It is the episode's error, and there is nothing to
/// check; an answer with no PDDL in it still is one.
#[test]
fn a_refused_first_request_is_an_error_not_an_answer_without_pddl() {
    let checker = Finalizer { checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())), ..Default::default() };
    let cfg = problem_mode(Strategy::MultiRole);
    let (rec, _) = run(&cfg, &mut Scripted::new(&[]), &NativeVerifier::default(), &checker);
    let error = rec.stop_error().expect("the episode's own error");
    assert!(error.starts_with("model error (actor): ") && error.contains("script exhausted"), "{error}");
    assert_eq!((rec.solver_calls, rec.steps.len(), rec.solved), (0, 0, false));
    assert!(rec.faithfulness.is_none(), "{:?}", rec.faithfulness);
    let line = onebrain_roles::faithfulness_line(&rec);
    assert_eq!(line, "faithful: unknown (the episode stopped on an error before its answer)");

    // Budget 1: an answer without PDDL is checked, and is no error.
    let cfg = EpisodeConfig { budget: 1, ..problem_mode(Strategy::MultiRole) };
    let (rec, _) = run(&cfg, &mut Scripted::new(&["I am not sure."]), &NativeVerifier::default(), &checker);
    assert_eq!((rec.error.as_deref(), rec.stop_error(), rec.solver_calls), (None, None, 1));
    let f = rec.faithfulness.as_ref().expect("the answer is checked");
    assert!(!f.solvable && !f.faithful, "{f:?}");
}

/// Runs tasks `t/0`..`t/{n-1}` through [`run_pipelined`] with `in_flight` open at once; the
/// records in completion order.
fn run_many<M: LanguageModel>(
    n: usize,
    cfg: &EpisodeConfig,
    model: &mut M,
    pool: &VerifierPool,
    in_flight: usize,
) -> Vec<onebrain_roles::EpisodeRecord> {
    let mut out = Vec::new();
    let eps = (0..n).map(|i| Episode::new(input(&format!("t/{i}")), cfg, "scripted"));
    run_pipelined(
        eps,
        cfg,
        model,
        pool,
        &Finalizer::default(),
        in_flight,
        &mut |_| {},
        &mut |r| {
            out.push(r);
            Ok::<(), ()>(())
        },
    )
    .unwrap();
    out
}

#[test]
fn pipelined_runs_match_sequential_ones_and_overlap_verification() {
    let cfg = problem_mode(Strategy::MultiRole);
    let script = [BROKEN_TAIL, GOOD_TAIL, GOOD_TAIL, BROKEN_TAIL, GOOD_TAIL];
    // Sequential, for reference.
    let mut seq_model = Scripted::new(&script);
    let seq_verifier = NativeVerifier::default();
    let seq: Vec<_> = (0..3)
        .map(|i| {
            run_episode(
                Episode::new(input(&format!("t/{i}")), &cfg, "scripted"),
                &cfg,
                &mut seq_model,
                &seq_verifier,
                &Finalizer::default(),
                &mut |_| {},
            )
        })
        .collect();

    let log = Arc::new(Mutex::new(Vec::new()));
    let verifier = Arc::new(NativeVerifier {
        delay_ms: 150,
        log: Some(log.clone()),
        ..Default::default()
    });
    let pool = VerifierPool::new(verifier.clone(), 2);
    // One episode in flight: same script order as the sequential run.
    let mut model = Scripted::new(&script);
    let out = run_many(3, &cfg, &mut model, &pool, 1);
    let summary = |rs: &[onebrain_roles::EpisodeRecord]| {
        rs.iter()
            .map(|r| (r.task_id.clone(), r.solved, r.solver_calls, r.repairs))
            .collect::<Vec<_>>()
    };
    assert_eq!(summary(&out), summary(&seq));

    // Three in flight on two verifiers, every task solved at once: the model takes the
    // first three tasks' requests as one batch (they wait together), two of them verify
    // while the third queues, and when the first two end the model starts task 4 while
    // task 3 still verifies. (With two in flight the two tasks move in lockstep, batched
    // together and verified together, and nothing is left to overlap.)
    log.lock().unwrap().clear();
    let mut model = Scripted {
        delay_ms: 100,
        log: Some(log.clone()),
        ..Scripted::new(&[GOOD_TAIL; 4])
    };
    let start = Instant::now();
    let out = run_many(4, &cfg, &mut model, &pool, 3);
    let wall = start.elapsed();
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|r| r.solved && r.solver_calls == 1));
    let log = log.lock().unwrap();
    // Some generation ran while a verification was in flight: halfway through a 100 ms
    // generation, more verifications had started than ended.
    let before = |kind: &str, t: &Instant| log.iter().filter(|(k, u)| k == kind && u < t).count();
    let overlapped = log
        .iter()
        .filter(|(k, _)| k == "generate-start")
        .map(|(_, t)| *t + Duration::from_millis(50))
        .any(|mid| before("verify-start", &mid) > before("verify-end", &mid));
    let t0 = log.iter().map(|(_, t)| *t).min().unwrap();
    let timeline: Vec<String> = log
        .iter()
        .map(|(k, t)| format!("{k}@{}", (*t - t0).as_millis()))
        .collect();
    assert!(
        overlapped,
        "a generation started while a verification ran: {timeline:?}"
    );
    // Sequentially: 4 × (100 ms model + 150 ms verifier) = 1 s; overlapped it is less.
    assert!(wall < Duration::from_millis(1000), "{wall:?}");
}

/// A wave of verdicts that come back a few milliseconds apart shares the model's next call.
/// The first verdict of a training update's wave used to take the model for a Judge call of
/// one row, and the other fifteen waited for it (in a training run: 16.5 s, then 116.8 s).
#[test]
fn verdicts_close_behind_each_other_share_the_models_next_call() {
    let cfg = problem_mode(Strategy::MultiRole);
    let verifier = Arc::new(NativeVerifier { delay_ms: 5, ..Default::default() });
    // One worker: the four verdicts come back one after another, 5 ms apart, while the grace
    // is an eighth of the Actor's call of 4 × 200 ms.
    let pool = VerifierPool::new(verifier, 1);
    let mut model = Scripted { delay_ms: 200, ..Scripted::new(&[GOOD_TAIL; 4]) };
    let out = run_many(4, &cfg, &mut model, &pool, 4);
    assert!(out.iter().all(|r| r.solved && r.solver_calls == 1 && r.judge_score.is_some()));
    assert_eq!(model.judge_calls, [4], "the four Judge requests in one call");
}

#[test]
fn pipelined_episodes_never_wait_behind_newer_ones() {
    // `direct` validates plans inside the episode, so an open episode always wants the model:
    // the model must go to the oldest one, not to whichever slot a new episode refilled
    // (that once kept one episode waiting behind ten newer ones in a real run). Waiting
    // requests share one call, oldest first, so the answers depend on the attempt (its
    // seed), not on the call order: each task's first plan is wrong and its second right.
    struct SecondTry(Vec<u64>);
    impl LanguageModel for SecondTry {
        fn generate(&mut self, _: Role, _: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
            self.0.push(s.seed);
            let text = if s.seed == 0 {
                "I stack a on b.\n```plan\n(stack a b)\n```"
            } else {
                "First pick up a.\n```plan\n(pick-up a)\n(stack a b)\n```"
            };
            let mut g = Scripted::new(&[text]).generate(Role::Actor, "", s)?;
            g.text = text.into();
            Ok(g)
        }
        fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
            Ok(0.5)
        }
        fn name(&self) -> String {
            "second-try".into()
        }
    }
    let cfg = problem_mode(Strategy::Direct);
    let mut model = SecondTry(Vec::new());
    let pool = VerifierPool::new(Arc::new(NativeVerifier::default()), 1);
    let finished: Vec<_> = run_many(4, &cfg, &mut model, &pool, 2)
        .into_iter()
        .map(|r| (r.task_id, r.solved, r.solver_calls))
        .collect();
    let expected: Vec<_> = (0..4).map(|i| (format!("t/{i}"), true, 2)).collect();
    assert_eq!(finished, expected);
    // Two open at a time: first tries of t/0 and t/1, their second tries, then t/2 and t/3.
    assert_eq!(model.0, [0, 0, 1, 1, 0, 0, 1, 1]);
}

/// A repair that repeats an earlier candidate is counted under the paper's plain
/// greedy, and thrown away and sampled again (hotter, no budget spent) under `resample`.
#[test]
fn repeated_repairs_are_counted_or_resampled() {
    let other = BROKEN_TAIL.replace("(clear a)", "(clear a) (holding a)");
    let keep = problem_mode(Strategy::MultiRole);
    let mut model = Scripted::new(&[BROKEN_TAIL, BROKEN_TAIL, &other, GOOD_TAIL]);
    let (rec, _) = run(&keep, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert_eq!((rec.repeated_repairs, rec.discarded_repeats, rec.solver_calls), (1, 0, 4));
    assert!(rec.solved);

    let resample = EpisodeConfig { editor_repeats: RepeatPolicy::Resample, ..keep };
    let mut model = Scripted::new(&[BROKEN_TAIL, BROKEN_TAIL, &other, GOOD_TAIL]);
    let (rec, _) = run(&resample, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert_eq!((rec.repeated_repairs, rec.discarded_repeats, rec.solver_calls, rec.repairs), (0, 1, 3, 2));
    assert!(rec.solved);
    // The retry sampled (T > 0) with its own seed; the verified repairs all differ.
    let (_, _, retry) = &model.calls[2];
    assert!(retry.temperature > 0.0 && retry.seed != model.calls[1].2.seed, "{retry:?}");
    let outputs: Vec<&str> = rec.steps.iter().map(|s| s.output.as_str()).collect();
    assert_eq!(outputs, [BROKEN_TAIL, other.as_str(), GOOD_TAIL]);

    // A model that can only repeat itself: at most MAX_RESAMPLES retries per repair, then kept.
    let mut model = Scripted::new(&vec![BROKEN_TAIL; 40]);
    let cfg = EpisodeConfig { budget: 2, ..resample };
    let (rec, _) = run(&cfg, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert_eq!((rec.discarded_repeats, rec.repeated_repairs, rec.solver_calls), (MAX_RESAMPLES, 1, 2));
}

/// Under `forbid` (the default) each repair's grammar carries the earlier candidates
/// of its episode, so the guard refuses to close a repeat; the Actor's carries none. A repeat
/// that still comes back (here: a scripted model that ignores the grammar) is resampled.
#[test]
fn forbid_hands_each_repair_the_candidates_it_may_not_repeat() {
    let other = BROKEN_TAIL.replace("(clear a)", "(clear a) (holding a)");
    let cfg = EpisodeConfig { editor_repeats: RepeatPolicy::default(), ..problem_mode(Strategy::MultiRole) };
    assert_eq!(cfg.editor_repeats, RepeatPolicy::Forbid);
    let mut model = Scripted::new(&[BROKEN_TAIL, &other, BROKEN_TAIL, GOOD_TAIL]);
    let (rec, _) = run(&cfg, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert!(rec.solved);
    let avoid = |i: usize| match &model.calls[i].2.constraint {
        Some(onebrain_model::ConstraintSpec::Problem { avoid, .. }) => avoid.clone(),
        c => panic!("call {i}: {c:?}"),
    };
    assert!(avoid(0).is_empty(), "the Actor has nothing to avoid");
    assert_eq!(avoid(1), [BROKEN_TAIL]);
    // The third call repeated the first candidate: thrown away, asked again with the same list.
    assert_eq!(avoid(2), [BROKEN_TAIL, other.as_str()]);
    assert_eq!(avoid(3), [BROKEN_TAIL, other.as_str()]);
    assert_eq!((rec.discarded_repeats, rec.repeated_repairs), (1, 0));
}

/// Best-of-k: K Actor samples, each verified and judged, none repaired, and a
/// success does not stop it; without a reward plugin the Judge's pick is returned. The
/// record's s_J stays y_0's (the Judge's AUC pairs it with b_0).
#[test]
fn best_of_k_spends_its_budget_judges_every_sample_and_returns_the_judges_pick() {
    let cfg = EpisodeConfig { budget: 3, select: Select::Judge, ..problem_mode(Strategy::BestOfK) };
    let mut model = Scripted::new(&[BROKEN_TAIL, GOOD_TAIL, GOOD_TAIL_REORDERED]);
    model.judge_scores = [0.3, 0.2, 0.7].into();
    let (rec, _) = run(&cfg, &mut model, &NativeVerifier::default(), &Finalizer::default());
    assert_eq!(model.calls.len(), 3, "a solved sample does not stop best-of-k");
    assert!(model.calls.iter().all(|c| c.0 == Role::Actor && c.1 == model.calls[0].1), "the Actor's prompt each time");
    assert_eq!(model.calls.iter().map(|c| c.2.temperature).collect::<Vec<_>>(), [0.0, 0.7, 0.7]);
    assert_eq!(model.judged.len(), 3);
    assert_eq!(
        (rec.b0, rec.solved, rec.first_success, rec.selected, rec.repairs, rec.solver_calls),
        (false, true, Some(1), Some(2), 0, 3)
    );
    assert_eq!(rec.judge_score, Some(0.3));
    assert!(rec.final_spec.as_ref().unwrap().problem.contains("(:objects b a)"));
    assert!(rec.steps.iter().all(|s| s.kind == "sample"));
}

/// What a reward double was asked: the one-step episodes best-of-k's selector scores.
struct Recording<R> {
    inner: R,
    seen: Mutex<Vec<FinishedEpisode>>,
}

impl<R: Reward> Reward for Recording<R> {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards, BoxError> {
        self.seen.lock().unwrap().push(ep.clone());
        self.inner.rewards(ep)
    }
}

/// The reward selector scores each sample alone with the Judge's weight at 0: Φ = b for the
/// paper's rewards, so the two solved samples tie and the higher Judge score breaks it.
#[test]
fn best_of_k_by_reward_scores_each_sample_alone_without_the_judge_term() {
    let cfg = EpisodeConfig { budget: 3, ..problem_mode(Strategy::BestOfK) };
    assert_eq!(cfg.select, Select::Reward, "the default selector");
    let mut model = Scripted::new(&[GOOD_TAIL, BROKEN_TAIL, GOOD_TAIL_REORDERED]);
    // The broken sample has the Judge's best score: with its λ_J·s_J term it still loses.
    model.judge_scores = [0.1, 0.95, 0.8].into();
    let reward = Arc::new(Recording { inner: PaperRewards, seen: Mutex::new(Vec::new()) });
    let finalizer = Finalizer { reward: Some(reward.clone()), checker: None };
    let (rec, _) = run(&cfg, &mut model, &NativeVerifier::default(), &finalizer);
    let seen = reward.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|e| e.steps.len() == 1 && e.settings.lambda_judge == 0.0));
    assert_eq!(seen.iter().map(|e| e.judge_score).collect::<Vec<_>>(), [0.1, 0.95, 0.8]);
    assert_eq!((rec.selected, rec.solved), (Some(2), true));
    assert!(rec.final_spec.as_ref().unwrap().problem.contains("(:objects b a)"));
    assert_eq!(rec.rewards.as_ref().map(|r| r.actor), Some(1.0), "the picked sample's rewards");
    assert!(rec.error.is_none());
}

/// A reward plugin whose Φ is not a number cannot rank the samples: the Judge's pick stands
/// and the failure is reported, as any plugin failure is.
#[test]
fn best_of_k_keeps_the_judges_pick_when_the_reward_is_not_a_number() {
    struct NotANumber;
    impl Reward for NotANumber {
        fn rewards(&self, _: &FinishedEpisode) -> Result<Rewards, BoxError> {
            Ok(Rewards { actor: f32::NAN, editor: 0.0, judge: 0.0, editor_steps: None })
        }
    }
    let cfg = EpisodeConfig { budget: 2, ..problem_mode(Strategy::BestOfK) };
    let mut model = Scripted::new(&[GOOD_TAIL, GOOD_TAIL_REORDERED]);
    model.judge_scores = [0.9, 0.1].into();
    let finalizer = Finalizer { reward: Some(Arc::new(NotANumber)), checker: None };
    let (rec, _) = run(&cfg, &mut model, &NativeVerifier::default(), &finalizer);
    assert_eq!((rec.selected, rec.solved), (Some(0), true));
    assert!(rec.rewards.is_none());
    assert_eq!(rec.failures.len(), 1);
    assert!(rec.error.as_deref().unwrap().starts_with("reward plugin: Φ of step 0 is NaN"), "{:?}", rec.error);
}

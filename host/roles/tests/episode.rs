//! The episode with a scripted model (a test double that returns prepared outputs) and a
//! verifier made of the native checks: control flow, budget and metrics, checked exactly.

mod scripted;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use onebrain_core::{BoxError, Category, FinishedEpisode, StepRole, Reward, Rewards};
use onebrain_model::{ConstraintStats, GuardRule, Relaxation};
use onebrain_roles::{
    EpisodeConfig, Event, Finalizer, Mode, RepeatPolicy, Role, Select, Strategy, MAX_RESAMPLES,
};

use scripted::*;

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

/// An answer in which `forbid-init-mutex` gave way (every token the grammar allowed led to an
/// impossible initial state) is unsolved with that as its reason, even though a planner would
/// solve it, and no planner is called for it; the Editor sees the reason and repairs it.
#[test]
fn an_answer_an_honesty_guard_gave_way_in_is_unsolved_with_its_reason() {
    let cfg = problem_mode(Strategy::MultiRole);
    let mut model = Scripted::new(&[GOOD_TAIL, GOOD_TAIL_REORDERED]);
    let gave_way = ConstraintStats {
        guard_overrides: 1,
        relaxations: vec![Relaxation { position: 12, rule: GuardRule::InitMutex }],
        ..ConstraintStats::default()
    };
    // A relaxation of a rule that is not about honesty (a repeat of an earlier candidate)
    // leaves the answer to the planner.
    let repeat_gave_way = ConstraintStats {
        guard_overrides: 1,
        relaxations: vec![Relaxation { position: 30, rule: GuardRule::Avoid }],
        ..ConstraintStats::default()
    };
    model.constraints = VecDeque::from([Some(gave_way), Some(repeat_gave_way)]);
    let verifier = NativeVerifier::default();
    let (rec, _) = run(&cfg, &mut model, &verifier, &Finalizer::default());

    let verdict = rec.steps[0].verdict.as_ref().unwrap();
    assert!(!verdict.solved && verdict.plan.is_empty(), "{verdict:?}");
    assert_eq!(verdict.diagnostics.len(), 1);
    let reason = &verdict.diagnostics[0];
    assert_eq!(reason.category, Category::GoalConstraint);
    assert!(
        reason.message.starts_with("forbid-init-mutex left no token at answer token 12: ")
            && reason.message.contains("mutex group"),
        "{}",
        reason.message
    );
    assert!(!rec.steps[0].solver_call);
    assert!(model.calls[1].1.contains("forbid-init-mutex left no token"), "the Editor sees why");
    // The repair reached the planner and was solved.
    assert!(rec.steps[1].solver_call && rec.solved && !rec.b0);
    assert_eq!(verifier.calls.load(Ordering::SeqCst), 1);
    assert_eq!((rec.solver_calls, rec.planner_calls, rec.first_success), (2, 1, Some(1)));
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

//! [`run_pipelined`] hands the model every waiting request of one kind in one call:
//! with a model double whose answers depend only on the request (never on the call
//! order or on what else is in the call), many open episodes give the same records as one
//! episode at a time, in fewer, larger calls, the oldest requests first.

use std::sync::Arc;

use onebrain_core::{BoxError, Outcome, Spec, Task, Verdict, Verifier};
use onebrain_roles::{
    run_pipelined, Episode, EpisodeConfig, EpisodeInput, EpisodeRecord, Finalizer, Generation, LanguageModel,
    Mode, OneAtATime, RepeatPolicy, Role, SamplingConfig, StopReason, Strategy, MAX_BATCH,
};
use onebrain_verifier::VerifierPool;

const DOMAIN: &str = "(define (domain bw) (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";
const GOOD_TAIL: &str = "a b)\n  (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))\n```";
/// Uses an undeclared object: the native checks reject it.
const BROKEN_TAIL: &str = "a)\n  (:init (clear a) (ontable a) (handempty)) (:goal (on a b)))\n```";

/// The task number written into a prompt by [`input`].
fn task_of(prompt: &str) -> usize {
    let at = prompt.find("(task #").expect("a task prompt") + "(task #".len();
    prompt[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
}

/// Answers as a function of the request alone: the Actor breaks tasks 1 mod 3 and fails
/// (a model error) on task 5, the Editor repairs, the Judge scores by task number. The
/// batched calls are logged, and a call that mixes roles is a test failure.
#[derive(Default)]
struct Keyed {
    /// `(kind, rows, first task of each row)` per batched call.
    calls: Vec<(&'static str, Vec<usize>)>,
    generations: usize,
}

impl LanguageModel for Keyed {
    fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
        self.generations += 1;
        let task = task_of(prompt);
        let text = match role {
            Role::Actor if task == 5 => return Err(format!("no answer for task {task}").into()),
            Role::Actor if task % 3 == 1 => BROKEN_TAIL.to_string(),
            _ => GOOD_TAIL.to_string(),
        };
        Ok(Generation {
            // The seed shows up in the tokens, so a row answered with another row's config
            // would change the record.
            tokens: vec![s.seed as u32, task as u32],
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
        Ok(0.05 + 0.01 * task_of(prompt) as f32)
    }

    fn name(&self) -> String {
        "keyed".into()
    }
}

/// [`Keyed`] whose batched calls are logged (and checked) before being answered row by row.
#[derive(Default)]
struct Batching(Keyed);

impl LanguageModel for Batching {
    fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
        self.0.generate(role, prompt, s)
    }
    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError> {
        self.0.judge(prompt)
    }
    fn name(&self) -> String {
        self.0.name()
    }
    fn generate_many(&mut self, requests: &[(Role, String, SamplingConfig)]) -> Vec<Result<Generation, BoxError>> {
        assert!(!requests.is_empty() && requests.len() <= MAX_BATCH, "{} rows", requests.len());
        assert!(requests.iter().all(|r| r.0 == requests[0].0), "a call mixes roles");
        let kind = if requests[0].0 == Role::Actor { "actor" } else { "editor" };
        self.0.calls.push((kind, requests.iter().map(|r| task_of(&r.1)).collect()));
        requests.iter().map(|(role, p, s)| self.0.generate(*role, p, s)).collect()
    }
    fn judge_many(&mut self, prompts: &[String]) -> Vec<Result<f32, BoxError>> {
        assert!(!prompts.is_empty() && prompts.len() <= MAX_BATCH);
        self.0.calls.push(("judge", prompts.iter().map(|p| task_of(p)).collect()));
        prompts.iter().map(|p| self.0.judge(p)).collect()
    }
}

/// Native checks only: parse and semantic errors reject, anything else is solved.
struct NativeVerifier;
impl Verifier for NativeVerifier {
    fn verify(&self, spec: &Spec) -> Verdict {
        let diagnostics: Vec<_> = onebrain_pddl::check_sources(&spec.domain, &spec.problem)
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        let solved = diagnostics.is_empty();
        Verdict {
            solved,
            outcome: if solved { Outcome::Solved } else { Outcome::Rejected },
            plan: if solved { vec!["(pick-up a)".into(), "(stack a b)".into()] } else { vec![] },
            diagnostics,
            time_ms: 1,
            solver_time_ms: 0,
            solver_output: None,
        }
    }
}

fn input(i: usize) -> EpisodeInput {
    EpisodeInput {
        task: Task {
            id: format!("t/{i}"),
            domain: "blocksworld".into(),
            text: format!("Blocks a and b are on the table (task #{i}). My goal is to have a on b."),
            reference: None,
        },
        description: "Blocks on a table; pick up and stack.".into(),
        domain_pddl: Some(DOMAIN.into()),
        example: None,
        foreign_example: None,
    }
}

fn config() -> EpisodeConfig {
    EpisodeConfig {
        strategy: Strategy::MultiRole,
        mode: Mode::Problem,
        editor_repeats: RepeatPolicy::Keep,
        greedy: false,
        temperature: 0.7,
        seed: 40,
        ..Default::default()
    }
}

/// Runs tasks 0..n with `in_flight` open at once; the records sorted by task.
fn run(n: usize, model: &mut dyn LanguageModel, in_flight: usize) -> Vec<EpisodeRecord> {
    let cfg = config();
    let pool = VerifierPool::new(Arc::new(NativeVerifier), 2);
    let mut out = Vec::new();
    let episodes = (0..n).map(|i| {
        let ep = EpisodeConfig { seed: cfg.seed + 10_000 * i as u64, ..cfg.clone() };
        Episode::new(input(i), &ep, "keyed")
    });
    run_pipelined(episodes, &cfg, model, &pool, &Finalizer::default(), in_flight, &mut |_| {}, &mut |r| {
        out.push(r);
        Ok::<(), ()>(())
    })
    .unwrap();
    out.sort_by_key(|r| task_of(&r.task_text));
    out
}

/// What a record says, timings left out.
fn summary(r: &EpisodeRecord) -> String {
    let steps: Vec<String> = r
        .steps
        .iter()
        .map(|s| {
            format!(
                "{} {} seed {} tokens {:?} judge {:?} solved {:?}\n{}\n=> {}",
                s.role,
                s.kind,
                s.sampling.seed,
                s.output_tokens,
                s.judge_score,
                s.verdict.as_ref().map(|v| v.solved),
                s.prompt,
                s.output
            )
        })
        .collect();
    format!(
        "{} solved {} repairs {} calls {} judge {:?} error {:?}\n{}",
        r.task_id,
        r.solved,
        r.repairs,
        r.solver_calls,
        r.judge_score,
        r.error,
        steps.join("\n")
    )
}

#[test]
fn open_episodes_share_model_calls_and_keep_their_records() {
    const N: usize = 20;
    // One episode at a time: every call is one request, as before batching.
    let mut alone = Keyed::default();
    let reference = run(N, &mut alone, 1);
    assert_eq!(reference.len(), N);
    assert!(reference[5].error.as_deref().unwrap().contains("no answer for task 5"), "{:?}", reference[5].error);
    assert!(reference[1].repairs == 1 && reference[1].solved, "task 1 is repaired");
    assert!(reference.iter().filter(|r| r.error.is_none()).all(|r| r.solved));

    // All open at once: the same records from fewer, larger calls.
    let mut model = Batching::default();
    let batched = run(N, &mut model, N);
    for (a, b) in reference.iter().zip(&batched) {
        assert_eq!(summary(a), summary(b));
    }
    let calls = &model.0.calls;
    let generate_calls = calls.iter().filter(|c| c.0 != "judge").count();
    assert!(generate_calls < model.0.generations, "{generate_calls} calls for {} generations", model.0.generations);
    assert_eq!(model.0.generations, alone.generations);
    // The first call: the 16 oldest Actor requests, oldest first; the next Actor call the rest.
    assert_eq!(calls[0], ("actor", (0..MAX_BATCH).collect()));
    let second_actor = calls.iter().skip(1).find(|c| c.0 == "actor").expect("a second Actor call");
    assert_eq!(second_actor.1, (MAX_BATCH..N).collect::<Vec<_>>());
    // Every episode is judged once (task 5 never gets there), in calls of any size.
    let judged: usize = calls.iter().filter(|c| c.0 == "judge").map(|c| c.1.len()).sum();
    assert_eq!(judged, N - 1);
    eprintln!("calls: {:?}", calls.iter().map(|c| (c.0, c.1.len())).collect::<Vec<_>>());

    // `OneAtATime` hides the batched calls: each request reaches the model alone.
    let mut unbatched = OneAtATime(Batching::default());
    let again = run(N, &mut unbatched, N);
    for (a, b) in reference.iter().zip(&again) {
        assert_eq!(summary(a), summary(b));
    }
    assert!(unbatched.0 .0.calls.is_empty(), "no batched call got through");
    assert_eq!(unbatched.0 .0.generations, alone.generations);
}

#[test]
fn the_default_batched_calls_loop_over_the_single_ones() {
    let mut model = Keyed::default();
    let requests = vec![
        (Role::Actor, input(2).task.text.clone(), SamplingConfig { seed: 9, ..Default::default() }),
        (Role::Actor, input(5).task.text.clone(), SamplingConfig::default()),
        (Role::Editor, input(4).task.text.clone(), SamplingConfig { seed: 3, ..Default::default() }),
    ];
    let out = model.generate_many(&requests);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].as_ref().unwrap().tokens, [9, 2]);
    assert!(out[1].is_err());
    assert_eq!(out[2].as_ref().unwrap().tokens, [3, 4]);
    let scores = model.judge_many(&[input(3).task.text.clone(), input(7).task.text.clone()]);
    assert_eq!(scores.len(), 2);
    assert!((scores[1].as_ref().unwrap() - 0.12).abs() < 1e-6);
    assert_eq!(model.generations, 3);
}

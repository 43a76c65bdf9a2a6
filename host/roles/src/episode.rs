//! The episode as a state machine: it asks for model calls and verifications and is fed their
//! answers, so one driver can run it step by step (`solve`) and another can keep several in
//! flight, the verifier checking one task while the model writes the next (`eval`).
//!
//! Algorithm 1 (multi-role): the Actor writes y_0; the verifier returns (b_0, d_0); the Judge
//! scores (x, y_0); while b_t = 0 and t < H_max the Editor writes y_{t+1} from (x, y_t, d_t).
//! It returns the first solver-executable spec, else the last edit. The baselines share the
//! budget of K verifier calls.

use std::time::Instant;

use onebrain_core::{Spec, Task, Verdict};
use onebrain_model::{Generation, Role, SamplingConfig, StopReason};

use crate::extract::{extract_spec, Mode};
use crate::plan::{parse_plan_lines, validate_answer, validate_plan};
use crate::prompts::{prompt_hash, TaskContext};
use crate::record::{EpisodeRecord, EpisodeTimings, Event, StepRecord, StepTimings};
use crate::strategy::{Constrain, EpisodeConfig, ExampleChoice, RepeatPolicy, Strategy, MAX_RESAMPLES};
use onebrain_model::{ConstraintSpec, MutexGroup, MutexPart};

/// What a task brings to an episode besides its text.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeInput {
    /// The task (its reference spec, when known, is for evaluation only).
    pub task: Task,
    /// The domain's NL description (from the domain plugin).
    pub description: String,
    /// The domain plugin's PDDL: given to the model in `problem` mode.
    pub domain_pddl: Option<String>,
    /// A worked example of the domain (a task text and its problem PDDL): LLM+P's
    /// in-context example, and every prompt's with `example = "same-domain"`.
    pub example: Option<(String, String)>,
    /// A worked example of another domain plugin, for `example = "other-domain"`: its text
    /// names the other domain, so the model is not led to take its objects.
    pub foreign_example: Option<(String, String)>,
}

/// What the episode needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// A generation in a role.
    Generate {
        /// The role.
        role: Role,
        /// The full prompt.
        prompt: String,
        /// How to sample.
        sampling: SamplingConfig,
    },
    /// A Judge score.
    Judge {
        /// The Judge prompt.
        prompt: String,
    },
    /// A verifier call E(y).
    Verify {
        /// The spec.
        spec: Spec,
    },
    /// Φ(y) of every verified step so far, from the reward plugin (`best-then-repair`'s pick):
    /// answer with [`Response::Ranked`], one entry per record step ([`Episode::record`]).
    Rank,
    /// The episode is over: call [`Episode::finish`].
    Done,
}

/// The answer to a [`Request`].
#[derive(Clone, Debug)]
pub enum Response {
    /// The model's generation.
    Generated(Generation),
    /// The Judge's score and how long it took.
    Judged {
        /// s_J.
        score: f32,
        /// Seconds.
        secs: f64,
    },
    /// The verifier's verdict.
    Verified(Verdict),
    /// Φ(y) per record step (`None` for a step without a verdict), for [`Request::Rank`].
    Ranked(Vec<Option<f32>>),
    /// The model (or the driver) failed; the episode ends with what it has.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Waiting for generation `index`.
    Generating { index: u32 },
    /// Waiting for the verdict on step `step` (an index into `record.steps`).
    Verifying { step: usize },
    /// Waiting for the Judge's score of step `step`.
    Judging { step: usize },
    /// Waiting for Φ of the verified steps.
    Ranking,
    /// ToT: waiting for proposal `j` for frontier node `node`.
    Proposing { node: usize, j: usize },
    /// ToT: waiting for the value of candidate `c`.
    Valuing { c: usize },
    /// Over.
    Done,
}

/// ToT's search state.
#[derive(Clone, Debug, Default, PartialEq)]
struct Search {
    depth: usize,
    frontier: Vec<Vec<String>>,
    candidates: Vec<Vec<String>>,
    values: Vec<f32>,
    /// Nodes the model called complete, to validate.
    complete: Vec<Vec<String>>,
    validated: Vec<Vec<String>>,
    generations: u32,
}

/// One task's episode under one strategy.
#[derive(Debug)]
pub struct Episode {
    cfg: EpisodeConfig,
    input: EpisodeInput,
    ctx: TaskContext,
    record: EpisodeRecord,
    phase: Phase,
    events: Vec<Event>,
    started: Option<Instant>,
    search: Search,
    /// The generation asked for last: its role, prompt and sampling go into the step record.
    pending: Option<(Role, String, SamplingConfig)>,
    /// Repeats of the current repair thrown away so far (`editor-repeats = "resample"`).
    resamples: u32,
    /// `best-then-repair`: Φ per record step, as last ranked.
    phi: Vec<Option<f32>>,
    /// `best-then-repair`: the step the next repair starts from, and the answer so far.
    repair_of: Option<usize>,
}

impl Episode {
    /// A new episode; nothing runs until [`Episode::start`].
    pub fn new(input: EpisodeInput, cfg: &EpisodeConfig, model: &str) -> Episode {
        let ctx = TaskContext {
            description: input.description.clone(),
            domain_pddl: input.domain_pddl.clone(),
            task: input.task.text.clone(),
            mode: cfg.mode,
            // LLM+P places its example itself, after the task.
            example: match (cfg.example, cfg.strategy) {
                (_, Strategy::LlmPlusP) | (ExampleChoice::None, _) => None,
                (ExampleChoice::SameDomain, _) => input.example.clone(),
                (ExampleChoice::OtherDomain, _) => input.foreign_example.clone(),
            },
        };
        let record = EpisodeRecord {
            task_id: input.task.id.clone(),
            domain: input.task.domain.clone(),
            strategy: cfg.strategy,
            mode: cfg.mode,
            model: model.to_string(),
            task_text: input.task.text.clone(),
            steps: Vec::new(),
            b0: false,
            solved: false,
            first_success: None,
            selected: None,
            repairs: 0,
            solver_calls: 0,
            planner_calls: 0,
            final_spec: None,
            final_plan: Vec::new(),
            judge_score: None,
            rewards: None,
            faithfulness: None,
            fact_agreement: None,
            timings: EpisodeTimings::default(),
            repeated_repairs: 0,
            discarded_repeats: 0,
            error: None,
            failures: Vec::new(),
        };
        Episode {
            cfg: cfg.clone(),
            input,
            ctx,
            record,
            phase: Phase::Done,
            events: Vec::new(),
            started: None,
            search: Search::default(),
            pending: None,
            resamples: 0,
            phi: Vec::new(),
            repair_of: None,
        }
    }

    /// The task's identifier.
    pub fn task_id(&self) -> &str {
        &self.record.task_id
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.input.task
    }

    /// The first request.
    pub fn start(&mut self) -> Request {
        self.started = Some(Instant::now());
        self.events.push(Event::Started {
            task_id: self.record.task_id.clone(),
            strategy: self.cfg.strategy,
        });
        let needs_domain = self.cfg.mode == Mode::Problem || self.cfg.strategy.writes_plan();
        if needs_domain && self.input.domain_pddl.is_none() {
            return self.fail("this mode needs the domain plugin's domain PDDL".into());
        }
        match self.cfg.strategy {
            Strategy::Direct | Strategy::Tot if self.input.task.reference.is_none() => {
                self.fail(format!("the {} strategy validates plans against the reference task, which this task lacks", self.cfg.strategy))
            }
            Strategy::LlmPlusP if self.input.example.is_none() => {
                self.fail("the llm+p strategy needs an in-context example from the domain plugin".into())
            }
            Strategy::Tot => {
                self.search.frontier = vec![Vec::new()];
                self.propose(0, 0)
            }
            _ => self.generate(0),
        }
    }

    /// Feeds the answer to the last request; returns the next one.
    pub fn resume(&mut self, response: Response) -> Request {
        let response = match response {
            Response::Failed(message) => return self.fail(message),
            r => r,
        };
        match (self.phase.clone(), response) {
            (Phase::Generating { index }, Response::Generated(g)) => self.on_generated(index, g),
            (Phase::Verifying { step }, Response::Verified(v)) => self.on_verified(step, v),
            (Phase::Judging { step }, Response::Judged { score, secs }) => {
                self.on_judged(step, score, secs)
            }
            (Phase::Proposing { node, j }, Response::Generated(g)) => self.on_proposal(node, j, g),
            (Phase::Valuing { c }, Response::Judged { score, secs }) => {
                self.on_value(c, score, secs)
            }
            (Phase::Ranking, Response::Ranked(phi)) => self.on_ranked(phi),
            (phase, r) => self.fail(format!("driver bug: {r:?} does not answer {phase:?}")),
        }
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The record so far (complete after [`Request::Done`]).
    pub fn record(&self) -> &EpisodeRecord {
        &self.record
    }

    /// The finished record. Rewards and faithfulness are added by [`crate::Finalizer`]; the
    /// drivers emit [`Event::Finished`] after that.
    pub fn finish(mut self) -> EpisodeRecord {
        self.close();
        self.record
    }

    // ------------------------------------------------------------------ spec strategies

    fn generate(&mut self, index: u32) -> Request {
        let (role, prompt, max_tokens, resample) = match (self.cfg.strategy, index) {
            (Strategy::MultiRole, 0) | (Strategy::SelfRefine, 0) => {
                (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, false)
            }
            (Strategy::MultiRole, _) | (Strategy::SelfRefine, _) => {
                let last = self
                    .last_spec_step()
                    .expect("a repair follows a verified step");
                let candidate = self.ctx.candidate_text(last.spec.as_ref(), &last.output);
                let verdict = last.verdict.as_ref().expect("verified");
                if self.cfg.strategy == Strategy::MultiRole {
                    (
                        Role::Editor,
                        self.ctx.editor(&candidate, verdict),
                        self.cfg.max_tokens,
                        false,
                    )
                } else {
                    // Self-Refine has no role conditioning: the Actor's parameters throughout.
                    (
                        Role::Actor,
                        self.ctx.self_refine(&candidate, verdict),
                        self.cfg.max_tokens,
                        false,
                    )
                }
            }
            (Strategy::LlmPlusP, _) => {
                let (text, problem) = self.input.example.as_ref().expect("checked at start");
                (
                    Role::Actor,
                    self.ctx.llm_plus_p(text, problem),
                    self.cfg.max_tokens,
                    true,
                )
            }
            (Strategy::Direct, _) => (
                Role::Actor,
                self.ctx.direct(),
                self.cfg.plan_max_tokens,
                true,
            ),
            // The Actor's own prompt each time: greedy first at evaluation, then samples.
            (Strategy::BestOfK, _) => (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, true),
            (Strategy::BestThenRepair, i) if i < self.cfg.samples => {
                (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, true)
            }
            (Strategy::BestThenRepair, _) => {
                let at = self.repair_of.expect("a repair follows the pick");
                let step = &self.record.steps[at];
                let candidate = self.ctx.candidate_text(step.spec.as_ref(), &step.output);
                let verdict = self.repair_verdict(at);
                (Role::Editor, self.ctx.editor(&candidate, &verdict), self.cfg.max_tokens, false)
            }
            (Strategy::Tot, _) => unreachable!("ToT proposes through `propose`"),
        };
        let mut sampling = self.cfg.sampling(index, max_tokens, resample);
        if self.cfg.mode == Mode::Problem && !self.cfg.strategy.writes_plan() {
            // The primer opened the one code block: its closing fence ends the answer, and
            // the prose a small model adds after it would cost seconds per step.
            sampling.stop = vec!["```".into()];
        }
        sampling.constraint = self.constraint(index);
        self.ask(Phase::Generating { index }, role, prompt, sampling)
    }

    /// The grammar generation `index` is held to, when `constrain = "grammar"`.
    fn constraint(&self, index: u32) -> Option<ConstraintSpec> {
        if self.cfg.constrain == Constrain::None {
            return None;
        }
        let limits = self.cfg.grammar;
        let domain = self.input.domain_pddl.clone();
        match self.cfg.strategy {
            Strategy::Direct | Strategy::Tot => {
                let objects = self.reference_objects()?;
                let domain = domain?;
                Some(if self.cfg.strategy == Strategy::Direct {
                    ConstraintSpec::Plan { domain, objects, limits }
                } else {
                    ConstraintSpec::NextAction { domain, objects }
                })
            }
            _ => match self.cfg.mode {
                Mode::Full => Some(ConstraintSpec::Full {
                    limits,
                    avoid: self.candidates_to_avoid(index),
                    forbid_goal_at_init: self.cfg.forbid_goal_at_init,
                }),
                Mode::Problem => {
                    let domain = domain?;
                    let init_mutex = if self.cfg.forbid_init_mutex { init_mutex(&domain) } else { Vec::new() };
                    Some(ConstraintSpec::Problem {
                        domain,
                        prefix: self.ctx.primer(),
                        limits,
                        avoid: self.candidates_to_avoid(index),
                        forbid_goal_at_init: self.cfg.forbid_goal_at_init,
                        init_mutex,
                    })
                }
            },
        }
    }

    /// The reference task's objects with their types: the vocabulary of a plan grammar.
    fn reference_objects(&self) -> Option<Vec<(String, String)>> {
        let r = self.input.task.reference.as_ref()?;
        let p = onebrain_pddl::parse_problem(&r.problem).ok()?;
        Some(p.objects.iter().map(|o| (o.name.to_ascii_lowercase(), o.ty.to_ascii_lowercase())).collect())
    }

    /// True when generation `index` repairs an earlier candidate (an Editor or Self-Refine step).
    fn is_repair(&self, index: u32) -> bool {
        match self.cfg.strategy {
            Strategy::MultiRole | Strategy::SelfRefine => index > 0,
            Strategy::BestThenRepair => index >= self.cfg.samples,
            _ => false,
        }
    }

    /// What the Editor is told about step `at`: its verdict, and when the planner solved it
    /// but Φ found it worthless, why a solved spec still needs repair.
    fn repair_verdict(&self, at: usize) -> Verdict {
        let step = &self.record.steps[at];
        let mut verdict = step.verdict.clone().expect("a verified step");
        if verdict.solved {
            let why = if verdict.plan.is_empty() {
                "the planner's plan is empty: the goal already holds in the stated initial state, so the spec does not ask for what the task asks"
            } else {
                "the planner solved it, but the spec does not state the task's text: a fact or goal the text does not say, or one it contradicts"
            };
            verdict.diagnostics.insert(0, onebrain_core::Diagnostic::error(onebrain_core::Category::GoalConstraint, why));
        }
        verdict
    }

    /// The earlier candidates a repair may not repeat (`editor-repeats = "forbid"`).
    fn candidates_to_avoid(&self, index: u32) -> Vec<String> {
        if !self.is_repair(index) || self.cfg.editor_repeats != RepeatPolicy::Forbid {
            return Vec::new();
        }
        let mut earlier: Vec<String> = Vec::new();
        for s in self.record.steps.iter().filter(|s| s.verdict.is_some()) {
            if !earlier.contains(&s.output) {
                earlier.push(s.output.clone());
            }
        }
        earlier
    }

    /// True when `text` (a spec answer, primer included) says what an earlier candidate of this
    /// episode said, up to whitespace and case.
    fn repeats_earlier(&self, text: &str) -> bool {
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase();
        let now = norm(text);
        let primer = self.ctx.primer();
        self.record
            .steps
            .iter()
            .filter(|s| s.verdict.is_some())
            .any(|s| norm(&format!("{primer}{}", s.output)) == now)
    }

    fn ask(
        &mut self,
        phase: Phase,
        role: Role,
        prompt: String,
        sampling: SamplingConfig,
    ) -> Request {
        self.phase = phase;
        self.pending = Some((role, prompt.clone(), sampling.clone()));
        Request::Generate {
            role,
            prompt,
            sampling,
        }
    }

    fn last_spec_step(&self) -> Option<&StepRecord> {
        self.record.steps.iter().rev().find(|s| s.verdict.is_some())
    }

    fn kind(&self, index: u32) -> &'static str {
        match (self.cfg.strategy, index) {
            (Strategy::MultiRole, 0) | (Strategy::SelfRefine, 0) => "actor",
            (Strategy::MultiRole, _) => "editor",
            (Strategy::SelfRefine, _) => "self-refine",
            (Strategy::LlmPlusP, _) | (Strategy::BestOfK, _) => "sample",
            (Strategy::BestThenRepair, i) if i < self.cfg.samples => "sample",
            (Strategy::BestThenRepair, _) => "editor",
            (Strategy::Direct, _) => "plan",
            (Strategy::Tot, _) => "propose",
        }
    }

    fn step_from(
        &self,
        index: u32,
        kind: &str,
        role: Role,
        prompt: String,
        g: &Generation,
        sampling: SamplingConfig,
    ) -> StepRecord {
        StepRecord {
            index,
            role,
            kind: kind.to_string(),
            prompt_sha256: prompt_hash(&prompt),
            prompt,
            prompt_tokens: g.prompt_tokens,
            cached_prompt_tokens: g.cached_prompt_tokens,
            output: g.text.clone(),
            output_tokens: g.tokens.clone(),
            output_logprobs: g.logprobs.clone(),
            sampling,
            stop_reason: stop_name(&g.stop_reason),
            constraint: g.constraint.clone(),
            extraction: None,
            spec: None,
            verdict: None,
            dominant: None,
            solver_call: false,
            judge_score: None,
            judge_prompt: None,
            timings: StepTimings {
                prefill_ms: g.prefill_secs * 1e3,
                decode_ms: g.decode_secs * 1e3,
                ..Default::default()
            },
        }
    }

    fn on_generated(&mut self, index: u32, g: Generation) -> Request {
        let (role, prompt, sampling) = self.pending.take().expect("a generation was asked for");
        let kind = self.kind(index);
        if self.is_repair(index) && self.repeats_earlier(&format!("{}{}", self.ctx.primer(), g.text)) {
            if self.cfg.editor_repeats != RepeatPolicy::Keep && self.resamples < MAX_RESAMPLES {
                // Thrown away: its time counts, it spends no budget. Each retry samples hotter.
                self.resamples += 1;
                self.record.timings.generation_ms += (g.prefill_secs + g.decode_secs) * 1e3;
                self.record.discarded_repeats += 1;
                let t = self.cfg.temperature * (1.0 + 0.25 * (self.resamples - 1) as f32);
                let seed = self.cfg.seed.wrapping_add(1000 * u64::from(index) + u64::from(self.resamples));
                let resampled = SamplingConfig {
                    temperature: t,
                    top_p: self.cfg.top_p,
                    seed,
                    ..sampling
                };
                return self.ask(Phase::Generating { index }, role, prompt, resampled);
            }
            self.record.repeated_repairs += 1;
        }
        self.resamples = 0;
        if self.is_repair(index) {
            self.record.repairs += 1;
        }
        let mut step = self.step_from(index, kind, role, prompt, &g, sampling);
        self.record.timings.generation_ms += step.timings.prefill_ms + step.timings.decode_ms;
        let primed = match self.cfg.strategy {
            Strategy::Direct => String::new(),
            _ => self.ctx.primer(),
        };
        let text = format!("{primed}{}", g.text);
        self.events.push(Event::Generated {
            task_id: self.record.task_id.clone(),
            index,
            role,
            kind: kind.to_string(),
            text: text.clone(),
            tokens: g.tokens.len(),
            secs: g.prefill_secs + g.decode_secs,
        });
        if self.cfg.strategy == Strategy::Direct {
            let reference = self
                .input
                .task
                .reference
                .as_ref()
                .expect("checked at start");
            let (_, verdict) = validate_answer(reference, &text);
            step.solver_call = true;
            self.record.steps.push(step);
            let at = self.record.steps.len() - 1;
            return self.on_verified(at, verdict);
        }
        let ex = extract_spec(&text, self.cfg.mode, self.input.domain_pddl.as_deref());
        step.spec = ex.spec.clone();
        let failure = ex.failure_verdict();
        step.extraction = Some(ex);
        self.record.steps.push(step);
        let at = self.record.steps.len() - 1;
        match failure {
            // No PDDL: a syntax failure that spends its budget unit without a planner call.
            Some(v) => self.on_verified(at, v),
            None => {
                self.phase = Phase::Verifying { step: at };
                Request::Verify {
                    spec: self.record.steps[at].spec.clone().expect("extracted"),
                }
            }
        }
    }

    fn on_verified(&mut self, at: usize, verdict: Verdict) -> Request {
        // A no-PDDL output spends its budget unit without reaching the verifier.
        let real_call = self.record.steps[at]
            .extraction
            .as_ref()
            .is_none_or(|e| e.failure.is_none());
        let writes_plan = self.cfg.strategy.writes_plan();
        let rec = &mut self.record;
        rec.solver_calls += 1;
        if real_call {
            rec.planner_calls += u32::from(verdict.solver_time_ms > 0 || writes_plan);
        }
        rec.timings.verification_ms += verdict.time_ms as f64;
        rec.timings.planner_ms += verdict.solver_time_ms as f64;
        let step = &mut rec.steps[at];
        step.solver_call = real_call;
        step.timings.verify_ms = verdict.time_ms as f64;
        step.dominant = if verdict.solved {
            None
        } else {
            verdict.dominant_category()
        };
        let index = step.index;
        self.events.push(Event::Verified {
            task_id: rec.task_id.clone(),
            index,
            verdict: verdict.clone(),
        });
        // Store the verdict without the planner's full log: it can run to 64 KiB per call.
        let mut stored = verdict;
        stored.solver_output = stored.solver_output.map(|mut o| {
            o.stdout = tail(&o.stdout, 2000);
            o.stderr = tail(&o.stderr, 2000);
            o
        });
        let solved = stored.solved;
        rec.steps[at].verdict = Some(stored);
        let attempt = rec.steps.iter().filter(|s| s.verdict.is_some()).count();
        if attempt == 1 {
            rec.b0 = solved;
        }
        // Multi-role judges y_0; best-of-k judges every sample, since its selector may read it.
        let judged = match self.cfg.strategy {
            Strategy::MultiRole => attempt == 1,
            Strategy::BestOfK => true,
            Strategy::BestThenRepair => index < self.cfg.samples,
            _ => false,
        };
        if self.cfg.judge && judged {
            let step = &self.record.steps[at];
            let candidate = self.ctx.candidate_text(step.spec.as_ref(), &step.output);
            let prompt = self.ctx.judge(&candidate);
            self.record.steps[at].judge_prompt = Some(prompt.clone());
            self.phase = Phase::Judging { step: at };
            return Request::Judge { prompt };
        }
        self.after_verdict(at)
    }

    fn on_judged(&mut self, at: usize, score: f32, secs: f64) -> Request {
        let rec = &mut self.record;
        rec.timings.judge_ms += secs * 1e3;
        // The record's s_J is y_0's (the Judge's AUC pairs it with b_0); each step keeps its own.
        if rec.judge_score.is_none() {
            rec.judge_score = Some(score);
        }
        let step = &mut rec.steps[at];
        step.judge_score = Some(score);
        step.timings.judge_ms += secs * 1e3;
        self.events.push(Event::Judged {
            task_id: rec.task_id.clone(),
            index: rec.steps[at].index,
            score,
        });
        self.after_verdict(at)
    }

    fn after_verdict(&mut self, at: usize) -> Request {
        let step = &self.record.steps[at];
        let solved = step.verdict.as_ref().is_some_and(|v| v.solved);
        let index = step.index;
        if solved && self.record.first_success.is_none() {
            self.record.first_success = Some(index);
        }
        if self.cfg.strategy == Strategy::BestThenRepair {
            return self.best_then_repair_next(index);
        }
        // Best-of-k spends its whole budget: a later sample may be the better answer.
        if solved && self.cfg.strategy != Strategy::BestOfK {
            return self.done();
        }
        if self.record.solver_calls >= self.cfg.budget {
            return self.done();
        }
        match self.cfg.strategy {
            Strategy::MultiRole | Strategy::SelfRefine => {
                // Step t is the t-th repair's output.
                if index >= self.cfg.repairs_allowed() {
                    return self.done();
                }
                self.generate(index + 1)
            }
            Strategy::LlmPlusP | Strategy::Direct | Strategy::BestOfK => self.generate(index + 1),
            Strategy::BestThenRepair => unreachable!("handled above"),
            Strategy::Tot => self.tot_next(),
        }
    }

    // ----------------------------------------------------------------- best-then-repair

    /// After step `index`'s verdict: draw the next sample, or rank what there is.
    fn best_then_repair_next(&mut self, index: u32) -> Request {
        let budget_left = self.record.solver_calls < self.cfg.budget;
        if index + 1 < self.cfg.samples && budget_left {
            return self.generate(index + 1);
        }
        self.phase = Phase::Ranking;
        Request::Rank
    }

    /// The pick: the verified step of highest Φ (ties to the higher Judge score, then the
    /// earlier step). A pick with Φ > 0 is the answer; otherwise the Editor repairs the pick,
    /// then its own last repair, while the budget lasts.
    fn on_ranked(&mut self, phi: Vec<Option<f32>>) -> Request {
        if phi.len() != self.record.steps.len() || phi.iter().flatten().any(|p| !p.is_finite()) {
            return self.fail(format!("driver bug: Φ for {} steps ({phi:?}), the record has {}", phi.len(), self.record.steps.len()));
        }
        self.phi = phi;
        let Some(best) = pick_by_phi(&self.record.steps, &self.phi) else {
            return self.done();
        };
        let last = self.record.steps.iter().rposition(|s| s.verdict.is_some()).expect("a verified step");
        let repairs_done = self.record.steps[last].index.saturating_sub(self.cfg.samples - 1);
        let repairs_left = self.record.solver_calls < self.cfg.budget && repairs_done < self.cfg.max_repairs;
        if self.phi[best].is_some_and(|p| p > 0.0) || !repairs_left {
            self.repair_of = Some(best);
            return self.done();
        }
        // The first repair starts from the pick, each later one from the repair before it.
        let from_pick = self.record.steps[last].index < self.cfg.samples;
        self.repair_of = Some(if from_pick { best } else { last });
        let next = self.record.steps[last].index + 1;
        self.generate(next)
    }

    fn fail(&mut self, message: String) -> Request {
        self.record.error = Some(message);
        self.done()
    }

    fn done(&mut self) -> Request {
        self.phase = Phase::Done;
        self.close();
        Request::Done
    }

    /// Fixes the returned answer: the first solved step, else the last verified one. Best-of-k
    /// returns the sample its selector picks; the reward selector's pick needs the reward
    /// plugin, so [`crate::Finalizer`] makes it, and this one (the Judge's) stands without one.
    fn close(&mut self) {
        if let Some(start) = self.started.take() {
            self.record.timings.wall_ms = start.elapsed().as_secs_f64() * 1e3;
            let chosen = if self.cfg.strategy == Strategy::BestOfK {
                pick_by_judge(&self.record.steps)
            } else if self.cfg.strategy == Strategy::BestThenRepair {
                // Φ's pick; an episode that ended before its ranking falls back to the Judge's.
                pick_by_phi(&self.record.steps, &self.phi).or_else(|| pick_by_judge(&self.record.steps))
            } else {
                self.record
                    .steps
                    .iter()
                    .position(|s| s.verdict.as_ref().is_some_and(|v| v.solved))
                    .or_else(|| self.record.steps.iter().rposition(|s| s.verdict.is_some()))
            };
            if let Some(at) = chosen {
                self.record.return_step(at);
            }
        }
    }

    // ------------------------------------------------------------------------------ ToT

    fn propose(&mut self, node: usize, j: usize) -> Request {
        let prompt = self.ctx.tot_propose(&self.search.frontier[node]);
        let sampling = self
            .cfg
            .sampling(self.search.generations, self.cfg.tot.max_tokens, true);
        // One step of the domain's actions over the task's objects, or `done)`: without it
        // the base model proposed `(put-down orange orange)` to a one-argument action. The
        // grammar ends the step at its `)`; free decoding needs stop strings, and a grammar
        // must not get `\n`, which it allows between arguments.
        let constraint = self.constraint(self.search.generations);
        let stop = if constraint.is_some() { Vec::new() } else { vec![")".into(), "\n".into()] };
        let sampling = SamplingConfig { stop, constraint, ..sampling };
        self.search.generations += 1;
        self.ask(Phase::Proposing { node, j }, Role::Actor, prompt, sampling)
    }

    fn on_proposal(&mut self, node: usize, j: usize, g: Generation) -> Request {
        let (role, prompt, sampling) = self.pending.take().expect("a proposal was asked for");
        let index = self.search.generations - 1;
        let step = self.step_from(index, "propose", role, prompt, &g, sampling);
        self.record.timings.generation_ms += step.timings.prefill_ms + step.timings.decode_ms;
        let text = format!("({})", g.text.trim().trim_end_matches(')'));
        self.events.push(Event::Generated {
            task_id: self.record.task_id.clone(),
            index,
            role: Role::Actor,
            kind: "propose".into(),
            text: text.clone(),
            tokens: g.tokens.len(),
            secs: g.prefill_secs + g.decode_secs,
        });
        self.record.steps.push(step);
        let base = self.search.frontier[node].clone();
        match parse_plan_lines(&text).into_iter().next() {
            // `(done)` (or nothing usable) marks the node complete.
            None => {
                if !base.is_empty()
                    && !self.search.complete.contains(&base)
                    && !self.search.validated.contains(&base)
                {
                    self.search.complete.push(base);
                }
            }
            Some(action) => {
                let mut cand = base;
                cand.push(action);
                if !self.search.candidates.contains(&cand) {
                    self.search.candidates.push(cand);
                }
            }
        }
        if j + 1 < self.cfg.tot.proposals {
            self.propose(node, j + 1)
        } else if node + 1 < self.search.frontier.len() {
            self.propose(node + 1, 0)
        } else {
            self.search.values.clear();
            self.value_or_advance()
        }
    }

    fn value_or_advance(&mut self) -> Request {
        let c = self.search.values.len();
        if c < self.search.candidates.len() {
            self.phase = Phase::Valuing { c };
            return Request::Judge {
                prompt: self.ctx.tot_value(&self.search.candidates[c]),
            };
        }
        self.tot_next()
    }

    fn on_value(&mut self, c: usize, score: f32, secs: f64) -> Request {
        self.record.timings.judge_ms += secs * 1e3;
        self.search.values.push(score);
        debug_assert_eq!(self.search.values.len(), c + 1);
        self.value_or_advance()
    }

    /// After a depth: validate completed nodes (one budget unit each), then keep the best
    /// candidates and go one level deeper, or validate the leaves at the depth limit.
    fn tot_next(&mut self) -> Request {
        if let Some(node) = self.search.complete.pop() {
            return self.validate_node(node);
        }
        if !self.search.candidates.is_empty() {
            let mut ranked: Vec<(f32, Vec<String>)> = self
                .search
                .values
                .iter()
                .copied()
                .zip(self.search.candidates.drain(..))
                .collect();
            // Stable sort: ties keep proposal order, so greedy proposals come first.
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            ranked.truncate(self.cfg.tot.breadth);
            self.search.frontier = ranked.into_iter().map(|(_, p)| p).collect();
            self.search.values.clear();
            self.search.depth += 1;
            if self.search.depth >= self.cfg.tot.max_depth {
                // The depth limit: the kept leaves are the answers.
                self.search.complete = self.search.frontier.drain(..).rev().collect();
                return self.tot_next();
            }
            return self.propose(0, 0);
        }
        self.done()
    }

    fn validate_node(&mut self, node: Vec<String>) -> Request {
        self.search.validated.push(node.clone());
        let reference = self
            .input
            .task
            .reference
            .as_ref()
            .expect("checked at start");
        let verdict = validate_plan(reference, &node);
        let index = self.search.generations;
        let mut step = self
            .record
            .steps
            .last()
            .cloned()
            .expect("a proposal came first");
        step.index = index;
        step.kind = "validate".into();
        step.output = node.join("\n");
        step.output_tokens = Vec::new();
        step.output_logprobs = Vec::new();
        step.timings = StepTimings::default();
        self.record.steps.push(step);
        let at = self.record.steps.len() - 1;
        self.on_verified(at, verdict)
    }
}

/// Best-of-k's answer by the Judge: the verified sample with the highest s_J, ties (and
/// samples without a score) to the earlier one.
/// The verified step of highest Φ (`phi`, per record step), ties to the higher Judge score,
/// then the earlier step; `None` when no verified step has a Φ.
fn pick_by_phi(steps: &[StepRecord], phi: &[Option<f32>]) -> Option<usize> {
    let mut best: Option<(usize, f32, f32)> = None;
    for (at, s) in steps.iter().enumerate().filter(|(_, s)| s.verdict.is_some()) {
        let Some(p) = phi.get(at).copied().flatten() else { continue };
        let judge = s.judge_score.unwrap_or(f32::NEG_INFINITY);
        if best.is_none_or(|(_, bp, bj)| p > bp || (p == bp && judge > bj)) {
            best = Some((at, p, judge));
        }
    }
    best.map(|(at, _, _)| at)
}

fn pick_by_judge(steps: &[StepRecord]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (at, s) in steps.iter().enumerate().filter(|(_, s)| s.verdict.is_some()) {
        let score = s.judge_score.unwrap_or(f32::NEG_INFINITY);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((at, score));
        }
    }
    best.map(|(at, _)| at)
}

fn stop_name(r: &StopReason) -> String {
    match r {
        StopReason::Eos => "eos".into(),
        StopReason::StopString(s) => format!("stop:{s}"),
        StopReason::MaxTokens => "max-tokens".into(),
        StopReason::ContextFull => "context-full".into(),
        StopReason::Complete => "complete".into(),
    }
}

fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        s.to_string()
    } else {
        s.chars().skip(count - n).collect()
    }
}

/// The domain's mutex groups, proved from its action schemas, as the guard reads them
/// (`forbid-init-mutex`); none when the domain does not parse (the verifier will say why).
fn init_mutex(domain: &str) -> Vec<MutexGroup> {
    let Ok(d) = onebrain_pddl::parse_domain(domain) else { return Vec::new() };
    let part = |p: onebrain_faithful::GroupPart| MutexPart { predicate: p.predicate, params: p.params, counted: p.counted };
    onebrain_faithful::mutex_groups(&d).into_iter().map(|g| MutexGroup { parts: g.parts.into_iter().map(part).collect() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plugin's BlocksWorld gets its groups, and the guard built from them refuses an
    /// initial state the domain cannot be in, byte by byte as a decoder would meet it.
    #[test]
    fn blocksworld_groups_reach_the_guard() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/blocksworld/domain.pddl");
        let domain = std::fs::read_to_string(path).unwrap();
        let groups = init_mutex(&domain);
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert!(init_mutex("(define (domain broken").is_empty());
        let spec = |init_mutex| ConstraintSpec::Problem {
            domain: domain.clone(),
            prefix: "(define (problem p) (:domain blocksworld-4ops) (:objects ".into(),
            limits: onebrain_model::GrammarLimits::default(),
            avoid: vec![],
            forbid_goal_at_init: false,
            init_mutex,
        };
        let env = onebrain_model::TokenEnv::bytes();
        // Whether the constraint lets `text` through, every byte allowed where it comes.
        let passes = |spec: &ConstraintSpec, text: &str| {
            let mut c = spec.build(&env, 400).unwrap();
            text.bytes().all(|b| c.allowed().unwrap().is_allowed(u32::from(b)) && c.consume(u32::from(b)).is_ok())
        };
        let held_and_empty = "a b) (:init (holding a) (handempty)";
        let on_two = "a b c) (:init (on a b) (on a c)";
        let possible = "a b c) (:init (holding a) (on b c) (ontable c) (clear b)) (:goal (and (on a b))))";
        for text in [held_and_empty, on_two] {
            assert!(passes(&spec(vec![]), text), "the rule is off: {text}");
            assert!(!passes(&spec(groups.clone()), text), "{text}");
        }
        assert!(passes(&spec(groups), possible));
    }
}

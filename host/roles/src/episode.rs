//! The episode as a state machine: it asks for model calls and verifications and is fed their
//! answers, so one driver can run it step by step (`solve`) and another can keep several in
//! flight, the verifier checking one task while the model writes the next (`eval`).
//!
//! Algorithm 1 (multi-role): the Actor writes y_0; the verifier returns (b_0, d_0); the Judge
//! scores (x, y_0); while b_t = 0 and t < H_max the Editor writes y_{t+1} from (x, y_t, d_t).
//! It returns the first solver-executable spec, else the last edit. The baselines share the
//! budget of K verifier calls.

mod best_then_repair;
mod pick;
mod spec;
mod tot;

use std::time::Instant;

use onebrain_core::{Spec, Task, Verdict};
use onebrain_model::{Generation, Role, SamplingConfig};

use crate::extract::Mode;
use crate::prompts::TaskContext;
use crate::record::{EpisodeRecord, EpisodeTimings, Event};
use crate::strategy::{EpisodeConfig, ExampleChoice, Strategy};
use pick::{pick_by_judge, pick_by_phi};
use tot::Search;

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
}

//! Prompts, the multi-role episode (Actor → verifier → Judge → Editor) and the baselines.
//!
//! - [`Episode`] is one task under one [`Strategy`], written as a state machine: it asks for
//!   model calls and verifications ([`Request`]) and is fed the answers ([`Response`]). The
//!   strategies, at the same budget of K = 6 verifier calls ([`EpisodeConfig`]):
//!   `multi-role` (Algorithm 1: Actor, verifier, Judge, then up to H_max = 5 Editor repairs,
//!   stopping at the first success), `self-refine` (raw feedback, no roles), `llm+p`
//!   (in-context example, K samples to the planner), `direct` (the model writes the plan;
//!   K samples validated against the reference), `tot` (breadth-first search over partial
//!   plans scored by the model) and `best-of-k` (K Actor answers, all verified and judged,
//!   the one a reference-free [`Select`]or picks returned).
//! - [`run_episode`] drives one episode step by step; [`run_pipelined`] keeps several in
//!   flight so the verifier works on one task while the model generates the next, and hands
//!   the model every waiting request of one kind in one call (a batch of up to [`MAX_BATCH`]).
//! - Every step is kept in an [`EpisodeRecord`] (one JSONL trace line): prompts and their
//!   hashes, generated tokens, sampling seeds, extractions, verdicts, Judge scores, rewards
//!   and faithfulness (added by a [`Finalizer`] from the reward and checker plugins), timings.
//! - [`extract_spec`] finds the domain and problem in model output; output with no PDDL is a
//!   `syntax` failure verdict, never an error. [`TaskContext`] builds every prompt on one
//!   shared prefix (system, domain, task) so the model's prefix cache is reused.
//! - The model is behind [`LanguageModel`] (implemented for `onebrain_model::Brain`); the
//!   verifier and plugins behind the `onebrain-core` traits. [`SolveConfig`] →
//!   [`Services`] / [`load_model`] is the one place that builds the real objects, and
//!   [`solve`] is `onebrain solve`.
//!
//! ```
//! use onebrain_core::{Category, Outcome, Spec, Task, Verdict, Verifier};
//! use onebrain_model::{Generation, Role, SamplingConfig, StopReason};
//! use onebrain_roles::{run_episode, Episode, EpisodeConfig, EpisodeInput, Finalizer, LanguageModel, Mode};
//!
//! /// A model that always writes the same problem.
//! struct Canned;
//! impl LanguageModel for Canned {
//!     fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, onebrain_core::BoxError> {
//!         Ok(Generation { text: ")\n  (:init) (:goal (and)))\n```".into(), tokens: vec![1, 2], prompt_tokens: 10, cached_prompt_tokens: 0,
//!             prefill_tokens: 10, prefill_secs: 0.0, decode_secs: 0.0, stop_reason: StopReason::Eos,
//!             logprobs: vec![], constraint: None })
//!     }
//!     fn judge(&mut self, _: &str) -> Result<f32, onebrain_core::BoxError> { Ok(0.9) }
//!     fn name(&self) -> String { "canned".into() }
//! }
//! /// A verifier that solves everything.
//! struct Yes;
//! impl Verifier for Yes {
//!     fn verify(&self, _: &Spec) -> Verdict {
//!         Verdict { solved: true, outcome: Outcome::Solved, plan: vec!["(noop)".into()], diagnostics: vec![],
//!             time_ms: 1, solver_time_ms: 1, solver_output: None }
//!     }
//! }
//! let cfg = EpisodeConfig { mode: Mode::Problem, ..Default::default() };
//! let input = EpisodeInput {
//!     task: Task { id: "t/1".into(), domain: "d".into(), text: "Do it.".into(), reference: None },
//!     description: "A domain.".into(),
//!     domain_pddl: Some("(define (domain d))".into()),
//!     example: None,
//!     foreign_example: None,
//! };
//! let rec = run_episode(Episode::new(input, &cfg, "canned"), &cfg, &mut Canned, &Yes, &Finalizer::default(), &mut |_| {});
//! assert!(rec.solved && rec.b0);
//! assert_eq!((rec.solver_calls, rec.repairs, rec.judge_score), (1, 0, Some(0.9)));
//! // The answer continues the primer `(define (problem task) (:domain d) (:objects `.
//! assert_eq!(rec.final_spec.unwrap().problem, "(define (problem task)\n  (:domain d)\n  (:objects )\n  (:init) (:goal (and)))");
//! ```
#![deny(missing_docs)]

mod config;
mod driver;
mod episode;
mod error;
mod extract;
mod guard_verdict;
mod model;
mod plan;
mod prompts;
mod record;
mod render;
mod setup;
mod solve;
mod strategy;

pub use config::{config_base, CheckerChoice, SolveConfig, SolverConfig};
pub use driver::{finished_episode, run_episode, run_pipelined, Finalizer, MAX_BATCH};
pub use episode::{Episode, EpisodeInput, Request, Response};
pub use error::RolesError;
pub use extract::{extract_spec, Extraction, Mode};
pub use model::{LanguageModel, OneAtATime};
pub use plan::{map_plan, parse_plan_lines, validate_answer, validate_plan};
pub use prompts::{format_diagnostics, prompt_hash, raw_feedback, TaskContext, SYSTEM};
pub use record::{EpisodeRecord, EpisodeTimings, Event, FailedPlugin, PluginFailure, StepRecord, StepTimings};
pub use render::{faithfulness_line, render_event, side_by_side, what_differs};
pub use setup::{episode_input, load_model, test_setup_missing, Services};
pub use solve::{
    domain_text_input, read_nonempty_text, read_reference, solve, solve_with, task_from_problem_file, CustomDomain,
    DomainFile, DomainText, ReferenceFiles, SolveOptions, TaskInput,
};
pub use strategy::{episode_seed, Constrain, EpisodeConfig, ExampleChoice, RepeatPolicy, Select, Strategy, TotConfig, MAX_RESAMPLES};

/// The model types the records and the [`LanguageModel`] trait use.
pub use onebrain_model::{Generation, Role, SamplingConfig, StopReason};

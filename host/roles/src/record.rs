//! What an episode leaves behind: one [`StepRecord`] per model call and verification, one
//! [`EpisodeRecord`] per task (a line of the JSONL trace), and the [`Event`]s a caller sees
//! as they happen.
//!
//! The records are rich enough for training to reuse the episode as a rollout: the role, the
//! prompt (and its hash and token count), the generated token ids and the sampling config with
//! its seed. The prompt's token ids are `model.encode(prompt)`, deterministic from the text.

use onebrain_core::{Category, FactAgreement, FaithfulnessReport, Rewards, Spec, Verdict};
use onebrain_model::{Role, SamplingConfig};
use serde::{Deserialize, Serialize};

use crate::extract::{Extraction, Mode};
use crate::strategy::Strategy;

/// One model generation and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 0 for the first attempt, t for the t-th repair or sample.
    pub index: u32,
    /// The role that generated.
    pub role: Role,
    /// What this step was for: `actor`, `editor`, `self-refine`, `sample`, `plan`, `propose`.
    pub kind: String,
    /// sha256 of the prompt text.
    pub prompt_sha256: String,
    /// The prompt text (the primer the answer starts with included).
    pub prompt: String,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys/values came from the model's prefix cache.
    pub cached_prompt_tokens: usize,
    /// The generated text (without the prompt's primer).
    pub output: String,
    /// The generated token ids.
    pub output_tokens: Vec<u32>,
    /// log π(token) of each generated token under the distribution it was sampled from (the
    /// constraint's mask and the sampling temperature applied; 0 for forced tokens): PPO's
    /// old log-probabilities when the learner runs the sampler's weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_logprobs: Vec<f32>,
    /// How it was sampled, seed included.
    pub sampling: SamplingConfig,
    /// Why generation stopped (`eos`, `max-tokens`, `complete`, …).
    pub stop_reason: String,
    /// The decoding constraint's counters (mask time, forced tokens, guard refusals), when
    /// one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<onebrain_model::ConstraintStats>,
    /// What the extractor found (spec steps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction: Option<Extraction>,
    /// The extracted spec that was verified (spec steps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Spec>,
    /// The verdict on this step's spec or plan (`None` for ToT proposals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The dominant diagnostic category of an unsolved verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dominant: Option<Category>,
    /// True when the verdict came from a real verifier call (a budget unit was spent).
    pub solver_call: bool,
    /// The Judge's score of this step's candidate, when it was scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_score: Option<f32>,
    /// The Judge's prompt (x, y) for that score: what training's Judge loss reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_prompt: Option<String>,
    /// Where the step's time went.
    pub timings: StepTimings,
}

/// Milliseconds per phase of one step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimings {
    /// Prompt prefill.
    pub prefill_ms: f64,
    /// Token decoding.
    pub decode_ms: f64,
    /// Verification (native checks + planner), or native plan validation.
    pub verify_ms: f64,
    /// The Judge's forward pass.
    pub judge_ms: f64,
}

/// Milliseconds per phase of a whole episode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeTimings {
    /// From the episode's first request to its last answer (overlapping episodes overlap here).
    pub wall_ms: f64,
    /// Model generation (prefill + decode).
    pub generation_ms: f64,
    /// Verifier calls.
    pub verification_ms: f64,
    /// Inside the planner (part of `verification_ms`).
    pub planner_ms: f64,
    /// Judge forward passes.
    pub judge_ms: f64,
    /// WebAssembly plugin calls (reward, checker).
    pub plugins_ms: f64,
}

/// One task's episode: the JSON object of one trace line. The default is an empty record
/// (no steps, unsolved, no verifier call), a start to fill in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// The task's identifier.
    pub task_id: String,
    /// The task's domain.
    pub domain: String,
    /// The strategy that ran.
    pub strategy: Strategy,
    /// Full or problem mode.
    pub mode: Mode,
    /// The model that generated.
    pub model: String,
    /// The task text x.
    pub task_text: String,
    /// Every step, in order.
    pub steps: Vec<StepRecord>,
    /// b_0: the first attempt was solved.
    pub b0: bool,
    /// b_T: the returned spec (or plan) was solved.
    pub solved: bool,
    /// The step that first succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_success: Option<u32>,
    /// T: Editor repairs made (multi-role and Self-Refine).
    pub repairs: u32,
    /// Verification attempts, each one unit of the budget K (no-PDDL outputs included).
    pub solver_calls: u32,
    /// Calls that reached the planner (or the plan validator for plan strategies).
    pub planner_calls: u32,
    /// The returned spec: the first solver-executable one, else the last edit (best-of-k: the
    /// selected sample's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_spec: Option<Spec>,
    /// The plan of the returned spec, or the plan the model wrote (direct, ToT).
    pub final_plan: Vec<String>,
    /// Best-of-k: the index of the sample returned, the one its selector picked. Absent for
    /// the other strategies, whose answer follows from the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<u32>,
    /// s_J(x, y_0), when the Judge ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_score: Option<f32>,
    /// The reward plugin's rewards, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewards: Option<Rewards>,
    /// The faithfulness checker's report on the returned spec, when a checker and a reference exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faithfulness: Option<FaithfulnessReport>,
    /// What the returned problem shares with the reference's (up to renaming), when a reference
    /// exists and the returned problem parses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_agreement: Option<FactAgreement>,
    /// Where the time went.
    pub timings: EpisodeTimings,
    /// Repairs that repeated an earlier candidate of the episode and were kept (and so spent
    /// a budget unit on a known answer).
    #[serde(default)]
    pub repeated_repairs: u32,
    /// Repeated repairs thrown away and generated again (`editor-repeats = "resample"`, or `"forbid"` where the guard let one through).
    #[serde(default)]
    pub discarded_repeats: u32,
    /// Why the episode stopped early (a model error, a plugin error), if it did: the
    /// episode's own error first (see [`EpisodeRecord::stop_error`]), then each failed
    /// plugin call's, after its plugin's prefix ([`FailedPlugin::error_prefix`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The reward and checker calls that failed, each with its kind, in the order they ran
    /// (their text is in `error` too). Absent from records without one, so those serialize
    /// as before this field existed, and traces written before it still read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<PluginFailure>,
}

/// The plugin whose call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailedPlugin {
    /// The reward function.
    Reward,
    /// The faithfulness checker.
    Checker,
}

impl FailedPlugin {
    /// What the plugin's part of [`EpisodeRecord::error`] begins with.
    pub fn error_prefix(self) -> &'static str {
        match self {
            FailedPlugin::Reward => "reward plugin: ",
            FailedPlugin::Checker => "faithfulness checker: ",
        }
    }
}

/// One failed plugin call of an episode, as `Finalizer` saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginFailure {
    /// Which plugin failed.
    pub plugin: FailedPlugin,
    /// The kind of failure: the plugin host's own ([`onebrain_runtime::FailureKind`]), so no
    /// reader has to parse `message`. `None` for an implementation that is not a WebAssembly
    /// plugin (the native reference checker), whose errors have no kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<onebrain_runtime::FailureKind>,
    /// The error's text, as in the record's `error`.
    pub message: String,
}

impl EpisodeRecord {
    /// Makes step `at` (an index into `steps`, a verified one) the returned answer: its spec,
    /// its verdict's plan and whether it was solved. Best-of-k records which sample that is.
    pub fn return_step(&mut self, at: usize) {
        let step = &self.steps[at];
        self.solved = step.verdict.as_ref().is_some_and(|v| v.solved);
        self.final_spec = step.spec.clone();
        self.final_plan = step.verdict.as_ref().map(|v| v.plan.clone()).unwrap_or_default();
        if matches!(self.strategy, Strategy::BestOfK | Strategy::BestThenRepair) {
            self.selected = Some(step.index);
        }
    }

    /// The dominant diagnostic of the step `h`'s verdict, if that step exists and was unsolved.
    pub fn dominant_at(&self, h: u32) -> Option<Category> {
        self.verified_steps()
            .nth(h as usize)
            .and_then(|s| s.dominant)
    }

    /// The error the episode itself stopped on, if it did: a model error (`model error
    /// (actor): …`, such as a request the memory budget refused) or a task its strategy
    /// cannot run. Such an episode has no answer of its strategy's: it did not run to the
    /// end its config sets, and it is counted apart from the answers, in no rate's
    /// denominator. `None` for an episode that ran to its end, whether a plugin failed on
    /// its answer afterwards or not.
    ///
    /// Read from [`EpisodeRecord::error`], whose first part only the episode writes; the
    /// plugins' parts follow it, each after its prefix, so no plugin's message can pass for
    /// the episode's error. Traces from before this method read the same way.
    pub fn stop_error(&self) -> Option<&str> {
        let error = self.error.as_deref()?;
        if [FailedPlugin::Reward, FailedPlugin::Checker].iter().any(|p| error.starts_with(p.error_prefix())) {
            return None;
        }
        let plugins: Vec<String> = self.failures.iter().map(|f| format!("{}{}", f.plugin.error_prefix(), f.message)).collect();
        let plugins = format!("; {}", plugins.join("; "));
        Some(error.strip_suffix(plugins.as_str()).filter(|_| !self.failures.is_empty()).unwrap_or(error))
    }

    /// The steps that carry a verdict, in order (ToT's proposals have none).
    pub fn verified_steps(&self) -> impl Iterator<Item = &StepRecord> {
        self.steps.iter().filter(|s| s.verdict.is_some())
    }
}

/// What happens during an episode, as it happens.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// An episode began.
    Started {
        /// The task.
        task_id: String,
        /// The strategy.
        strategy: Strategy,
    },
    /// The model produced an output.
    Generated {
        /// The task.
        task_id: String,
        /// The step index.
        index: u32,
        /// The role that generated.
        role: Role,
        /// What the step was for.
        kind: String,
        /// The generated text (primer included).
        text: String,
        /// Tokens generated.
        tokens: usize,
        /// Seconds the call took.
        secs: f64,
    },
    /// A spec or plan was verified.
    Verified {
        /// The task.
        task_id: String,
        /// The step index.
        index: u32,
        /// The verdict.
        verdict: Verdict,
    },
    /// The Judge scored a candidate.
    Judged {
        /// The task.
        task_id: String,
        /// The step index.
        index: u32,
        /// s_J.
        score: f32,
    },
    /// The episode ended.
    Finished(Box<EpisodeRecord>),
}

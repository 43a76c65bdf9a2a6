//! The inference strategies and the episode's settings (every default is the paper's).

use onebrain_model::SamplingConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::RolesError;
use crate::extract::Mode;

/// How a task is turned into a spec or a plan. All run at the same budget of K verifier calls.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Strategy {
    /// Actor → verifier → Judge → Editor, at most H_max repairs (Algorithm 1).
    #[default]
    #[serde(rename = "multi-role")]
    MultiRole,
    /// The same model repairs its own answer from the raw verifier messages; no roles, no Judge.
    #[serde(rename = "self-refine")]
    SelfRefine,
    /// One in-context PDDL example, K samples each handed to the planner; first success wins.
    #[serde(rename = "llm+p")]
    LlmPlusP,
    /// The model writes the plan itself (chain of thought); K samples, each validated against
    /// the reference task.
    #[serde(rename = "direct")]
    Direct,
    /// Tree of Thoughts: breadth-first search over partial plans, scored by the model.
    #[serde(rename = "tot")]
    Tot,
    /// K Actor answers, each verified and scored by the Judge, none repaired; the one a
    /// selector picks without a reference (`select`) is returned.
    #[serde(rename = "best-of-k")]
    BestOfK,
    /// Best-of-k, then the Editor: `samples` Actor answers, each verified and scored by the
    /// Judge; the reward plugin's Φ(y) (the Actor reward without its Judge term; for
    /// `text-agreement`, the planner's verdict times the answer's agreement with the text)
    /// picks one. If the pick is worth nothing to Φ (unsolved, or solved by a spec that does
    /// not state the task: a goal that already holds, a contradicted fact), the Editor
    /// repairs it with the remaining budget, told what the verifier and the config's
    /// diagnostic reviewers found, until a repair earns Φ > 0. The answer is the candidate
    /// of highest Φ. No reference is read. Run it with the grammar's guards on and
    /// `diagnostic-reviewers = ["text-diagnostics"]` for the combined method.
    #[serde(rename = "best-then-repair")]
    BestThenRepair,
}

impl Strategy {
    /// Every strategy, in the paper's table order, then ours.
    pub const ALL: [Strategy; 7] = [
        Strategy::Direct,
        Strategy::Tot,
        Strategy::LlmPlusP,
        Strategy::SelfRefine,
        Strategy::MultiRole,
        Strategy::BestOfK,
        Strategy::BestThenRepair,
    ];

    /// The name used in configs, traces and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::MultiRole => "multi-role",
            Strategy::SelfRefine => "self-refine",
            Strategy::LlmPlusP => "llm+p",
            Strategy::Direct => "direct",
            Strategy::Tot => "tot",
            Strategy::BestOfK => "best-of-k",
            Strategy::BestThenRepair => "best-then-repair",
        }
    }

    /// True for the strategies whose answer is a plan, not a spec.
    pub fn writes_plan(self) -> bool {
        matches!(self, Strategy::Direct | Strategy::Tot)
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Strategy {
    type Err = RolesError;

    fn from_str(s: &str) -> Result<Strategy, RolesError> {
        Strategy::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| RolesError::Config(format!("unknown strategy `{s}` (expected one of multi-role, self-refine, llm+p, direct, tot, best-of-k, best-then-repair)")))
    }
}

/// Whether answers are held to a grammar while they are generated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Constrain {
    /// Grammar-constrained decoding (`onebrain-grammar`): every spec answer is well-formed
    /// PDDL over the domain's vocabulary, every plan answer uses the domain's actions.
    #[default]
    Grammar,
    /// Free decoding (the model writes whatever it writes).
    None,
}

impl std::str::FromStr for Constrain {
    type Err = RolesError;

    fn from_str(s: &str) -> Result<Constrain, RolesError> {
        match s {
            "grammar" => Ok(Constrain::Grammar),
            "none" => Ok(Constrain::None),
            other => Err(RolesError::Config(format!("unknown constrain `{other}` (expected grammar or none)"))),
        }
    }
}

/// Which worked example every prompt shows (LLM+P always shows its own domain's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExampleChoice {
    /// No example (the paper's setting). The default: on the base model it preserved the
    /// task's objects most often, where both example arms had the model copy the example's
    /// objects (README, "Which worked example").
    #[default]
    None,
    /// A task of the same domain with its problem PDDL: teaches the format, and invites copying.
    SameDomain,
    /// A task of another domain plugin, one whose domain has another shape: teaches the
    /// format, and a copy is never the answer.
    OtherDomain,
}

/// What the Editor does when a repair repeats a candidate of its own episode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepeatPolicy {
    /// Keep it (the paper's plain greedy Algorithm 1): the repair spends its budget unit.
    Keep,
    /// Ask again, sampling at the episode's temperature (then hotter), until the repair is new
    /// or [`MAX_RESAMPLES`] tries are spent.
    Resample,
    /// The grammar refuses to close a repair's goal on a problem equal to an earlier candidate
    /// (same objects, `:init` and goal, as sets; in `full` mode also the same domain), so a
    /// greedy repair is new by construction. Where that cannot hold (`constrain = "none"`, or
    /// the guard had to let a repeat through), it falls back to `resample`.
    #[default]
    Forbid,
}

/// How `best-of-k` picks its answer among the K it sampled: from what the episode itself
/// has, never a reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Select {
    /// The highest Φ(y): the reward plugin's Actor reward for y alone, without its Judge
    /// term (λ_J = 0). For `text-agreement`, Φ = b·A(y): the planner's verdict times the
    /// answer's agreement with the task's text. Ties go to the higher Judge score.
    #[default]
    Reward,
    /// The highest Judge score s_J(x, y).
    Judge,
}

impl Select {
    fn is_default(&self) -> bool {
        *self == Select::default()
    }
}

/// The most extra generations one repair may take to differ from the earlier candidates.
pub const MAX_RESAMPLES: u32 = 4;

/// Tree-of-Thought search sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TotConfig {
    /// Partial plans kept per depth.
    pub breadth: usize,
    /// Next actions proposed per kept partial plan.
    pub proposals: usize,
    /// Longest plan searched; a leaf at this depth is validated.
    pub max_depth: usize,
    /// Tokens per proposal (one action).
    pub max_tokens: usize,
}

impl Default for TotConfig {
    fn default() -> Self {
        // Small on purpose: every proposal and every value is a model call.
        TotConfig {
            breadth: 2,
            proposals: 2,
            max_depth: 12,
            max_tokens: 24,
        }
    }
}

/// One episode's own sampling seed, from a run's base seed and what tells the episode apart
/// (an update and a slot in training; a strategy and a task in an evaluation): a hash,
/// shifted right so that the episode's per-step seeds (seed + 1000·step + resamples) stay
/// apart from any other episode's. Episodes that all sampled with the base seed drew the same
/// random numbers, so one evaluation's tasks rose and fell together: the pass@k draws
/// found 13 faithful answers of 64 with one base seed and 1 with the next.
pub fn episode_seed(base: u64, parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    h.update(base.to_le_bytes());
    for part in parts {
        h.update(part);
    }
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes")) >> 8
}

/// The settings of one episode. Defaults are the paper's table: H_max = 5, K = 6, greedy at
/// evaluation (T = 0.7 nucleus when sampling), λ_J = 0.3, β = 0.1, τ = 0.5.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct EpisodeConfig {
    /// Which strategy runs.
    pub strategy: Strategy,
    /// Full (domain + problem) or problem only.
    pub mode: Mode,
    /// H_max: the most Editor repairs.
    pub max_repairs: u32,
    /// K: the most verifier calls (the matched budget of every strategy).
    pub budget: u32,
    /// Greedy decoding (evaluation); otherwise nucleus sampling at `temperature`.
    pub greedy: bool,
    /// Sampling temperature when not greedy, and for samples after the first.
    pub temperature: f32,
    /// Nucleus mass when sampling (the paper gives only T; 0.95 is a common choice).
    pub top_p: f32,
    /// Most tokens per spec generation.
    pub max_tokens: usize,
    /// Most tokens per direct plan (chain of thought + plan).
    pub plan_max_tokens: usize,
    /// Base seed; step i samples with `seed + i`.
    pub seed: u64,
    /// Score y_0 with the Judge (multi-role).
    pub judge: bool,
    /// λ_J: the Judge's weight in R_A.
    pub lambda_judge: f32,
    /// β: the per-repair cost in R_E.
    pub repair_cost: f32,
    /// τ: the Judge's threshold.
    pub judge_threshold: f32,
    /// Which worked example every prompt shows, before the task: none (the paper's setting),
    /// one of the same domain, or one of another domain plugin. LLM+P always has its own.
    pub example: ExampleChoice,
    /// Grammar-constrained decoding, or none.
    pub constrain: Constrain,
    /// Bounds of the grammars.
    pub grammar: onebrain_model::GrammarLimits,
    /// What a repair that repeats an earlier candidate does.
    pub editor_repeats: RepeatPolicy,
    /// Under the grammar, a spec's goal may not close while it holds in the spec's own
    /// initial state (the planner's empty plan). Off by default: a few real tasks start at
    /// their goal.
    pub forbid_goal_at_init: bool,
    /// Under the grammar in `problem` mode, no two `:init` facts may break one of the
    /// domain's mutex groups, proved from its action schemas (`(holding a)` beside
    /// `(handempty)`). Off by default, and left out of the serialised config when off, so
    /// the digests of runs that predate it stand.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub forbid_init_mutex: bool,
    /// How `best-of-k` picks its answer (ties: the higher Judge score, then the earlier
    /// sample). Left out of the serialised config at its default, so run digests stand.
    #[serde(skip_serializing_if = "Select::is_default")]
    pub select: Select,
    /// `best-then-repair`: the Actor answers drawn before the pick (the rest of the budget
    /// goes to repairs). Left out of the serialised config at its default, so run digests
    /// stand.
    #[serde(skip_serializing_if = "is_default_samples")]
    pub samples: u32,
    /// Tree-of-Thought sizes.
    pub tot: TotConfig,
}

/// `best-then-repair`'s default draw: four answers, leaving two of the paper's six verifier
/// calls for repairs.
pub const DEFAULT_SAMPLES: u32 = 4;

fn is_default_samples(n: &u32) -> bool {
    *n == DEFAULT_SAMPLES
}

impl Default for EpisodeConfig {
    fn default() -> Self {
        EpisodeConfig {
            strategy: Strategy::MultiRole,
            mode: Mode::Full,
            max_repairs: 5,
            budget: 6,
            greedy: true,
            temperature: 0.7,
            top_p: 0.95,
            max_tokens: 512,
            plan_max_tokens: 384,
            seed: 0,
            judge: true,
            lambda_judge: 0.3,
            repair_cost: 0.1,
            judge_threshold: 0.5,
            example: ExampleChoice::None,
            constrain: Constrain::Grammar,
            grammar: onebrain_model::GrammarLimits::default(),
            editor_repeats: RepeatPolicy::Forbid,
            forbid_goal_at_init: false,
            forbid_init_mutex: false,
            select: Select::Reward,
            samples: DEFAULT_SAMPLES,
            tot: TotConfig::default(),
        }
    }
}

impl EpisodeConfig {
    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), RolesError> {
        let bad = |m: String| Err(RolesError::Config(m));
        if self.budget == 0 {
            return bad("budget (K) must be at least 1".into());
        }
        if self.max_tokens == 0 || self.plan_max_tokens == 0 || self.tot.max_tokens == 0 {
            return bad("max-tokens must be at least 1".into());
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return bad(format!("temperature must be > 0, got {}", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top-p must be in (0, 1], got {}", self.top_p));
        }
        if self.tot.breadth == 0 || self.tot.proposals == 0 || self.tot.max_depth == 0 {
            return bad("tot breadth, proposals and max-depth must be at least 1".into());
        }
        if self.forbid_init_mutex && self.mode == Mode::Full {
            // The groups are proved from the domain before decoding; a `full` answer writes
            // its own domain.
            return bad("forbid-init-mutex needs mode = \"problem\"".into());
        }
        if self.strategy == Strategy::BestOfK && self.select == Select::Judge && !self.judge {
            return bad("best-of-k with select = \"judge\" needs judge = true".into());
        }
        if self.strategy == Strategy::BestThenRepair && !(1..=self.budget).contains(&self.samples) {
            return bad(format!("best-then-repair draws 1 to budget (K = {}) samples, not {}", self.budget, self.samples));
        }
        if !(0.0..=1.0).contains(&self.judge_threshold) {
            return bad(format!(
                "judge-threshold must be in [0, 1], got {}",
                self.judge_threshold
            ));
        }
        Ok(())
    }

    /// The sampling config of generation number `i` of an episode: greedy at evaluation for
    /// the first attempt and the repairs (which see new feedback each time); K-sample
    /// strategies sample after their first draw, since greedy would repeat it.
    pub fn sampling(&self, i: u32, max_tokens: usize, resample: bool) -> SamplingConfig {
        let seed = self.seed.wrapping_add(i as u64);
        if self.greedy && !(resample && i > 0) {
            SamplingConfig {
                seed,
                ..SamplingConfig::greedy(max_tokens)
            }
        } else {
            SamplingConfig::nucleus(self.temperature, self.top_p, max_tokens, seed)
        }
    }

    /// The most repairs this config allows within the budget: min(H_max, K − 1).
    pub fn repairs_allowed(&self) -> u32 {
        self.max_repairs.min(self.budget.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Strategy::ALL {
            assert_eq!(s.as_str().parse::<Strategy>().unwrap(), s);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert!("cot".parse::<Strategy>().is_err());
    }

    #[test]
    fn the_init_mutex_rule_is_off_by_default_and_left_out_of_the_serialised_config() {
        let c = EpisodeConfig::default();
        assert!(!c.forbid_init_mutex);
        // Configs written before the option serialise as they did, so run digests stand.
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("forbid-init-mutex"), "{json}");
        let on: EpisodeConfig = toml::from_str("mode = \"problem\"\nforbid-init-mutex = true").unwrap();
        assert!(on.forbid_init_mutex && on.validate().is_ok());
        assert!(serde_json::to_string(&on).unwrap().contains("\"forbid-init-mutex\":true"));
        // In `full` mode the answer writes the domain the groups would come from.
        let full = EpisodeConfig { mode: Mode::Full, ..on };
        assert!(full.validate().is_err());
    }

    #[test]
    fn best_of_k_selects_by_reward_by_default_and_by_the_judge_only_when_it_runs() {
        let c: EpisodeConfig = toml::from_str("strategy = \"best-of-k\"").unwrap();
        assert_eq!((c.strategy, c.select), (Strategy::BestOfK, Select::Reward));
        // At its default the selector is left out, so configs before it keep their digests.
        assert!(!serde_json::to_string(&c).unwrap().contains("select"));
        let judge: EpisodeConfig = toml::from_str("strategy = \"best-of-k\"\nselect = \"judge\"").unwrap();
        assert!(judge.validate().is_ok());
        assert!(EpisodeConfig { judge: false, ..judge }.validate().is_err());
        assert!(toml::from_str::<EpisodeConfig>("select = \"oracle\"").is_err());
    }

    #[test]
    fn defaults_are_the_papers() {
        let c = EpisodeConfig::default();
        assert_eq!((c.max_repairs, c.budget, c.repairs_allowed()), (5, 6, 5));
        assert_eq!(
            (
                c.lambda_judge,
                c.repair_cost,
                c.judge_threshold,
                c.temperature
            ),
            (0.3, 0.1, 0.5, 0.7)
        );
        assert!(c.greedy);
        assert_eq!(c.sampling(3, 10, false).temperature, 0.0);
        assert_eq!(c.sampling(0, 10, true).temperature, 0.0);
        let s = c.sampling(2, 10, true);
        assert_eq!((s.temperature, s.seed), (0.7, 2));
        assert!(c.validate().is_ok());
        let parsed: EpisodeConfig =
            toml::from_str("strategy = \"llm+p\"\nmode = \"problem\"\n[tot]\nbreadth = 3").unwrap();
        assert_eq!(
            (
                parsed.strategy,
                parsed.mode,
                parsed.tot.breadth,
                parsed.tot.proposals
            ),
            (Strategy::LlmPlusP, Mode::Problem, 3, 2)
        );
        assert!(
            toml::from_str::<EpisodeConfig>("max_repairs = 3").is_err(),
            "unknown keys are errors"
        );
        assert!(EpisodeConfig { budget: 0, ..c }.validate().is_err());
    }
}

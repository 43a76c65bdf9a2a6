//! What the user wrote for `onebrain train` (`configs/train-*.toml`): parsed and validated,
//! no I/O beyond reading the file. [`crate::Trainer::open`] turns it into the loaded model,
//! verifier, plugins and run folder.

use std::path::{Path, PathBuf};

use onebrain_core::config_keys::suggest_near_key;
use onebrain_eval::Benchmark;
use onebrain_model::{ModelConfig, Role};
use onebrain_roles::{CheckerChoice, EpisodeConfig, SolveConfig, SolverConfig, Strategy};
use onebrain_runtime::RuntimeConfig;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;
use crate::ppo::PpoArgs;

/// Which roles learn, and how the episode runs for them: the paper's ablations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ablation {
    /// Actor, Judge and Editor on one shared backbone (the paper's method).
    #[default]
    Full,
    /// The Actor alone: no Judge score, no repairs.
    ActorOnly,
    /// Actor and Judge: the Judge scores y_0 (its score enters R_A), no repairs.
    ActorJudge,
    /// Actor and Editor: repairs, no Judge.
    ActorEditor,
    /// Editor and Judge learn; the Actor writes y_0 but is not trained.
    EditorJudge,
    /// All three roles, each with its own copy of every trainable parameter (sets
    /// `model.separate_models`). The role adapters are separate in every ablation; this one
    /// differs from `full` when `model.train_backbone` trains the backbone too: three
    /// backbones instead of one shared.
    SeparateModels,
}

impl Ablation {
    /// True when `role`'s parameters are trained.
    pub fn trains(self, role: Role) -> bool {
        match self {
            Ablation::Full | Ablation::SeparateModels => true,
            Ablation::ActorOnly => role == Role::Actor,
            Ablation::ActorJudge => role != Role::Editor,
            Ablation::ActorEditor => role != Role::Judge,
            Ablation::EditorJudge => role != Role::Actor,
        }
    }

    /// True when the Editor repairs during rollouts.
    pub fn repairs(self) -> bool {
        !matches!(self, Ablation::ActorOnly | Ablation::ActorJudge)
    }

    /// True when the Judge scores y_0 during rollouts.
    pub fn judges(self) -> bool {
        !matches!(self, Ablation::ActorOnly | Ablation::ActorEditor)
    }

    /// The name used in configs.
    pub fn as_str(self) -> &'static str {
        match self {
            Ablation::Full => "full",
            Ablation::ActorOnly => "actor-only",
            Ablation::ActorJudge => "actor-judge",
            Ablation::ActorEditor => "actor-editor",
            Ablation::EditorJudge => "editor-judge",
            Ablation::SeparateModels => "separate-models",
        }
    }
}

/// Where training tasks come from, in a fixed order, so a position in the stream names one
/// task forever (that is what a checkpoint records).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TaskStream {
    /// Domain plugins that generate tasks, in turn.
    pub domains: Vec<String>,
    /// Objects per generated task, cycled: candidate i has `sizes[(i / domains) mod len]`.
    pub sizes: Vec<u32>,
    /// The seed of the first generated candidate; candidate i uses `first-seed + i` (task i
    /// too, while no candidate was skipped as a held-out twin). Keep held-out evaluation
    /// seeds outside [first-seed, first-seed + candidates used).
    pub first_seed: u64,
    /// Benchmark rows instead of generated tasks (e.g. Planetarium train rows), cycled.
    pub benchmarks: Vec<Benchmark>,
    /// Eval configs (`configs/eval-*.toml`, relative to this file) whose tasks the stream never
    /// yields, besides `eval-config`'s: a candidate equal to one of them up to a renaming of
    /// objects is skipped for the next (`skipped-twins.jsonl` in the run folder).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_out: Vec<PathBuf>,
    /// Sizes by update, replacing `sizes` when given: each stage's sizes are cycled as
    /// `sizes` is, from its `from-update` until the next stage's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curriculum: Vec<CurriculumStage>,
}

/// One stage of a size curriculum (`[[tasks.curriculum]]`).
///
/// ```toml
/// [[tasks.curriculum]]
/// from-update = 0
/// sizes = [3, 4, 5, 6]
/// [[tasks.curriculum]]
/// from-update = 15
/// sizes = [4, 6, 8, 10]
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CurriculumStage {
    /// The first update (0-based) whose tasks take this stage's sizes.
    pub from_update: u64,
    /// Objects per generated task, cycled within the stage.
    pub sizes: Vec<u32>,
    /// Sizes for one domain instead of `sizes`, by domain name: a generator's size counts
    /// different things (Logistics counts packages, and each adds a location's worth of
    /// facts), so one list cannot fit every domain. `domain-sizes = { logistics = [2, 3] }`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub domain_sizes: std::collections::BTreeMap<String, Vec<u32>>,
}

impl Default for TaskStream {
    fn default() -> Self {
        TaskStream {
            domains: vec!["blocksworld".into()],
            sizes: vec![3, 4],
            first_seed: 1,
            benchmarks: Vec::new(),
            held_out: Vec::new(),
            curriculum: Vec::new(),
        }
    }
}

impl TaskStream {
    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), TrainError> {
        let no_sizes = self.sizes.is_empty() && self.curriculum.is_empty();
        if self.benchmarks.is_empty() && (self.domains.is_empty() || no_sizes) {
            return Err(TrainError::Config("[tasks] needs domains and sizes, or benchmarks".into()));
        }
        if self.curriculum.is_empty() {
            return Ok(());
        }
        if !self.benchmarks.is_empty() {
            return Err(TrainError::Config(
                "[[tasks.curriculum]] sets the sizes of generated tasks; benchmark rows have theirs".into(),
            ));
        }
        if self.curriculum[0].from_update != 0 {
            return Err(TrainError::Config(format!(
                "[[tasks.curriculum]] must start at from-update = 0 (the first starts at {})",
                self.curriculum[0].from_update
            )));
        }
        if let Some(w) = self.curriculum.windows(2).find(|w| w[1].from_update <= w[0].from_update) {
            return Err(TrainError::Config(format!(
                "[[tasks.curriculum]] stages must be in increasing from-update order ({} comes after {})",
                w[1].from_update, w[0].from_update
            )));
        }
        if let Some((s, d)) = self
            .curriculum
            .iter()
            .find_map(|s| s.domain_sizes.iter().find(|(d, sizes)| sizes.is_empty() || !self.domains.contains(d)).map(|(d, _)| (s, d)))
        {
            return Err(TrainError::Config(format!(
                "[[tasks.curriculum]] stage from-update = {}: domain-sizes names `{d}`, which is not one of [tasks] domains, or gives it no sizes",
                s.from_update
            )));
        }
        if let Some(s) = self.curriculum.iter().find(|s| s.sizes.is_empty()) {
            return Err(TrainError::Config(format!(
                "[[tasks.curriculum]] stage from-update = {} has no sizes",
                s.from_update
            )));
        }
        Ok(())
    }

    /// The sizes cycled for `domain` during update `update` (0-based): the curriculum's
    /// stage (its `domain-sizes` entry for the domain, else its `sizes`), or `sizes`.
    pub fn sizes_at(&self, update: u64, domain: &str) -> &[u32] {
        match self.curriculum.iter().rev().find(|s| s.from_update <= update) {
            Some(stage) => stage.domain_sizes.get(domain).unwrap_or(&stage.sizes),
            None => &self.sizes,
        }
    }
}

/// A training run (`onebrain train --config`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TrainConfig {
    /// The run's name (logs, plots).
    pub name: String,
    /// The run folder: checkpoints, episodes, metrics, curves (relative to the config file).
    pub out_dir: PathBuf,
    /// The shared data folder, for benchmark task streams (relative to the config file).
    pub data: PathBuf,
    /// Seed of everything random in the run (sampling seeds, minibatch order).
    pub seed: u64,
    /// Updates to run in all (a resumed run counts the ones already done).
    pub updates: u64,
    /// Write a checkpoint every this many updates (and after the last).
    pub checkpoint_every: u64,
    /// Checkpoints kept on disk (the newest ones).
    pub keep_checkpoints: usize,
    /// Also keep every checkpoint whose update is a multiple of this (0: none), so that the
    /// parameters behind each held-out row can be evaluated again later, on other tasks or
    /// with other code.
    pub keep_checkpoints_every: u64,
    /// Episodes open at once during rollouts (the verifier checks one while the model writes
    /// another).
    pub in_flight: usize,
    /// Which roles learn.
    pub ablation: Ablation,
    /// The training tasks.
    pub tasks: TaskStream,
    /// PPO and the Judge loss.
    pub ppo: PpoArgs,
    /// The model.
    pub model: ModelConfig,
    /// The episode (rollouts sample with `temperature`; `greedy` is ignored).
    pub episode: EpisodeConfig,
    /// The planner's limits.
    pub solver: SolverConfig,
    /// The plugins: the domain adapters and the reward plugin (required).
    pub plugins: RuntimeConfig,
    /// Start from these trained role parameters instead of fresh ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_checkpoint: Option<PathBuf>,
    /// The held-out slice: an eval config (`configs/eval-*.toml`, relative to this file)
    /// whose tasks the parameters being trained solve before the first update, every
    /// `eval-every` updates and after the last. Its `[model]` is ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_config: Option<PathBuf>,
    /// Updates between held-out evaluations (0: before the first and after the last only).
    pub eval_every: u64,
    /// Over a job array only: the most updates a group's sampling parameters may lag the
    /// learner's; an actor waits rather than sample further behind, and the learner drops
    /// an older group. Left out of `config.json` at its default, so that configs written
    /// before it existed keep their digest.
    #[serde(skip_serializing_if = "is_default_staleness")]
    pub max_staleness: u64,
}

/// `max-staleness`'s default: two updates, few enough that the clip (ε = 0.2) is rarely
/// what bounds an off-policy step.
pub const DEFAULT_MAX_STALENESS: u64 = 2;

fn is_default_staleness(n: &u64) -> bool {
    *n == DEFAULT_MAX_STALENESS
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            name: "train".into(),
            out_dir: PathBuf::from("../runs/train"),
            data: PathBuf::from("../../shared/data"),
            seed: 0,
            updates: 100,
            checkpoint_every: 1,
            keep_checkpoints: 2,
            keep_checkpoints_every: 0,
            in_flight: 2,
            ablation: Ablation::Full,
            tasks: TaskStream::default(),
            ppo: PpoArgs::default(),
            model: ModelConfig::default(),
            episode: EpisodeConfig::default(),
            solver: SolverConfig::default(),
            plugins: RuntimeConfig::default(),
            init_checkpoint: None,
            eval_config: None,
            eval_every: 0,
            max_staleness: DEFAULT_MAX_STALENESS,
        }
    }
}

impl TrainConfig {
    /// Parses TOML text (unknown keys are errors) and validates it.
    pub fn from_toml(text: &str) -> Result<TrainConfig, TrainError> {
        let cfg: TrainConfig =
            toml::from_str(text).map_err(|e| TrainError::Config(suggest_near_key(&e.to_string())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a config file; relative paths in it are relative to its folder.
    pub fn from_file(path: &Path) -> Result<TrainConfig, TrainError> {
        let text = std::fs::read_to_string(path).map_err(|e| TrainError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        TrainConfig::from_toml(&text).map_err(|e| TrainError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// The config as its rollouts run it: sampling with the nucleus off (`top-p = 1`, what
    /// [`TrainConfig::rollout_episode`] forces), so that a run's `config.json` records what
    /// ran rather than a `top-p` nothing used.
    pub fn as_run(&self) -> TrainConfig {
        let mut cfg = self.clone();
        cfg.episode.top_p = 1.0;
        cfg.episode.greedy = false;
        cfg
    }

    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), TrainError> {
        self.ppo.validate()?;
        if self.updates == 0 || self.checkpoint_every == 0 || self.keep_checkpoints == 0 {
            return Err(TrainError::Config(
                "updates, checkpoint-every and keep-checkpoints must be at least 1".into(),
            ));
        }
        if self.eval_every > 0 && self.eval_config.is_none() {
            return Err(TrainError::Config(
                "eval-every needs eval-config: the eval config of the held-out slice".into(),
            ));
        }
        self.tasks.validate()?;
        if self.episode.strategy != Strategy::MultiRole {
            return Err(TrainError::Config(format!(
                "training runs the multi-role episode; strategy `{}` is for evaluation",
                self.episode.strategy
            )));
        }
        if self.plugins.reward.is_none() {
            return Err(TrainError::Config(
                "[plugins] reward is required: rewards come from the reward plugin".into(),
            ));
        }
        if self.model.separate_models && self.ablation != Ablation::SeparateModels {
            return Err(TrainError::Config(
                "model.separate_models is the \"separate-models\" ablation: set `ablation` instead"
                    .into(),
            ));
        }
        self.solve_config().validate().map_err(TrainError::Setup)
    }

    /// The episode rollouts run: sampled (never greedy), with the ablation's roles, and with
    /// the nucleus off (`top-p = 1`): PPO's old policy is the distribution the samples were
    /// drawn from, which a nucleus cut would leave (the learner scores full distributions).
    pub fn rollout_episode(&self) -> EpisodeConfig {
        let mut ep = self.episode.clone();
        ep.greedy = false;
        ep.top_p = 1.0;
        if !self.ablation.repairs() {
            ep.max_repairs = 0;
        }
        ep.judge = self.ablation.judges();
        ep
    }

    /// The solve config of the rollouts (what `Services` and the model are built from).
    pub fn solve_config(&self) -> SolveConfig {
        SolveConfig {
            model: ModelConfig {
                separate_models: self.ablation == Ablation::SeparateModels,
                ..self.model.clone()
            },
            episode: self.rollout_episode(),
            solver: self.solver.clone(),
            plugins: self.plugins.clone(),
            // Faithfulness is evaluation only, never a training signal.
            checker: CheckerChoice::None,
            checkpoint: self.init_checkpoint.clone(),
        }
    }

    /// Distinct tasks per update (each sampled `group-size` times).
    pub fn tasks_per_update(&self) -> usize {
        self.ppo.batch_size / self.ppo.group_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ablations_select_roles_and_episode_shape() {
        use Ablation::*;
        let table = [
            (Full, [true, true, true], true, true),
            (ActorOnly, [true, false, false], false, false),
            (ActorJudge, [true, true, false], false, true),
            (ActorEditor, [true, false, true], true, false),
            (EditorJudge, [false, true, true], true, true),
            (SeparateModels, [true, true, true], true, true),
        ];
        for (a, roles, repairs, judges) in table {
            let got: Vec<bool> = Role::ALL.iter().map(|r| a.trains(*r)).collect();
            assert_eq!(got, roles, "{}", a.as_str());
            assert_eq!(
                (a.repairs(), a.judges()),
                (repairs, judges),
                "{}",
                a.as_str()
            );
            let parsed: Ablation =
                toml::from_str::<toml::Value>(&format!("a = \"{}\"", a.as_str())).unwrap()["a"]
                    .clone()
                    .try_into()
                    .unwrap();
            assert_eq!(parsed, a);
        }
    }

    #[test]
    fn config_checks() {
        let ok = "[plugins]\nreward = \"paper-rewards\"\n";
        let c = TrainConfig::from_toml(ok).unwrap();
        assert_eq!(c.ppo, PpoArgs::default());
        assert_eq!(c.tasks_per_update(), 8);
        let ep = TrainConfig {
            ablation: Ablation::ActorOnly,
            ..c.clone()
        }
        .rollout_episode();
        assert_eq!((ep.greedy, ep.max_repairs, ep.judge), (false, 0, false));
        assert!(
            TrainConfig::from_toml("").is_err(),
            "a reward plugin is required"
        );
        assert!(
            TrainConfig::from_toml(&format!("{ok}[ppo]\nclip = 0.1")).is_err(),
            "unknown key"
        );
        assert!(TrainConfig::from_toml(&format!("{ok}[episode]\nstrategy = \"llm+p\"")).is_err());
        let sep = TrainConfig::from_toml(&format!("ablation = \"separate-models\"\n{ok}")).unwrap();
        assert!(sep.solve_config().model.separate_models);
        assert!(!c.solve_config().model.separate_models);
        assert!(TrainConfig::from_toml(&format!("{ok}[model]\nseparate_models = true")).is_err());
    }

    #[test]
    fn max_staleness_is_left_out_of_the_saved_config_at_its_default() {
        let ok = "[plugins]\nreward = \"paper-rewards\"\n";
        let c = TrainConfig::from_toml(ok).unwrap();
        assert_eq!(c.max_staleness, DEFAULT_MAX_STALENESS);
        assert!(!serde_json::to_string(&c).unwrap().contains("max-staleness"));
        let c = TrainConfig::from_toml(&format!("max-staleness = 0\n{ok}")).unwrap();
        assert_eq!(c.max_staleness, 0);
        assert!(serde_json::to_string(&c).unwrap().contains("\"max-staleness\":0"));
    }

    #[test]
    fn shipped_train_configs_parse_with_the_papers_values() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("train") && name.ends_with(".toml") {
                let c =
                    TrainConfig::from_file(&entry.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
                let p = &c.ppo;
                assert_eq!(
                    (p.clip_coef, p.gamma, p.lambda_editor, p.lambda_judge),
                    (0.2, 0.9, 0.5, 0.3),
                    "{name}"
                );
                assert_eq!(c.episode.temperature, 0.7, "{name}");
                n += 1;
            }
        }
        assert!(n >= 2, "configs/train-*.toml");
    }
}

//! What the user wrote for `onebrain solve` (stage one: parsed and validated, no I/O beyond
//! reading the file). [`crate::Setup`] turns it into the loaded model, verifier and plugins.

use std::path::{Path, PathBuf};
use std::time::Duration;

use onebrain_core::config_keys::suggest_near_key;
use onebrain_model::ModelConfig;
use onebrain_runtime::RuntimeConfig;
use onebrain_verifier::{Search, SolverLimits};
use serde::{Deserialize, Serialize};

use crate::error::RolesError;
use crate::strategy::{EpisodeConfig, Select, Strategy};

/// The planner's limits as a config table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SolverConfig {
    /// Wall-clock limit per planner call, in seconds (the paper's 60).
    pub timeout_s: f64,
    /// Address-space limit for the planner, in MiB.
    pub memory_mb: u64,
    /// A Fast Downward alias (`lama-first`) or search string (`astar(lmcut())`).
    pub search: String,
    /// Concurrent verifications (`eval` only).
    pub workers: usize,
}

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            timeout_s: 60.0,
            memory_mb: 4096,
            search: "lama-first".into(),
            workers: 1,
        }
    }
}

impl SolverConfig {
    /// The verifier's limits.
    pub fn limits(&self) -> Result<SolverLimits, RolesError> {
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(RolesError::Config(format!(
                "solver timeout-s must be > 0, got {}",
                self.timeout_s
            )));
        }
        Ok(SolverLimits {
            timeout: Duration::from_secs_f64(self.timeout_s),
            memory_mb: self.memory_mb,
            search: Search::parse(&self.search),
        })
    }
}

/// How faithfulness is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckerChoice {
    /// The `[plugins] checker` plugin (the reference checker under WebAssembly), if configured.
    #[default]
    Plugin,
    /// The same reference checker, linked natively (`onebrain-faithful`).
    Native,
    /// No faithfulness check.
    None,
}

/// The `onebrain solve` config (`configs/solve*.toml`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SolveConfig {
    /// The language model.
    pub model: ModelConfig,
    /// The episode: strategy, mode, budget, sampling.
    pub episode: EpisodeConfig,
    /// The planner's limits.
    pub solver: SolverConfig,
    /// The plugins: domain adapters, reward, checker.
    pub plugins: RuntimeConfig,
    /// Where faithfulness comes from.
    pub checker: CheckerChoice,
    /// Trained role parameters to load over the fresh ones (a checkpoint folder written by
    /// `onebrain train`, relative to the config file's folder); `None` runs the base model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<PathBuf>,
}

impl SolveConfig {
    /// Parses TOML text (unknown keys are errors) and validates it.
    pub fn from_toml(text: &str) -> Result<SolveConfig, RolesError> {
        let cfg: SolveConfig =
            toml::from_str(text).map_err(|e| RolesError::Config(suggest_near_key(&e.to_string())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a config file; relative paths in it are relative to its folder.
    pub fn from_file(path: &Path) -> Result<SolveConfig, RolesError> {
        let text = std::fs::read_to_string(path).map_err(|e| RolesError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        SolveConfig::from_toml(&text).map_err(|e| RolesError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), RolesError> {
        self.episode.validate()?;
        if self.episode.strategy == Strategy::BestOfK && self.episode.select == Select::Reward && self.plugins.reward.is_none() {
            // Without a plugin there is no Φ: the pick would quietly be the Judge's.
            return Err(RolesError::Config(
                "best-of-k picks by the reward plugin (select = \"reward\"), and [plugins] reward is not set: name one, or set select = \"judge\"".into(),
            ));
        }
        if self.episode.strategy == Strategy::BestThenRepair && self.plugins.reward.is_none() {
            return Err(RolesError::Config(
                "best-then-repair picks by the reward plugin's Φ, and [plugins] reward is not set: name one (text-agreement)".into(),
            ));
        }
        self.solver.limits()?;
        self.model
            .validate()
            .map_err(|e| RolesError::Config(e.to_string()))
    }
}

/// The folder relative paths in a config file are resolved against.
pub fn config_base(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mode;

    #[test]
    fn best_of_k_by_reward_needs_a_reward_plugin() {
        let err = SolveConfig::from_toml("[episode]\nstrategy = \"best-of-k\"").unwrap_err().to_string();
        assert!(err.contains("[plugins] reward is not set"), "{err}");
        assert!(SolveConfig::from_toml("[episode]\nstrategy = \"best-of-k\"\n[plugins]\nreward = \"text-agreement\"").is_ok());
        assert!(SolveConfig::from_toml("[episode]\nstrategy = \"best-of-k\"\nselect = \"judge\"").is_ok());
    }

    #[test]
    fn defaults_parse_and_unknown_keys_fail() {
        let c = SolveConfig::from_toml("").unwrap();
        assert_eq!(c, SolveConfig::default());
        assert_eq!(c.solver.limits().unwrap().timeout, Duration::from_secs(60));
        let c = SolveConfig::from_toml(
            "checker = \"native\"\n[episode]\nstrategy = \"self-refine\"\nmode = \"problem\"\n[model]\npath = \"x.gguf\"\n[plugins]\ndomains = [\"blocksworld\"]\n[solver]\ntimeout-s = 5",
        )
        .unwrap();
        assert_eq!(
            (c.episode.strategy, c.episode.mode, c.checker),
            (Strategy::SelfRefine, Mode::Problem, CheckerChoice::Native)
        );
        assert_eq!(c.plugins.domains, ["blocksworld"]);
        let err = SolveConfig::from_toml("[episode]\nbudgett = 3").unwrap_err().to_string();
        assert!(err.ends_with("did you mean `budget`?"), "{err}");
        let err = SolveConfig::from_toml("[model]\nlora_rnak = 8").unwrap_err().to_string();
        assert!(err.ends_with("did you mean `lora-rank`?"), "{err}");
        assert!(SolveConfig::from_toml("[solver]\ntimeout-s = -1").is_err());
        assert!(matches!(
            SolveConfig::from_file(Path::new("/nonexistent.toml")),
            Err(RolesError::ConfigFile { .. })
        ));
    }

    #[test]
    fn shipped_solve_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("solve") && name.ends_with(".toml") {
                let c =
                    SolveConfig::from_file(&entry.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
                // The paper's budget of K = 6 verifier calls and λ_J = 0.3 for every method;
                // its H_max = 5 repairs where the Editor alone spends the budget.
                assert_eq!((c.episode.budget, c.episode.lambda_judge), (6, 0.3), "{name}");
                match c.episode.strategy {
                    Strategy::BestThenRepair => {
                        assert!(c.episode.samples + c.episode.max_repairs <= c.episode.budget, "{name}")
                    }
                    _ => assert_eq!(c.episode.max_repairs, 5, "{name}"),
                }
                n += 1;
            }
        }
        assert!(n >= 1, "no configs/solve*.toml found");
    }
}

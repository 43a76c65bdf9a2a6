//! `onebrain eval --config configs/eval-*.toml`: what to run and where to write it.

use std::path::{Path, PathBuf};

use onebrain_core::config_keys::suggest_near_key;
use onebrain_model::ModelConfig;
use onebrain_roles::{CheckerChoice, EpisodeConfig, SolveConfig, SolverConfig, Strategy};
use onebrain_runtime::RuntimeConfig;
use serde::{Deserialize, Serialize};

use crate::tasks::Benchmark;
use crate::transfer::TransferBenchmark;

/// Why an eval config is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The TOML does not parse, or has unknown keys.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range.
    #[error("invalid eval config: {0}")]
    Invalid(String),
}

/// The report's statistical settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReportConfig {
    /// δ of the Hoeffding bound on ε (confidence 1 − δ).
    pub delta: f64,
    /// Checkpoints sharing δ (union bound).
    pub checkpoints: usize,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            delta: 0.05,
            checkpoints: 1,
        }
    }
}

/// An evaluation: benchmarks × strategies, one model, one verifier, the plugins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EvalConfig {
    /// The run's name (report titles).
    #[serde(default = "default_name")]
    pub name: String,
    /// Where the trace and the reports go (relative to the config file).
    pub out_dir: PathBuf,
    /// The shared data folder (relative to the config file).
    #[serde(default = "default_data")]
    pub data: PathBuf,
    /// The strategies to run, each on every benchmark task.
    #[serde(default = "default_strategies")]
    pub strategies: Vec<Strategy>,
    /// Episodes open at once (the verifier checks one while the model writes another); the
    /// model decodes the waiting ones as one batch. Default 8 (see `default_in_flight`).
    #[serde(default = "default_in_flight")]
    pub in_flight: usize,
    /// The planning benchmarks.
    #[serde(default)]
    pub benchmarks: Vec<Benchmark>,
    /// The transfer benchmarks (ProntoQA, NATURAL PLAN), answered directly.
    #[serde(default)]
    pub transfer: Vec<TransferBenchmark>,
    /// The model.
    #[serde(default)]
    pub model: ModelConfig,
    /// The episode settings (`strategy` is overridden by `strategies`).
    #[serde(default)]
    pub episode: EpisodeConfig,
    /// The planner's limits.
    #[serde(default)]
    pub solver: SolverConfig,
    /// The plugins.
    #[serde(default)]
    pub plugins: RuntimeConfig,
    /// Where faithfulness comes from.
    #[serde(default)]
    pub checker: CheckerChoice,
    /// The report's settings.
    #[serde(default)]
    pub report: ReportConfig,
    /// Trained role parameters to load (a checkpoint folder written by `onebrain train`,
    /// relative to the config file); absent for the base model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<PathBuf>,
}

fn default_name() -> String {
    "eval".into()
}
fn default_data() -> PathBuf {
    PathBuf::from("../../shared/data")
}
fn default_strategies() -> Vec<Strategy> {
    vec![Strategy::MultiRole]
}
/// 8 rows of the 1.5B default model fit the default memory budget up to 4,263 positions
/// each, room for repairs' prompts, which carry the last answer and its diagnostics (16 rows
/// fit up to 2,128: the update-0 set's 1,757, not much more). At the update-0 set's lengths
/// 8 rows are estimated at 4.8 GiB and measured at 4.7 GB, beside a training
/// run's 6–9 GB on a 24 GB machine; 2, the default before, left the batched decode idle.
fn default_in_flight() -> usize {
    8
}

impl EvalConfig {
    /// Parses and validates TOML text.
    pub fn from_toml(text: &str) -> Result<EvalConfig, ConfigError> {
        let cfg: EvalConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::from("<text>"),
            message: suggest_near_key(&e.to_string()),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<EvalConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        EvalConfig::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })
    }

    /// Checks the values that need no I/O.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.benchmarks.is_empty() && self.transfer.is_empty() {
            return Err(ConfigError::Invalid("no [[benchmarks]] and no [[transfer]]".into()));
        }
        if self.strategies.is_empty() {
            return Err(ConfigError::Invalid("no strategies".into()));
        }
        if !(self.report.delta > 0.0 && self.report.delta < 1.0) || self.report.checkpoints == 0 {
            return Err(ConfigError::Invalid(
                "report delta must be in (0, 1) and checkpoints ≥ 1".into(),
            ));
        }
        if let Some(b) = self.benchmarks.iter().find(|b| b.source == crate::SourceKind::TextFolder) {
            if self.episode.mode != onebrain_roles::Mode::Full {
                return Err(ConfigError::Invalid(format!(
                    "benchmark `{}` is a text-folder: its domains exist only in prose, so it needs mode = \"full\"",
                    b.domain
                )));
            }
            if let Some(s) = self.strategies.iter().find(|s| s.writes_plan() || **s == Strategy::LlmPlusP) {
                return Err(ConfigError::Invalid(format!(
                    "benchmark `{}` is a text-folder, which has no domain plugin; strategy {s} needs one (multi-role and self-refine do not)",
                    b.domain
                )));
            }
        }
        // Each strategy's: some settings hold for one strategy only (best-of-k's selector).
        for &s in &self.strategies {
            self.solve_config(s).validate().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        }
        Ok(())
    }

    /// The per-strategy solve config this evaluation runs with.
    pub fn solve_config(&self, strategy: Strategy) -> SolveConfig {
        SolveConfig {
            model: self.model.clone(),
            episode: EpisodeConfig {
                strategy,
                ..self.episode.clone()
            },
            solver: self.solver.clone(),
            plugins: self.plugins.clone(),
            checker: self.checker,
            checkpoint: self.checkpoint.clone(),
        }
    }
}

//! The `[plugins]` part of a onebrain config (what the user wrote, stage one)
//! and the loaded plugins it becomes (stage two).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use onebrain_core::config_keys::suggest_near_key;
use serde::{Deserialize, Serialize};

use crate::adapters::{WasmChecker, WasmDiagnosticParser, WasmDomainAdapter, WasmReward};
use crate::error::RegistryError;
use crate::grants::Grants;
use crate::host::{HostOptions, PluginDigest, PluginHost};
use crate::instance::InstancePolicy;
use crate::limits::Limits;
use crate::manifest::World;
use crate::registry::PluginRegistry;

/// Plugin settings. Every plugin reference is an installed plugin's name
/// (`"paper-rewards"`) or a path to a `plugin.toml`, a plugin folder or a
/// bare `.wasm` (`"plugins/my-reward/my-reward.wasm"`), relative to the
/// config file; changing one line swaps the plugin with no rebuild.
///
/// ```toml
/// plugin-dirs = ["plugins"]
/// reward = "paper-rewards"
/// diagnostic-parser = "fd-diagnostics"
/// diagnostic-reviewers = ["text-diagnostics"]
/// domains = ["blocksworld", "logistics"]
/// [limits]
/// timeout-ms = 2000
/// [grants.my-checker]
/// read-dirs = ["../shared/data"]
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuntimeConfig {
    /// Where installed plugins live (one folder per plugin with a `plugin.toml`).
    #[serde(default = "default_plugin_dirs")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Where compiled components are cached; `None` compiles on every start.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Per-call limits.
    #[serde(default)]
    pub limits: Limits,
    /// Whether instances are kept between calls.
    #[serde(default)]
    pub instances: InstancePolicy,
    /// Directories granted to plugins, by plugin name.
    #[serde(default)]
    pub grants: Grants,
    /// The reward plugin.
    #[serde(default)]
    pub reward: Option<String>,
    /// The faithfulness checker plugin.
    #[serde(default)]
    pub checker: Option<String>,
    /// The diagnostic parser plugin.
    #[serde(default)]
    pub diagnostic_parser: Option<String>,
    /// Diagnostic parser plugins (API 0.4.0 or later) whose `review` reads every unsolved
    /// spec against the task's text; what they find is added to the spec's diagnostics,
    /// for the Editor. None by default.
    #[serde(default)]
    pub diagnostic_reviewers: Vec<String>,
    /// Domain adapter plugins.
    #[serde(default)]
    pub domains: Vec<String>,
}

fn default_plugin_dirs() -> Vec<PathBuf> {
    vec![PathBuf::from("plugins")]
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            plugin_dirs: default_plugin_dirs(),
            cache_dir: None,
            limits: Limits::default(),
            instances: InstancePolicy::default(),
            grants: Grants::default(),
            reward: None,
            checker: None,
            diagnostic_parser: None,
            diagnostic_reviewers: Vec::new(),
            domains: Vec::new(),
        }
    }
}

/// The plugins a config names, loaded and ready to call.
#[derive(Default)]
pub struct Plugins {
    /// The reward plugin, if configured.
    pub reward: Option<Arc<WasmReward>>,
    /// The faithfulness checker, if configured.
    pub checker: Option<Arc<WasmChecker>>,
    /// The diagnostic parser, if configured.
    pub diagnostic_parser: Option<Arc<WasmDiagnosticParser>>,
    /// The diagnostic reviewers, in config order (none unless configured).
    pub diagnostic_reviewers: Vec<Arc<WasmDiagnosticParser>>,
    /// Domain adapters, in config order.
    pub domains: Vec<Arc<WasmDomainAdapter>>,
    /// Plugin folders that were skipped while scanning the plugin
    /// directories, one line each (also printed on stderr by [`RuntimeConfig::load`]).
    pub warnings: Vec<String>,
    /// Which component each loaded plugin runs, in load order.
    pub digests: Vec<PluginDigest>,
}

impl RuntimeConfig {
    /// Parses TOML text (unknown keys are errors).
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| suggest_near_key(&e.to_string()))
    }

    /// The host and registry this config describes; relative paths are
    /// resolved against `base` (the config file's folder).
    pub fn host(&self, base: &Path) -> Result<(PluginHost, PluginRegistry), RegistryError> {
        let dirs: Vec<PathBuf> = self.plugin_dirs.iter().map(|d| base.join(d)).collect();
        let registry = PluginRegistry::discover(&dirs)?;
        let grants = self
            .grants
            .iter()
            .map(|(k, g)| {
                let mut g = g.clone();
                g.read_dirs = g.read_dirs.iter().map(|d| base.join(d)).collect();
                (k.clone(), g)
            })
            .collect();
        let options = HostOptions {
            cache_dir: self.cache_dir.as_ref().map(|d| base.join(d)),
            limits: self.limits.clone(),
            grants,
        };
        let host = PluginHost::new(options).map_err(|e| RegistryError::Manifest {
            path: base.to_path_buf(),
            message: format!("cannot start the WebAssembly engine: {e}"),
        })?;
        Ok((host, registry))
    }

    /// Loads every plugin the config names. A broken plugin folder the
    /// config does not name is skipped with a warning on stderr (and in
    /// [`Plugins::warnings`]); one it names is an error. Two domain adapters
    /// answering for one domain are an error naming both.
    pub fn load(&self, base: &Path) -> Result<Plugins, RegistryError> {
        let (host, registry) = self.host(base)?;
        let warnings = registry.warnings();
        for w in &warnings {
            // Not `eprintln!`, which panics when stderr is a closed pipe: a
            // warning nobody can read is no reason to stop.
            let _ = writeln!(std::io::stderr(), "onebrain: warning: {w}");
        }
        let mut digests = Vec::new();
        let mut load = |r: &str, world| -> Result<_, RegistryError> {
            let m = registry.resolve(r, world, base)?;
            let plugin = host.load(&m)?;
            digests.push(plugin.digest());
            Ok(plugin)
        };
        let policy = self.instances;
        let mut out = Plugins::default();
        if let Some(r) = &self.reward {
            out.reward = Some(Arc::new(WasmReward::new(&load(r, World::Reward)?, policy)?));
        }
        if let Some(r) = &self.checker {
            out.checker = Some(Arc::new(WasmChecker::new(&load(r, World::FaithfulnessChecker)?, policy)?));
        }
        if let Some(r) = &self.diagnostic_parser {
            out.diagnostic_parser =
                Some(Arc::new(WasmDiagnosticParser::new(&load(r, World::DiagnosticParser)?, policy)?));
        }
        for r in &self.diagnostic_reviewers {
            out.diagnostic_reviewers
                .push(Arc::new(WasmDiagnosticParser::reviewer(&load(r, World::DiagnosticParser)?, policy)?));
        }
        let mut claimed: Vec<(String, String)> = Vec::new();
        for r in &self.domains {
            let d = WasmDomainAdapter::new(&load(r, World::DomainAdapter)?, policy)?;
            let name = onebrain_core::DomainAdapter::name(&d);
            let origin = d.origin();
            if let Some((_, first)) = claimed.iter().find(|(n, _)| *n == name) {
                return Err(RegistryError::DuplicateDomain { name, first: first.clone(), second: origin });
            }
            claimed.push((name, origin));
            out.domains.push(Arc::new(d));
        }
        out.warnings = warnings;
        out.digests = digests;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_keys() {
        let c = RuntimeConfig::from_toml("").unwrap();
        assert_eq!(c, RuntimeConfig::default());
        let c = RuntimeConfig::from_toml("reward = \"paper-rewards\"\n[limits]\ntimeout-ms = 10").unwrap();
        assert_eq!(c.reward.as_deref(), Some("paper-rewards"));
        assert_eq!(c.limits.timeout_ms, 10);
        assert!(RuntimeConfig::from_toml("rewards = \"x\"").is_err());
        assert!(c.diagnostic_reviewers.is_empty() && RuntimeConfig::default().diagnostic_reviewers.is_empty());
        let c = RuntimeConfig::from_toml("diagnostic-reviewers = [\"text-diagnostics\", \"plugins/x/x.wasm\"]").unwrap();
        assert_eq!(c.diagnostic_reviewers, ["text-diagnostics", "plugins/x/x.wasm"]);
        // One reviewer is still a list.
        assert!(RuntimeConfig::from_toml("diagnostic-reviewers = \"text-diagnostics\"").is_err());
        assert!(RuntimeConfig::from_toml("[grants.x]\nwrite-dirs = [\"/\"]").is_err());
    }
}

//! The plugin host: sandboxed WebAssembly components (wasmtime 48, WASI
//! preview 2) behind the `onebrain:plugin` WIT worlds.
//!
//! - [`PluginRegistry`] finds installed plugins (`plugins/<name>/plugin.toml`,
//!   a [`PluginManifest`]) and produces the reports of `onebrain plugins
//!   list | inspect | check` ([`PluginInfo`], [`PluginDetails`], [`CheckReport`]).
//! - [`PluginHost`] loads a plugin: checks the SDK's API version, compiles
//!   the component or takes it from the [`ComponentCache`], and grants it
//!   nothing but what [`CapabilityGranter`] allows.
//! - [`WasmReward`], [`WasmDomainAdapter`], [`WasmDiagnosticParser`] and
//!   [`WasmChecker`] implement the `onebrain-core` seams by calling it; each
//!   call runs under [`Limits`] (timeout, fuel, memory, output size), every
//!   answer is validated (finite, bounded rewards; self-consistent reports;
//!   a domain's own name; escaped text), and every failure is a
//!   [`PluginError`] naming the plugin and its version.
//! - A plugin's identity is its folder's name, which its manifest and (for a
//!   domain) its `name()` must repeat; grants follow that name. Its manifest
//!   and component are read only as regular files inside its folder, size
//!   capped ([`MAX_COMPONENT_BYTES`]). Everything it says is escaped
//!   ([`escape_line`]) before it can reach a terminal.
//! - [`RuntimeConfig`] is the `[plugins]` config: which plugins, by name or
//!   path, so a changed line swaps a plugin without rebuilding the host.
//! - What a call costs, and WASM against native code, is measured by
//!   `onebrain bench plugins` (`onebrain-bench`), not here.
//!
//! ```
//! use onebrain_runtime::{PluginHost, HostOptions, PluginRegistry, RuntimeConfig, World};
//! use onebrain_core::{FinishedEpisode, Outcome, Reward, Step, StepRole, Verdict};
//!
//! let config = RuntimeConfig::from_toml(r#"
//!     plugin-dirs = ["plugins"]
//!     reward = "paper-rewards"
//!     [limits]
//!     timeout-ms = 500
//! "#).unwrap();
//! assert_eq!(config.limits.timeout_ms, 500);
//!
//! // With the bundled plugins built (scripts/build-plugins.sh):
//! let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
//! let registry = PluginRegistry::discover(&[root.join("plugins")]).unwrap();
//! if registry.get("paper-rewards").map_or(false, |m| m.component_path().is_file()) {
//!     let plugins = config.load(&root).unwrap();
//!     let reward = plugins.reward.unwrap();
//!     let solved = Verdict::new(Outcome::Solved, vec!["(pick-up a)".into()], vec![]);
//!     let steps = vec![Step::new(StepRole::Actor, None, solved)];
//!     let r = reward.rewards(&FinishedEpisode { steps, judge_score: 1.0, ..Default::default() }).unwrap();
//!     assert!((r.actor - 1.3).abs() < 1e-6);
//! }
//! ```
#![deny(missing_docs)]

mod adapters;
mod cache;
mod clocks;
mod config;
mod error;
mod files;
mod grants;
mod host;
mod instance;
mod limits;
mod manifest;
mod registry;
mod state;
mod text;
mod validate;
mod wit;

pub use adapters::{WasmChecker, WasmDiagnosticParser, WasmDomainAdapter, WasmReward};
pub use cache::{CacheOutcome, ComponentCache};
pub use config::{Plugins, RuntimeConfig};
pub use error::{FailureKind, PluginError, PluginErrorKind, PluginId, RegistryError};
pub use files::{MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES};
pub use grants::{CapabilityGranter, Grant, Grants, PermissionError, Preopen};
pub use host::{HostOptions, LoadedPlugin, PluginDigest, PluginHost};
pub use instance::{CallCost, InstancePolicy};
pub use limits::{memory_address_space, Limits};
pub use manifest::{CallBudget, Permissions, PluginManifest, World};
pub use registry::{check_manifest, CheckReport, PluginDetails, PluginInfo, PluginRegistry};
pub use text::{escape_line, escape_path, escape_text};
pub use wit::ApiVersion;

use std::path::{Path, PathBuf};

use crate::text::escape_path;

fn shown(p: &Path) -> String {
    escape_path(p)
}
use std::time::Duration;

/// Which plugin failed: its manifest name and version, so every error a run
/// logs says whose fault it was (Zed's `extension_error` does the same).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginId {
    /// The manifest's `name`.
    pub name: String,
    /// The manifest's `version`.
    pub version: String,
}

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

/// Why a call into a plugin failed. Every variant but [`PluginErrorKind::Guest`]
/// discards the plugin's store: the next call starts a fresh instance.
#[derive(Debug, thiserror::Error)]
pub enum PluginErrorKind {
    /// The guest ran past its wall-clock deadline (epoch interruption).
    #[error("timed out after {limit:?}")]
    Timeout {
        /// The per-call limit that was hit.
        limit: Duration,
    },
    /// The guest used up its instruction budget (fuel).
    #[error("ran out of fuel ({fuel} units)")]
    FuelExhausted {
        /// The per-call budget that was hit.
        fuel: u64,
    },
    /// The guest asked for more linear memory than the cap allows.
    #[error("hit the memory limit of {limit_bytes} bytes")]
    MemoryLimit {
        /// The cap on linear memory, in bytes.
        limit_bytes: u64,
    },
    /// The guest exhausted its WebAssembly stack (runaway recursion).
    #[error("stack overflow")]
    StackOverflow,
    /// The guest panicked or hit another trap.
    #[error("trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap {
        /// The trap's description, e.g. "wasm `unreachable` instruction executed".
        trap: String,
        /// The tail of what the guest wrote to stderr (a panic message, usually).
        stderr: String,
    },
    /// The guest returned more data than the host accepts from one call
    /// (its answer or its error message).
    #[error("returned {}, more than the limit of {limit}", output_size(.bytes))]
    OutputTooLarge {
        /// How much it returned, when known: a result far over the limit is
        /// stopped while being copied out of the guest, before it is measured.
        bytes: Option<usize>,
        /// The cap, in bytes.
        limit: usize,
    },
    /// The guest handled the call and reported an error of its own (escaped
    /// as one line and capped at [`Limits::message_kb`](crate::Limits::message_kb)).
    #[error("reported an error: {0}")]
    Guest(String),
    /// The guest answered with a value the host refuses: a reward out of
    /// bounds, a self-contradictory faithfulness report, a task of another
    /// domain.
    #[error("returned an invalid value: {0}")]
    Invalid(String),
    /// The guest answered NaN or ±∞ where the host takes only a finite number
    /// (a reward, a checker's Schema-F1). Worded as [`PluginErrorKind::Invalid`]
    /// is; a variant of its own so that a trace can count it without reading
    /// the words.
    #[error("returned an invalid value: {0}")]
    NonFinite(String),
    /// A domain adapter's `name()` is not the name it is installed under (its
    /// folder's and manifest's, or a bare component's file name): one plugin
    /// cannot answer for another's domain.
    #[error("says its name is `{reported}`, but it is installed as `{manifest}` (its folder's and manifest's name, or its file's)")]
    Identity {
        /// The manifest's name.
        manifest: String,
        /// What the component reported.
        reported: String,
    },
    /// The manifest's `component` is not a file the host will read: an
    /// absolute path, a path with `..`, a symlink out of the plugin folder, a
    /// device, a FIFO, or a file over the size cap.
    #[error("has a component the host will not read: {0}")]
    ComponentFile(String),
    /// The component was built for a WIT version this host cannot load.
    #[error("was built for onebrain:plugin@{found}; this host loads {supported}")]
    IncompatibleApiVersion {
        /// The version in the component's `onebrain:api-version` section.
        found: String,
        /// The versions this host has bindings for.
        supported: String,
    },
    /// The component carries no `onebrain:api-version` section (not built with the SDK).
    #[error("has no onebrain:api-version custom section; build it with onebrain-sdk")]
    MissingApiVersion,
    /// The component does not implement the world its manifest names.
    #[error("does not implement world `{world}`: {reason}")]
    WorldMismatch {
        /// The world the host expected.
        world: String,
        /// What wasmtime said.
        reason: String,
    },
    /// The component could not be compiled or instantiated.
    #[error("could not be loaded: {0}")]
    Load(String),
    /// The manifest asks for a permission the configuration did not grant.
    #[error("permission denied: {0}")]
    Permission(#[from] crate::grants::PermissionError),
    /// Any other failure inside wasmtime.
    #[error("failed inside the runtime: {0}")]
    Runtime(String),
}

fn output_size(bytes: &Option<usize>) -> String {
    match bytes {
        Some(b) => format!("{b} bytes"),
        None => "more data".into(),
    }
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {})", stderr.trim_end())
    }
}

impl PluginErrorKind {
    /// What kind of failure this is, without its details or wording: what a trace records
    /// and a report counts (a reworded message cannot move a failure to another kind).
    pub fn failure_kind(&self) -> FailureKind {
        use PluginErrorKind as K;
        match self {
            K::Timeout { .. } => FailureKind::Timeout,
            K::FuelExhausted { .. } => FailureKind::Fuel,
            K::MemoryLimit { .. } => FailureKind::Memory,
            K::StackOverflow => FailureKind::StackOverflow,
            K::Trap { .. } => FailureKind::Trap,
            K::OutputTooLarge { .. } => FailureKind::OutputTooLarge,
            K::Guest(_) => FailureKind::Reported,
            K::Invalid(_) => FailureKind::Invalid,
            K::NonFinite(_) => FailureKind::NonFinite,
            K::Identity { .. }
            | K::ComponentFile(_)
            | K::IncompatibleApiVersion { .. }
            | K::MissingApiVersion
            | K::WorldMismatch { .. }
            | K::Load(_)
            | K::Permission(_) => FailureKind::Load,
            K::Runtime(_) => FailureKind::Runtime,
        }
    }
}

/// The kind of a [`PluginErrorKind`], without its details: a closed list, serialized in
/// kebab-case (`"non-finite"`), that episode records store next to the error's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// [`PluginErrorKind::Timeout`]: past the wall-clock limit.
    Timeout,
    /// [`PluginErrorKind::FuelExhausted`]: out of fuel.
    Fuel,
    /// [`PluginErrorKind::MemoryLimit`]: over the memory cap.
    Memory,
    /// [`PluginErrorKind::StackOverflow`]: out of stack.
    StackOverflow,
    /// [`PluginErrorKind::Trap`]: a panic or another trap.
    Trap,
    /// [`PluginErrorKind::OutputTooLarge`]: an answer over the output cap.
    OutputTooLarge,
    /// [`PluginErrorKind::Guest`]: the guest's own error.
    Reported,
    /// [`PluginErrorKind::Invalid`]: a value the host refuses.
    Invalid,
    /// [`PluginErrorKind::NonFinite`]: NaN or ±∞ where a finite number belongs.
    NonFinite,
    /// The plugin could not be loaded or may not run: a bad component, identity, API
    /// version, world or permission.
    Load,
    /// [`PluginErrorKind::Runtime`]: another failure inside wasmtime.
    Runtime,
}

impl FailureKind {
    /// The name a trace stores (`"non-finite"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Fuel => "fuel",
            FailureKind::Memory => "memory",
            FailureKind::StackOverflow => "stack-overflow",
            FailureKind::Trap => "trap",
            FailureKind::OutputTooLarge => "output-too-large",
            FailureKind::Reported => "reported",
            FailureKind::Invalid => "invalid",
            FailureKind::NonFinite => "non-finite",
            FailureKind::Load => "load",
            FailureKind::Runtime => "runtime",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of one plugin, named by plugin and version.
#[derive(Debug, thiserror::Error)]
#[error("plugin {plugin} {kind}")]
pub struct PluginError {
    /// Whose failure it was.
    pub plugin: PluginId,
    /// What went wrong.
    #[source]
    pub kind: PluginErrorKind,
}

impl PluginError {
    /// The error, with every string in it that a plugin could have written
    /// (its message, its stderr, wasmtime's text about its code) escaped as
    /// one line and capped, so it is safe to print and cheap to store.
    pub(crate) fn new(plugin: &PluginId, kind: PluginErrorKind) -> Self {
        PluginError { plugin: plugin.clone(), kind: kind.bounded(MESSAGE_BYTES, STDERR_BYTES) }
    }

    /// The kind of failure ([`PluginErrorKind::failure_kind`]).
    pub fn failure_kind(&self) -> FailureKind {
        self.kind.failure_kind()
    }

    /// As [`PluginError::new`], with the caps of `limits`.
    pub(crate) fn with_limits(plugin: &PluginId, kind: PluginErrorKind, limits: &crate::Limits) -> Self {
        PluginError { plugin: plugin.clone(), kind: kind.bounded(limits.message_bytes(), limits.stderr_bytes()) }
    }
}

/// Caps for errors raised before a plugin's limits are known (loading).
const MESSAGE_BYTES: usize = 4 << 10;
const STDERR_BYTES: usize = 16 << 10;

impl PluginErrorKind {
    fn bounded(self, cap: usize, stderr_cap: usize) -> Self {
        use crate::text::message;
        use PluginErrorKind as K;
        match self {
            K::Trap { trap, stderr } => K::Trap { trap: message(&trap, cap), stderr: message(&stderr, stderr_cap) },
            K::Guest(m) => K::Guest(message(&m, cap)),
            K::Invalid(m) => K::Invalid(message(&m, cap)),
            K::NonFinite(m) => K::NonFinite(message(&m, cap)),
            K::Identity { manifest, reported } => K::Identity { manifest, reported: message(&reported, 64) },
            K::ComponentFile(m) => K::ComponentFile(message(&m, cap)),
            K::IncompatibleApiVersion { found, supported } => {
                K::IncompatibleApiVersion { found: message(&found, 64), supported }
            }
            K::WorldMismatch { world, reason } => K::WorldMismatch { world, reason: message(&reason, cap) },
            K::Load(m) => K::Load(message(&m, cap)),
            K::Runtime(m) => K::Runtime(message(&m, cap)),
            other => other,
        }
    }
}

/// Errors of the plugin registry and configuration: finding, reading and
/// validating manifests before any plugin code runs.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", shown(.path))]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `plugin.toml` or config is not valid TOML or has unknown keys.
    #[error("invalid manifest {}: {message}", shown(.path))]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// No plugin of that name is installed in any plugin directory.
    #[error("no plugin named `{0}` (looked in the configured plugin directories)")]
    NotFound(String),
    /// Two plugin folders claim the same name; neither is used.
    #[error("plugin `{name}` is claimed twice, by {} and {}", shown(.first), shown(.second))]
    Duplicate {
        /// The duplicated name.
        name: String,
        /// The first manifest.
        first: PathBuf,
        /// The second manifest.
        second: PathBuf,
    },
    /// The plugin folder of that name was skipped when the plugin
    /// directories were scanned (see [`PluginRegistry::skipped`](crate::PluginRegistry::skipped)).
    #[error("plugin `{name}` cannot be used: its folder {} was skipped: {reason}", shown(.dir))]
    Broken {
        /// The folder's name, which is the name a config uses.
        name: String,
        /// The folder.
        dir: PathBuf,
        /// Why it was skipped.
        reason: String,
    },
    /// Two domain adapters in one config answer for the same domain.
    #[error("domain `{name}` is claimed by two plugins: {first} and {second}")]
    DuplicateDomain {
        /// The domain.
        name: String,
        /// The first plugin (its folder or component).
        first: String,
        /// The second plugin.
        second: String,
    },
    /// The plugin implements another world than the caller needs.
    #[error("plugin `{name}` implements world `{found}`, expected `{expected}`")]
    WrongWorld {
        /// The plugin.
        name: String,
        /// Its world.
        found: String,
        /// The world the caller needs.
        expected: String,
    },
    /// A plugin failed while loading or during its smoke call.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_finite_value_reads_as_an_invalid_one_but_is_its_own_kind() {
        let plugin = PluginId { name: "r".into(), version: "0.1.0".into() };
        let why = "the actor reward is NaN, not a finite number";
        let nan = PluginError::new(&plugin, PluginErrorKind::NonFinite(why.into()));
        let invalid = PluginError::new(&plugin, PluginErrorKind::Invalid(why.into()));
        // The text people read is what it was before the variant existed.
        assert_eq!(nan.to_string(), "plugin r@0.1.0 returned an invalid value: the actor reward is NaN, not a finite number");
        assert_eq!(nan.to_string(), invalid.to_string());
        assert_eq!((nan.failure_kind(), invalid.failure_kind()), (FailureKind::NonFinite, FailureKind::Invalid));
    }

    #[test]
    fn failure_kinds_are_named_as_they_are_serialized() {
        use FailureKind as F;
        let all = [
            F::Timeout,
            F::Fuel,
            F::Memory,
            F::StackOverflow,
            F::Trap,
            F::OutputTooLarge,
            F::Reported,
            F::Invalid,
            F::NonFinite,
            F::Load,
            F::Runtime,
        ];
        for k in all {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<FailureKind>(&json).unwrap(), k);
        }
    }
}

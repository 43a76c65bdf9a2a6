use std::path::PathBuf;
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
    /// The guest returned more data than the host accepts from one call.
    #[error("returned {bytes} bytes, more than the limit of {limit}")]
    OutputTooLarge {
        /// How much it returned.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
    /// The guest handled the call and reported an error of its own.
    #[error("reported an error: {0}")]
    Guest(String),
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

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {})", stderr.trim_end())
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
    pub(crate) fn new(plugin: &PluginId, kind: PluginErrorKind) -> Self {
        PluginError { plugin: plugin.clone(), kind }
    }
}

/// Errors of the plugin registry and configuration: finding, reading and
/// validating manifests before any plugin code runs.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `plugin.toml` or config is not valid TOML or has unknown keys.
    #[error("invalid manifest {path}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// No plugin of that name is installed in any plugin directory.
    #[error("no plugin named `{0}` (looked in the configured plugin directories)")]
    NotFound(String),
    /// Two plugin directories hold plugins with the same name.
    #[error("plugin `{name}` is installed twice: {first} and {second}")]
    Duplicate {
        /// The duplicated name.
        name: String,
        /// The first manifest.
        first: PathBuf,
        /// The second manifest.
        second: PathBuf,
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

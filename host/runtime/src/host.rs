use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, OptLevel};

use crate::cache::{CacheOutcome, ComponentCache};
use crate::error::{PluginError, PluginErrorKind, PluginId};
use crate::grants::{CapabilityGranter, Grant, Preopen};
use crate::limits::{reservation, Limits, EPOCH_TICK, MEMORY_GUARD_BYTES};
use crate::manifest::PluginManifest;
use crate::state::StoreState;
use crate::wit::{read_api_version, ApiVersion};

/// An engine and the linker built on it.
pub(crate) struct EngineLinker {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreState>,
}

/// The engine for plugins whose memory is capped at `memory_bytes`, built once
/// per process and cap (Zed's `wasm_engine()`, Spin's `Config::default`): its
/// memory reservation follows the cap ([`memory_address_space`](crate::limits::memory_address_space)), and compiled
/// code and the component cache are tied to its settings (the cache key holds
/// the engine's compatibility hash, so each cap has its own entries). A process
/// normally sees one cap; tests see a few. One background thread advances every
/// engine's epoch.
pub(crate) fn engine(memory_bytes: u64) -> Result<&'static EngineLinker, String> {
    static ENGINES: Mutex<Vec<(u64, &'static EngineLinker)>> = Mutex::new(Vec::new());
    static TICKER: OnceLock<Result<(), String>> = OnceLock::new();
    let reserve = reservation(memory_bytes);
    let mut engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, e)) = engines.iter().find(|(r, _)| *r == reserve) {
        return Ok(e);
    }
    let mut c = Config::new();
    // Wall-clock deadlines (timeouts) and instruction budgets (fuel).
    c.epoch_interruption(true);
    c.consume_fuel(true);
    // 1 MiB of WebAssembly stack: deep enough for any honest
    // recursion over a PDDL AST, and a runaway one traps quickly.
    c.max_wasm_stack(1 << 20);
    c.cranelift_opt_level(OptLevel::Speed);
    // Address space follows the memory cap (see `memory_address_space`).
    // Instances are allocated on demand, never pooled: a pool reserves every
    // slot's memory up front.
    c.memory_reservation(reserve);
    c.memory_guard_size(MEMORY_GUARD_BYTES);
    c.guard_before_linear_memory(true);
    // Only used by a memory that outgrows its reservation, which the limiter
    // refuses; nothing extra to reserve.
    c.memory_reservation_for_growth(0);
    let engine = Engine::new(&c).map_err(|e| format!("{e:#}"))?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| format!("{e:#}"))?;
    crate::clocks::add_to_linker(&mut linker).map_err(|e| format!("{e:#}"))?;
    // Leaked on purpose: one per cap, alive as long as the process, like the
    // `OnceLock` engine it replaces.
    let built: &'static EngineLinker = Box::leak(Box::new(EngineLinker { engine, linker }));
    engines.push((reserve, built));
    drop(engines);
    TICKER
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("onebrain-epoch".into())
                .spawn(|| loop {
                    std::thread::sleep(EPOCH_TICK);
                    for (_, e) in ENGINES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                        e.engine.increment_epoch();
                    }
                })
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()?;
    Ok(built)
}

/// Which component a loaded plugin runs: its name, version and the SHA-256 of the bytes it was
/// compiled from. A run folder records its plugins' digests, so that a resumed run can tell a
/// plugin whose file changed since the run began (`onebrain-eval`'s `check_plugins`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PluginDigest {
    /// The plugin's name.
    pub name: String,
    /// Its version, as its manifest says.
    pub version: String,
    /// The SHA-256 of its component's bytes, in hex.
    pub sha256: String,
}

/// Where the host finds things and how it limits plugins.
#[derive(Clone, Debug, Default)]
pub struct HostOptions {
    /// Directory of precompiled components; `None` compiles on every load.
    pub cache_dir: Option<PathBuf>,
    /// Per-call limits for every plugin.
    pub limits: Limits,
    /// Permissions granted, by plugin name.
    pub grants: crate::grants::Grants,
}

/// Loads plugins: reads the component, checks its API version and world,
/// compiles it (or takes it from the cache) and prepares instantiation.
#[derive(Clone)]
pub struct PluginHost {
    engine: &'static Engine,
    linker: &'static Linker<StoreState>,
    cache: ComponentCache,
    limits: Limits,
    grants: crate::grants::Grants,
}

/// Everything per-plugin a store needs, shared by the plugin's instances.
#[derive(Debug)]
pub(crate) struct PluginShared {
    pub(crate) id: PluginId,
    pub(crate) limits: Limits,
    pub(crate) preopens: Vec<Preopen>,
    pub(crate) engine: &'static Engine,
}

/// A plugin ready to instantiate: compiled, version-checked, with its
/// imports resolved. Cheap to clone.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The manifest it was loaded from.
    pub manifest: PluginManifest,
    /// The WIT version it was built against.
    pub api_version: ApiVersion,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
    /// How long loading took (read, version check, compile or deserialize, link).
    pub load_time: Duration,
    /// The SHA-256 of the component's bytes as read: the version this plugin runs, whatever
    /// happens to its file afterwards (it is read once, and compiled from memory).
    pub sha256: String,
    pub(crate) shared: Arc<PluginShared>,
    pub(crate) pre: InstancePre<StoreState>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("id", &self.shared.id)
            .field("world", &self.manifest.world)
            .field("api_version", &self.api_version)
            .field("cache", &self.cache)
            .finish()
    }
}

impl LoadedPlugin {
    /// The plugin's name and version.
    pub fn id(&self) -> &PluginId {
        &self.shared.id
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Which component it runs, for a run folder's record.
    pub fn digest(&self) -> PluginDigest {
        PluginDigest {
            name: self.manifest.name.clone(),
            version: self.manifest.version.clone(),
            sha256: self.sha256.clone(),
        }
    }

    /// The directories it can read (empty unless granted).
    pub fn preopens(&self) -> &[Preopen] {
        &self.shared.preopens
    }
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost").field("cache", &self.cache).field("limits", &self.limits).finish()
    }
}

impl PluginHost {
    /// A host with `options`. Fails only if wasmtime cannot build its engine.
    pub fn new(options: HostOptions) -> Result<Self, String> {
        let built = engine(options.limits.memory_bytes())?;
        Ok(PluginHost {
            engine: &built.engine,
            linker: &built.linker,
            cache: options.cache_dir.map(ComponentCache::new).unwrap_or_else(ComponentCache::disabled),
            limits: options.limits,
            grants: options.grants,
        })
    }

    /// The limits plugins get.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The component cache.
    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }

    /// Loads the plugin `manifest` describes.
    pub fn load(&self, manifest: &PluginManifest) -> Result<LoadedPlugin, PluginError> {
        let started = Instant::now();
        let id = PluginId { name: manifest.name.clone(), version: manifest.version.clone() };
        let fail = |kind| PluginError::new(&id, kind);

        // A regular file inside the plugin folder, size-checked before it is read.
        let bytes = manifest.read_component().map_err(|e| fail(PluginErrorKind::ComponentFile(e)))?;
        let api_version = check_api_version(&bytes).map_err(fail)?;

        let preopens = self.preopens(manifest).map_err(fail)?;
        let (component, cache) = self
            .cache
            .load(self.engine, &bytes)
            .map_err(|e| fail(PluginErrorKind::Load(format!("{e:#}"))))?;
        let pre = self.instance_pre(&component).map_err(fail)?;
        let shared = PluginShared { id, limits: self.limits.clone(), preopens, engine: self.engine };
        Ok(LoadedPlugin {
            manifest: manifest.clone(),
            api_version,
            cache,
            load_time: started.elapsed(),
            sha256: {
                use sha2::Digest;
                hex::encode(sha2::Sha256::digest(&bytes))
            },
            shared: Arc::new(shared),
            pre,
        })
    }

    /// Loads a bare component file for `world` (a config that names a `.wasm`).
    pub fn load_component(&self, wasm: &Path, world: crate::World) -> Result<LoadedPlugin, PluginError> {
        self.load(&PluginManifest::for_component(wasm, world))
    }

    fn instance_pre(&self, component: &Component) -> Result<InstancePre<StoreState>, PluginErrorKind> {
        self.linker.instantiate_pre(component).map_err(|e| {
            // An import we do not provide: the component wants more than WASI
            // (a world of another version, or a capability we never link).
            PluginErrorKind::Load(format!("{e:#}"))
        })
    }

    fn preopens(&self, m: &PluginManifest) -> Result<Vec<Preopen>, PluginErrorKind> {
        if m.permissions.read_dirs.is_empty() {
            return Ok(Vec::new());
        }
        // Grants are keyed by name, and a name is only an identity when the
        // folder holding the manifest bears it: a folder that copies another
        // plugin's name does not get its grant.
        m.check_folder()
            .map_err(|reason| crate::grants::PermissionError::Unverified { plugin: m.name.clone(), reason })?;
        let granter = CapabilityGranter::new(&m.name, self.grants.get(&m.name))?;
        let mut out = Vec::new();
        for (mount, requested) in &m.permissions.read_dirs {
            out.push(granter.read_dir(&m.dir, requested, mount)?);
        }
        Ok(out)
    }

    /// What the configuration grants `plugin`.
    pub fn grant(&self, plugin: &str) -> Option<&Grant> {
        self.grants.get(plugin)
    }
}

/// Reads and checks the component's `onebrain:api-version` before anything is compiled.
pub(crate) fn check_api_version(bytes: &[u8]) -> Result<ApiVersion, PluginErrorKind> {
    let text = read_api_version(bytes)
        .map_err(|e| PluginErrorKind::Load(format!("not a WebAssembly component: {e}")))?
        .ok_or(PluginErrorKind::MissingApiVersion)?;
    ApiVersion::from_section(&text).ok_or_else(|| PluginErrorKind::IncompatibleApiVersion {
        found: text,
        supported: ApiVersion::supported_list(),
    })
}

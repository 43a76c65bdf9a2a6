//! Installed plugins: discovery from plugin directories, and the reports of
//! `onebrain plugins list | inspect | check`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::adapters::{WasmChecker, WasmDiagnosticParser, WasmDomainAdapter, WasmReward};
use crate::cache::CacheOutcome;
use crate::error::{PluginError, RegistryError};
use crate::grants::Preopen;
use crate::host::PluginHost;
use crate::instance::InstancePolicy;
use crate::limits::Limits;
use crate::manifest::{Permissions, PluginManifest, World};
use crate::text::{escape_line, escape_path};
use crate::wit::read_api_version;

/// One line of `plugins list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The world it implements.
    pub world: World,
    /// Its one-line description.
    pub description: String,
    /// The component file.
    pub component: PathBuf,
    /// Whether the component file is there and acceptable: a regular file in
    /// the plugin folder within the size cap (bundled plugins are built by
    /// `scripts/build-plugins.sh`).
    pub built: bool,
}

/// `plugins inspect NAME`: the manifest and what the component file says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PluginDetails {
    /// The list entry.
    #[serde(flatten)]
    pub info: PluginInfo,
    /// The manifest file.
    pub manifest: PathBuf,
    /// The component's size in bytes, if built.
    pub component_bytes: Option<u64>,
    /// The component's SHA-256, if built.
    pub sha256: Option<String>,
    /// The WIT version in its `onebrain:api-version` section, if present.
    pub api_version: Option<String>,
    /// Why the component file was not read (absent, not a regular file in the
    /// plugin folder, over the size cap), if it was not.
    pub component_error: Option<String>,
    /// What the manifest asks for.
    pub permissions: Permissions,
}

/// `plugins check NAME`: load, instantiate, one smoke call, and the limits it ran under.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its world.
    pub world: World,
    /// True when it loaded, instantiated and answered the smoke call.
    pub ok: bool,
    /// The WIT version it was built against (when it loaded).
    pub api_version: Option<String>,
    /// Whether compiled code came from the cache.
    pub cache: Option<CacheOutcome>,
    /// Load time in milliseconds.
    pub load_ms: f64,
    /// The smoke call and its answer, e.g. `generate(1, 3) -> blocksworld/seed-1-size-3`.
    pub smoke: String,
    /// Time of instantiation plus the smoke call, in milliseconds.
    pub smoke_ms: f64,
    /// The error, when not ok.
    pub error: Option<String>,
    /// The per-call limits.
    pub limits: Limits,
    /// Directories it may read.
    pub preopens: Vec<Preopen>,
}

/// The plugins found in a set of plugin directories.
///
/// A folder that cannot be used (a bad manifest, a manifest that names the
/// plugin after another folder, a name two folders claim) is skipped, not
/// fatal: the other plugins stay usable, [`PluginRegistry::warnings`] names
/// it, and asking for it by name is an error that says why.
#[derive(Clone, Debug, Default)]
pub struct PluginRegistry {
    plugins: BTreeMap<String, PluginManifest>,
    unusable: BTreeMap<String, Unusable>,
}

/// Why a name in the plugin directories cannot be used.
#[derive(Clone, Debug)]
enum Unusable {
    /// Its folder was skipped.
    Broken { dir: PathBuf, reason: String },
    /// Two folders claim it.
    Duplicate { first: PathBuf, second: PathBuf },
}

impl Unusable {
    fn error(&self, name: &str) -> RegistryError {
        match self {
            Unusable::Broken { dir, reason } => {
                RegistryError::Broken { name: name.to_string(), dir: dir.clone(), reason: reason.clone() }
            }
            Unusable::Duplicate { first, second } => {
                RegistryError::Duplicate { name: name.to_string(), first: first.clone(), second: second.clone() }
            }
        }
    }
}

impl PluginRegistry {
    /// Scans each directory for `*/plugin.toml` (one folder per plugin, named
    /// after it). A directory that does not exist is skipped, and so is a
    /// plugin folder that cannot be used (see [`PluginRegistry::warnings`]);
    /// only a plugin directory that cannot be listed is an error.
    pub fn discover(dirs: &[PathBuf]) -> Result<Self, RegistryError> {
        // Every folder with a plugin.toml, by folder name (the plugin's name).
        let mut found: BTreeMap<String, Vec<(PathBuf, Result<PluginManifest, String>)>> = BTreeMap::new();
        for dir in dirs {
            if !dir.is_dir() {
                continue;
            }
            let entries = std::fs::read_dir(dir).map_err(|source| RegistryError::Io { path: dir.clone(), source })?;
            let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                // symlink_metadata: a dangling or looping link is a broken folder, not a hang.
                if std::fs::symlink_metadata(p.join("plugin.toml")).is_err() {
                    continue;
                }
                let folder = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let m = PluginManifest::load(&p).map_err(|e| match e {
                    RegistryError::Manifest { message, .. } => message,
                    other => other.to_string(),
                });
                found.entry(folder).or_default().push((p, m));
            }
        }
        let mut reg = PluginRegistry::default();
        for (name, mut folders) in found {
            if folders.len() > 1 {
                let (first, second) = (folders.swap_remove(0).0, folders.swap_remove(0).0);
                reg.unusable.insert(name, Unusable::Duplicate { first, second });
                continue;
            }
            match folders.pop().expect("one folder") {
                (_, Ok(m)) => {
                    reg.plugins.insert(name, m);
                }
                (dir, Err(reason)) => {
                    reg.unusable.insert(name, Unusable::Broken { dir, reason });
                }
            }
        }
        Ok(reg)
    }

    /// One warning per skipped plugin folder or contested name, each naming
    /// the folders (escaped: a folder's name is plugin-authored text).
    pub fn warnings(&self) -> Vec<String> {
        self.unusable
            .iter()
            .map(|(name, u)| match u {
                Unusable::Broken { dir, reason } => {
                    format!("skipped the plugin folder {}: {}", escape_path(dir), escape_line(reason))
                }
                Unusable::Duplicate { .. } => format!("skipped both folders: {}", u.error(name)),
            })
            .collect()
    }

    /// Adds one manifest; a second plugin of the same name is an error.
    pub fn add(&mut self, m: PluginManifest) -> Result<(), RegistryError> {
        if let Some(u) = self.unusable.get(&m.name) {
            return Err(u.error(&m.name));
        }
        if let Some(prev) = self.plugins.get(&m.name) {
            return Err(RegistryError::Duplicate {
                name: m.name.clone(),
                first: prev.dir.join("plugin.toml"),
                second: m.dir.join("plugin.toml"),
            });
        }
        self.plugins.insert(m.name.clone(), m);
        Ok(())
    }

    /// The manifest of `name`; a skipped folder of that name, or a name two
    /// folders claim, is an error that says so.
    pub fn get(&self, name: &str) -> Result<&PluginManifest, RegistryError> {
        if let Some(u) = self.unusable.get(name) {
            return Err(u.error(name));
        }
        self.plugins.get(name).ok_or_else(|| RegistryError::NotFound(escape_line(name).into_owned()))
    }

    /// Every usable plugin, by world then name.
    pub fn list(&self) -> Vec<PluginInfo> {
        let mut v: Vec<PluginInfo> = self.plugins.values().map(info).collect();
        v.sort_by(|a, b| (a.world, &a.name).cmp(&(b.world, &b.name)));
        v
    }

    /// Resolves a config's plugin reference for `world`: an installed
    /// plugin's name, or a path (relative to `base`) to a `plugin.toml`, a
    /// plugin folder or a bare `.wasm` component. A plugin named by path
    /// that claims the name of another installed plugin is an error naming both.
    pub fn resolve(&self, reference: &str, world: World, base: &Path) -> Result<PluginManifest, RegistryError> {
        let looks_like_path = reference.contains('/') || reference.ends_with(".wasm") || reference.ends_with(".toml");
        let m = if looks_like_path {
            let path = base.join(reference);
            let m = if reference.ends_with(".wasm") {
                if !path.is_file() {
                    return Err(RegistryError::Io {
                        path,
                        source: std::io::Error::from(std::io::ErrorKind::NotFound),
                    });
                }
                PluginManifest::for_component(&path, world)
            } else {
                PluginManifest::load(&path)?
            };
            if let Some(u) = self.unusable.get(&m.name) {
                return Err(u.error(&m.name));
            }
            if let Some(installed) = self.plugins.get(&m.name) {
                if !same_dir(&installed.dir, &m.dir) {
                    return Err(RegistryError::Duplicate {
                        name: m.name.clone(),
                        first: installed.dir.join("plugin.toml"),
                        second: m.component_path(),
                    });
                }
            }
            m
        } else {
            self.get(reference)?.clone()
        };
        if m.world != world {
            return Err(RegistryError::WrongWorld {
                name: m.name,
                found: m.world.to_string(),
                expected: world.to_string(),
            });
        }
        Ok(m)
    }

    /// `plugins inspect NAME`. The component is read under the host's rules
    /// (a regular file in the plugin folder, size-checked first); when it is
    /// refused, `component_error` says why and nothing of it is shown.
    pub fn inspect(&self, name: &str) -> Result<PluginDetails, RegistryError> {
        let m = self.get(name)?;
        let read = m.read_component();
        let bytes = read.as_ref().ok();
        Ok(PluginDetails {
            info: info(m),
            manifest: m.dir.join("plugin.toml"),
            component_bytes: bytes.map(|b| b.len() as u64),
            sha256: bytes.map(|b| {
                use sha2::Digest;
                hex::encode(sha2::Sha256::digest(b))
            }),
            api_version: bytes.and_then(|b| read_api_version(b).ok().flatten()).map(|v| escape_line(&v).into_owned()),
            component_error: read.err(),
            permissions: m.permissions.clone(),
        })
    }

    /// `plugins check NAME`: loads it with `host`, instantiates it and makes
    /// one smoke call. A plugin that fails is reported (`ok == false`), not
    /// returned as an error; only an unknown or unusable name is an error.
    pub fn check(&self, host: &PluginHost, name: &str) -> Result<CheckReport, RegistryError> {
        let m = self.get(name)?;
        Ok(check_manifest(host, m))
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn info(m: &PluginManifest) -> PluginInfo {
    PluginInfo {
        name: m.name.clone(),
        version: m.version.clone(),
        world: m.world,
        description: m.description.clone(),
        component: m.component_path(),
        built: m.check_component().is_ok(),
    }
}

/// Loads, instantiates and smoke-calls one plugin.
pub fn check_manifest(host: &PluginHost, m: &PluginManifest) -> CheckReport {
    let mut report = CheckReport {
        name: m.name.clone(),
        version: m.version.clone(),
        world: m.world,
        ok: false,
        api_version: None,
        cache: None,
        load_ms: 0.0,
        smoke: String::new(),
        smoke_ms: 0.0,
        error: None,
        limits: host.limits().clone(),
        preopens: Vec::new(),
    };
    let plugin = match host.load(m) {
        Ok(p) => p,
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    report.api_version = Some(plugin.api_version.as_str().to_string());
    report.cache = Some(plugin.cache);
    report.load_ms = plugin.load_time.as_secs_f64() * 1e3;
    report.preopens = plugin.preopens().to_vec();
    let t = Instant::now();
    let smoke: Result<String, PluginError> = (|| match m.world {
        World::Reward => {
            let r = WasmReward::new(&plugin, InstancePolicy::Reuse)?;
            let out = r.try_rewards(&onebrain_core::FinishedEpisode::with_outcomes(&[true], 0.8))?;
            Ok(format!("rewards(b0=1, s_J=0.8) -> actor {}, editor {}, judge {}", out.actor, out.editor, out.judge))
        }
        World::DomainAdapter => {
            let d = WasmDomainAdapter::new(&plugin, InstancePolicy::Reuse)?;
            let t = d.try_generate(1, 3)?;
            Ok(format!("name() -> {}; generate(1, 3) -> {}", onebrain_core::DomainAdapter::name(&d), t.id))
        }
        World::DiagnosticParser => {
            let p = WasmDiagnosticParser::new(&plugin, InstancePolicy::Reuse)?;
            let raw = onebrain_core::SolverOutput { exit_code: Some(0), ..Default::default() };
            let out = p.try_parse(&raw, &[])?;
            // A parser built before 0.4.0 has no `review`; it answers nothing, without a call.
            let reviewed = p.try_review("", &onebrain_core::Spec::default(), &[])?;
            Ok(format!(
                "parse(exit 0, no output) -> {} diagnostics; review(no text, empty spec) -> {} diagnostics",
                out.len(),
                reviewed.len()
            ))
        }
        World::FaithfulnessChecker => {
            let c = WasmChecker::new(&plugin, InstancePolicy::Reuse)?;
            let spec = onebrain_core::Spec::default();
            match c.try_check(&spec, &spec, None) {
                Ok(r) => Ok(format!("check(empty, empty) -> faithful {}", r.faithful)),
                // Refusing an empty spec is a fine answer: the plugin ran.
                Err(PluginError { kind: crate::PluginErrorKind::Guest(msg), .. }) => {
                    Ok(format!("check(empty, empty) -> error: {msg}"))
                }
                Err(e) => Err(e),
            }
        }
    })();
    report.smoke_ms = t.elapsed().as_secs_f64() * 1e3;
    match smoke {
        Ok(s) => {
            report.smoke = s;
            report.ok = true;
        }
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}

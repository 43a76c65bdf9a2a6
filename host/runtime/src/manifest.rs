use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::RegistryError;

/// The WIT worlds a plugin can implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// `reward`: episode summary → Actor, Editor and Judge rewards.
    Reward,
    /// `domain-adapter`: domain text, reference PDDL, task generator, describer.
    DomainAdapter,
    /// `diagnostic-parser`: raw planner output → categorised diagnostics.
    DiagnosticParser,
    /// `faithfulness-checker`: reference and candidate spec → faithfulness report.
    FaithfulnessChecker,
}

impl World {
    /// Every world, in the order `plugins list` shows them.
    pub const ALL: [World; 4] = [World::DomainAdapter, World::DiagnosticParser, World::FaithfulnessChecker, World::Reward];

    /// The world's WIT name.
    pub fn as_str(self) -> &'static str {
        match self {
            World::Reward => "reward",
            World::DomainAdapter => "domain-adapter",
            World::DiagnosticParser => "diagnostic-parser",
            World::FaithfulnessChecker => "faithfulness-checker",
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a plugin asks for beyond the default sandbox (which has nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Permissions {
    /// Directories to read, by guest mount point: `"/data" = "data"` mounts the
    /// plugin's `data/` folder read-only at `/data`. Only honoured when the
    /// configuration grants a directory containing it.
    #[serde(default)]
    pub read_dirs: BTreeMap<String, PathBuf>,
}

/// `plugins/<name>/plugin.toml`.
///
/// ```toml
/// name = "paper-rewards"
/// version = "0.1.0"
/// world = "reward"
/// component = "paper-rewards.wasm"
/// description = "R_A = b0 + 0.3 s_J, R_E = b_T - 0.1 T, the Judge table"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginManifest {
    /// The plugin's name; configs refer to it by this name.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The WIT world it implements.
    pub world: World,
    /// The component file, relative to the manifest's directory.
    pub component: PathBuf,
    /// One line for `plugins list`.
    #[serde(default)]
    pub description: String,
    /// Requested permissions.
    #[serde(default)]
    pub permissions: Permissions,
    /// Where the manifest was read from (set by the loader, not written in the file).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl PluginManifest {
    /// Reads and validates `path` (a `plugin.toml`, or a directory holding one).
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let file = if path.is_dir() { path.join("plugin.toml") } else { path.to_path_buf() };
        let text = std::fs::read_to_string(&file).map_err(|source| RegistryError::Io { path: file.clone(), source })?;
        let mut m = Self::parse(&text).map_err(|message| RegistryError::Manifest { path: file.clone(), message })?;
        m.dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(m)
    }

    /// Parses manifest text (no I/O); `dir` is left empty.
    pub fn parse(text: &str) -> Result<Self, String> {
        let m: PluginManifest = toml::from_str(text).map_err(|e| e.to_string())?;
        if m.name.is_empty() || !m.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("name `{}` must be non-empty ASCII letters, digits, `-` or `_`", m.name));
        }
        if m.version.is_empty() {
            return Err("version must not be empty".into());
        }
        Ok(m)
    }

    /// A manifest for a bare `.wasm` named in a config: named after the file,
    /// implementing the world the caller needs, with no permissions.
    pub fn for_component(wasm: &Path, world: World) -> Self {
        let name = wasm.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "component".into());
        PluginManifest {
            name,
            version: "0.0.0".into(),
            world,
            component: PathBuf::from(wasm.file_name().unwrap_or_default()),
            description: format!("{} (loaded by path)", wasm.display()),
            permissions: Permissions::default(),
            dir: wasm.parent().map(Path::to_path_buf).unwrap_or_default(),
        }
    }

    /// The component file's full path.
    pub fn component_path(&self) -> PathBuf {
        self.dir.join(&self.component)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_manifest() {
        let m = PluginManifest::parse(
            r#"
name = "blocksworld"
version = "0.1.0"
world = "domain-adapter"
component = "blocksworld.wasm"
description = "PlanBench BlocksWorld"
[permissions]
read-dirs = { "/data" = "data" }
"#,
        )
        .unwrap();
        assert_eq!(m.world, World::DomainAdapter);
        assert_eq!(m.permissions.read_dirs["/data"], PathBuf::from("data"));
    }

    #[test]
    fn rejects_unknown_keys_worlds_and_bad_names() {
        let base = "version = \"1\"\ncomponent = \"x.wasm\"\n";
        assert!(PluginManifest::parse(&format!("name = \"x\"\nworld = \"reward\"\n{base}extra = 1")).is_err());
        assert!(PluginManifest::parse(&format!("name = \"x\"\nworld = \"rewards\"\n{base}")).is_err());
        assert!(PluginManifest::parse(&format!("name = \"../x\"\nworld = \"reward\"\n{base}")).is_err());
        assert!(PluginManifest::parse(&format!("name = \"x\"\nworld = \"reward\"\n{base}[permissions]\nnet = true"))
            .is_err());
    }
}

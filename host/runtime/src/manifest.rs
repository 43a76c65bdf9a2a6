use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use onebrain_core::config_keys::suggest_near_key;
use serde::{Deserialize, Serialize};

use crate::error::RegistryError;
use crate::files;
use crate::text::{escape_line, escape_text, is_identifier};

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

/// Per-call limits that grow with the task, for a `faithfulness-checker`, whose work grows
/// with the reference task: each call gets `fuel-base + fuel-per-unit × units` fuel and
/// `timeout-ms-base + timeout-us-per-unit × units / 1000` ms of wall clock, each capped by
/// the host's ceiling ([`Limits::max_fuel`](crate::Limits::max_fuel),
/// [`Limits::max_timeout_ms`](crate::Limits::max_timeout_ms)). `units` is
/// [`CallBudget::units`]: the reference task's ground actions plus ground atoms.
///
/// ```toml
/// [budget]
/// fuel-base = 4_000_000_000
/// fuel-per-unit = 40_000_000
/// timeout-ms-base = 2_000
/// timeout-us-per-unit = 10_000
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CallBudget {
    /// Fuel every call gets.
    pub fuel_base: u64,
    /// Fuel more per unit of the task's size.
    pub fuel_per_unit: u64,
    /// Wall clock every call gets, in milliseconds.
    pub timeout_ms_base: u64,
    /// Wall clock more per unit of the task's size, in microseconds.
    pub timeout_us_per_unit: u64,
}

impl CallBudget {
    /// The size a budget is measured in: the reference task's ground actions plus ground
    /// atoms, as `onebrain-pddl` grounds it (what the checker's own work budget grows with);
    /// 0 when the reference does not parse or ground (the checker then reports why).
    pub fn units(reference: &onebrain_core::Spec) -> u64 {
        use onebrain_pddl::{ground, parse_domain, parse_problem};
        let (Ok(d), Ok(p)) = (parse_domain(&reference.domain), parse_problem(&reference.problem)) else { return 0 };
        ground(&d, &p).map_or(0, |t| (t.num_atoms() + t.actions().len()) as u64)
    }
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
    /// The plugin's name, which is also its folder's name; configs and
    /// grants refer to it by this name, and a domain adapter's `name()` must say it.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The WIT world it implements.
    pub world: World,
    /// The component file, relative to the manifest's directory: plain names
    /// only (no absolute path, no `..`).
    pub component: PathBuf,
    /// One line for `plugins list`.
    #[serde(default)]
    pub description: String,
    /// Requested permissions.
    #[serde(default)]
    pub permissions: Permissions,
    /// Per-call limits that grow with the task (checkers only); without it a call gets the
    /// host's `[limits]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<CallBudget>,
    /// Where the manifest was read from (set by the loader, not written in the file).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl PluginManifest {
    /// Reads and validates `path` (a `plugin.toml`, or a directory holding one).
    ///
    /// The manifest must sit in a folder named after the plugin: that name is
    /// the plugin's one identity (configs, grants and domains all use it), so
    /// a folder cannot claim another plugin's name. The file itself is read
    /// under the rules of the component file (a regular file in the folder,
    /// at most 64 KiB), so a FIFO or `/dev/zero` in its place cannot hang or
    /// exhaust the host.
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let file = if path.is_dir() { path.join("plugin.toml") } else { path.to_path_buf() };
        let bad = |message: String| RegistryError::Manifest { path: file.clone(), message };
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = file.file_name().map(PathBuf::from).unwrap_or_default();
        let bytes = crate::files::read(&dir, &name, crate::files::MAX_MANIFEST_BYTES).map_err(bad)?;
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let mut m = Self::parse(&text).map_err(|message| bad(escape_text(&message).into_owned()))?;
        m.dir = dir;
        m.check_folder().map_err(bad)?;
        Ok(m)
    }

    /// Parses manifest text (no I/O); `dir` is left empty.
    ///
    /// Refuses a name that is not an identifier, a version or description
    /// with control characters, and a `component` that is absolute or has `..`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let m: PluginManifest = toml::from_str(text).map_err(|e| suggest_near_key(&e.to_string()))?;
        if !is_identifier(&m.name) {
            return Err(format!(
                "name `{}` must be 1 to 64 ASCII letters, digits, `-` or `_`",
                escape_line(&m.name)
            ));
        }
        if m.version.is_empty()
            || m.version.len() > 64
            || !m.version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        {
            return Err(format!(
                "version `{}` must be 1 to 64 ASCII letters, digits, `.`, `-` or `+`",
                escape_line(&m.version)
            ));
        }
        if m.description.len() > 1024 || escape_line(&m.description) != m.description {
            return Err("description must be one line of at most 1024 bytes without control characters".into());
        }
        files::check_relative(&m.component).map_err(|e| format!("component: {e}"))?;
        if m.budget.is_some() && m.world != World::FaithfulnessChecker {
            // Only a checker's call carries a task whose size the host can measure.
            return Err(format!("[budget] applies to faithfulness-checker plugins only, not to a {}", m.world));
        }
        Ok(m)
    }

    /// Checks that the folder holding the manifest is named after the plugin.
    pub fn check_folder(&self) -> Result<(), String> {
        // The name as the plugin directory lists it (a folder may be a
        // symlink to a build folder of another name); `.` has none of its own.
        let folder_name = match self.dir.file_name() {
            Some(n) => n.to_string_lossy().into_owned(),
            None => {
                let canon = self.dir.canonicalize().unwrap_or_default();
                canon.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            }
        };
        if folder_name != self.name {
            return Err(format!(
                "the manifest names the plugin `{}`, but its folder is `{}`: a plugin's name is its folder's name",
                self.name,
                escape_line(&folder_name)
            ));
        }
        Ok(())
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
            budget: None,
            dir: wasm.parent().map(Path::to_path_buf).unwrap_or_default(),
        }
    }

    /// The component file's full path (as written; [`PluginManifest::read_component`]
    /// is how the host reads it).
    pub fn component_path(&self) -> PathBuf {
        self.dir.join(&self.component)
    }

    /// Checks the component file without reading it: a regular file inside
    /// the plugin folder, at most [`MAX_COMPONENT_BYTES`](crate::MAX_COMPONENT_BYTES).
    pub fn check_component(&self) -> Result<(), String> {
        files::resolve(&self.dir, &self.component, files::MAX_COMPONENT_BYTES).map(|_| ())
    }

    /// Reads the component file under the rules of [`PluginManifest::check_component`].
    pub fn read_component(&self) -> Result<Vec<u8>, String> {
        files::read(&self.dir, &self.component, files::MAX_COMPONENT_BYTES)
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
    fn a_budget_is_read_for_checkers_and_refused_elsewhere() {
        let m = |world: &str, extra: &str| {
            PluginManifest::parse(&format!(
                "name = \"x\"\nversion = \"1\"\nworld = \"{world}\"\ncomponent = \"x.wasm\"\n{extra}"
            ))
        };
        let budget = "[budget]\nfuel-base = 10\nfuel-per-unit = 2\ntimeout-ms-base = 3\ntimeout-us-per-unit = 4\n";
        let c = m("faithfulness-checker", budget).unwrap();
        assert_eq!(c.budget, Some(CallBudget { fuel_base: 10, fuel_per_unit: 2, timeout_ms_base: 3, timeout_us_per_unit: 4 }));
        assert!(m("reward", budget).unwrap_err().contains("faithfulness-checker plugins only"));
        assert!(m("faithfulness-checker", "[budget]\nfuel = 1\n").is_err());
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

    #[test]
    fn rejects_component_paths_out_of_the_folder_and_control_characters() {
        let m = |component: &str, extra: &str| {
            PluginManifest::parse(&format!(
                "name = \"x\"\nversion = \"1\"\nworld = \"reward\"\ncomponent = {component:?}\n{extra}"
            ))
        };
        assert!(m("x.wasm", "").is_ok());
        for bad in ["/etc/shadow", "../../etc/shadow", "build/../../x.wasm", "/dev/zero", ""] {
            let e = m(bad, "").unwrap_err();
            assert!(e.starts_with("component:"), "{bad}: {e}");
        }
        assert!(m("x.wasm", "description = \"ok\\u001b[2K\"").unwrap_err().contains("control characters"));
        let e = PluginManifest::parse("name = \"x\"\nversion = \"1\\u001b]0;t\"\nworld = \"reward\"\ncomponent = \"x.wasm\"")
            .unwrap_err();
        assert!(e.contains("version") && !e.contains('\x1b'), "{e}");
    }

    #[test]
    fn a_manifest_must_sit_in_a_folder_of_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |folder: &str, name: &str| {
            let dir = tmp.path().join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            let text = format!("name = \"{name}\"\nversion = \"1\"\nworld = \"reward\"\ncomponent = \"x.wasm\"\n");
            std::fs::write(dir.join("plugin.toml"), text).unwrap();
            dir
        };
        assert_eq!(PluginManifest::load(&write("mine", "mine")).unwrap().name, "mine");
        let e = PluginManifest::load(&write("evil", "trusted-data")).unwrap_err().to_string();
        assert!(e.contains("`trusted-data`") && e.contains("`evil`"), "{e}");
    }
}

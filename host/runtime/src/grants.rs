//! Every permission decision of the host, in one place (Zed's
//! `capability_granter.rs`): a plugin runs with nothing unless its manifest
//! asks for a directory and the configuration grants one that contains it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::{escape_line, escape_path};

/// What the configuration allows one plugin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Grant {
    /// Host directories the plugin may read (itself and everything below it).
    #[serde(default)]
    pub read_dirs: Vec<PathBuf>,
}

/// The configuration's grants, by plugin name.
pub type Grants = BTreeMap<String, Grant>;

/// A directory the plugin sees, read-only, at `guest`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preopen {
    /// The canonical host directory.
    pub host: PathBuf,
    /// Where the guest sees it, e.g. `/data`.
    pub guest: String,
}

/// Why a requested permission was refused.
#[derive(Debug, thiserror::Error)]
pub enum PermissionError {
    /// The requested directory is not inside any directory the configuration grants.
    #[error("`{plugin}` asks to read {}, which is not inside a directory the configuration grants it", escape_path(.requested))]
    NotGranted {
        /// The plugin.
        plugin: String,
        /// The canonical requested directory.
        requested: PathBuf,
    },
    /// A requested or granted path does not exist or is not a directory.
    #[error("{} is not an existing directory: {reason}", escape_path(.path))]
    NotADirectory {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The plugin's name is not verified by its folder's name, so no grant
    /// made to that name applies to it.
    #[error("`{plugin}` cannot receive the grants of that name: {reason}")]
    Unverified {
        /// The name the manifest claims.
        plugin: String,
        /// Why it is not verified.
        reason: String,
    },
    /// The guest mount point is not an absolute, normalised path.
    #[error("mount point `{}` must be an absolute path without `.` or `..` or control characters, other than `/`", escape_line(.mount))]
    BadMount {
        /// The mount point as written.
        mount: String,
    },
}

/// Decides which directories one plugin may see.
#[derive(Clone, Debug)]
pub struct CapabilityGranter {
    plugin: String,
    granted: Vec<PathBuf>,
}

impl CapabilityGranter {
    /// The granter for `plugin` under `grant`. Granted paths are
    /// canonicalised now, so a symlink in a granted path cannot be swapped later.
    pub fn new(plugin: &str, grant: Option<&Grant>) -> Result<Self, PermissionError> {
        let granted = grant
            .map(|g| g.read_dirs.iter().map(|p| canonical_dir(p)).collect::<Result<Vec<_>, _>>())
            .transpose()?
            .unwrap_or_default();
        Ok(CapabilityGranter { plugin: plugin.to_string(), granted })
    }

    /// Checks one manifest request: read `requested` (relative to the
    /// plugin's directory `base`, or absolute), mounted at `mount`.
    ///
    /// The request is resolved through symlinks and `..` first, then must lie
    /// inside a granted directory: a request for `data/../../etc` or for a
    /// symlink that points outside is refused.
    pub fn read_dir(&self, base: &Path, requested: &Path, mount: &str) -> Result<Preopen, PermissionError> {
        check_mount(mount)?;
        let requested = canonical_dir(&base.join(requested))?;
        if self.granted.iter().any(|g| requested.starts_with(g)) {
            Ok(Preopen { host: requested, guest: mount.to_string() })
        } else {
            Err(PermissionError::NotGranted { plugin: self.plugin.clone(), requested })
        }
    }
}

fn canonical_dir(path: &Path) -> Result<PathBuf, PermissionError> {
    let canon = path
        .canonicalize()
        .map_err(|e| PermissionError::NotADirectory { path: path.to_path_buf(), reason: e.to_string() })?;
    if !canon.is_dir() {
        return Err(PermissionError::NotADirectory { path: path.to_path_buf(), reason: "not a directory".into() });
    }
    Ok(canon)
}

fn check_mount(mount: &str) -> Result<(), PermissionError> {
    // Checked on the text, not with `Path::components`, which silently drops
    // `.` segments: the mount must be exactly what the guest will see.
    let ok = mount.len() > 1
        && mount.starts_with('/')
        && !mount.contains('\\')
        && !mount.chars().any(char::is_control)
        && mount[1..].split('/').all(|s| !s.is_empty() && s != "." && s != "..");
    if ok {
        Ok(())
    } else {
        Err(PermissionError::BadMount { mount: mount.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let plugin = tmp.path().join("plugins/p");
        let data = plugin.join("data");
        std::fs::create_dir_all(data.join("sub")).unwrap();
        std::fs::create_dir_all(tmp.path().join("secret")).unwrap();
        (tmp, plugin, data)
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let (_tmp, plugin, _) = setup();
        let g = CapabilityGranter::new("p", None).unwrap();
        assert!(matches!(g.read_dir(&plugin, Path::new("data"), "/data"), Err(PermissionError::NotGranted { .. })));
    }

    #[test]
    fn a_granted_directory_and_its_subdirectories_are_allowed() {
        let (_tmp, plugin, data) = setup();
        let g = CapabilityGranter::new("p", Some(&Grant { read_dirs: vec![data.clone()] })).unwrap();
        let p = g.read_dir(&plugin, Path::new("data"), "/data").unwrap();
        assert_eq!(p.host, data.canonicalize().unwrap());
        assert_eq!(p.guest, "/data");
        assert!(g.read_dir(&plugin, Path::new("data/sub"), "/sub").is_ok());
    }

    #[test]
    fn read_dir_rejects_escape_attempts() {
        let (tmp, plugin, data) = setup();
        let g = CapabilityGranter::new("p", Some(&Grant { read_dirs: vec![data.clone()] })).unwrap();
        // `..` out of the granted directory.
        for req in ["data/..", "data/../../../secret", "../../secret", "/etc"] {
            assert!(
                matches!(g.read_dir(&plugin, Path::new(req), "/d"), Err(PermissionError::NotGranted { .. })),
                "{req} must be refused"
            );
        }
        // A symlink inside the grant that points outside it.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("secret"), data.join("link")).unwrap();
            assert!(matches!(
                g.read_dir(&plugin, Path::new("data/link"), "/d"),
                Err(PermissionError::NotGranted { .. })
            ));
        }
        // A sibling whose name merely starts with the granted name.
        std::fs::create_dir_all(plugin.join("data2")).unwrap();
        assert!(g.read_dir(&plugin, Path::new("data2"), "/d").is_err());
    }

    #[test]
    fn bad_mount_points_are_rejected() {
        let (_tmp, plugin, data) = setup();
        let g = CapabilityGranter::new("p", Some(&Grant { read_dirs: vec![data] })).unwrap();
        for m in ["data", "/", "/a/../b", "/./a", "//a", "/a/", "", "\\a", "/d\x1b[2J"] {
            assert!(
                matches!(g.read_dir(&plugin, Path::new("data"), m), Err(PermissionError::BadMount { .. })),
                "{m:?} must be refused"
            );
        }
    }

    #[test]
    fn missing_directories_are_errors() {
        let (_tmp, plugin, _) = setup();
        assert!(CapabilityGranter::new("p", Some(&Grant { read_dirs: vec![plugin.join("nope")] })).is_err());
        let g = CapabilityGranter::new("p", Some(&Grant { read_dirs: vec![plugin.clone()] })).unwrap();
        assert!(matches!(g.read_dir(&plugin, Path::new("nope"), "/d"), Err(PermissionError::NotADirectory { .. })));
    }
}

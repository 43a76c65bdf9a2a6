//! Files a plugin folder names: its `plugin.toml` and its component.
//!
//! Both are written by whoever made the plugin, so the host reads them on
//! its own terms: a relative path of plain names inside the plugin's folder
//! (no absolute path, no `..`), resolved through symlinks only as far as
//! they stay in that folder, a regular file (not a device such as
//! `/dev/zero`, not a FIFO that would block the host forever), and no
//! larger than a cap checked before a byte is read.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The largest component the host reads. The bundled plugins are 0.2–1.5 MB;
/// 64 MiB leaves room for big honest ones and stops a file that would
/// exhaust the host's memory.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// The largest `plugin.toml` the host reads (a real one is a few hundred bytes).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 10;

/// Checks that `rel` is a path of plain names: not absolute, no `..`, not empty.
pub(crate) fn check_relative(rel: &Path) -> Result<(), String> {
    let mut names = 0;
    for c in rel.components() {
        match c {
            Component::Normal(_) => names += 1,
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("`{}` leaves the plugin folder (`..`)", rel.display())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("`{}` is absolute; it must be relative to the plugin folder", rel.display()))
            }
        }
    }
    if names == 0 {
        return Err("the path is empty".into());
    }
    Ok(())
}

/// Resolves `rel` inside `dir` and checks it is a regular file within the
/// folder and at most `cap` bytes; returns its canonical path. Reads nothing.
pub(crate) fn resolve(dir: &Path, rel: &Path, cap: u64) -> Result<PathBuf, String> {
    check_relative(rel)?;
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let folder = dir.canonicalize().map_err(|e| format!("plugin folder {}: {e}", dir.display()))?;
    let path = folder.join(rel);
    let canon = path.canonicalize().map_err(|e| format!("{}: {e}", rel.display()))?;
    if !canon.starts_with(&folder) {
        return Err(format!("`{}` is a symlink out of the plugin folder", rel.display()));
    }
    // The canonical path has no symlinks left: this is the file itself.
    let meta = std::fs::metadata(&canon).map_err(|e| format!("{}: {e}", rel.display()))?;
    check_meta(rel, &meta, cap)?;
    Ok(canon)
}

fn check_meta(rel: &Path, meta: &std::fs::Metadata, cap: u64) -> Result<(), String> {
    if !meta.is_file() {
        return Err(format!("`{}` is not a regular file ({})", rel.display(), kind(meta)));
    }
    if meta.len() > cap {
        return Err(format!("`{}` is {} bytes, more than the limit of {cap}", rel.display(), meta.len()));
    }
    Ok(())
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a plain file"
    }
}

/// Reads `rel` inside `dir` under the rules of this module.
///
/// The checks are made again on the opened file (`fstat`), and the open
/// neither follows a final symlink nor blocks on a FIFO, so a file swapped
/// between the check and the read is refused too; the read stops at `cap`.
pub(crate) fn read(dir: &Path, rel: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let canon = resolve(dir, rel, cap)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options.open(&canon).map_err(|e| format!("{}: {e}", rel.display()))?;
    let meta = file.metadata().map_err(|e| format!("{}: {e}", rel.display()))?;
    check_meta(rel, &meta, cap)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", rel.display()))?;
    if bytes.len() as u64 > cap {
        return Err(format!("`{}` grew past the limit of {cap} bytes while being read", rel.display()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_names() {
        assert!(check_relative(Path::new("x.wasm")).is_ok());
        assert!(check_relative(Path::new("./build/x.wasm")).is_ok());
        for bad in ["/etc/shadow", "../x.wasm", "a/../../x", "", "."] {
            assert!(check_relative(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_a_small_regular_file_and_refuses_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.wasm"), b"abc").unwrap();
        std::fs::write(tmp.path().join("outside"), b"secret").unwrap();
        assert_eq!(read(&dir, Path::new("a.wasm"), 10).unwrap(), b"abc");
        let e = read(&dir, Path::new("a.wasm"), 2).unwrap_err();
        assert!(e.contains("more than the limit"), "{e}");
        assert!(read(&dir, Path::new("sub"), 10).unwrap_err().contains("directory"));
        assert!(read(&dir, Path::new("missing"), 10).is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a.wasm", dir.join("inside")).unwrap();
            assert_eq!(read(&dir, Path::new("inside"), 10).unwrap(), b"abc");
            std::os::unix::fs::symlink(tmp.path().join("outside"), dir.join("out")).unwrap();
            let e = read(&dir, Path::new("out"), 10).unwrap_err();
            assert!(e.contains("symlink out of the plugin folder") && !e.contains("secret"), "{e}");
        }
    }
}

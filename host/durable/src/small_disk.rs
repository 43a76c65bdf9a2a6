//! A disk that fills up, for tests that inject a full disk.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The ballast file [`SmallDisk::fill_to`] writes at the disk's root.
const BALLAST: &str = ".ballast";

/// A size-limited tmpfs mounted for the life of this value: a real filesystem that answers
/// ENOSPC when it is full, for tests that fill a disk while a run writes. Mounting needs root
/// (CI and the development machines run as root); [`SmallDisk::mount`] says why it cannot
/// otherwise, and a test skips with that message.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` (rounded up to whole pages by the kernel) on a new folder
    /// under the temporary folder.
    pub fn mount(bytes: u64) -> Result<SmallDisk, String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        if uid != 0 {
            return Err(format!("mounting a size-limited tmpfs needs root, and this test runs as uid {uid}"));
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("onebrain-small-disk-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(SmallDisk { dir })
    }

    /// The mounted folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Bytes free.
    pub fn available(&self) -> u64 {
        let path = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes()).expect("no NUL in a temporary path");
        // SAFETY: `path` is a valid C string and `st` a plain struct statvfs fills in.
        unsafe {
            let mut st: libc::statvfs = std::mem::zeroed();
            if libc::statvfs(path.as_ptr(), &mut st) != 0 {
                return 0;
            }
            st.f_bavail as u64 * st.f_frsize as u64
        }
    }

    /// Fills the disk with a ballast file until about `leave` bytes are free (to the page), so
    /// that the next writes run into a full disk at a chosen point; [`SmallDisk::unfill`]
    /// frees the space again.
    pub fn fill_to(&self, leave: u64) -> std::io::Result<()> {
        self.unfill();
        let mut f = std::fs::File::create(self.dir.join(BALLAST))?;
        let chunk = vec![0u8; 1 << 16];
        loop {
            let free = self.available();
            if free <= leave {
                return Ok(());
            }
            let n = ((free - leave) as usize).min(chunk.len());
            match f.write_all(&chunk[..n]).and_then(|()| f.flush()) {
                Ok(()) => {}
                // Full before `leave`: the page rounding.
                Err(e) if crate::error::is_full(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Frees the space of the ballast [`SmallDisk::fill_to`] wrote, and removes it.
    pub fn unfill(&self) {
        crate::atomic::free_and_remove(&self.dir.join(BALLAST));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a file a test left open does not keep the mount.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI failed once when the space of a removed ballast stayed taken: a child process another
    /// test thread had just forked still held the ballast open (until its exec closed it).
    #[test]
    fn unfill_frees_the_space_even_while_another_process_holds_the_ballast_open() {
        let disk = match SmallDisk::mount(256 * 1024) {
            Ok(disk) => disk,
            Err(why) => return eprintln!("skipping: {why}"),
        };
        let empty = disk.available();
        disk.fill_to(8 * 1024).unwrap();
        let held = std::fs::File::open(disk.path().join(BALLAST)).unwrap();
        disk.unfill();
        assert!(disk.available() + 16 * 1024 >= empty, "{} of {empty} bytes free", disk.available());
        drop(held);
    }
}

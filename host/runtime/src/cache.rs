//! Compiled components on disk, so a plugin loads in about a millisecond
//! after its first use instead of the ~60 ms Cranelift takes (DESIGN.md).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

/// How a component was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// Deserialized from a precompiled file in the cache.
    Hit,
    /// Compiled now and written to the cache.
    Compiled,
    /// Compiled now; no cache is configured (or writing to it failed).
    Uncached,
}

/// A directory of precompiled components, keyed by the SHA-256 of the
/// component bytes together with the engine's compatibility hash (wasmtime
/// version, target and every setting that changes compiled code), so a
/// changed plugin or a changed engine never reads a stale entry.
#[derive(Clone, Debug)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// A cache in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ComponentCache { dir: Some(dir.into()) }
    }

    /// No cache: every load compiles.
    pub fn disabled() -> Self {
        ComponentCache { dir: None }
    }

    /// The cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The key of `bytes` under `engine`.
    pub fn key(engine: &Engine, bytes: &[u8]) -> String {
        struct ShaHasher(Sha256);
        impl Hasher for ShaHasher {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, b: &[u8]) {
                self.0.update(b);
            }
        }
        let mut h = ShaHasher(Sha256::new());
        h.0.update(bytes);
        engine.precompile_compatibility_hash().hash(&mut h);
        hex::encode(h.0.finalize())
    }

    /// The component for `bytes`: from the cache if present and loadable,
    /// else compiled (and stored).
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Uncached));
        };
        let path = dir.join(format!("{}.cwasm", Self::key(engine, bytes)));
        // Read into memory rather than `deserialize_file`: that one maps the
        // file, and anything truncating it in place while the component is in
        // use (a user clearing the cache, a crashed writer) would crash the
        // host with SIGBUS. The copy costs well under a millisecond.
        if let Ok(cached) = std::fs::read(&path) {
            // SAFETY: `deserialize` runs native code from these bytes, so they
            // must come from `precompile_component` of a compatible engine.
            // The cache directory is the host's own (never a plugin's),
            // entries are written atomically below, the key covers both the
            // component bytes and the engine settings, and wasmtime re-checks
            // the engine compatibility header before accepting the bytes.
            if let Ok(c) = unsafe { Component::deserialize(engine, &cached) } {
                return Ok((c, CacheOutcome::Hit));
            }
            // A truncated or foreign file: compile again and overwrite it.
        }
        let compiled = engine.precompile_component(bytes)?;
        let outcome = match write_atomically(dir, &path, &compiled) {
            Ok(()) => CacheOutcome::Compiled,
            Err(_) => CacheOutcome::Uncached,
        };
        // SAFETY: `compiled` was produced just now by `precompile_component` of this engine.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, outcome))
    }
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

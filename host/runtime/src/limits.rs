use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Per-call limits on a plugin. The defaults are generous for the bundled
/// plugins (the slowest, a domain `describe` of a 20-object Logistics task,
/// takes well under a millisecond) and tight enough that a runaway guest
/// costs the episode at most a couple of seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct Limits {
    /// Wall-clock limit of one call, in milliseconds (epoch interruption).
    pub timeout_ms: u64,
    /// Instruction budget of one call (wasmtime fuel units, roughly one per
    /// WebAssembly instruction).
    pub fuel: u64,
    /// Cap on the guest's linear memory, in MiB.
    pub memory_mb: u64,
    /// Cap on the data one call may return (strings and lists, summed), in KiB.
    pub max_output_kb: u64,
    /// How much of the guest's stdout and stderr is kept for error reports, in KiB.
    pub stderr_kb: u64,
    /// How much of one message a plugin writes (its error string, a
    /// diagnostic, a line of explanation) is kept, in KiB.
    pub message_kb: u64,
    /// The largest |reward| a reward plugin may return; NaN and ±inf are
    /// always refused. The paper's rewards stay within ±2.
    pub reward_bound: f32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 2_000,
            // ~10^10 instructions: a few seconds of guest code, so the clock
            // (timeout_ms) usually fires first and fuel catches a guest that
            // spins in a tight loop the epoch check would also catch.
            fuel: 10_000_000_000,
            memory_mb: 64,
            max_output_kb: 1024,
            stderr_kb: 16,
            message_kb: 4,
            reward_bound: 100.0,
        }
    }
}

impl Limits {
    /// The timeout as a [`Duration`].
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mb.saturating_mul(1 << 20)
    }

    /// The address space one of the guest's linear memories reserves:
    /// the memory cap plus guard regions ([`memory_address_space`](crate::memory_address_space)).
    pub fn address_space_bytes(&self) -> u64 {
        crate::host::memory_address_space(self.memory_bytes())
    }

    /// The output cap in bytes.
    pub fn max_output_bytes(&self) -> usize {
        usize::try_from(self.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }

    /// The cap on one message, in bytes.
    pub fn message_bytes(&self) -> usize {
        usize::try_from(self.message_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }

    /// How many bytes wasmtime may copy out of the guest for one call
    /// (its "hostcall fuel"; its default is 128 MiB). Lifting a result costs
    /// its string bytes plus, per list element, the element's size on the
    /// host (24 bytes for a `String`), so four times the output cap is ample
    /// for any answer under the cap, while a list that points at one string
    /// a million times stops being copied here, not after 128 MiB.
    pub fn copy_bytes(&self) -> usize {
        self.max_output_bytes().saturating_mul(4).max(64 << 10)
    }

    /// The captured-stderr cap in bytes.
    pub fn stderr_bytes(&self) -> usize {
        usize::try_from(self.stderr_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }
}

/// The store's resource limiter: caps linear memory and tables, and remembers
/// that it refused a growth, so a trap that follows (Rust's allocator aborts
/// when `memory.grow` fails) is reported as [`MemoryLimit`](crate::PluginErrorKind::MemoryLimit)
/// rather than as an anonymous `unreachable`.
#[derive(Debug)]
pub(crate) struct StoreLimiter {
    memory_bytes: usize,
    pub(crate) hit: bool,
}

/// Table elements a guest may have: Rust guests use a few hundred; the cap
/// only stops a guest that grows tables to eat host memory.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl StoreLimiter {
    pub(crate) fn new(memory_bytes: u64) -> Self {
        StoreLimiter { memory_bytes: usize::try_from(memory_bytes).unwrap_or(usize::MAX), hit: false }
    }
}

impl wasmtime::ResourceLimiter for StoreLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        // A component made by wit-component has a handful of core instances.
        64
    }

    fn memories(&self) -> usize {
        8
    }

    fn tables(&self) -> usize {
        16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn limiter_refuses_growth_past_the_cap_and_remembers() {
        let mut l = StoreLimiter::new(1 << 20);
        assert!(l.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!l.hit);
        assert!(!l.memory_growing(1 << 20, (1 << 20) + 65536, None).unwrap());
        assert!(l.hit);
    }

    #[test]
    fn limits_parse_from_toml_and_reject_unknown_keys() {
        let l: Limits = toml::from_str("timeout-ms = 50\nmemory-mb = 8").unwrap();
        assert_eq!(l.timeout(), Duration::from_millis(50));
        assert_eq!(l.memory_bytes(), 8 << 20);
        assert_eq!(l.fuel, Limits::default().fuel);
        assert!(toml::from_str::<Limits>("timeout = 5").is_err());
    }
}

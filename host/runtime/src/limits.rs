use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::manifest::CallBudget;

/// How often the epoch advances. A guest is interrupted at most one tick
/// after its deadline (a rough upper bound, as Zed's `wasm_engine()` puts
/// it); 10 ms keeps the ticking thread's cost negligible.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The guard regions around each linear memory, after it and before it. Only
/// address space, never memory: 2 MiB covers the static offset of any load or
/// store a compiler emits for a Rust struct, so Cranelift folds those offsets
/// into one bounds check, and the region before stays as wasmtime's defence in
/// depth against a code-generator bug. (wasmtime's default is 32 MiB each side.)
pub(crate) const MEMORY_GUARD_BYTES: u64 = 2 << 20;

/// The most a 32-bit linear memory can address (65,536 pages of 64 KiB).
const WASM32_MEMORY_BYTES: u64 = 4 << 30;

/// The address space one linear memory reserves under a memory cap of
/// `memory_bytes`: the cap itself (so a memory never moves while it grows up
/// to the cap; the [`StoreLimiter`] refuses
/// growth past it) plus the two guard regions. Default limits: 64 MiB + 4 MiB.
///
/// wasmtime's default is 4 GiB + 2 × 32 MiB per memory whatever the cap, so
/// that 32-bit loads need no bounds check: under `ulimit -v 8000000`, common on
/// shared clusters, the second plugin could not load ("mmap failed to reserve
/// 0x104000000 bytes"). The price is an explicit bounds check per
/// load and store (not measured against the old setting; guest calls take
/// microseconds beside the model's milliseconds).
pub fn memory_address_space(memory_bytes: u64) -> u64 {
    reservation(memory_bytes) + 2 * MEMORY_GUARD_BYTES
}

/// The engine's `memory_reservation` for a memory cap: the cap rounded up to
/// whole WebAssembly pages, at most what a 32-bit memory can address.
pub(crate) fn reservation(memory_bytes: u64) -> u64 {
    memory_bytes.div_ceil(64 << 10).saturating_mul(64 << 10).clamp(64 << 10, WASM32_MEMORY_BYTES)
}

/// How many bytes of data a call returned, for the output cap.
pub(crate) trait OutputSize {
    fn output_size(&self) -> usize;
}

impl OutputSize for String {
    fn output_size(&self) -> usize {
        self.len()
    }
}

impl<T: OutputSize> OutputSize for Vec<T> {
    fn output_size(&self) -> usize {
        self.iter().map(OutputSize::output_size).sum::<usize>() + self.len()
    }
}

impl<T: OutputSize> OutputSize for Option<T> {
    fn output_size(&self) -> usize {
        self.as_ref().map_or(0, OutputSize::output_size)
    }
}

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
    /// The ceiling on the fuel a manifest's `[budget]` may give one call, however large
    /// the task.
    pub max_fuel: u64,
    /// The ceiling on the wall clock a manifest's `[budget]` may give one call, in
    /// milliseconds.
    pub max_timeout_ms: u64,
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
            // About three times what the largest task of the checker's corpus is given (a
            // 20-block BlocksWorld, 3.3e11, results/checker-large/): room for larger tasks,
            // and a bound on what one call can cost whatever a manifest asks.
            max_fuel: 1_000_000_000_000,
            max_timeout_ms: 120_000,
        }
    }
}

impl Limits {
    /// The limits of one call to a plugin whose manifest has `budget`, on a task of `units`
    /// (its [`CallBudget::units`]): the budget's fuel and wall clock, each capped by this
    /// host's ceiling; every other limit as it is.
    pub fn for_task(&self, budget: &CallBudget, units: u64) -> Limits {
        let fuel = budget.fuel_base.saturating_add(budget.fuel_per_unit.saturating_mul(units));
        let us = budget.timeout_us_per_unit.saturating_mul(units) / 1000;
        let timeout_ms = budget.timeout_ms_base.saturating_add(us);
        Limits { fuel: fuel.min(self.max_fuel), timeout_ms: timeout_ms.min(self.max_timeout_ms), ..self.clone() }
    }

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
        memory_address_space(self.memory_bytes())
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

    #[test]
    fn a_budget_scales_with_the_task_within_the_ceiling() {
        let b = CallBudget { fuel_base: 1_000, fuel_per_unit: 10, timeout_ms_base: 100, timeout_us_per_unit: 500 };
        let host = Limits { max_fuel: 50_000, max_timeout_ms: 1_000, ..Limits::default() };
        let small = host.for_task(&b, 100);
        assert_eq!((small.fuel, small.timeout_ms), (2_000, 150));
        assert_eq!(small.memory_mb, host.memory_mb);
        let huge = host.for_task(&b, u64::MAX);
        assert_eq!((huge.fuel, huge.timeout_ms), (50_000, 1_000));
    }
}

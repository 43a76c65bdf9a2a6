//! The process heap's policy for the model's large, short-lived buffers.
//!
//! A learner step allocates and frees buffers of megabytes per layer (attention scores,
//! activations kept for backward). glibc serves any block over its mmap threshold (128 KiB at
//! first, at most 32 MiB as it adapts) with a fresh mapping and unmaps it on free, so every
//! such buffer costs page faults and the kernel's zeroing of each page again. Measured on one
//! update of the 0.5B model (8 episodes, 2 cores): 73 s of 154 s in the kernel, 17 s once the
//! heap keeps those blocks for reuse, and the update 22 % faster; peak RSS +4 %.
//!
//! The same policy hides what a phase holds behind what the heap keeps, so the module also
//! offers a counting allocator ([`CountingAllocator`]) that tells the two apart.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

/// Keeps freed large blocks in the heap for reuse instead of returning them to the kernel.
/// Idempotent; a no-op where the C library is not glibc.
pub fn keep_large_blocks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
        unsafe {
            // 1 GiB: above any one buffer the model allocates; larger blocks still map.
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
            // Never shrink the heap's top on free: the next step needs the same memory.
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        }
    });
}

/// The system allocator, counting the bytes the program holds and their peak.
///
/// The kernel's resident set says what a process has mapped; it cannot tell a buffer the
/// program still holds from a freed block the heap kept (above, [`keep_large_blocks`]) or a
/// hole between live blocks. This allocator's count can: a binary installs it with
/// `#[global_allocator]`, and [`heap_live_mib`] and [`heap_peak_mib`] then read what is live
/// and the most that was since [`reset_heap_peak`]. Where it is not installed they return
/// `None`. Its cost is one atomic add per allocation and release, and a compare-and-swap when
/// the peak grows.
///
/// An observer, if given ([`CountingAllocator::observed`]), sees every allocation (`bytes`
/// > 0) and release with the live bytes just after it; it must not allocate.
pub struct CountingAllocator {
    observer: Option<fn(ptr: *mut u8, bytes: i64, live: usize)>,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl CountingAllocator {
    /// The allocator, counting only.
    pub const fn new() -> CountingAllocator {
        CountingAllocator { observer: None }
    }

    /// The allocator, also calling `observer` on every allocation and release.
    pub const fn observed(observer: fn(ptr: *mut u8, bytes: i64, live: usize)) -> CountingAllocator {
        CountingAllocator { observer: Some(observer) }
    }

    fn grew(&self, ptr: *mut u8, bytes: usize) {
        let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
        // A plain read first: `fetch_max` is a locked compare-and-swap even when it changes
        // nothing, and most allocations do not raise the peak.
        if live > PEAK.load(Ordering::Relaxed) {
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        if let Some(observe) = self.observer {
            observe(ptr, bytes as i64, live);
        }
    }

    fn shrank(&self, ptr: *mut u8, bytes: usize) {
        let live = LIVE.fetch_sub(bytes, Ordering::Relaxed).saturating_sub(bytes);
        if let Some(observe) = self.observer {
            observe(ptr, -(bytes as i64), live);
        }
    }
}

impl Default for CountingAllocator {
    fn default() -> CountingAllocator {
        CountingAllocator::new()
    }
}

// SAFETY: every call forwards to `System` with the same arguments; the counters only observe.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.shrank(ptr, layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.shrank(ptr, layout.size());
            self.grew(p, new_size);
        }
        p
    }
}

/// Whether a [`CountingAllocator`] is the global one: any program has allocated by the time
/// it asks, so a count still at zero means nothing counts.
fn counting() -> bool {
    PEAK.load(Ordering::Relaxed) > 0
}

/// The bytes the program holds now, MiB; `None` where no [`CountingAllocator`] is installed.
pub fn heap_live_mib() -> Option<f64> {
    counting().then(|| mib(LIVE.load(Ordering::Relaxed)))
}

/// The most bytes the program held at once since the last [`reset_heap_peak`] (or since it
/// started), MiB; `None` where no [`CountingAllocator`] is installed.
pub fn heap_peak_mib() -> Option<f64> {
    counting().then(|| mib(PEAK.load(Ordering::Relaxed)))
}

/// Starts the next peak from the bytes held now.
pub fn reset_heap_peak() {
    if counting() {
        PEAK.store(LIVE.load(Ordering::Relaxed).max(1), Ordering::Relaxed);
    }
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_counting_allocator_nothing_is_counted() {
        // This test binary keeps the system allocator: the counters must say so, not 0 MiB.
        let v = vec![1u8; 1 << 20];
        std::hint::black_box(&v);
        assert_eq!(heap_live_mib(), None);
        assert_eq!(heap_peak_mib(), None);
        reset_heap_peak();
        assert_eq!(heap_peak_mib(), None);
    }
}

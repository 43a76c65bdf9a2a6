//! The process heap's policy for the model's large, short-lived buffers.
//!
//! A learner step allocates and frees buffers of megabytes per layer (attention scores,
//! activations kept for backward). glibc serves any block over its mmap threshold (128 KiB at
//! first, at most 32 MiB as it adapts) with a fresh mapping and unmaps it on free, so every
//! such buffer costs page faults and the kernel's zeroing of each page again. Measured on one
//! update of the 0.5B model (8 episodes, 2 cores): 73 s of 154 s in the kernel, 17 s once the
//! heap keeps those blocks for reuse, and the update 22 % faster; peak RSS +4 %.

use std::sync::Once;

/// Keeps freed large blocks in the heap for reuse instead of returning them to the kernel.
/// Idempotent; a no-op where the C library is not glibc.
pub(crate) fn keep_large_blocks() {
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

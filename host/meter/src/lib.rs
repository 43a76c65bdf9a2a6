//! What the process uses, for the benchmarks and the trainer's metrics.
//!
//! * [`CountingAllocator`]: the system allocator counting the bytes the program holds;
//!   [`heap_live_mib`] and [`heap_peak_mib`] read it where a binary installs it.
//! * [`keep_large_blocks`]: the heap's policy for the model's large, short-lived buffers.
//! * [`rss_mib`], [`peak_rss_mib`] and [`reset_peak_rss`]: resident memory; [`cpu_seconds`]
//!   and [`steal_seconds`]: CPU time of the process and steal time of the machine.
//!
//! ```
//! // Nothing installs the counting allocator in a doctest, so the heap reads as unknown.
//! assert_eq!(onebrain_meter::heap_live_mib(), None);
//! onebrain_meter::reset_peak_rss();
//! if let (Some(now), Some(peak)) = (onebrain_meter::rss_mib(), onebrain_meter::peak_rss_mib()) {
//!     assert!(peak >= now * 0.5);
//! }
//! ```
#![deny(missing_docs)]

mod heap;
mod process;

pub use heap::{heap_live_mib, heap_peak_mib, keep_large_blocks, reset_heap_peak, CountingAllocator};
pub use process::{cpu_seconds, peak_rss_mib, reset_peak_rss, rss_mib, steal_seconds};

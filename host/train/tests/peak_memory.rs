//! The trainer's per-phase memory peaks (`perf/rollout_peak_rss_mib`,
//! `perf/update_peak_rss_mib`, and the heap held, `perf/*_peak_heap_mib`): a phase's peak
//! covers what it allocated, the next phase starts from the memory resident and held then, and
//! the process's peak keeps the largest. Its own test binary, so no other test allocates in the
//! same process meanwhile; it counts its heap as `onebrain` does.

use onebrain_model::CountingAllocator;
use onebrain_train::PeakMemory;

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

/// Allocates and touches `mib` MiB, then frees it.
fn touch(mib: usize) {
    let mut v = vec![0u8; mib << 20];
    for page in v.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(&v);
}

#[test]
fn each_phase_has_its_own_peak_and_the_process_keeps_the_largest() {
    if std::fs::OpenOptions::new().write(true).open("/proc/self/clear_refs").is_err() {
        eprintln!("skipped: /proc/self/clear_refs cannot be written here, so no phase can be read");
        return;
    }
    let mut memory = PeakMemory::default();
    memory.phase();
    let resident = onebrain_model::rss_mib().expect("/proc/self/status");
    let held = onebrain_model::heap_live_mib().expect("the counting allocator is installed");
    touch(256);
    let busy = memory.phase();
    let (busy_rss, busy_heap) = (busy.rss_mib.expect("a peak"), busy.heap_mib.expect("a heap peak"));
    assert!(busy_rss >= resident + 200.0, "the phase that held 256 MiB peaked at {busy_rss:.0} MiB from {resident:.0}");
    assert!(busy_heap >= held + 256.0, "the phase that held 256 MiB held at most {busy_heap:.0} MiB from {held:.0}");
    let quiet = memory.phase();
    let (quiet_rss, quiet_heap) = (quiet.rss_mib.expect("a peak"), quiet.heap_mib.expect("a heap peak"));
    assert!(quiet_rss < busy_rss - 200.0, "the next phase starts again from what is resident: {quiet_rss:.0} against {busy_rss:.0} MiB");
    assert!(quiet_heap < busy_heap - 250.0, "and from what is held: {quiet_heap:.0} against {busy_heap:.0} MiB");
    let so_far = memory.so_far().expect("a peak");
    assert!(so_far >= busy_rss, "the process's peak {so_far:.0} MiB keeps the busy phase's {busy_rss:.0}");
}

//! The trainer's per-phase memory peaks (`perf/rollout_peak_rss_mib`,
//! `perf/update_peak_rss_mib`): a phase's peak covers what it allocated, the next phase starts
//! from the memory resident then, and the process's peak keeps the largest. Its own test binary,
//! so no other test allocates in the same process meanwhile.

use onebrain_train::PeakMemory;

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
    touch(256);
    let busy = memory.phase().expect("a peak");
    assert!(busy >= resident + 200.0, "the phase that held 256 MiB peaked at {busy:.0} MiB from {resident:.0}");
    let quiet = memory.phase().expect("a peak");
    assert!(quiet < busy - 200.0, "the next phase starts again from what is resident: {quiet:.0} against {busy:.0} MiB");
    let so_far = memory.so_far().expect("a peak");
    assert!(so_far >= busy, "the process's peak {so_far:.0} MiB keeps the busy phase's {busy:.0}");
}

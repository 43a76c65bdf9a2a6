//! Fuzzing campaigns with counts, shared by the harnesses of every crate through
//! `#[path = "…/tests/fuzz/campaign.rs"] mod campaign;`.
//!
//! A campaign runs a proptest strategy through a target function, counts the inputs tried,
//! keeps the slowest one's time, and treats a case that runs past [`HANG_SECS`] as a hang: a
//! watchdog prints the input and aborts the process, as a fuzzer would. A panic in the target
//! is a crash: proptest shrinks it and the test fails with the smallest input.
//!
//! The normal test suite runs a short campaign (each target's `default_cases`, a few seconds);
//! `ONEBRAIN_FUZZ_CASES=200000` runs every campaign that long. Each prints one line:
//!
//! ```text
//! fuzz pddl/mutated-domains: 200000 inputs, 0 crashes, 0 hangs, slowest 3.1 ms (seed 35)
//! ```
//!
//! `ONEBRAIN_FUZZ_SEED` picks the random seed (default 35, so the short campaign is the same
//! every run); a long campaign with another seed tries other inputs.
#![allow(dead_code)]

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// A case slower than this is a hang (the slowest legitimate cases take milliseconds).
pub const HANG_SECS: u64 = 20;

/// Inputs per campaign: `ONEBRAIN_FUZZ_CASES`, else `default_cases`.
pub fn cases(default_cases: u32) -> u32 {
    std::env::var("ONEBRAIN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases)
}

fn seed() -> u64 {
    std::env::var("ONEBRAIN_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(35)
}

/// What a campaign did.
#[derive(Debug)]
pub struct Report {
    /// Inputs tried.
    pub inputs: usize,
    /// The slowest input's time.
    pub slowest: Duration,
}

/// Runs `target` on `cases(default_cases)` inputs drawn from `strategy`; panics (with the
/// shrunk input) on a crash, aborts on a hang. Prints the campaign's line on stderr.
pub fn run<S>(name: &str, default_cases: u32, strategy: S, target: impl Fn(S::Value) -> Result<(), TestCaseError>) -> Report
where
    S: Strategy,
    S::Value: Debug,
{
    let n = cases(default_cases);
    let config = Config {
        cases: n,
        // Inputs rejected by a filter are not counted as tried; do not give up on them.
        max_global_rejects: n.saturating_mul(4),
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed()));
    let mut runner = TestRunner::new_with_rng(config, rng);

    let tried = AtomicUsize::new(0);
    let slowest_ns = AtomicU64::new(0);
    let watch = Watchdog::start(name);
    let result = runner.run(&strategy, |value| {
        watch.begin(&value);
        let started = Instant::now();
        let r = target(value);
        let ns = started.elapsed().as_nanos() as u64;
        watch.end();
        slowest_ns.fetch_max(ns, Ordering::Relaxed);
        tried.fetch_add(1, Ordering::Relaxed);
        r
    });
    watch.stop();
    let report = Report { inputs: tried.into_inner(), slowest: Duration::from_nanos(slowest_ns.into_inner()) };
    match result {
        Ok(()) => {
            eprintln!(
                "fuzz {name}: {} inputs, 0 crashes, 0 hangs, slowest {:.1} ms (seed {})",
                report.inputs,
                report.slowest.as_secs_f64() * 1e3,
                seed()
            );
            report
        }
        Err(e) => panic!("fuzz {name}: a crash after {} inputs (seed {}): {e}", report.inputs, seed()),
    }
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (i, chunk) in b.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&seed.wrapping_add(i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    }
    b
}

/// Draws one value of `strategy` (for seeding inputs outside a campaign).
pub fn sample<S: Strategy>(strategy: &S) -> S::Value {
    let mut runner = TestRunner::deterministic();
    strategy.new_tree(&mut runner).expect("a strategy draws").current()
}

/// Aborts the process when one case runs past [`HANG_SECS`], printing the input.
struct Watchdog {
    state: Arc<Mutex<Option<(Instant, String)>>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(name: &str) -> Watchdog {
        let state: Arc<Mutex<Option<(Instant, String)>>> = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        let (s, d, name) = (state.clone(), done.clone(), name.to_string());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if let Some((since, input)) = &*s.lock().unwrap_or_else(|e| e.into_inner()) {
                    if since.elapsed() > Duration::from_secs(HANG_SECS) {
                        eprintln!("fuzz {name}: a hang, {HANG_SECS} s on one input:\n{input}");
                        std::process::abort();
                    }
                }
            }
        });
        Watchdog { state, done, thread: Some(thread) }
    }

    fn begin(&self, value: &impl Debug) {
        // The input is formatted only when a case starts, which costs microseconds; a hang
        // report needs it after the case has taken the thread.
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), format!("{value:#?}")));
    }

    fn end(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

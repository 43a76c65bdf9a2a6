//! The compute threads our kernels share: candle's barrier pool's `execute_chunked`, with
//! waits that give the core away.
//!
//! candle 0.11's pool makes its caller spin, without bound, until every worker has finished,
//! even a worker that never started. Beside another process on the same cores, a worker is
//! often descheduled, and the caller then spins for the rest of a scheduler slice: a
//! SmolLM2 answer beside a training arm spent 86 % of its cycles there
//! (`results/bench-spin-wait`). Here the caller
//! - runs the chunks itself and only waits for workers that have taken a share: a worker
//!   that has not started by the time the chunks are gone is shut out of the call;
//! - spins briefly, then yields, then parks while it waits, and the last worker out wakes it.
//!
//! Workers likewise spin briefly between calls, then park. The chunks are those of candle's
//! pool (about eight per thread, taken from a shared cursor), so a caller whose chunks write
//! their own outputs gets the same numbers from either pool, on any number of threads.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Runs `f` over `0..n_items` in contiguous chunks, on the calling thread and the pool's
/// workers, and returns when every chunk has run. Each chunk runs once; which thread runs it
/// varies from call to call, so `f` should write only outputs that belong to its range.
///
/// The pool has `candle_core::utils::get_num_threads() − 1` workers (`RAYON_NUM_THREADS=1`
/// runs everything on the caller). A call from inside `f` runs inline. A panic in any chunk
/// is raised again in the caller once every worker has left the call.
pub fn execute_chunked<F: Fn(Range<usize>) + Sync>(n_items: usize, f: F) {
    if n_items == 0 {
        return;
    }
    if on_candle_pool() {
        return candle_core::utils::barrier_pool().execute_chunked(n_items, f);
    }
    let pool = pool();
    if pool.workers.is_empty() || n_items == 1 || INSIDE.with(Cell::get) {
        return f(0..n_items);
    }
    pool.run(n_items, &f);
}

/// The old path, for `onebrain bench pool`: while `yes`, [`execute_chunked`] hands its calls
/// to candle's barrier pool instead. The chunks are the same, so are the numbers. A whole
/// command runs on the old path with `ONEBRAIN_POOL=candle` in its environment, for paired
/// timings of whole commands.
pub fn use_candle_pool(yes: bool) {
    BACKEND.store(if yes { CANDLE } else { OWN }, Ordering::Relaxed);
}

const UNREAD: u8 = 0;
const OWN: u8 = 1;
const CANDLE: u8 = 2;
static BACKEND: AtomicU8 = AtomicU8::new(UNREAD);

fn on_candle_pool() -> bool {
    let mut backend = BACKEND.load(Ordering::Relaxed);
    if backend == UNREAD {
        let from_env = if std::env::var("ONEBRAIN_POOL").is_ok_and(|v| v == "candle") { CANDLE } else { OWN };
        backend = match BACKEND.compare_exchange(UNREAD, from_env, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => from_env,
            Err(set) => set,
        };
    }
    backend == CANDLE
}

/// Bits of [`Shared::admission`] that count the workers inside the current call.
const COUNT_BITS: u32 = 16;
const INSIDE_MASK: usize = (1 << COUNT_BITS) - 1;
/// Set while the call admits workers: from its start until its caller has run out of chunks.
const OPEN: usize = 1 << COUNT_BITS;
/// One call: the generation sits above the count and the open bit.
const GENERATION: usize = OPEN << 1;

/// How long a waiting thread spins before it yields, and yields before it parks. Spinning
/// covers the common waits, a chunk's tail or the serial code between two products; past
/// that the core is worth more to someone else.
const SPIN_FOR: Duration = Duration::from_micros(50);
const YIELD_FOR: Duration = Duration::from_micros(200);

thread_local! {
    /// Set on the pool's workers, and on a caller while it runs its share.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

struct Pool {
    shared: &'static Shared,
    workers: Vec<Thread>,
    /// One call at a time; a second caller waits for the first.
    call: Mutex<()>,
}

/// What the caller and the workers of one call share.
struct Shared {
    /// `generation · GENERATION | OPEN | workers inside`. A worker enters only while `OPEN` is
    /// set and leaves when the cursor runs out; the caller clears `OPEN`, then waits for the
    /// count to reach 0. The job is written only while no worker is inside and none can enter.
    admission: AtomicUsize,
    cursor: AtomicUsize,
    job: UnsafeCell<Job>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `job` is written by the caller under `Pool::call` while no worker is inside the
// call, and read by workers only while they are counted inside (see `Shared::admission`).
unsafe impl Sync for Shared {}

/// The current call: its closure, type-erased, and who to wake when the last worker leaves.
struct Job {
    run: unsafe fn(*const (), Range<usize>),
    f: *const (),
    n_items: usize,
    chunk: usize,
    caller: Option<Thread>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(candle_core::utils::get_num_threads().saturating_sub(1)))
}

impl Pool {
    fn new(n_workers: usize) -> Self {
        // The pool lives as long as the process; leaking it gives the workers a `'static`.
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            admission: AtomicUsize::new(0),
            cursor: AtomicUsize::new(0),
            job: UnsafeCell::new(Job { run: run_erased::<fn(Range<usize>)>, f: std::ptr::null(), n_items: 0, chunk: 1, caller: None }),
            panic: Mutex::new(None),
        }));
        let workers = (0..n_workers)
            .map(|i| {
                thread::Builder::new()
                    .name(format!("onebrain-pool-{i}"))
                    .spawn(move || work(shared))
                    .expect("the OS starts a compute thread")
                    .thread()
                    .clone()
            })
            .collect();
        Pool { shared, workers, call: Mutex::new(()) }
    }

    fn run<F: Fn(Range<usize>) + Sync>(&self, n_items: usize, f: &F) {
        let _one_call = lock(&self.call);
        let shared = self.shared;
        let threads = self.workers.len() + 1;
        // candle's chunking: about eight grabs per thread keeps the cursor cool and the tail short.
        let chunk = n_items.div_ceil(threads * 8).max(1);
        // SAFETY: no worker is inside (the last call waited for them) and none can enter
        // (the last call closed), so nothing reads the job while it is written.
        unsafe {
            *shared.job.get() = Job {
                run: run_erased::<F>,
                f: f as *const F as *const (),
                n_items,
                chunk,
                caller: Some(thread::current()),
            };
        }
        shared.cursor.store(0, Ordering::Relaxed);
        let generation = shared.admission.load(Ordering::Relaxed) / GENERATION + 1;
        shared.admission.store(generation * GENERATION | OPEN, Ordering::Release);
        for worker in &self.workers {
            worker.unpark();
        }
        // Closes the call and waits for the workers inside, on return or on a panic in `f`:
        // they hold a pointer to `f`, which lives in this frame.
        let close = Close(shared);
        INSIDE.with(|inside| inside.set(true));
        // SAFETY: `f` is the job's closure, alive for the whole call.
        unsafe { take_chunks(shared) };
        drop(close);
    }
}

/// Closes a call on drop and waits for the workers inside it.
struct Close(&'static Shared);

impl Drop for Close {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(false));
        let admission = &self.0.admission;
        if admission.fetch_and(!OPEN, Ordering::AcqRel) & INSIDE_MASK != 0 {
            let mut wait = Backoff::new();
            while admission.load(Ordering::Acquire) & INSIDE_MASK != 0 {
                wait.snooze();
            }
        }
        // A worker's panic is raised here, and dropped if the caller is already unwinding:
        // either way the next call starts without it.
        let payload = lock(&self.0.panic).take();
        if let (Some(payload), false) = (payload, thread::panicking()) {
            std::panic::resume_unwind(payload);
        }
    }
}

/// A worker: waits for a call, enters it if it is still open, takes chunks until none are
/// left, leaves (waking the caller if it was the last one out of a closed call), and waits
/// again.
fn work(shared: &'static Shared) {
    INSIDE.with(|inside| inside.set(true));
    let mut seen = 0;
    loop {
        let mut wait = Backoff::new();
        let mut state = shared.admission.load(Ordering::Acquire);
        while state / GENERATION == seen {
            wait.snooze();
            state = shared.admission.load(Ordering::Acquire);
        }
        let entered = loop {
            seen = state / GENERATION;
            if state & OPEN == 0 {
                break false;
            }
            match shared.admission.compare_exchange_weak(state, state + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break true,
                Err(now) => state = now,
            }
        };
        if !entered {
            continue;
        }
        // SAFETY: inside the call, the job and its closure stay alive and unchanged.
        let caller = unsafe { (*shared.job.get()).caller.clone() };
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { take_chunks(shared) })) {
            lock(&shared.panic).get_or_insert(payload);
        }
        let before = shared.admission.fetch_sub(1, Ordering::AcqRel);
        if before & OPEN == 0 && before & INSIDE_MASK == 1 {
            if let Some(caller) = caller {
                caller.unpark();
            }
        }
    }
}

/// Runs the job's chunks from the shared cursor until there are none left.
///
/// # Safety
/// The caller is the job's caller during its call, or a worker counted inside the call.
unsafe fn take_chunks(shared: &Shared) {
    let job = &*shared.job.get();
    loop {
        let start = shared.cursor.fetch_add(job.chunk, Ordering::Relaxed);
        if start >= job.n_items {
            return;
        }
        (job.run)(job.f, start..job.n_items.min(start + job.chunk));
    }
}

unsafe fn run_erased<F: Fn(Range<usize>)>(f: *const (), range: Range<usize>) {
    (*(f as *const F))(range)
}

/// A poisoned lock only means a chunk panicked; the panic itself is passed on.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Spin, then yield, then park: a short wait costs no system call, a long one no core.
/// Parking is safe against a missed wake-up because `unpark` before `park` makes `park`
/// return at once, and every wait re-checks its condition.
struct Backoff {
    start: Option<Instant>,
    spins: u32,
}

impl Backoff {
    fn new() -> Self {
        Backoff { start: None, spins: 0 }
    }

    fn snooze(&mut self) {
        self.spins = self.spins.wrapping_add(1);
        // Reading the clock costs about as much as a few dozen spins: do it now and then.
        if self.spins % 64 != 0 {
            return std::hint::spin_loop();
        }
        let waited = self.start.get_or_insert_with(Instant::now).elapsed();
        if waited < SPIN_FOR {
            std::hint::spin_loop();
        } else if waited < SPIN_FOR + YIELD_FOR {
            thread::yield_now();
        } else {
            thread::park();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_item_runs_exactly_once() {
        for n in [1, 2, 7, 64, 1000, 100_003] {
            let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            execute_chunked(n, |range| {
                for i in range {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "n = {n}");
        }
    }

    #[test]
    fn a_nested_call_runs_inline() {
        let total = AtomicUsize::new(0);
        execute_chunked(8, |outer| {
            for _ in outer {
                execute_chunked(5, |inner| {
                    total.fetch_add(inner.len(), Ordering::Relaxed);
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 40);
    }

    #[test]
    fn concurrent_callers_each_get_all_their_items() {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                thread::spawn(move || {
                    for round in 0..200 {
                        let n = 1 + (t * 131 + round * 17) % 300;
                        let sum = AtomicUsize::new(0);
                        execute_chunked(n, |range| {
                            sum.fetch_add(range.sum::<usize>(), Ordering::Relaxed);
                        });
                        assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("no caller panicked");
        }
    }

    #[test]
    fn a_panicking_chunk_reaches_the_caller_and_the_pool_goes_on() {
        let caught = std::panic::catch_unwind(|| {
            execute_chunked(1000, |range| {
                if range.contains(&999) {
                    panic!("chunk 999");
                }
            })
        });
        let message = caught.expect_err("the panic is raised in the caller");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"chunk 999"));
        let sum = AtomicUsize::new(0);
        execute_chunked(100, |range| {
            sum.fetch_add(range.len(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 100);
    }

    #[test]
    fn a_slow_worker_is_waited_for_and_its_writes_are_seen() {
        let out: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
        execute_chunked(64, |range| {
            for i in range {
                if i % 16 == 3 {
                    thread::sleep(Duration::from_millis(2));
                }
                out[i].store(i + 1, Ordering::Relaxed);
            }
        });
        assert!(out.iter().enumerate().all(|(i, v)| v.load(Ordering::Relaxed) == i + 1));
    }
}

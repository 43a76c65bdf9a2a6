//! Stops asked by SIGINT or SIGTERM, taken at a run's safe points.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A signal that asks a run to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C at a terminal.
    Interrupt,
    /// SIGTERM: `kill`, a scheduler's preemption, a container's stop.
    Terminate,
}

impl StopSignal {
    /// Its name, `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => libc::SIGINT,
            StopSignal::Terminate => libc::SIGTERM,
        }
    }

    /// The exit status of a process it stopped: 128 + its number (130, 143), as a shell
    /// reports a process the signal killed, so scripts that test for those keep working.
    pub fn exit_code(self) -> u8 {
        (128 + self.number()) as u8
    }

    fn from_number(n: usize) -> Option<StopSignal> {
        [StopSignal::Interrupt, StopSignal::Terminate].into_iter().find(|s| s.number() as usize == n)
    }
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A run that stopped at a safe point because a signal asked it to: everything it recorded is
/// on disk, and a resume continues from there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("stopped by {signal} {at}; {resume}")]
pub struct Stopped {
    /// The signal.
    pub signal: StopSignal,
    /// Where the run stopped (`after update 12`).
    pub at: String,
    /// How to go on (`resume with --resume`).
    pub resume: String,
}

/// The signal number of the first stop asked for, 0 while none has been.
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// Installs the handlers of SIGINT and SIGTERM, once per process. The first of them only
/// records the request, which [`stop_requested`] reads at a run's safe points: between two
/// episodes, after an update's checkpoint. A second one ends the process at once, with the
/// second signal's exit status, wherever it is: every write is atomic or an append whose torn
/// line is dropped, so even then a resume loses nothing but the work in flight.
pub fn install_stop_handlers() -> std::io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            for signal in [StopSignal::Interrupt, StopSignal::Terminate] {
                let n = signal.number();
                // SAFETY: the action is async-signal-safe: it touches one atomic, and on a
                // second signal writes a static message with write(2) and calls _exit(2).
                let registered = unsafe {
                    signal_hook::low_level::register(n, move || {
                        if REQUESTED.compare_exchange(0, n as usize, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                            let msg = b"onebrain: a second signal: stopping at once (a resume continues from what is on disk)\n";
                            libc::write(2, msg.as_ptr().cast(), msg.len());
                            signal_hook::low_level::exit(128 + n);
                        }
                    })
                };
                registered.map_err(|e| format!("cannot handle {signal}: {e}"))?;
            }
            Ok(())
        })
        .clone()
        .map_err(std::io::Error::other)
}

/// The signal that asked this process to stop, if one has.
pub fn stop_requested() -> Option<StopSignal> {
    StopSignal::from_number(REQUESTED.load(Ordering::SeqCst))
}

/// Asks for a stop as `signal` would (a test, or a caller that stops its run for its own
/// reason). A signal after it ends the process at once.
pub fn request_stop(signal: StopSignal) {
    let _ = REQUESTED.compare_exchange(0, signal.number() as usize, Ordering::SeqCst, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_exit_as_a_shell_reports_them() {
        assert_eq!((StopSignal::Interrupt.exit_code(), StopSignal::Terminate.exit_code()), (130, 143));
        let s = Stopped { signal: StopSignal::Terminate, at: "after update 12".into(), resume: "resume with --resume".into() };
        assert_eq!(s.to_string(), "stopped by SIGTERM after update 12; resume with --resume");
    }
}

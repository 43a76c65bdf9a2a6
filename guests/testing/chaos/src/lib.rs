//! Faults on a schedule, for the fault-injection soak: what `chaos-reward` and
//! `chaos-checker` share.
//!
//! A plugin has no source of randomness (no clock, no entropy), so the "random" choice is a
//! hash of the call's inputs: the same episode draws the same fault on every run, and a
//! resumed soak replays it exactly. Each fault has a stated probability ([`TRAP_PERCENT`],
//! [`NAN_PERCENT`], [`HANG_PERCENT`]); the rest of the calls are answered honestly.

use onebrain_sdk::Rng;

/// Share of calls that trap (a panic, which `panic = "abort"` turns into wasm's
/// `unreachable`), in percent.
pub const TRAP_PERCENT: u64 = 10;
/// Share of calls that answer NaN where the host expects a finite number, in percent.
pub const NAN_PERCENT: u64 = 10;
/// Share of calls that spin until the host's wall-clock or fuel limit stops them, in percent.
pub const HANG_PERCENT: u64 = 10;

/// What a call does instead of answering honestly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Panics: the host sees a trap.
    Trap,
    /// Answers NaN: the host refuses the value.
    NotANumber,
    /// Loops forever: the host's clock (epochs) or fuel budget ends the call.
    Hang,
}

/// The fault, if any, for a call whose inputs are `parts`. `salt` keeps two plugins that
/// see the same inputs from drawing the same faults.
pub fn draw(salt: &str, parts: &[&[u8]]) -> Option<Fault> {
    // FNV-1a over the parts, each ended by a 0xff byte (which UTF-8 text never contains),
    // so ("ab", "c") and ("a", "bc") differ; SplitMix64 then spreads FNV's weak low bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in std::iter::once(salt.as_bytes()).chain(parts.iter().copied()) {
        for &b in part.iter().chain(&[0xff]) {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let roll = Rng::new(h).next_u64() % 100;
    match roll {
        r if r < TRAP_PERCENT => Some(Fault::Trap),
        r if r < TRAP_PERCENT + NAN_PERCENT => Some(Fault::NotANumber),
        r if r < TRAP_PERCENT + NAN_PERCENT + HANG_PERCENT => Some(Fault::Hang),
        _ => None,
    }
}

/// The trap: a panic (its message reaches the host through stderr).
pub fn trap(plugin: &str) -> ! {
    panic!("{plugin}: a trap on purpose (fault injection)")
}

/// The hang: work with no end and no side effect, which only the host's limits stop.
pub fn hang() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_is_deterministic_and_near_its_stated_rates() {
        let n = 10_000;
        let mut counts = [0usize; 4];
        for i in 0..n {
            let text = format!("task {i}");
            let fault = draw("salt", &[text.as_bytes(), b"spec"]);
            assert_eq!(fault, draw("salt", &[text.as_bytes(), b"spec"]));
            counts[match fault {
                Some(Fault::Trap) => 0,
                Some(Fault::NotANumber) => 1,
                Some(Fault::Hang) => 2,
                None => 3,
            }] += 1;
        }
        // 10 % of 10,000 is 1,000 with a standard deviation of 30: 150 is five of them.
        for (c, p) in counts.iter().zip([TRAP_PERCENT, NAN_PERCENT, HANG_PERCENT]) {
            assert!(c.abs_diff(n * p as usize / 100) < 150, "{counts:?}");
        }
        let differs = (0..100).filter(|i| {
            let t = format!("task {i}");
            draw("a", &[t.as_bytes()]) != draw("b", &[t.as_bytes()])
        });
        assert!(differs.count() > 20, "salts draw independently");
    }
}

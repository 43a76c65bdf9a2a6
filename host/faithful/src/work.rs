//! The checker's work meter: one count, shared by every stage of one check, of the work it
//! did in units that do not depend on the machine.
//!
//! A unit is one ground action scanned, one atom reset or one pool state looked at: the inner
//! steps of the state-space stages, each a handful of instructions. Counting them instead of
//! seconds or fuel makes the budget's end fall at the same step natively and under
//! WebAssembly, so the two give the same verdict, and it makes the fuel a check can
//! take proportional to its count (`results/checker-large/`), so the plugin's fuel can be sized
//! to let the meter, not the sandbox, stop the check. A stage that finds the meter spent stops
//! as if its own bound were hit: a search reports its limit, a proof is not made, a mapping
//! search stops. Each of those already means "undecided", never a guess.

use std::cell::Cell;
use std::rc::Rc;

/// A shared work count and its limit. Cloning shares the count.
#[derive(Clone, Debug)]
pub(crate) struct Work {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    spent: Cell<u64>,
    limit: u64,
}

impl Work {
    pub fn new(limit: u64) -> Work {
        Work { inner: Rc::new(Inner { spent: Cell::new(0), limit }) }
    }

    /// Counts `units`; false once the total has passed the limit.
    pub fn charge(&self, units: u64) -> bool {
        let spent = self.inner.spent.get().saturating_add(units);
        self.inner.spent.set(spent);
        spent <= self.inner.limit
    }

    /// True once the total has passed the limit.
    pub fn exhausted(&self) -> bool {
        self.inner.spent.get() > self.inner.limit
    }

    /// The units counted so far.
    pub fn spent(&self) -> u64 {
        self.inner.spent.get()
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.inner.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_count_and_the_limit_is_inclusive() {
        let w = Work::new(10);
        let v = w.clone();
        assert!(w.charge(6));
        assert!(v.charge(4));
        assert!(!w.exhausted());
        assert!(!v.charge(1));
        assert!(w.exhausted());
        assert_eq!(w.spent(), 11);
    }
}

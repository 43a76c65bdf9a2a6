//! A success count and its rate.

use serde::{Deserialize, Serialize};

/// A success count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Successes.
    pub k: usize,
    /// Tasks.
    pub n: usize,
    /// k / n (0 when n = 0).
    pub rate: f64,
}

impl Rate {
    pub(super) fn new(k: usize, n: usize) -> Rate {
        Rate {
            k,
            n,
            rate: if n > 0 { k as f64 / n as f64 } else { 0.0 },
        }
    }
}

//! A sample's five-number summary and mean.

use serde::{Deserialize, Serialize};

use crate::svg;

/// Five-number summary and mean of a sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Mean (0 when empty).
    pub mean: f64,
    /// min, q1, median, q3, max (absent when empty).
    pub five: Option<[f64; 5]>,
}

impl Summary {
    pub(super) fn of(values: &[f64]) -> Summary {
        let n = values.len();
        Summary {
            n,
            mean: if n > 0 {
                values.iter().sum::<f64>() / n as f64
            } else {
                0.0
            },
            five: svg::five_numbers(values),
        }
    }
}

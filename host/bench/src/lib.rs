//! Benchmarks that measure onebrain against a peer in the same run.
//!
//! Targets live here, never in timed unit tests: the machines are shared and
//! noisy, so a figure means something only next to its peer, measured in the
//! same process a moment apart. `onebrain bench <what>` parses its flags and
//! calls [`suite::run`], which prints a [`Table`] per benchmark; the README
//! quotes them with the command. The figures come from [`model`] (generation,
//! long prompts, a forward and backward), [`kernels`] (the CPU kernels against
//! candle's), [`training`] (one real training step of each path), [`verifier`],
//! [`plugins`] and [`constraint`]. `peers/` holds the llama.cpp peers of the
//! model figures, `examples/` the model benchmarks as JSON lines and the
//! update and Judge probes.
//!
//! ```
//! let mut t = onebrain_bench::Table::new(["measure", "value"]);
//! t.row(["answer".to_string(), "42".to_string()]);
//! assert!(t.to_string().contains("| answer | 42 |"));
//! ```
#![deny(missing_docs)]

pub mod constraint;
pub mod kernels;
pub mod model;
pub mod plugins;
pub mod pool;
pub mod suite;
pub mod training;
pub mod verifier;

use std::fmt;

/// A Markdown table, ready to paste into the README.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<const N: usize>(header: [&str; N]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row<const N: usize>(&mut self, cells: [String; N]) {
        self.rows.push(cells.to_vec());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| {} |", self.header.join(" | "))?;
        writeln!(f, "|{}", "---|".repeat(self.header.len()))?;
        for row in &self.rows {
            writeln!(f, "| {} |", row.join(" | "))?;
        }
        Ok(())
    }
}

/// `value` as pretty JSON and a newline: a benchmark's figures for `--json`.
pub(crate) fn write_json<T: serde::Serialize>(out: &mut dyn std::io::Write, value: &T) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

/// The arithmetic mean (0 for no samples).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The median (0 for no samples): robust to the load spikes of a shared machine.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

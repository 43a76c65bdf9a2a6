//! Benchmark loaders, metrics and reports.
#![deny(missing_docs)]

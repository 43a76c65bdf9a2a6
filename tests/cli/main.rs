//! End-to-end tests of the `onebrain` binary, through its CLI contract.

mod harness;

mod check;
mod configs;
mod eval;
mod plugins;
mod solve;
mod train;
mod validate;

//! End-to-end tests of the `onebrain` binary, through its CLI contract.

mod harness;

mod check;
mod validate;

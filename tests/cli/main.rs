//! End-to-end tests of the `onebrain` binary, through its CLI contract.

mod harness;

mod address_space;
mod check;
mod configs;
mod eval;
mod faithful;
mod hostile;
mod pipes;
mod plugins;
mod run_scripts;
mod setup_scripts;
mod solve;
mod tour;
mod train;
mod train_cluster;
mod validate;

//! Solver-grounded training: PPO for Actor and Editor, the Judge loss, the joint update, checkpoints.
#![deny(missing_docs)]

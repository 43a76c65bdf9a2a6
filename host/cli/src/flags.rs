//! What the user wrote, validated by clap; no I/O here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// onebrain: natural-language planning tasks to faithful PDDL, learned from solver feedback.
#[derive(Debug, Parser)]
#[command(name = "onebrain", version, about)]
pub struct Flags {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Verify a domain + problem: native checks, then Fast Downward (the paper's E(y)).
    Check(CheckArgs),
    /// Validate a plan against a domain + problem, step by step (VAL-equivalent).
    Validate(ValidateArgs),
    /// Measure onebrain against a peer in the same run and print the ratios.
    Bench(BenchArgs),
}

/// `onebrain check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The domain PDDL file.
    #[arg(long)]
    pub domain: PathBuf,
    /// The problem PDDL file.
    #[arg(long)]
    pub problem: PathBuf,
    /// Wall-clock limit for the planner, in seconds (the paper uses 60).
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Memory limit for the planner, in MiB.
    #[arg(long, default_value_t = 4096)]
    pub memory_mb: u64,
    /// Fast Downward search: an alias (`lama-first`) or a search string (`astar(lmcut())`).
    #[arg(long, default_value = "lama-first")]
    pub search: String,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// With --json, include the planner's raw output.
    #[arg(long)]
    pub solver_output: bool,
}

/// `onebrain validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The domain PDDL file.
    #[arg(long)]
    pub domain: PathBuf,
    /// The problem PDDL file.
    #[arg(long)]
    pub problem: PathBuf,
    /// The plan: one `(action arg ...)` per line, `;` comments (Fast Downward's format).
    #[arg(long)]
    pub plan: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `onebrain bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(value_enum, default_value = "verifier")]
    pub what: BenchTarget,
    /// Repetitions (scales the corpus and the samples).
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    /// Where the benchmark data lives (PlanBench, Planetarium).
    #[arg(long, default_value = "../shared/data")]
    pub data: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The benchmark suites.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum BenchTarget {
    /// The verifier: native rejection, plan validation, overhead, throughput.
    Verifier,
}

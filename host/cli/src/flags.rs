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
    /// Exit status: 0 solved, 1 not solved, 2 error.
    Check(CheckArgs),
    /// Validate a plan against a domain + problem, step by step (VAL-equivalent).
    /// Exit status: 0 valid, 1 not valid, 2 error.
    Validate(ValidateArgs),
    /// Does a candidate spec still mean the task? Compare it with the reference spec.
    /// Exit status: 0 faithful, 1 not faithful (or undecided), 2 error.
    Faithful(FaithfulArgs),
    /// Generate text in one role of the model, for a quick look (the Judge prints its score).
    Generate(GenerateArgs),
    /// Installed WebAssembly plugins: list, inspect, check.
    Plugins(PluginsArgs),
    /// Measure onebrain against a peer in the same run and print the ratios.
    Bench(BenchArgs),
    /// Solve one task with the model: Actor → verifier → Judge → Editor, each step printed.
    Solve(SolveArgs),
    /// Evaluate strategies on benchmarks from a config; resumable; writes the report.
    Eval(EvalArgs),
    /// Train Actor and Editor with PPO and the Judge with its calibrated loss, from solver
    /// feedback alone; checkpoints as it goes, `--resume` continues exactly.
    Train(TrainArgs),
    /// Compare training runs (arms): held-out rows before and after with 95 % intervals,
    /// each arm against the first, and the curves on shared axes.
    Compare(CompareArgs),
    /// Evaluate a training run's kept checkpoints afterwards on an eval config's tasks, with
    /// this binary: one row per update in `RUN/posthoc/SET.jsonl`, for `compare --set SET`.
    Posthoc(PosthocArgs),
    /// Write one role of a checkpoint for another runtime: a PEFT adapter folder
    /// (transformers + PEFT) or a LoRA adapter GGUF (llama.cpp), with its role tokens.
    Export(ExportArgs),
}

impl Command {
    /// True for the commands that answer yes or no (`check`, `validate`, `faithful`): they
    /// exit 0 for yes, 1 for no and 2 for an error, as grep does.
    pub fn answers_yes_or_no(&self) -> bool {
        matches!(self, Command::Check(_) | Command::Validate(_) | Command::Faithful(_))
    }
}

/// `onebrain export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The checkpoint: a folder written by `onebrain train` (`results/<arm>/checkpoints/update-N`,
    /// or a run folder for its newest), or a PEFT LoRA folder (to turn it into a GGUF).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// The role to export: actor, editor or judge.
    #[arg(long)]
    pub role: String,
    /// `peft` (transformers + PEFT) or `gguf` (llama.cpp).
    #[arg(long, default_value = "peft")]
    pub format: String,
    /// The folder to write (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// The base model (`.gguf` or safetensors folder; a bare name is looked up in
    /// `.cache/models/`). Defaults to the one the checkpoint names.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

/// `onebrain compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run folders (`runs/train-…` or committed `results/train-…`); the first is the
    /// baseline the others are set against.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Write `arms.md` and the curves (`arms-*.svg`) into this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Compare the runs' post-hoc evaluations on this set (`onebrain posthoc`; the eval
    /// config's file stem, e.g. `eval-heldout`) instead of the held-out rows the runs made.
    #[arg(long)]
    pub set: Option<String>,
}

/// `onebrain posthoc`.
#[derive(Debug, Args)]
pub struct PosthocArgs {
    /// The run folder (`onebrain train`'s out-dir): its `config.json` gives the model, its
    /// `checkpoints/update-N` the parameters.
    #[arg(long)]
    pub run: PathBuf,
    /// The eval config whose tasks, episode and solver the evaluations use (its `[model]`
    /// is replaced by the run's).
    #[arg(long)]
    pub config: PathBuf,
    /// The updates to evaluate, comma-separated; 0 is the parameters the run started from.
    #[arg(long, value_delimiter = ',', required = true)]
    pub updates: Vec<u64>,
    /// Episodes open at once (overrides the eval config's `in-flight`; on the CPU a greedy
    /// answer does not depend on it).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub in_flight: Option<u64>,
    #[command(flatten)]
    pub device: DeviceFlag,
}

/// `onebrain train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The training config (`configs/train-*.toml`).
    #[arg(long)]
    pub config: PathBuf,
    /// Continue the run in the config's out-dir from its newest checkpoint (or from its
    /// held-out trace, if killed before the first); an empty out-dir starts a new run.
    #[arg(long, conflicts_with = "role")]
    pub resume: bool,
    /// Train over a job array (docs/cluster.md), sharing the config's out-dir: `learner`
    /// (with `--actors N`), `actor` (with `--actor K/N`), or `array`, which reads the role
    /// from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (task 0 learns, task t is actor
    /// t-1 of COUNT-1). A role always continues what its files hold; no held-out evaluation.
    #[arg(long, value_enum)]
    pub role: Option<TrainRole>,
    /// `--role actor`: which actor this process is, K of N (K from 0).
    #[arg(long, value_name = "K/N")]
    pub actor: Option<onebrain_eval::Shard>,
    /// `--role learner`: how many actors feed it.
    #[arg(long, value_name = "N")]
    pub actors: Option<usize>,
    /// Override the config's total number of updates.
    #[arg(long)]
    pub updates: Option<u64>,
    /// Override the config's out-dir (relative to the current folder).
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Run no held-out evaluation (`onebrain bench training` times the update alone).
    #[arg(long)]
    pub skip_heldout: bool,
    /// Print a line per episode, not only per update.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub device: DeviceFlag,
}

/// `onebrain train --role`: a process of a job array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrainRole {
    /// Learns from the actors' episodes and publishes the parameters (`--actors N`).
    Learner,
    /// Samples its slice of the task stream (`--actor K/N`).
    Actor,
    /// The role of this Slurm array task: 0 learns, the others act.
    Array,
}

/// `onebrain solve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("task").required(true).args(["text", "file", "seed", "planbench", "problem_file"])))]
#[command(group(clap::ArgGroup::new("custom_domain").args(["domain_file", "domain_text"])))]
pub struct SolveArgs {
    /// The solve config (model, episode, solver, plugins).
    #[arg(long, default_value = "configs/solve.toml")]
    pub config: PathBuf,
    #[command(flatten)]
    pub device: DeviceFlag,
    /// The domain plugin that describes the task (`blocksworld`, `logistics`, …).
    #[arg(long, required_unless_present = "custom_domain", conflicts_with = "custom_domain")]
    pub domain: Option<String>,
    /// A domain no plugin has, as a PDDL file: the model writes the problem for it
    /// (`problem` mode) from `--text` or `--file`.
    #[arg(long, conflicts_with_all = ["seed", "planbench", "problem_file"])]
    pub domain_file: Option<PathBuf>,
    /// A domain no plugin has and no PDDL states, described in prose in this file: the model
    /// writes the domain and the problem (`full` mode) from it and `--text` or `--file`.
    #[arg(long, conflicts_with_all = ["seed", "planbench", "problem_file"])]
    pub domain_text: Option<PathBuf>,
    /// With `--domain-text`: the reference domain, for the faithfulness check (with
    /// `--reference-problem`).
    #[arg(long, requires_all = ["domain_text", "reference_problem"])]
    pub reference_domain: Option<PathBuf>,
    /// With `--domain-file` or `--domain-text`: a reference problem, for the faithfulness
    /// check (with `--domain-text`, also `--reference-domain`).
    #[arg(long, requires = "custom_domain")]
    pub reference_problem: Option<PathBuf>,
    /// A problem file of the plugin's domain: the plugin states it in words, and the file is
    /// the reference for the faithfulness check.
    #[arg(long)]
    pub problem_file: Option<PathBuf>,
    /// The task text.
    #[arg(long)]
    pub text: Option<String>,
    /// A file holding the task text.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// A task the domain plugin generates from this seed (it has a reference spec).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Objects in a generated task.
    #[arg(long, default_value_t = 4, requires = "seed")]
    pub size: u32,
    /// A PlanBench task `set/instance` (e.g. `blocksworld_3/2`), with its reference spec.
    #[arg(long)]
    pub planbench: Option<String>,
    /// Where the benchmark data lives (for --planbench).
    #[arg(long, default_value = "../shared/data")]
    pub data: PathBuf,
    /// Override the config's strategy (multi-role, self-refine, llm+p, direct, tot, best-of-k).
    #[arg(long)]
    pub strategy: Option<String>,
    /// Override the config's mode (full, problem).
    #[arg(long)]
    pub mode: Option<String>,
    /// Override the config's decoding constraint: `grammar` (well-formed PDDL over the
    /// domain's vocabulary) or `none`.
    #[arg(long)]
    pub constrain: Option<String>,
    /// Trained role parameters to load (a checkpoint folder written by `onebrain train`).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Then solve the same task again with the role parameters of this checkpoint folder,
    /// and print the two episodes side by side (solved, plan, Judge, faithful, what differs
    /// from the task's reference).
    #[arg(long, value_name = "CHECKPOINT", conflicts_with = "json")]
    pub side_by_side: Option<PathBuf>,
    /// Print only the episode record, as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `onebrain eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The eval config (`configs/eval-*.toml`).
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub device: DeviceFlag,
    /// Trained role parameters to load (a checkpoint folder written by `onebrain train`).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Override the config's out-dir (relative to the current folder), e.g. to evaluate a
    /// checkpoint beside the base model with one config.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Override the config's decoding constraint (`grammar` or `none`).
    #[arg(long)]
    pub constrain: Option<String>,
    /// Override the episode's base seed: when sampling, another draw of the same tasks
    /// (pass@k and best-of-k: `scripts/pass-at-k.sh`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the config's `in-flight` (episodes open at once). On the CPU a row's
    /// arithmetic does not depend on its batch, so greedy answers are the same at any value.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub in_flight: Option<u64>,
    /// Rewrite the report from the trace without running anything.
    #[arg(long, conflicts_with_all = ["shard", "merge"])]
    pub report_only: bool,
    /// Run only the K-th of N deterministic slices of the episodes (K from 0, a job array's
    /// task id), into OUT/shards/K-of-N/; resumable like a whole run.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<onebrain_eval::Shard>,
    /// Join the finished shards into the run's trace and write its report; refuses shards
    /// run with another config.
    #[arg(long, conflicts_with = "shard")]
    pub merge: bool,
    /// Print every step of every episode, not only a line per episode.
    #[arg(long, short)]
    pub verbose: bool,
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
    pub what: onebrain_bench::suite::Target,
    /// Repetitions (scales the corpus and the samples).
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    /// Where the benchmark data lives (PlanBench, Planetarium).
    #[arg(long, default_value = "../shared/data")]
    pub data: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// `training` only: the config of the new path (default configs/train-1.5b-full.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// `training` only: the config of the path it is compared with (default
    /// configs/train-old-path.toml: batch-1 rollouts and a dense f32 learner).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// `constraint` only: what the Actor writes, `problem` or `full` (the domain, then the
    /// problem under the domain it wrote; 1,024 tokens, as `configs/eval-full-mode.toml`).
    /// Default `problem`.
    #[arg(long)]
    pub mode: Option<String>,
}

/// `onebrain plugins`.
#[derive(Debug, Args)]
pub struct PluginsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PluginsAction,
    /// A folder of installed plugins (one sub-folder with a `plugin.toml` each); repeatable.
    #[arg(long = "plugins-dir", global = true, default_value = "plugins")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Where compiled components are cached.
    #[arg(long, global = true, default_value = ".cache/components")]
    pub cache_dir: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `onebrain plugins <action>`.
#[derive(Debug, Subcommand)]
pub enum PluginsAction {
    /// One line per installed plugin.
    List,
    /// A plugin's manifest, permissions and the API version its component was built against.
    Inspect {
        /// The plugin's name.
        name: String,
    },
    /// Load, instantiate and call a plugin once; print the limits it ran under.
    Check {
        /// The plugin's name; all plugins when omitted.
        name: Option<String>,
    },
    /// Score the multi-role episodes of an eval or training trace again with other reward
    /// plugins (the paper's weights), next to the rewards the trace recorded: what a reward
    /// would have paid, without running the model again.
    Rescore {
        /// The trace (`trace.jsonl` of `onebrain eval`, `episodes.jsonl` of `onebrain train`).
        #[arg(long)]
        trace: PathBuf,
        /// Reward plugins, by name or path; repeatable.
        #[arg(long = "reward", required = true)]
        rewards: Vec<String>,
    },
}

/// `onebrain faithful`.
#[derive(Debug, Args)]
pub struct FaithfulArgs {
    /// The reference domain PDDL.
    #[arg(long)]
    pub ref_domain: PathBuf,
    /// The reference problem PDDL.
    #[arg(long)]
    pub ref_problem: PathBuf,
    /// The candidate domain PDDL.
    #[arg(long)]
    pub domain: PathBuf,
    /// The candidate problem PDDL.
    #[arg(long)]
    pub problem: PathBuf,
    /// The faithfulness-checker plugin: an installed plugin's name or a path to its
    /// `plugin.toml`, folder or `.wasm`.
    #[arg(long, default_value = "reference-checker")]
    pub checker: String,
    /// Run the reference checker natively instead of as a plugin.
    #[arg(long, conflicts_with = "checker")]
    pub native: bool,
    /// A folder of installed plugins; repeatable.
    #[arg(long = "plugins-dir", default_value = "plugins")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Wall-clock limit for the planner on the candidate, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `onebrain generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The role whose embeddings and adapters condition the model.
    #[arg(long, default_value = "actor")]
    pub role: String,
    #[command(flatten)]
    pub device: DeviceFlag,
    /// The user message.
    #[arg(long, required_unless_present = "prompt_file")]
    pub prompt: Option<String>,
    /// A file holding the whole prompt as the model sees it, chat template included (an
    /// Actor prompt from a trace, say); instead of `--prompt` and `--system`.
    #[arg(long, conflicts_with_all = ["prompt", "system"])]
    pub prompt_file: Option<PathBuf>,
    /// The system message.
    #[arg(long, default_value = "You are a planning expert who writes PDDL.")]
    pub system: String,
    /// A `.gguf` file or a Hugging Face safetensors folder; a bare file name is looked up in
    /// `.cache/models/`. Defaults to the checkpoint's model, else Qwen2.5-Coder-1.5B-Instruct.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Trained role parameters to load: a checkpoint folder written by `onebrain train`, or
    /// a PEFT LoRA adapter folder (loaded into `--role`).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Also write to this file, as JSON, the prompt's token ids, the next-token logits after
    /// it (generation path) and the greedy answer's token ids: what `scripts/verify-export.sh`
    /// compares with transformers + PEFT and llama.cpp.
    #[arg(long, value_name = "FILE")]
    pub logits_json: Option<PathBuf>,
    /// With `--logits-json`: also the next-token logits of the dense f32 path (the weights
    /// dequantized, activations unrounded; `learner_weights = "dense"`).
    #[arg(long, requires = "logits_json")]
    pub dense: bool,
    /// Most new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature (0 = greedy, the evaluation setting).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Nucleus mass.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Sampler seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--device`, on every command that loads the model.
#[derive(Debug, Args)]
pub struct DeviceFlag {
    /// Where the model runs: cpu or cuda:N (a CUDA build: `make build-cuda`); overrides the
    /// config's `model.device`.
    #[arg(long = "device", value_name = "cpu|cuda:N")]
    pub choice: Option<onebrain_model::DeviceChoice>,
}

impl DeviceFlag {
    /// Sets `model.device` when the flag was given.
    pub fn apply(&self, model: &mut onebrain_model::ModelConfig) {
        if let Some(d) = self.choice {
            model.device = d;
        }
    }
}

//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading, running or saving the backbone.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model file was not found in any of the places searched.
    #[error(
        "model file `{name}` not found (searched: {}); run `scripts/setup.sh --models {setup}` \
         to download it, set ONEBRAIN_MODEL_DIR, or name an existing file in the config",
        display_paths(.searched)
    )]
    ModelNotFound {
        /// The file name or path the config named.
        name: String,
        /// Every candidate path that was tried.
        searched: Vec<PathBuf>,
        /// The `--models` argument of the setup script that fetches it (`test` or `all`).
        setup: &'static str,
    },
    /// A model file exists but is not the file it claims to be (size, magic or layout).
    #[error("model file {path} is unusable: {reason}; re-run `scripts/setup.sh --models {setup}`")]
    WrongModelFile {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
        /// The `--models` argument of the setup script that repairs it.
        setup: &'static str,
    },
    /// A file could not be written whole (a full disk among the causes): the message names
    /// it, and the file keeps what it held before.
    #[error(transparent)]
    Write(#[from] onebrain_durable::Error),
    /// Reading or writing a file failed.
    #[error("I/O error on {path}: {error}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// What the OS said (in the message, not as a source: a chain printer such as
        /// anyhow's `{:#}` would say it twice).
        error: std::io::Error,
    },
    /// A GGUF file breaks its own format, or its tensors do not have the shapes its metadata
    /// declares: refused before any tensor is used.
    #[error("GGUF file {path} is unusable: {what}: {reason}")]
    MalformedGguf {
        /// The file.
        path: PathBuf,
        /// The part at fault: `the header`, ``metadata `key` ``, ``tensor `name` ``.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A required GGUF metadata key or safetensors/config.json field is missing or mistyped.
    #[error("missing or invalid model metadata `{key}`: {reason}")]
    Metadata {
        /// The key (GGUF metadata key, config.json field or tensor name).
        key: String,
        /// What was wrong.
        reason: String,
    },
    /// The checkpoint's architecture is not one this crate implements.
    #[error("unsupported architecture `{0}` (supported: llama, qwen2)")]
    UnsupportedArchitecture(String),
    /// The GGUF names a pre-tokenizer this crate does not know.
    #[error("unsupported tokenizer pre-tokenizer `{0}` (supported: qwen2, smollm, llama-bpe, gpt2)")]
    UnsupportedPreTokenizer(String),
    /// Building or running the tokenizer failed.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// A configuration value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A prompt (plus the tokens to generate) does not fit the model's context.
    #[error("prompt of {tokens} tokens (+{max_new} to generate) exceeds the context of {context} positions")]
    ContextOverflow {
        /// Prompt length in tokens, including role tokens.
        tokens: usize,
        /// Tokens requested for generation.
        max_new: usize,
        /// The model's maximum number of positions.
        context: usize,
    },
    /// A request would hold more memory than the config's budget; refused before prefill.
    #[error(
        "{rows} row(s) of {positions} positions need an estimated {:.0} MiB (weights {:.0}, \
         keys and values {:.0}, work {:.0}), past the memory budget of {budget_mib} MiB \
         (model.memory-budget-mb)",
        .estimate.total_mib(), .estimate.model_mib, .estimate.kv_mib, .estimate.work_mib
    )]
    OverBudget {
        /// Rows in the request (a batch of rollouts, of Judge prompts).
        rows: usize,
        /// Positions per row: role tokens, the longest prompt and the tokens to generate.
        positions: usize,
        /// What the request was estimated to hold.
        estimate: crate::memory_estimate::MemoryEstimate,
        /// The budget, MiB.
        budget_mib: usize,
    },
    /// A token id is outside the vocabulary.
    #[error("token id {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange {
        /// The id.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// A decoding constraint could not be built or applied.
    #[error("constrained decoding: {0}")]
    Constraint(onebrain_grammar::GrammarError),
    /// An empty input where at least one token is needed.
    #[error("empty input: {0}")]
    EmptyInput(&'static str),
    /// A checkpoint or PEFT directory does not match this model.
    #[error("checkpoint {path} does not match this model: {reason}")]
    CheckpointMismatch {
        /// The checkpoint file or directory.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// Parameters hold NaN or infinite values: a checkpoint with them is refused at load,
    /// and none is written with them.
    #[error("{path}: {} parameter(s) not finite (NaN or infinite): {}", .names.len(), name_list(.names))]
    NonFinite {
        /// The checkpoint file or folder.
        path: PathBuf,
        /// The parameters at fault, sorted.
        names: Vec<String>,
    },
    /// A JSON file (config.json, checkpoint meta, adapter_config.json) could not be parsed.
    #[error("invalid JSON in {path}: {error}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error (in the message, not as a source).
        error: serde_json::Error,
    },
    /// A safetensors file could not be read or written.
    #[error("safetensors error in {path}: {reason}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A tensor operation failed inside candle (in the message, not as a source).
    #[error("tensor error: {0}")]
    Candle(candle_core::Error),
}

// The causes of `Constraint` and `Candle` are in their messages; `#[from]` would also make
// them `source()`, and a chain printer (anyhow's `{:#}`) then says each twice ("tensor
// needs 30081024 bytes …: tensor needs 30081024 bytes …").
impl From<onebrain_grammar::GrammarError> for Error {
    fn from(e: onebrain_grammar::GrammarError) -> Self {
        Error::Constraint(e)
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Candle(e)
    }
}

impl From<onebrain_kernels::Error> for Error {
    fn from(e: onebrain_kernels::Error) -> Self {
        match e {
            onebrain_kernels::Error::Refused { what, reason } => Error::meta(what, reason),
            onebrain_kernels::Error::Candle(e) => Error::Candle(e),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The first few names and how many more: every LoRA matrix of a run can be at fault.
fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut out = names.iter().take(SHOWN).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    out
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".to_string();
    }
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Error::Io { path: path.into(), error }
    }

    pub(crate) fn meta(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Metadata { key: key.into(), reason: reason.into() }
    }
}

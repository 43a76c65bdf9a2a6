//! Zero-shot transfer (the right half of the paper's Table 1): ProntoQA and NATURAL PLAN
//! Trip Planning and Calendar Scheduling, answered directly by the model in one role's
//! conditioning and scored by exact match under each benchmark's own protocol
//! (`onebrain-transfer`). A trained checkpoint is evaluated exactly like the base model.
//!
//! One record per example goes to `transfer.jsonl` next to the planning trace as it is
//! scored; a rerun skips the examples already there.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use onebrain_model::{chat_prompt, Role, SamplingConfig};
use onebrain_roles::LanguageModel;
use onebrain_transfer as tr;
use serde::{Deserialize, Serialize};

use crate::metrics::wilson_interval;
use crate::trace::{read_jsonl, TraceError, TraceWriter};

/// Which transfer benchmark a table names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransferKind {
    /// ProntoQA, a JSONL file such as `prontoqa/prontoqa-5hop-fictional.jsonl`.
    Prontoqa,
    /// NATURAL PLAN's official `trip_planning.json`.
    TripPlanning,
    /// NATURAL PLAN's official `calendar_scheduling.json`.
    CalendarScheduling,
}

impl TransferKind {
    /// The report's column name.
    pub fn column(self) -> &'static str {
        match self {
            TransferKind::Prontoqa => "ProntoQA",
            TransferKind::TripPlanning => "Trip",
            TransferKind::CalendarScheduling => "Calendar",
        }
    }

    /// The worked examples a prompt shows unless the config says otherwise: the
    /// generator's 8 for ProntoQA, the benchmark's 5-shot prompt for NATURAL PLAN.
    fn default_shots(self) -> usize {
        match self {
            TransferKind::Prontoqa => 8,
            _ => 5,
        }
    }
}

/// One `[[transfer]]` table of an eval config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TransferBenchmark {
    /// The benchmark.
    pub kind: TransferKind,
    /// Its file, relative to the config file's folder unless absolute (NATURAL PLAN's
    /// official files are not shipped: point this at yours).
    pub file: PathBuf,
    /// The first `sample` examples; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    /// Worked examples in the prompt: ProntoQA 0–8 (default 8); NATURAL PLAN 5 (default)
    /// or 0, its two official prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shots: Option<usize>,
    /// The role whose conditioning answers (default: the Actor).
    #[serde(default = "actor")]
    pub role: Role,
    /// The answer's token cap.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
}

fn actor() -> Role {
    Role::Actor
}
fn default_max_tokens() -> usize {
    384
}

/// One scored answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferRecord {
    /// The benchmark.
    pub kind: TransferKind,
    /// The example's id.
    pub id: String,
    /// ProntoQA's hop count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<u32>,
    /// The conditioning role.
    pub role: Role,
    /// Worked examples in the prompt.
    pub shots: usize,
    /// The model file.
    pub model: String,
    /// The answer as written.
    pub output: String,
    /// What the scorer read from it (`true`, `Oslo 3, Riga 4`, `Monday 12:00-12:30`);
    /// `None` when it read nothing, which scores 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parsed: Option<String>,
    /// Exact match.
    pub correct: bool,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Tokens written.
    pub output_tokens: usize,
    /// Model time (prefill + decode), seconds.
    pub model_secs: f64,
    /// A model error, when the answer could not be generated (scored 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why transfer examples could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TransferLoadError {
    /// The benchmark file.
    #[error(transparent)]
    File(#[from] tr::TransferError),
    /// A config value out of range.
    #[error("transfer benchmark {kind:?}: {message}")]
    Invalid {
        /// The benchmark.
        kind: TransferKind,
        /// What is wrong.
        message: String,
    },
}

/// An example ready to ask: its id, prompt and scorer.
pub struct TransferItem {
    /// The example's id.
    pub id: String,
    /// ProntoQA's hop count.
    pub hops: Option<u32>,
    /// The user message.
    pub prompt: String,
    /// Where the answer ends.
    pub stop: Vec<String>,
    score: Box<dyn Fn(&str) -> (bool, Option<String>) + Send>,
}

impl std::fmt::Debug for TransferItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferItem").field("id", &self.id).field("hops", &self.hops).finish_non_exhaustive()
    }
}

impl TransferItem {
    /// Scores an answer: exact match, and what was read from it.
    pub fn score(&self, answer: &str) -> (bool, Option<String>) {
        (self.score)(answer)
    }
}

fn trip_text(stays: &[(String, u32)]) -> Option<String> {
    (!stays.is_empty()).then(|| stays.iter().map(|(c, d)| format!("{c} {d}")).collect::<Vec<_>>().join(", "))
}

fn time_text(t: &tr::MeetingTime) -> String {
    format!("{} {:02}:{:02}-{:02}:{:02}", t.day, t.start / 60, t.start % 60, t.end / 60, t.end % 60)
}

/// The examples of one `[[transfer]]` table (its `file` relative to `base`), with their
/// prompts and scorers.
pub fn transfer_items(b: &TransferBenchmark, base: &Path) -> Result<Vec<TransferItem>, TransferLoadError> {
    let path = base.join(&b.file);
    let shots = b.shots.unwrap_or(b.kind.default_shots());
    let invalid = |message: String| TransferLoadError::Invalid { kind: b.kind, message };
    let mut items: Vec<TransferItem> = match b.kind {
        TransferKind::Prontoqa => {
            if shots > 8 {
                return Err(invalid(format!("shots = {shots}, but ProntoQA examples carry 8")));
            }
            tr::load_prontoqa(&path)?
                .into_iter()
                .map(|ex| TransferItem {
                    id: ex.id.clone(),
                    hops: Some(ex.hops),
                    prompt: tr::prontoqa_prompt(&ex, shots),
                    stop: vec!["\nQ:".into()],
                    score: Box::new(move |a| {
                        let label = tr::extract_label(a);
                        (label == Some(ex.label()), label.map(|l| l.to_string()))
                    }),
                })
                .collect()
        }
        TransferKind::TripPlanning => {
            let pick = natural_plan_prompt(shots).map_err(invalid)?;
            let trips = tr::load_trip_planning(&path)?;
            trips
                .into_iter()
                .map(|ex| {
                    let prompt = pick(&ex.prompt_0shot, &ex.prompt_5shot);
                    natural_plan_item(ex.id.clone(), prompt, move |a| (tr::score_trip(&ex, a), trip_text(&tr::parse_trip(a))))
                })
                .collect()
        }
        TransferKind::CalendarScheduling => {
            let pick = natural_plan_prompt(shots).map_err(invalid)?;
            let meetings = tr::load_calendar_scheduling(&path)?;
            meetings
                .into_iter()
                .map(|ex| {
                    let prompt = pick(&ex.prompt_0shot, &ex.prompt_5shot);
                    natural_plan_item(ex.id.clone(), prompt, move |a| {
                        let parsed = tr::parse_calendar(a);
                        (parsed.as_ref() == Some(&ex.golden), parsed.as_ref().map(time_text))
                    })
                })
                .collect()
        }
    };
    if let Some(n) = b.sample {
        items.truncate(n);
    }
    Ok(items)
}

/// A NATURAL PLAN example: its answer ends where the next worked example's `TASK:` would begin.
fn natural_plan_item(id: String, prompt: String, score: impl Fn(&str) -> (bool, Option<String>) + Send + 'static) -> TransferItem {
    TransferItem { id, hops: None, prompt, stop: vec!["\nTASK:".into()], score: Box::new(score) }
}

/// NATURAL PLAN ships two prompts per example; `shots` picks one.
fn natural_plan_prompt(shots: usize) -> Result<fn(&str, &str) -> String, String> {
    match shots {
        0 => Ok(|zero, _| zero.to_string()),
        5 => Ok(|_, five| five.to_string()),
        n => Err(format!("shots = {n}; NATURAL PLAN has a 0-shot and a 5-shot prompt")),
    }
}

/// Asks the model every example of `benchmarks` (files relative to `base`) not yet in the
/// trace at `trace`, scores it and appends the record; `on_record(record, done, total)`
/// after each.
pub fn run_transfer(
    benchmarks: &[TransferBenchmark],
    base: &Path,
    trace: &Path,
    model: &mut dyn LanguageModel,
    on_record: &mut dyn FnMut(&TransferRecord, usize, usize),
) -> Result<Vec<TransferRecord>, TransferRunError> {
    let existing: Vec<TransferRecord> = read_jsonl(trace)?.records;
    let done: HashSet<(TransferKind, String)> = existing.iter().map(|r| (r.kind, r.id.clone())).collect();
    let mut plan = Vec::new();
    for b in benchmarks {
        for item in transfer_items(b, base)? {
            plan.push((b, item));
        }
    }
    let total = plan.len();
    let mut finished = plan.iter().filter(|(b, i)| done.contains(&(b.kind, i.id.clone()))).count();
    let mut writer = TraceWriter::open(trace)?;
    let mut out = existing;
    for (b, item) in plan.into_iter().filter(|(b, i)| !done.contains(&(b.kind, i.id.clone()))) {
        let sampling = SamplingConfig { stop: item.stop.clone(), ..SamplingConfig::greedy(b.max_tokens) };
        let prompt = chat_prompt("You are a careful assistant. Answer in the format asked for.", &item.prompt);
        let start = Instant::now();
        let (output, prompt_tokens, output_tokens, error) = match model.generate(b.role, &prompt, &sampling) {
            Ok(g) => (g.text, g.prompt_tokens, g.tokens.len(), None),
            Err(e) => (String::new(), 0, 0, Some(e.to_string())),
        };
        let (correct, parsed) = item.score(&output);
        let record = TransferRecord {
            kind: b.kind,
            id: item.id,
            hops: item.hops,
            role: b.role,
            shots: b.shots.unwrap_or(b.kind.default_shots()),
            model: model.name(),
            output,
            parsed,
            correct,
            prompt_tokens,
            output_tokens,
            model_secs: start.elapsed().as_secs_f64(),
            error,
        };
        writer.append(&record)?;
        finished += 1;
        on_record(&record, finished, total);
        out.push(record);
    }
    Ok(out)
}

/// Why a transfer run stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferRunError {
    /// The examples could not be loaded.
    #[error(transparent)]
    Load(#[from] TransferLoadError),
    /// The trace could not be read or written.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// The transfer columns: accuracy with its 95 % Wilson interval per benchmark (ProntoQA
/// also per hop count), and the mean output tokens and model seconds per example.
pub fn transfer_table(records: &[TransferRecord]) -> String {
    let mut rows: BTreeMap<(TransferKind, Option<u32>), Vec<&TransferRecord>> = BTreeMap::new();
    for r in records {
        rows.entry((r.kind, None)).or_default().push(r);
        if r.hops.is_some() {
            rows.entry((r.kind, r.hops)).or_default().push(r);
        }
    }
    let mut out = String::from(
        "| benchmark | n | exact match | 95 % interval | no answer read | tokens out | model s |\n|---|---|---|---|---|---|---|\n",
    );
    for ((kind, hops), rs) in &rows {
        let n = rs.len();
        let k = rs.iter().filter(|r| r.correct).count();
        let (lo, hi) = wilson_interval(k, n).unwrap_or((0.0, 0.0));
        let unread = rs.iter().filter(|r| r.parsed.is_none()).count();
        let tokens = rs.iter().map(|r| r.output_tokens as f64).sum::<f64>() / n as f64;
        let secs = rs.iter().map(|r| r.model_secs).sum::<f64>() / n as f64;
        let name = match hops {
            Some(h) => format!("{} ({h}-hop)", kind.column()),
            None => kind.column().to_string(),
        };
        out.push_str(&format!(
            "| {name} | {n} | {k}/{n} = {:.1} % | [{:.0}, {:.0}] | {unread} | {tokens:.0} | {secs:.1} |\n",
            100.0 * k as f64 / n as f64,
            100.0 * lo,
            100.0 * hi
        ));
    }
    out
}

/// `onebrain eval` for a config's `[[transfer]]` tables: loads the model (and the config's
/// checkpoint, if any), runs [`run_transfer`] into `transfer.jsonl` in the out-dir, and
/// writes the table to `transfer.md` there. Returns the table.
pub fn run_transfer_eval(
    cfg: &crate::EvalConfig,
    base: &Path,
    on_record: &mut dyn FnMut(&TransferRecord, usize, usize),
) -> Result<(PathBuf, String), crate::EvalError> {
    let out_dir = base.join(&cfg.out_dir);
    let trace = out_dir.join("transfer.jsonl");
    let mut model = onebrain_roles::load_model(&cfg.solve_config(cfg.strategies[0]), base)?;
    let records = run_transfer(&cfg.transfer, base, &trace, &mut model, on_record)?;
    let table = transfer_table(&records);
    let md = out_dir.join("transfer.md");
    onebrain_durable::write_atomic(&md, format!("# {}: transfer\n\n{table}", cfg.name))?;
    Ok((trace, table))
}

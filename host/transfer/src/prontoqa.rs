//! ProntoQA (Saparov & He, ICLR 2023): a context of facts and rules, a statement, and
//! the answer True or False. The model reasons, then answers; the score is exact match
//! of the normalised final label.

use std::path::Path;

use serde::Deserialize;

use crate::TransferError;

/// One ProntoQA example, as `../shared/data/prontoqa/*.jsonl` stores it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ProntoQaExample {
    /// A stable id, e.g. `prontoqa-5hop-fictional-0001`.
    pub id: String,
    /// The number of deduction steps from the context to the answer.
    pub hops: u32,
    /// The facts and rules.
    pub context: String,
    /// The statement to judge, e.g. `Max is sour.`.
    pub query: String,
    /// The gold reasoning, one sentence per step.
    pub chain_of_thought: Vec<String>,
    /// `True` or `False`.
    pub answer: String,
    /// The generator's worked examples for this example (the paper's 8-shot setting).
    #[serde(default)]
    pub in_context_examples: Vec<ProntoQaShot>,
}

/// A worked example that precedes a question in the few-shot prompt.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ProntoQaShot {
    /// The facts and rules.
    pub context: String,
    /// The statement.
    pub query: String,
    /// The reasoning.
    pub chain_of_thought: Vec<String>,
    /// `True` or `False`.
    pub answer: String,
}

impl ProntoQaExample {
    /// The gold label.
    pub fn label(&self) -> bool {
        self.answer.eq_ignore_ascii_case("true")
    }
}

/// Reads a ProntoQA JSONL file; a row that does not parse, or whose answer is neither
/// True nor False, is an error naming its line.
pub fn load_prontoqa(path: &Path) -> Result<Vec<ProntoQaExample>, TransferError> {
    let text = std::fs::read_to_string(path).map_err(|source| TransferError::Io { path: path.into(), source })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |message: String| TransferError::Format { path: path.into(), row: format!("line {}", i + 1), message };
        let ex: ProntoQaExample = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if !(ex.answer.eq_ignore_ascii_case("true") || ex.answer.eq_ignore_ascii_case("false")) {
            return Err(bad(format!("answer `{}` is neither True nor False", ex.answer)));
        }
        out.push(ex);
    }
    Ok(out)
}

fn question(context: &str, query: &str) -> String {
    format!("Q: {context} True or false: {query}\nA:")
}

/// The prompt: up to `shots` of the example's worked examples (reasoning, then "The answer
/// is true/false."), then the question. `shots = 0` is zero-shot with the answer format
/// stated.
pub fn prontoqa_prompt(example: &ProntoQaExample, shots: usize) -> String {
    let mut out = String::from(
        "Answer the question by reasoning step by step from the facts and rules, \
         then end with \"The answer is true.\" or \"The answer is false.\"\n\n",
    );
    for shot in example.in_context_examples.iter().take(shots) {
        let answer = shot.answer.to_ascii_lowercase();
        out.push_str(&question(&shot.context, &shot.query));
        out.push_str(&format!(" {} The answer is {answer}.\n\n", shot.chain_of_thought.join(" ")));
    }
    out.push_str(&question(&example.context, &example.query));
    out
}

/// The final True / False label of a response: the one after the last "answer is", else
/// the last standalone "true" or "false". `None` when there is none.
pub fn extract_label(response: &str) -> Option<bool> {
    let lower = response.to_ascii_lowercase();
    let word_at = |s: &str| -> Option<bool> {
        let w: String = s.trim_start().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        match w.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    };
    if let Some(label) = lower.rmatch_indices("answer is").find_map(|(i, m)| word_at(&lower[i + m.len()..])) {
        return Some(label);
    }
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphabetic()).collect();
    words.iter().rev().find_map(|w| match *w {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    })
}

/// 1 when the response's final label is the gold one, else 0 (no label is a wrong one).
pub fn score_prontoqa(example: &ProntoQaExample, response: &str) -> bool {
    extract_label(response) == Some(example.label())
}

//! The transfer runner with a model double that answers from a script: every example is
//! asked once in the configured role, scored by its benchmark's own protocol, appended to
//! the trace, and skipped on a rerun; a model error scores 0 and the run goes on.

use std::path::{Path, PathBuf};

use onebrain_core::BoxError;
use onebrain_eval::{run_transfer, transfer_items, transfer_table, TransferBenchmark, TransferKind, TransferRecord};
use onebrain_model::{Generation, Role, SamplingConfig, StopReason};
use onebrain_roles::LanguageModel;

/// Answers each prompt with the first scripted answer whose key the prompt contains.
struct Scripted {
    answers: Vec<(&'static str, &'static str)>,
    calls: Vec<(Role, String)>,
}

impl LanguageModel for Scripted {
    fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
        self.calls.push((role, prompt.to_string()));
        assert!(s.temperature == 0.0 && !s.stop.is_empty());
        let Some((_, text)) = self.answers.iter().find(|(k, _)| prompt.contains(k)) else {
            return Err("the model crashed".into());
        };
        Ok(Generation {
            text: text.to_string(),
            tokens: vec![1; 7],
            prompt_tokens: 100,
            cached_prompt_tokens: 0,
            prefill_tokens: 100,
            prefill_secs: 0.0,
            decode_secs: 0.0,
            stop_reason: StopReason::Eos,
            logprobs: Vec::new(),
            constraint: None,
        })
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.5)
    }
    fn name(&self) -> String {
        "scripted".into()
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../transfer/tests/data")
}

fn bench(kind: TransferKind, file: &str) -> TransferBenchmark {
    TransferBenchmark { kind, file: file.into(), sample: None, shots: None, role: Role::Actor, max_tokens: 64 }
}

#[test]
fn natural_plan_examples_are_asked_once_scored_and_resumed() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("transfer.jsonl");
    let benchmarks = [
        bench(TransferKind::TripPlanning, "trip_planning.json"),
        TransferBenchmark { role: Role::Editor, ..bench(TransferKind::CalendarScheduling, "calendar_scheduling.json") },
    ];
    let mut model = Scripted {
        answers: vec![
            // Trip 1 right; trip 0 one day off.
            ("Oslo for 3 days", "**Day 1-3:** Oslo.\n**Day 3:** Fly from Oslo to Riga.\n**Day 3-6:** Riga."),
            ("Vienna", "**Day 1-5:** Vienna.\n**Day 5:** Fly from Vienna to Istanbul.\n**Day 5-8:** Istanbul.\n**Day 8:** Fly from Istanbul to Santorini.\n**Day 8-13:** Santorini."),
            // Calendar 0 right; calendar 1 has no scripted answer: a model error.
            ("Ana and Ben", "Here is the proposed time: Monday, 12:00 - 12:30"),
        ],
        calls: Vec::new(),
    };
    let mut seen = Vec::new();
    let records = run_transfer(&benchmarks, &fixtures(), &trace, &mut model, &mut |r, done, total| {
        seen.push((r.id.clone(), done, total))
    })
    .unwrap();
    assert_eq!(records.len(), 4);
    assert_eq!(seen.last().map(|s| (s.1, s.2)), Some((4, 4)));
    let get = |id: &str| records.iter().find(|r| r.id == id).unwrap();
    assert!(get("trip_planning_example_1").correct);
    let vienna = get("trip_planning_example_0");
    assert!(!vienna.correct);
    assert_eq!(vienna.parsed.as_deref(), Some("Vienna 5, Istanbul 4, Santorini 6"));
    assert!(get("calendar_scheduling_example_0").correct);
    let crashed = get("calendar_scheduling_example_1");
    assert!(!crashed.correct && crashed.parsed.is_none());
    assert!(crashed.error.as_deref().is_some_and(|e| e.contains("crashed")));
    // The 5-shot prompt by default, in the configured role.
    assert!(model.calls.iter().all(|(_, p)| p.contains("You are an expert at")));
    assert_eq!(model.calls.iter().filter(|(r, _)| *r == Role::Editor).count(), 2);

    // A rerun asks nothing and reads the same records back.
    let before = model.calls.len();
    let again = run_transfer(&benchmarks, &fixtures(), &trace, &mut model, &mut |_, _, _| {}).unwrap();
    assert_eq!(model.calls.len(), before);
    assert_eq!(again, records);
    let table = transfer_table(&again);
    assert!(table.contains("| Trip | 2 | 1/2 = 50.0 %"), "{table}");
    assert!(table.contains("| Calendar | 2 | 1/2 = 50.0 %"), "{table}");
}

#[test]
fn prontoqa_is_scored_per_hop_count_and_bad_configs_are_refused() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !data.is_dir() {
        eprintln!("skipping: no shared data");
        return;
    }
    let b = TransferBenchmark { sample: Some(3), ..bench(TransferKind::Prontoqa, "prontoqa/prontoqa-5hop-fictional.jsonl") };
    let items = transfer_items(&b, &data).unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].hops, Some(5));
    assert_eq!(items[0].prompt.matches("Q: ").count(), 9, "8 worked examples, then the question");
    // Row 1's gold answer is False (Max is not sour).
    assert_eq!(items[0].score("Max is a tumpus. Tumpuses are not sour. The answer is false."), (true, Some("false".into())));
    assert_eq!(items[0].score("The answer is true."), (false, Some("true".into())));
    assert_eq!(items[0].score("I am not sure."), (false, None));

    let tmp = tempfile::tempdir().unwrap();
    let mut model = Scripted { answers: vec![("True or false", "... The answer is false.")], calls: Vec::new() };
    let records: Vec<TransferRecord> =
        run_transfer(&[b.clone()], &data, &tmp.path().join("t.jsonl"), &mut model, &mut |_, _, _| {}).unwrap();
    let table = transfer_table(&records);
    assert!(table.contains("| ProntoQA (5-hop) | 3 |"), "{table}");

    let too_many = TransferBenchmark { shots: Some(9), ..b };
    assert!(transfer_items(&too_many, &data).unwrap_err().to_string().contains("shots = 9"));
    let three_shot = TransferBenchmark { shots: Some(3), ..bench(TransferKind::TripPlanning, "trip_planning.json") };
    assert!(transfer_items(&three_shot, &fixtures()).unwrap_err().to_string().contains("0-shot and a 5-shot"));
}

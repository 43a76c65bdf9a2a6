//! The scorers on hand-computed answers, near misses included (each must score 0), and
//! the loaders on the shared ProntoQA sets and on NATURAL PLAN rows written in the
//! official files' exact format (`tests/data/`; the real files are not reachable here).

use std::path::{Path, PathBuf};

use onebrain_transfer::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn trips() -> Vec<TripExample> {
    load_trip_planning(&data("trip_planning.json")).unwrap()
}

#[test]
fn trip_golden_plans_score_1_and_near_misses_0() {
    let trips = trips();
    assert_eq!(trips.len(), 2);
    let vienna = trips.iter().find(|t| t.id == "trip_planning_example_0").unwrap();
    assert_eq!(vienna.stays, [("Vienna".into(), 5), ("Istanbul".into(), 5), ("Santorini".into(), 5)]);
    for t in &trips {
        assert!(score_trip(t, &t.golden_plan), "{}", t.id);
    }
    let answer = |days: [&str; 3], cities: [&str; 3]| {
        format!(
            "Here is the trip plan for visiting the 3 European cities for 13 days:\n\n\
             **Day {}:** Arriving in {c0} and visit {c0} for 5 days.\n**Day 5:** Fly from {c0} to {c1}.\n\
             **Day {}:** Visit {c1} for 5 days.\n**Day 9:** Fly from {c1} to {c2}.\n**Day {}:** Visit {c2} for 5 days.",
            days[0], days[1], days[2], c0 = cities[0], c1 = cities[1], c2 = cities[2]
        )
    };
    let right = ["Vienna", "Istanbul", "Santorini"];
    assert!(score_trip(vienna, &answer(["1-5", "5-9", "9-13"], right)));
    // One day off in one stay.
    assert!(!score_trip(vienna, &answer(["1-5", "5-8", "8-13"], right)));
    // The right stays in the wrong order.
    assert!(!score_trip(vienna, &answer(["1-5", "5-9", "9-13"], ["Istanbul", "Vienna", "Santorini"])));
    // Only the first two legs.
    let short = "**Day 1-5:** Visit Vienna.\n**Day 5:** Fly from Vienna to Istanbul.\n**Day 5-9:** Visit Istanbul.";
    assert_eq!(parse_trip(short), [("Vienna".into(), 5), ("Istanbul".into(), 5)]);
    assert!(!score_trip(vienna, short));
    // No flights: no stays can be read, whatever the days say.
    assert_eq!(parse_trip("**Day 1-5:** Vienna\n**Day 5-9:** Istanbul\n**Day 9-13:** Santorini"), []);
    assert!(!score_trip(vienna, "I cannot plan this trip."));
    assert!(!score_trip(vienna, ""));
}

#[test]
fn trip_parsing_stops_at_the_last_day_and_reads_the_last_flight_of_a_line() {
    let text = "Here is the trip plan for visiting the 2 European cities for 6 days:\n\
                **Day 1-3:** Arriving in Oslo and visit Oslo for 3 days.\n\
                **Day 3:** Leave from the hotel and fly from Oslo to Riga.\n\
                **Day 3-6:** Visit Riga for 4 days.\n\
                **Day 6-9:** Extra days in Riga.";
    assert_eq!(parse_trip(text), [("Oslo".into(), 3), ("Riga".into(), 4)]);
}

#[test]
fn calendar_golden_plans_score_1_and_near_misses_0() {
    let cal = load_calendar_scheduling(&data("calendar_scheduling.json")).unwrap();
    assert_eq!(cal.len(), 2);
    let ana = cal.iter().find(|c| c.id == "calendar_scheduling_example_0").unwrap();
    assert_eq!((ana.num_people, ana.num_days), (2, 1));
    assert_eq!(ana.golden, MeetingTime { day: "Monday".into(), start: 12 * 60, end: 12 * 60 + 30 });
    let three = cal.iter().find(|c| c.id == "calendar_scheduling_example_1").unwrap();
    assert_eq!((three.num_people, three.num_days), (3, 2), "counts written as numbers load too");
    for c in &cal {
        assert!(score_calendar(c, &c.golden_plan), "{}", c.id);
    }
    assert!(score_calendar(ana, "Here is the proposed time: Monday, 12:00 - 12:30"));
    assert!(!score_calendar(ana, "Here is the proposed time: Monday, 12:00 - 13:00"), "a longer meeting");
    assert!(!score_calendar(ana, "Here is the proposed time: Tuesday, 12:00 - 12:30"), "the wrong day");
    assert!(!score_calendar(ana, "Monday 9:00 is busy, so Monday, 12:00 - 12:30"), "three times: no answer");
    assert!(!score_calendar(ana, "12:00 - 12:30"), "no day");
    assert!(!score_calendar(ana, ""));
}

#[test]
fn bad_files_are_errors_that_name_the_file_and_the_row() {
    let tmp = std::env::temp_dir().join(format!("onebrain-transfer-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let write = |name: &str, text: &str| {
        let p = tmp.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let e = load_trip_planning(&tmp.join("missing.json")).unwrap_err().to_string();
    assert!(e.contains("missing.json"), "{e}");
    let p = write("t.json", r#"{"ex0": {"cities": "A**B", "durations": "2", "prompt_0shot": "", "prompt_5shot": "", "golden_plan": ""}}"#);
    let e = load_trip_planning(&p).unwrap_err().to_string();
    assert!(e.contains("t.json") && e.contains("ex0") && e.contains("2 cities but 1 durations"), "{e}");
    let p = write("c.json", r#"{"ex1": {"num_people": "2", "num_days": "1", "prompt_0shot": "", "prompt_5shot": "", "golden_plan": "whenever"}}"#);
    let e = load_calendar_scheduling(&p).unwrap_err().to_string();
    assert!(e.contains("ex1") && e.contains("names no day and time"), "{e}");
    let p = write("q.jsonl", "{\"id\": \"x\", \"hops\": 1, \"context\": \"\", \"query\": \"\", \"chain_of_thought\": [], \"answer\": \"Maybe\"}\n");
    let e = load_prontoqa(&p).unwrap_err().to_string();
    assert!(e.contains("q.jsonl") && e.contains("line 1") && e.contains("neither True nor False"), "{e}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn prontoqa_labels_are_read_from_the_final_answer() {
    assert_eq!(extract_label("Max is not sour. The answer is false."), Some(false));
    assert_eq!(extract_label("True or false? Reasoning... the answer is True"), Some(true));
    // The last "answer is" wins over earlier words.
    assert_eq!(extract_label("It is true that Max is a yumpus. So the answer is false."), Some(false));
    // Without "answer is", the last standalone label.
    assert_eq!(extract_label("Max is a tumpus, so this is False."), Some(false));
    // Near misses: no label at all, or a label-like word that is not one.
    assert_eq!(extract_label("Max is a tumpus."), None);
    assert_eq!(extract_label("The answer is untrue-ish"), None);
    assert_eq!(extract_label(""), None);
}

#[test]
fn prontoqa_loads_the_shared_sets_and_scores_their_gold_reasoning() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/prontoqa");
    if !dir.is_dir() {
        eprintln!("skipping: {} not found", dir.display());
        return;
    }
    for (file, rows, hops) in [("prontoqa-5hop-fictional.jsonl", 500, 5), ("prontoqa-3hop-fictional.jsonl", 200, 3)] {
        let set = load_prontoqa(&dir.join(file)).unwrap();
        assert_eq!(set.len(), rows, "{file}");
        for ex in &set {
            assert_eq!(ex.hops, hops);
            // The gold chain of thought, then its label, scores 1; the other label 0.
            let label = if ex.label() { "true" } else { "false" };
            let gold = format!("{} The answer is {label}.", ex.chain_of_thought.join(" "));
            assert!(score_prontoqa(ex, &gold), "{}", ex.id);
            let flipped = format!("{} The answer is {}.", ex.chain_of_thought.join(" "), if ex.label() { "false" } else { "true" });
            assert!(!score_prontoqa(ex, &flipped), "{}", ex.id);
        }
        let first = &set[0];
        let prompt = prontoqa_prompt(first, 8);
        assert_eq!(prompt.matches("Q: ").count(), 8.min(first.in_context_examples.len()) + 1);
        assert!(prompt.ends_with(&format!("True or false: {}\nA:", first.query)), "{prompt}");
        assert!(!prontoqa_prompt(first, 0).contains(&first.in_context_examples[0].context));
    }
}

//! `describe` of a benchmark instance reproduces the benchmark's own NL
//! statement, through WASM: PlanBench for BlocksWorld, Mystery BlocksWorld
//! and Logistics (every row), Planetarium for Gripper (every explicit row).

mod common;

use std::io::BufRead;

use onebrain_runtime::{InstancePolicy, Limits, WasmDomainAdapter};

fn adapter(name: &str) -> WasmDomainAdapter {
    let host = common::host(Limits::default());
    WasmDomainAdapter::new(&common::bundled(&host, name), InstancePolicy::Reuse).unwrap()
}

fn planbench(plugin: &str, folder: &str, files: &[&str]) {
    let Some(data) = common::data_dir() else { return };
    let d = adapter(plugin);
    let mut rows = 0;
    for file in files {
        let dir = data.join("planbench").join(folder);
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let problem = std::fs::read_to_string(dir.join(row["problem_pddl"].as_str().unwrap())).unwrap();
            let want = row["nl_statement"].as_str().unwrap();
            let got = d.try_describe(&problem).unwrap_or_else(|e| panic!("{file} {}: {e}", row["instance_id"]));
            assert_eq!(got, want, "{file} instance {}", row["instance_id"]);
            rows += 1;
        }
    }
    assert!(rows >= 285, "{plugin}: only {rows} rows");
}

#[test]
fn blocksworld_matches_planbench() {
    planbench("blocksworld", "blocksworld", &["nl_tasks_blocksworld.jsonl", "nl_tasks_blocksworld_3.jsonl"]);
}

#[test]
fn mystery_blocksworld_matches_planbench() {
    planbench(
        "mystery-blocksworld",
        "mystery_blocksworld",
        &["nl_tasks_mystery_blocksworld.jsonl", "nl_tasks_mystery_blocksworld_3.jsonl"],
    );
}

#[test]
fn logistics_matches_planbench() {
    planbench("logistics", "logistics", &["nl_tasks_logistics.jsonl"]);
}

#[test]
fn gripper_matches_planetarium_explicit_rows() {
    let Some(data) = common::data_dir() else { return };
    let d = adapter("gripper");
    let file = std::fs::File::open(data.join("planetarium/gripper-train.jsonl.gz")).unwrap();
    let mut z = flate2::read::GzDecoder::new(file);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut z, &mut text).unwrap();
    let mut rows = 0;
    for line in text.as_bytes().lines() {
        let row: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        // Abstract rows ("gather all balls into one room") say what no single
        // problem's facts say; the explicit ones state every fact.
        if row["init_is_abstract"] != 0 || row["goal_is_abstract"] != 0 {
            continue;
        }
        let got = d.try_describe(row["problem_pddl"].as_str().unwrap()).unwrap();
        assert_eq!(got, row["natural_language"].as_str().unwrap(), "row {}", row["id"]);
        rows += 1;
    }
    assert!(rows > 10_000, "only {rows} explicit rows");
}

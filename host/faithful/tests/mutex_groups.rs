//! The mutex groups `mutex_groups` proves from a domain's action schemas hold in every
//! reference initial state of the benchmark data: no reference task states two atoms of one
//! group instance. (The groups are meant to refuse impossible initial states in a decoder; one
//! that a real task breaks would refuse a correct answer.)

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use onebrain_faithful::{mutex_groups, MutexGroup};

/// Two different initial atoms of `problem` in one group instance, if any.
fn broken(groups: &[MutexGroup], problem: &str) -> Option<(String, String)> {
    let p = onebrain_pddl::parse_problem(problem).unwrap();
    let mut seen: HashMap<(usize, Vec<&str>), &onebrain_pddl::Atom> = HashMap::new();
    for atom in &p.init {
        let args: Vec<&str> = atom.args.iter().map(|t| t.name.as_str()).collect();
        for (gi, g) in groups.iter().enumerate() {
            for part in g.parts.iter().filter(|q| q.predicate == atom.predicate && q.params.iter().all(|&i| i < args.len())) {
                let key = (gi, part.params.iter().map(|&i| args[i]).collect());
                match seen.get(&key) {
                    Some(other) if *other != atom => return Some((other.to_string(), atom.to_string())),
                    Some(_) => {}
                    None => {
                        seen.insert(key, atom);
                    }
                }
            }
        }
    }
    None
}

fn groups_of(path: &Path) -> Vec<MutexGroup> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    mutex_groups(&onebrain_pddl::parse_domain(&text).unwrap())
}

#[test]
fn planbench_reference_initial_states_break_no_group() {
    let Some(data) = common::data_dir() else { return };
    for (config, at_least) in [("blocksworld", 3), ("mystery_blocksworld", 3), ("logistics", 1)] {
        let dir = data.join("planbench").join(config);
        let groups = groups_of(&dir.join("domain.pddl"));
        assert!(groups.len() >= at_least, "{config}: {groups:?}");
        let mut checked = 0;
        for sub in ["instances", "instances_3blocks"] {
            let Ok(entries) = std::fs::read_dir(dir.join(sub)) else { continue };
            for e in entries.flatten() {
                let problem = std::fs::read_to_string(e.path()).unwrap();
                if let Some((a, b)) = broken(&groups, &problem) {
                    panic!("{}: {a} and {b} break {groups:?}", e.path().display());
                }
                checked += 1;
            }
        }
        assert!(checked > 200, "{config}: {checked} instances");
    }
}

#[test]
fn planetarium_reference_initial_states_break_no_group() {
    let Some(data) = common::data_dir() else { return };
    for domain in ["blocksworld", "gripper"] {
        let groups = groups_of(&data.join("planetarium/domains").join(format!("{domain}.pddl")));
        assert!(groups.len() >= 3, "{domain}: {groups:?}");
        let f = std::fs::File::open(data.join(format!("planetarium/{domain}-train.jsonl.gz"))).unwrap();
        // The first 2,000 rows of each: every init and goal shape the generator has.
        for line in BufReader::new(flate2::read::GzDecoder::new(f)).lines().take(2000) {
            let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let problem = v["problem_pddl"].as_str().unwrap();
            if let Some((a, b)) = broken(&groups, problem) {
                panic!("{domain} row {}: {a} and {b} break {groups:?}", v["id"]);
            }
        }
    }
}

/// By update 40 the `text-agreement` arm's Gripper answers appended `carry` facts to
/// a correct initial state (`results/train-1.5b-text-agreement`, "What Gripper learned").
/// The domain's own groups rule each one out twice: a gripper is free or carries, a ball is
/// in a room or carried. So the init-mutex guard would refuse the answer the reward underpaid.
#[test]
fn the_arms_gripper_carry_facts_break_the_domains_groups() {
    let Some(data) = common::data_dir() else { return };
    let groups = groups_of(&data.join("planetarium/domains/gripper.pddl"));
    let init = "(room room1) (room room2) (ball ball1) (gripper gripper1) (at-robby room1) (at ball1 room2) (free gripper1)";
    let problem = |extra: &str| {
        format!("(define (problem t) (:domain gripper) (:objects room1 room2 ball1 gripper1) (:init {init} {extra}) (:goal (at ball1 room1)))")
    };
    assert_eq!(broken(&groups, &problem("")), None, "the text's own initial state");
    let (a, b) = broken(&groups, &problem("(carry ball1 gripper1)")).expect("carry beside free and at");
    assert!(b.contains("carry") && (a.contains("free") || a.contains("(at ball1")), "{a} / {b}");
}

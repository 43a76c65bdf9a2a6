//! Timing figures for the native PDDL toolkit, on PlanBench data from ../shared/data.
//!
//! Run: `cargo bench -p onebrain-pddl --bench pddl`. Prints one line per figure. Compare the
//! rejection times with one Fast Downward call (≈ 140 ms on a 3-block task, DESIGN.md).

use std::collections::{HashSet, VecDeque};
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onebrain_pddl::{
    check, check_sources, ground, has_errors, parse_domain, parse_plan, parse_problem, validate,
};

fn data() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/planbench");
    p.is_dir().then_some(p)
}

/// Mean time of `f` over enough repetitions to fill ~0.3 s.
fn time<T>(mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_millis(300) {
        black_box(f());
        n += 1;
    }
    start.elapsed() / n
}

/// One run of `f`, timed as the fastest of 5 (to step over preemption by other processes).
fn timed<T>(mut f: impl FnMut() -> T) -> Duration {
    (0..5)
        .map(|_| {
            let s = Instant::now();
            black_box(f());
            s.elapsed()
        })
        .min()
        .unwrap()
}

fn median(it: impl Iterator<Item = Duration>) -> Duration {
    let mut v: Vec<Duration> = it.collect();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let Some(data) = data() else {
        eprintln!("SKIP: ../shared/data/planbench is absent");
        return;
    };
    let bw_dom = fs::read_to_string(data.join("blocksworld/domain.pddl")).unwrap();
    let bw_p =
        fs::read_to_string(data.join("blocksworld/instances_3blocks/instance-2.pddl")).unwrap();

    // 1. Native rejection of malformed specs (parse + all checks), one per category.
    let malformed: [(&str, String, String); 4] = [
        (
            "syntax (missing bracket)",
            bw_dom.replacen(')', "", 1),
            bw_p.clone(),
        ),
        (
            "predicate-schema (undefined predicate)",
            bw_dom.replace("(holding ?ob))", "(holdin ?ob))"),
            bw_p.clone(),
        ),
        (
            "object-type (undefined object)",
            bw_dom.clone(),
            bw_p.replacen("(handempty)", "(handempty) (clear zz)", 1),
        ),
        (
            "goal-constraint (unreachable goal)",
            bw_dom.clone(),
            bw_p.replacen("(handempty)", "", 1),
        ),
    ];
    for (what, d, p) in &malformed {
        assert!(has_errors(&check_sources(d, p)), "{what} is not rejected");
        println!(
            "reject {what}: {} per spec",
            us(time(|| check_sources(d, p)))
        );
    }
    println!(
        "accept valid 3-block spec (parse + check + reachability): {} per spec",
        us(time(|| check_sources(&bw_dom, &bw_p)))
    );

    // 2. Parse + check, grounding and validation over every PlanBench instance and plan.
    for cfg in ["blocksworld", "mystery_blocksworld", "logistics"] {
        let dir = data.join(cfg);
        let domain = parse_domain(&fs::read_to_string(dir.join("domain.pddl")).unwrap()).unwrap();
        let jsonl = fs::read_to_string(dir.join(format!("nl_tasks_{cfg}.jsonl"))).unwrap();
        let mut rows = Vec::new();
        for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
            // Pull the two fields without a JSON dependency: they are plain strings.
            let field = |k: &str| {
                let start = line.find(&format!("\"{k}\": \"")).unwrap() + k.len() + 5;
                let end = start + line[start..].find('"').unwrap();
                line[start..end].replace("\\n", "\n")
            };
            rows.push((field("problem_pddl"), field("ground_truth_plan")));
        }
        let problems: Vec<_> = rows
            .iter()
            .map(|(p, _)| parse_problem(&fs::read_to_string(dir.join(p)).unwrap()).unwrap())
            .collect();
        let srcs: Vec<String> = rows
            .iter()
            .map(|(p, _)| fs::read_to_string(dir.join(p)).unwrap())
            .collect();
        // Medians: on a shared 2-core machine the mean is dominated by a few preempted runs.
        let parse = median(srcs.iter().map(|s| timed(|| parse_problem(s).unwrap())));
        let check_t = median(problems.iter().map(|p| timed(|| check(&domain, p))));
        let ground_t = median(
            problems
                .iter()
                .map(|p| timed(|| ground(&domain, p).unwrap())),
        );
        let acts = problems
            .iter()
            .map(|p| ground(&domain, p).unwrap().actions().len())
            .max()
            .unwrap_or(0);
        // Blocksworld plans name blocks by colour (the integration test decodes them); here only
        // the timing matters, and an invalid plan is simulated up to its first failing step.
        let plans: Vec<_> = rows.iter().map(|(_, pl)| parse_plan(pl).unwrap()).collect();
        let valid = problems
            .iter()
            .zip(&plans)
            .filter(|(p, pl)| validate(&domain, p, pl).valid)
            .count();
        let val_t = median(
            problems
                .iter()
                .zip(&plans)
                .map(|(p, pl)| timed(|| validate(&domain, p, pl))),
        );
        println!(
            "{cfg} ({} tasks), medians: parse problem {}; check {}; ground {} (≤ {acts} ground actions); validate plan {} ({valid} valid as written)",
            problems.len(), us(parse), us(check_t), us(ground_t), us(val_t)
        );
    }

    // 3. Exhaustive breadth-first search of BlocksWorld state spaces (the faithfulness checker's use).
    for n in [4usize, 5, 6] {
        let objs: Vec<String> = (0..n).map(|i| format!("b{i}")).collect();
        let init: String = objs
            .iter()
            .map(|o| format!("(ontable {o}) (clear {o}) "))
            .collect();
        let p = parse_problem(&format!(
            "(define (problem s) (:domain blocksworld-4ops) (:objects {}) (:init (handempty) {init}) (:goal (on b0 b1)))",
            objs.join(" ")
        ))
        .unwrap();
        let domain = parse_domain(&bw_dom).unwrap();
        let start = Instant::now();
        let task = ground(&domain, &p).unwrap();
        let mut seen = HashSet::new();
        let mut queue = VecDeque::new();
        seen.insert(task.init().clone());
        queue.push_back(task.init().clone());
        let mut edges = 0usize;
        while let Some(s) = queue.pop_front() {
            for a in task.applicable(&s) {
                edges += 1;
                let next = task.apply(&s, a);
                if !seen.contains(&next) {
                    seen.insert(next.clone());
                    queue.push_back(next);
                }
            }
        }
        println!(
            "blocksworld {n} blocks: ground + BFS of all {} reachable states ({edges} transitions, {} ground actions) in {:.2} ms",
            seen.len(),
            task.actions().len(),
            start.elapsed().as_secs_f64() * 1e3
        );
    }
}

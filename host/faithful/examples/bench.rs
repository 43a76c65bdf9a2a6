//! Checker time per pair on PlanBench and Planetarium sizes, natively and through the WASM
//! plugin, and the share of pairs decided exactly, by closure, or left undecided.
//!
//! `cargo run --release -p onebrain-faithful --example bench [-- ROWS]` (ROWS per Planetarium
//! domain, default 200; the WASM column needs `scripts/build-plugins.sh` to have run).
//! Each reference is checked against two candidates: itself with every object renamed
//! (faithful) and itself with one goal fact dropped (goal weakening).

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Instant;

use onebrain_core::{Decision, Spec};
use onebrain_faithful::{check, Limits};
use onebrain_pddl::parse_problem;
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, WasmChecker};

struct Pair {
    reference: Spec,
    candidate: Spec,
    plan: Option<Vec<String>>,
}

fn pairs_of(reference: Spec, plan: Option<Vec<String>>) -> Vec<Pair> {
    let mut out = Vec::new();
    let m = common::object_renaming(&reference.problem);
    let renamed = Spec { domain: reference.domain.clone(), problem: common::rename(&reference.problem, &m) };
    out.push(Pair { reference: reference.clone(), candidate: renamed, plan: plan.as_ref().map(|p| p.iter().map(|s| common::rename(s, &m)).collect()) });
    let goal = parse_problem(&reference.problem).unwrap().goal;
    if goal.len() >= 2 {
        let lower = reference.problem.to_lowercase();
        let at = lower.find("(:goal").unwrap();
        let dropped = format!("{}{}", &lower[..at], lower[at..].replacen(&goal[0].to_string(), "", 1));
        out.push(Pair { reference: reference.clone(), candidate: Spec { domain: reference.domain.clone(), problem: dropped }, plan: None });
    }
    out
}

fn wasm_checker() -> Option<WasmChecker> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let registry = PluginRegistry::discover(&[root.join("plugins")]).ok()?;
    let manifest = registry.get("reference-checker").ok()?;
    let host = PluginHost::new(HostOptions::default()).ok()?;
    let plugin = host.load(manifest).ok()?;
    WasmChecker::new(&plugin, InstancePolicy::Reuse).ok()
}

fn main() {
    let rows: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let Some(data) = common::data_dir() else { return };
    let wasm = wasm_checker();
    if wasm.is_none() {
        eprintln!("no reference-checker plugin installed: WASM column skipped (run scripts/build-plugins.sh)");
    }
    let mut sets: Vec<(&str, Vec<Pair>)> = Vec::new();
    for (name, cfg, file) in [
        ("planbench-blocksworld", "blocksworld", "nl_tasks_blocksworld.jsonl"),
        ("planbench-logistics", "logistics", "nl_tasks_logistics.jsonl"),
    ] {
        let pairs = common::planbench_all(&data, cfg, file)
            .into_iter()
            .flat_map(|(_, d, p, plan)| pairs_of(Spec { domain: d, problem: p }, Some(plan)))
            .collect();
        sets.push((name, pairs));
    }
    for domain in ["blocksworld", "gripper"] {
        // Every size bucket: rows spread by taking every k-th.
        let all = common::planetarium(&data, domain, usize::MAX, |_| true);
        let step = (all.len() / rows.max(1)).max(1);
        let pairs = all.into_iter().step_by(step).take(rows).flat_map(|(d, p)| pairs_of(Spec { domain: d, problem: p }, None)).collect();
        sets.push((if domain == "gripper" { "planetarium-gripper" } else { "planetarium-blocksworld" }, pairs));
    }
    println!("| set | pairs | native mean ms | native p95 ms | native max ms | wasm mean ms | exact | closure | undecided |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let limits = Limits::default();
    for (name, pairs) in &sets {
        let mut times = Vec::new();
        let mut slowest = (0.0, String::new());
        let (mut exact, mut closure, mut undecided) = (0, 0, 0);
        for p in pairs {
            let t = Instant::now();
            let r = check(&p.reference, &p.candidate, p.plan.as_deref(), true, &limits).unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if ms > slowest.0 {
                let objects = parse_problem(&p.reference.problem).map(|q| q.objects.len()).unwrap_or(0);
                slowest = (ms, format!("{objects} objects, {:?}", r.decision));
            }
            times.push(ms);
            match r.decision {
                Decision::Exact => exact += 1,
                Decision::Closure => closure += 1,
                Decision::Undecided => undecided += 1,
            }
        }
        // A pair can exceed the plugin host's fuel or time limit: counted, not fatal.
        let mut wasm_errors = 0;
        let wasm_mean = wasm.as_ref().map(|w| {
            let t = Instant::now();
            for p in pairs {
                if let Err(e) = w.try_check(&p.reference, &p.candidate, p.plan.as_deref()) {
                    eprintln!("{name}: plugin error: {e}");
                    wasm_errors += 1;
                }
            }
            t.elapsed().as_secs_f64() * 1e3 / pairs.len() as f64
        });
        let n = times.len();
        let mean = times.iter().sum::<f64>() / n as f64;
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let p95 = sorted[(n * 95 / 100).min(n - 1)];
        let pct = |k: usize| format!("{:.1} %", 100.0 * k as f64 / n as f64);
        println!(
            "| {name} | {n} | {mean:.2} | {p95:.2} | {:.2} | {} | {} | {} | {} |",
            sorted[n - 1],
            wasm_mean.map_or("–".to_string(), |w| if wasm_errors > 0 { format!("{w:.2} ({wasm_errors} over limits)") } else { format!("{w:.2}") }),
            pct(exact),
            pct(closure),
            pct(undecided)
        );
        eprintln!("{name}: slowest pair {:.1} ms ({})", slowest.0, slowest.1);
    }
}

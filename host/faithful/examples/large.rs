//! The checker on large tasks: every pair of the corpus (`tests/corpus/mod.rs`:
//! BlocksWorld of 10, 15 and 20 blocks, Logistics of 6 to 10 packages, Gripper of 20 balls,
//! each reference renamed both ways and mutated six ways), checked natively and through the
//! `reference-checker` plugin under its manifest's budget. Prints whether the two agree on
//! every pair, the corpus table (unsound verdicts, false rejections, undecided, times), the
//! path that decided each pair, and the fuel each decision took against the task's size.
//!
//! ```sh
//! scripts/build-plugins.sh
//! cargo run --release -p onebrain-faithful --example large -- [--out results/checker-large] [--quick]
//! ```
//!
//! `--quick` takes the first seed of each size; `--out DIR` also writes `pairs.csv`, one row
//! per pair, and `table.md`, what is printed. For sizing the budget, `--native-only
//! --work-per-size N` checks natively only, under another work budget.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use corpus::{Kind, Pair};
use onebrain_core::{Decision, FaithfulnessReport};
use onebrain_faithful::{check, task_size, Limits, TaskSize};
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, WasmChecker};

/// Work units past which a pair's fuel is mostly work, not parsing: the pairs that size the
/// fuel a work unit needs.
const WORK_DOMINATES: u64 = 10_000_000;

/// One pair's results on both paths.
struct Row {
    pair: Pair,
    size: TaskSize,
    native: FaithfulnessReport,
    native_ms: f64,
    wasm: Result<FaithfulnessReport, String>,
    wasm_ms: f64,
    fuel: u64,
    fuel_limit: u64,
    timeout_ms: u64,
}

impl Row {
    fn agree(&self) -> bool {
        self.wasm.as_ref().is_ok_and(|w| key(w) == key(&self.native))
    }
}

/// What must be the same on both paths: verdict, decision, drift, and the work count (the
/// same count means the same computation).
fn key(r: &FaithfulnessReport) -> (&'static str, Decision, Option<onebrain_core::Drift>, u64) {
    (r.verdict(), r.decision, r.drift, r.work)
}

/// Which part of the checker decided the pair.
fn path(r: &FaithfulnessReport) -> &'static str {
    if r.undecided {
        "undecided"
    } else if !r.init_preserved {
        if r.objects_preserved {
            "mapping: initial state differs"
        } else {
            "mapping: objects differ"
        }
    } else if !r.goal_preserved {
        match r.decision {
            Decision::Closure => "closure: goal refuted by a reachable state",
            Decision::Exact => "exact: every reachable state compared",
            Decision::Undecided => "goal undecided, another test failed",
        }
    } else if !r.plan_replay_ok && r.solvable {
        "plan replay fails"
    } else {
        match r.decision {
            Decision::Exact => "exact: the same goal",
            Decision::Closure => "closure: goal implied (invariants or exhausted search)",
            Decision::Undecided => "undecided",
        }
    }
}

fn checker(root: &Path) -> Option<WasmChecker> {
    let registry = PluginRegistry::discover(&[root.join("plugins")]).ok()?;
    let manifest = registry.get("reference-checker").ok()?;
    let host = PluginHost::new(HostOptions::default()).ok()?;
    let plugin = host.load(manifest).ok()?;
    WasmChecker::new(&plugin, InstancePolicy::Reuse).ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn max(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(0.0, f64::max)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let native_only = args.iter().any(|a| a == "--native-only");
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
    let out: Option<PathBuf> = value("--out").map(PathBuf::from);
    let mut limits = Limits::default();
    if let Some(w) = value("--work-per-size") {
        limits.work_per_size = w.parse().expect("--work-per-size takes a number");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let wasm = if native_only { None } else { checker(&root) };
    if wasm.is_none() && !native_only {
        eprintln!("no reference-checker plugin installed: run scripts/build-plugins.sh");
        std::process::exit(2);
    }
    let pairs = corpus::pairs(&root, |domain, size, seed| {
        !quick || corpus::REFERENCES.iter().any(|(d, s, seeds)| *d == domain && *s == size && seeds.first() == Some(&seed))
    });
    let mut rows = Vec::new();
    for pair in pairs {
        let size = task_size(&pair.reference).expect("the corpus's references ground");
        let t = Instant::now();
        let native = check(&pair.reference, &pair.candidate, pair.plan.as_deref(), pair.plan.is_some(), &limits).unwrap();
        let native_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let (wasm_report, cost) = match &wasm {
            Some(w) => {
                let r = w.try_check(&pair.reference, &pair.candidate, pair.plan.as_deref()).map_err(|e| e.to_string());
                (r, w.last_call().expect("a call ran"))
            }
            None => (Ok(native.clone()), onebrain_runtime::CallCost { fuel: 0, fuel_limit: 0, timeout_ms: 0, wall_ms: 0.0 }),
        };
        let wasm_ms = t.elapsed().as_secs_f64() * 1e3;
        let row = Row {
            pair,
            size,
            native,
            native_ms,
            wasm: wasm_report,
            wasm_ms,
            fuel: cost.fuel,
            fuel_limit: cost.fuel_limit,
            timeout_ms: cost.timeout_ms,
        };
        eprintln!(
            "{:55} {:12} {:8.1} ms native {:8.1} ms wasm {:>14} fuel {:>12} work{}",
            row.pair.id,
            row.native.verdict(),
            row.native_ms,
            row.wasm_ms,
            row.fuel,
            row.native.work,
            if row.agree() { String::new() } else { format!("  DISAGREE: {:?}", row.wasm.as_ref().map(key)) }
        );
        rows.push(row);
    }
    let text = tables(&rows, &limits);
    print!("{text}");
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("table.md"), &text).unwrap();
        std::fs::write(dir.join("pairs.csv"), csv(&rows)).unwrap();
        eprintln!("wrote {}/table.md and pairs.csv", dir.display());
    }
    if rows.iter().any(|r| !r.agree()) {
        std::process::exit(1);
    }
}

fn tables(rows: &[Row], limits: &Limits) -> String {
    let mut s = String::new();
    let agree = rows.iter().filter(|r| r.agree()).count();
    let errors = rows.iter().filter(|r| r.wasm.is_err()).count();
    let _ = writeln!(s, "Native and plugin agree (verdict, decision, drift, work count) on {agree} of {} pairs; plugin errors: {errors}.\n", rows.len());

    // The corpus table: per domain and size.
    let _ = writeln!(s, "| set | pairs | unsound faithful | false rejections | undecided | native median / worst (ms) | plugin median / worst (ms) |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let mut sets: BTreeMap<(&str, u32), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        sets.entry((r.pair.domain, r.pair.size)).or_default().push(r);
    }
    let all: Vec<&Row> = rows.iter().collect();
    let mut line = |name: String, rs: &[&Row]| {
        let unsound = rs.iter().filter(|r| !r.pair.kind.faithful() && (r.native.faithful || r.wasm.as_ref().is_ok_and(|w| w.faithful))).count();
        let rejected = rs
            .iter()
            .filter(|r| r.pair.kind.faithful() && (r.native.verdict() == "not faithful" || r.wasm.as_ref().is_ok_and(|w| w.verdict() == "not faithful")))
            .count();
        let undecided = rs.iter().filter(|r| r.native.undecided).count();
        let _ = writeln!(
            s,
            "| {name} | {} | {unsound} | {rejected} | {undecided} | {:.0} / {:.0} | {:.0} / {:.0} |",
            rs.len(),
            median(rs.iter().map(|r| r.native_ms).collect()),
            max(rs.iter().map(|r| r.native_ms)),
            median(rs.iter().map(|r| r.wasm_ms).collect()),
            max(rs.iter().map(|r| r.wasm_ms)),
        );
    };
    for ((domain, size), rs) in &sets {
        line(format!("{domain} {size}"), rs);
    }
    line("all".into(), &all);

    // Which path decided each kind of pair.
    let mut paths: BTreeMap<(Kind, &str), usize> = BTreeMap::new();
    for r in rows {
        *paths.entry((r.pair.kind, path(&r.native))).or_default() += 1;
    }
    let _ = writeln!(s, "\n| candidate | verdict path (native = plugin) | pairs |");
    let _ = writeln!(s, "|---|---|---:|");
    for ((kind, p), n) in &paths {
        let _ = writeln!(s, "| {} | {p} | {n} |", kind.as_str());
    }

    // Fuel against size, per reference: the most any of its pairs took.
    let _ = writeln!(s, "\n| reference | objects | init facts | ground actions | atoms | size (actions + atoms) | work budget | most work | most fuel | fuel limit | fuel / work (busiest pair) | plugin worst (ms) | wall limit (ms) |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut refs: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        let id = r.pair.id.rsplit_once('/').map_or(r.pair.id.clone(), |(a, _)| a.to_string());
        refs.entry(id).or_default().push(r);
    }
    let mut per_work: Vec<f64> = Vec::new();
    for (id, rs) in &refs {
        let z = rs[0].size;
        let most_work = rs.iter().map(|r| r.native.work).max().unwrap_or(0);
        let most_fuel = rs.iter().map(|r| r.fuel).max().unwrap_or(0);
        // Fuel per work unit where the work dominates: the pair that did the most work. (A
        // pair decided by its mapping does no work; its fuel is parsing, not work.)
        let busiest = rs.iter().max_by_key(|r| r.native.work).expect("a reference has pairs");
        let ratio = busiest.fuel as f64 / busiest.native.work.max(1) as f64;
        per_work.extend(
            rs.iter().filter(|r| r.native.work >= WORK_DOMINATES).map(|r| r.fuel as f64 / r.native.work as f64),
        );
        let _ = writeln!(
            s,
            "| {id} | {} | {} | {} | {} | {} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {ratio:.1} | {:.0} | {} |",
            z.objects,
            z.init_facts,
            z.actions,
            z.atoms,
            z.units(),
            limits.max_work(&z) as f64,
            most_work as f64,
            most_fuel as f64,
            rs[0].fuel_limit as f64,
            max(rs.iter().map(|r| r.wasm_ms)),
            rs[0].timeout_ms,
        );
    }
    per_work.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (per_work.first(), per_work.last()) {
        let _ = writeln!(
            s,
            "\nFuel per work unit over the {} pairs with at least {WORK_DOMINATES:.0e} work units (where the \
             checker's fixed costs are small beside the work): min {lo:.1}, median {:.1}, max {hi:.1}.",
            per_work.len(),
            median(per_work.clone())
        );
    }

    // How well each measure of size predicts the most fuel a reference's pairs took.
    let _ = writeln!(s, "\n| measure | most fuel per unit, min over references | max | max / min |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    let measures: [(&str, fn(&TaskSize) -> u64); 5] = [
        ("objects", |z| z.objects),
        ("init facts", |z| z.init_facts),
        ("ground actions", |z| z.actions),
        ("atoms", |z| z.atoms),
        ("ground actions + atoms", |z| z.units()),
    ];
    for (name, m) in measures {
        let ratios: Vec<f64> =
            refs.values().map(|rs| rs.iter().map(|r| r.fuel).max().unwrap_or(0) as f64 / m(&rs[0].size).max(1) as f64).collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = max(ratios.iter().copied());
        let _ = writeln!(s, "| {name} | {lo:.3e} | {hi:.3e} | {:.1} |", hi / lo);
    }
    s
}

fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "pair,domain,size,kind,objects,init_facts,actions,atoms,native_verdict,plugin_verdict,decision,drift,path,work,fuel,fuel_limit,native_ms,plugin_ms,agree\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{:?},{},{},{},{},{},{:.1},{:.1},{}",
            r.pair.id,
            r.pair.domain,
            r.pair.size,
            r.pair.kind.as_str(),
            r.size.objects,
            r.size.init_facts,
            r.size.actions,
            r.size.atoms,
            r.native.verdict(),
            r.wasm.as_ref().map_or_else(|e| format!("error: {}", e.replace(',', ";")), |w| w.verdict().to_string()),
            r.native.decision,
            r.native.drift.map_or("", |d| d.as_str()),
            path(&r.native),
            r.native.work,
            r.fuel,
            r.fuel_limit,
            r.native_ms,
            r.wasm_ms,
            r.agree()
        );
    }
    s
}

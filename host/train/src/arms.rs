//! Comparing training runs (the learning experiment's arms): each arm's held-out row before
//! and after, the change with its 95 % interval, the arms against the first one, and their
//! curves on shared axes. Reads only a run folder's small files (`metrics.jsonl`,
//! `heldout.jsonl`, `heldout/update-*/report.json`, or a post-hoc set's
//! `posthoc/SET.jsonl` and `posthoc/SET/update-*/report.json`), so it works on committed
//! `results/`; where an evaluation's trace is there too (`trace.jsonl[.gz]`), the same tasks
//! are also compared task by task (`paired`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use onebrain_eval::{line_chart, wilson_interval, Report};

use crate::error::TrainError;
use crate::heldout::{read_rows as read_heldout, HeldOutRow};
use crate::metrics::MetricsRow;
use crate::paired::{paired, paired_cell, read_outcomes, Outcomes};
use crate::posthoc::{posthoc_dir, posthoc_rows_path};

/// One arm: a run folder's logs.
#[derive(Clone, Debug)]
pub struct ArmRun {
    /// What the tables call it.
    pub name: String,
    /// `metrics.jsonl`: one row per update.
    pub metrics: Vec<MetricsRow>,
    /// `heldout.jsonl`: one row per held-out evaluation, by update.
    pub heldout: Vec<HeldOutRow>,
    /// The held-out evaluations' reports (drift categories, solver calls), by update.
    pub reports: BTreeMap<u64, Report>,
    /// The held-out evaluations' outcomes task by task, by update, where a trace is kept.
    pub outcomes: BTreeMap<u64, Outcomes>,
}

impl ArmRun {
    /// Reads the run folder `dir`; an arm without a held-out evaluation is an error, since
    /// there is nothing to compare.
    pub fn read(name: &str, dir: &Path) -> Result<ArmRun, TrainError> {
        ArmRun::read_rows(name, dir, &dir.join("heldout.jsonl"), &dir.join("heldout"))
    }

    /// Reads the run folder `dir` with its post-hoc evaluations on the set `set`
    /// (`onebrain posthoc`) as its held-out rows, in place of those the run made itself.
    pub fn read_set(name: &str, dir: &Path, set: &str) -> Result<ArmRun, TrainError> {
        ArmRun::read_rows(name, dir, &posthoc_rows_path(dir, set), &posthoc_dir(dir, set))
    }

    fn read_rows(name: &str, dir: &Path, rows: &Path, evaluations: &Path) -> Result<ArmRun, TrainError> {
        let metrics: Vec<MetricsRow> = onebrain_eval::read_jsonl(&dir.join("metrics.jsonl"))?.records;
        let heldout = read_heldout(rows)?;
        if heldout.is_empty() {
            return Err(TrainError::Config(format!(
                "{}: no held-out evaluation in {}: nothing to compare",
                dir.display(),
                rows.display()
            )));
        }
        let (mut reports, mut outcomes) = (BTreeMap::new(), BTreeMap::new());
        for row in &heldout {
            let evaluation = evaluations.join(format!("update-{:06}", row.update));
            let path = evaluation.join("report.json");
            if let Ok(text) = std::fs::read_to_string(&path) {
                let report: Report = serde_json::from_str(&text)
                    .map_err(|e| TrainError::Config(format!("{}: {e}", path.display())))?;
                reports.insert(row.update, report);
            }
            if let Some(o) = read_outcomes(&evaluation)? {
                outcomes.insert(row.update, o);
            }
        }
        Ok(ArmRun { name: name.to_string(), metrics, heldout, reports, outcomes })
    }

    /// The held-out evaluation of the base model (the first row).
    pub fn before(&self) -> &HeldOutRow {
        &self.heldout[0]
    }

    /// The newest held-out evaluation.
    pub fn after(&self) -> &HeldOutRow {
        self.heldout.last().expect("read() refuses an arm without rows")
    }

    /// Updates done.
    pub fn updates(&self) -> u64 {
        self.metrics.last().map_or(0, |r| r.update)
    }
}

/// The names of run folders as the tables give them: the folder names less the prefix they
/// all share (`train-cpu-full`, `train-cpu-grounded` → `full`, `grounded`).
pub fn arm_names(dirs: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().map_or_else(|| d.display().to_string(), |n| n.to_string_lossy().into_owned()))
        .collect();
    if names.len() < 2 {
        return names;
    }
    let first = &names[0];
    let mut shared = first.len();
    for n in &names[1..] {
        shared = shared.min(first.bytes().zip(n.bytes()).take_while(|(a, b)| a == b).count());
    }
    // Cut at the last separator of the shared part, so `train-cpu-full` keeps `full`.
    let cut = first[..shared].rfind(['-', '_']).map_or(0, |i| i + 1);
    names.iter().map(|n| if n.len() > cut { n[cut..].to_string() } else { n.clone() }).collect()
}

/// Newcombe's 95 % interval (hybrid Wilson score, his method 10) for the difference of two
/// rates, `k2/n2 − k1/n1`. It treats the two samples as independent: for the same tasks
/// evaluated twice it is conservative, since a paired test could only be narrower.
pub fn difference_interval(k1: usize, n1: usize, k2: usize, n2: usize) -> Option<(f64, f64)> {
    let (l1, u1) = wilson_interval(k1, n1)?;
    let (l2, u2) = wilson_interval(k2, n2)?;
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let d = p2 - p1;
    let lo = d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt();
    let hi = d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt();
    Some((lo.max(-1.0), hi.min(1.0)))
}

/// `+5 [−12, +22] pp`, with `*` when the interval leaves out 0.
fn change(k1: usize, n1: usize, k2: usize, n2: usize) -> String {
    match difference_interval(k1, n1, k2, n2) {
        Some((lo, hi)) => {
            let d = 100.0 * (k2 as f64 / n2 as f64 - k1 as f64 / n1 as f64);
            let mark = if lo > 0.0 || hi < 0.0 { " *" } else { "" };
            format!("{d:+.0} [{:+.0}, {:+.0}]{mark}", 100.0 * lo, 100.0 * hi)
        }
        None => "–".into(),
    }
}

/// `31/40 [62, 88]`: a count with its Wilson interval in percent.
fn count(k: usize, n: usize) -> String {
    match wilson_interval(k, n) {
        Some((lo, hi)) => format!("{k}/{n} [{:.0}, {:.0}]", 100.0 * lo, 100.0 * hi),
        None => "–".into(),
    }
}

/// Answers whose goal already holds in their initial state (solved or not), of those compared.
fn goal_holds(row: &HeldOutRow) -> (usize, usize) {
    row.agreement.map_or((0, 0), |a| (a.goal_holds_initially, a.answers))
}

fn opt2(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

/// The report's drift categories and mean solver calls for one evaluation:
/// `goal 1 · type 21 · schema 0 · omission 0 · other 12`, `1.38`.
fn report_cells(arm: &ArmRun, update: u64) -> (String, String) {
    let Some(s) = arm.reports.get(&update).and_then(|r| r.strategies.first()) else {
        return ("–".into(), "–".into());
    };
    let drift = s.faithfulness.as_ref().map_or("–".into(), |f| {
        let c = &f.drift_categories;
        format!(
            "goal {} · type {} · schema {} · omission {} · other {}",
            c.goal_weakening, c.type_drift, c.schema_drift, c.constraint_omission, c.unclassified
        )
    });
    (drift, format!("{:.2}", s.avg_solver_calls))
}

fn heldout_line(out: &mut String, label: &str, arm: &ArmRun, row: &HeldOutRow) {
    let n = row.tasks;
    let (holds, answers) = goal_holds(row);
    let (init, goal) = row.agreement.map_or(("–".into(), "–".into()), |a| {
        (
            format!("{:.2} / {:.2}", a.init.precision(), a.init.recall()),
            format!("{:.2} / {:.2}", a.goal.precision(), a.goal.recall()),
        )
    });
    let (drift, calls) = report_cells(arm, row.update);
    let _ = writeln!(
        out,
        "| {label} | {} | {} | {} | {} | {} of {} | {} of {} | {init} | {goal} | {drift} | {calls} | {} / {} |",
        count(row.solved_b0, n),
        count(row.solved, n),
        count(row.faithful, n),
        count(holds, answers),
        row.solved_goal_at_init,
        row.solved,
        row.solved_objects_changed,
        row.solved,
        opt2(row.judge_auc),
        opt2(row.judge_ece),
    );
}

/// The same tasks in two evaluations, task by task (b_T and Faithful), when both traces are
/// kept: nothing otherwise.
fn paired_line(out: &mut String, label: &str, a: Option<&Outcomes>, b: Option<&Outcomes>) {
    let (Some(a), Some(b)) = (a, b) else { return };
    let _ = writeln!(
        out,
        "| {label} | | {} | {} | | | | | | | | |",
        paired_cell(&paired(a, b, |o| o.solved)),
        paired_cell(&paired(a, b, |o| o.faithful)),
    );
}

fn change_line(out: &mut String, label: &str, a: &HeldOutRow, b: &HeldOutRow) {
    let (ha, na) = goal_holds(a);
    let (hb, nb) = goal_holds(b);
    let _ = writeln!(
        out,
        "| {label} | {} | {} | {} | {} | | | | | | | |",
        change(a.solved_b0, a.tasks, b.solved_b0, b.tasks),
        change(a.solved, a.tasks, b.solved, b.tasks),
        change(a.faithful, a.tasks, b.faithful, b.tasks),
        change(ha, na, hb, nb),
    );
}

const HEADER: &str = "| | b_0 | b_T | Faithful | goal holds initially | solved with an empty plan | solved, objects changed | init P / R | goal P / R | drift categories (solved, unfaithful) | solver calls | Judge AUC / ECE |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n";

/// The comparison in Markdown: per arm its held-out rows (the first and the newest) and
/// the change between them, then each arm's newest row against the first arm's. Changes
/// are in percentage points with Newcombe's 95 % interval; `*` marks one that leaves out 0.
pub fn compare_table(arms: &[ArmRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Held-out before and after, counts with Wilson 95 % intervals (%); changes in percentage points with Newcombe's 95 % interval, `*` where it leaves out 0. Where both evaluations' traces are kept, *task by task* counts the tasks one side has and the other has not, with McNemar's exact p (`*` below 0.05): the same tasks are answered twice, so this is the sharper test.\n"
    );
    out.push_str(HEADER);
    for arm in arms {
        let (before, after) = (arm.before(), arm.after());
        heldout_line(&mut out, &format!("**{}**, update {}", arm.name, before.update), arm, before);
        if after.update != before.update {
            heldout_line(&mut out, &format!("{}, update {}", arm.name, after.update), arm, after);
            change_line(&mut out, &format!("{}: change", arm.name), before, after);
            let outcomes = |u: u64| arm.outcomes.get(&u);
            paired_line(&mut out, &format!("{}: task by task", arm.name), outcomes(before.update), outcomes(after.update));
        }
    }
    if arms.len() > 1 {
        let base = &arms[0];
        let _ = writeln!(out, "\nEach arm's newest held-out row against `{}`'s:\n", base.name);
        out.push_str("| | b_0 | b_T | Faithful | goal holds initially |\n|---|---:|---:|---:|---:|\n");
        let mut by_task = String::new();
        for arm in &arms[1..] {
            let (a, b) = (base.after(), arm.after());
            let (ha, na) = goal_holds(a);
            let (hb, nb) = goal_holds(b);
            let _ = writeln!(
                out,
                "| {} (update {}) − {} (update {}) | {} | {} | {} | {} |",
                arm.name,
                b.update,
                base.name,
                a.update,
                change(a.solved_b0, a.tasks, b.solved_b0, b.tasks),
                change(a.solved, a.tasks, b.solved, b.tasks),
                change(a.faithful, a.tasks, b.faithful, b.tasks),
                change(ha, na, hb, nb),
            );
            if let (Some(x), Some(y)) = (base.outcomes.get(&a.update), arm.outcomes.get(&b.update)) {
                let _ = writeln!(
                    by_task,
                    "| {} (update {}) against {} (update {}) | {} | {} |",
                    arm.name,
                    b.update,
                    base.name,
                    a.update,
                    paired_cell(&paired(x, y, |o| o.solved)),
                    paired_cell(&paired(x, y, |o| o.faithful)),
                );
            }
        }
        if !by_task.is_empty() {
            out.push_str("\nTask by task, where both traces are kept:\n\n| | b_T | Faithful |\n|---|---|---|\n");
            out.push_str(&by_task);
        }
    }
    out
}

/// The mean of each window of `w` values ending at i (fewer at the start); a value that
/// is not finite is skipped, and a window of none is NaN.
fn running_mean(values: &[f64], w: usize) -> Vec<f64> {
    (0..values.len())
        .map(|i| {
            let window: Vec<f64> =
                values[i.saturating_sub(w - 1)..=i].iter().copied().filter(|v| v.is_finite()).collect();
            if window.is_empty() {
                f64::NAN
            } else {
                window.iter().sum::<f64>() / window.len() as f64
            }
        })
        .collect()
}

/// The arms' curves on shared axes, each as (file name, SVG): the Actor's reward, training
/// b_0 and the share of solved episodes whose goal already held (running means over 5
/// updates), and the held-out Faithful and goal-holds-initially rates. x is the update,
/// 0 the base model.
pub fn compare_curves(arms: &[ArmRun]) -> Vec<(String, String)> {
    const WINDOW: usize = 5;
    let last = arms.iter().map(|a| a.updates().max(a.after().update)).max().unwrap_or(0) as usize;
    let by_update = |arm: &ArmRun, f: &dyn Fn(&MetricsRow) -> Option<f64>| -> Vec<f64> {
        let mut v = vec![f64::NAN; last + 1];
        for r in &arm.metrics {
            if let Some(slot) = v.get_mut(r.update as usize) {
                *slot = f(r).unwrap_or(f64::NAN);
            }
        }
        // Update 0 has no training batch: the running mean starts at update 1.
        let mut smoothed = running_mean(&v[1..], WINDOW);
        smoothed.insert(0, f64::NAN);
        smoothed
    };
    let stream = |file: &str, title: &str, label: &str, f: &dyn Fn(&MetricsRow) -> Option<f64>| {
        let series: Vec<(String, Vec<f64>)> = arms.iter().map(|a| (a.name.clone(), by_update(a, f))).collect();
        (file.to_string(), line_chart(title, "update", label, &series))
    };
    let held = |f: &dyn Fn(&HeldOutRow) -> f64| -> Vec<(String, Vec<f64>)> {
        arms.iter()
            .map(|a| {
                let mut v = vec![f64::NAN; last + 1];
                for h in &a.heldout {
                    if let Some(slot) = v.get_mut(h.update as usize) {
                        *slot = f(h);
                    }
                }
                (a.name.clone(), v)
            })
            .collect()
    };
    let mut heldout = held(&|h| h.rate(h.faithful));
    for (name, v) in held(&|h| {
        let (k, n) = goal_holds(h);
        if n == 0 {
            f64::NAN
        } else {
            k as f64 / n as f64
        }
    }) {
        heldout.push((format!("{name}: goal holds"), v));
    }
    vec![
        stream(
            "arms-reward.svg",
            "Actor reward R_A (mean of 5 updates; each arm's own reward plugin)",
            "R_A",
            &|r| Some(r.reward_actor),
        ),
        stream("arms-b0.svg", "Training b_0 (mean of 5 updates)", "b_0", &|r| Some(r.success_b0)),
        stream(
            "arms-goal-at-init.svg",
            "Solved with the goal already holding (mean of 5 updates)",
            "share of solved",
            &|r| r.solved_goal_at_init,
        ),
        (
            "arms-heldout.svg".to_string(),
            line_chart("Held-out: Faithful, and answers whose goal already holds", "update", "rate", &heldout),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcombe_matches_his_worked_example() {
        // Newcombe (1998), Table II, example (a): 56/70 − 48/80, method 10: 0.0524 to 0.3339.
        let (lo, hi) = difference_interval(48, 80, 56, 70).unwrap();
        assert!((lo - 0.0524).abs() < 5e-4 && (hi - 0.3339).abs() < 5e-4, "{lo} {hi}");
        // No change at 0 of 40 has an interval around 0, and the cell says so without a mark.
        assert_eq!(change(0, 40, 0, 40), "+0 [-9, +9]");
        assert!(change(31, 40, 10, 40).ends_with(" *"));
        assert!(difference_interval(0, 0, 1, 2).is_none());
    }

    #[test]
    fn arm_names_drop_the_shared_prefix_at_a_separator() {
        let dirs: Vec<PathBuf> =
            ["results/train-cpu-full", "results/train-cpu-grounded", "x/train-cpu-solver-only"].map(PathBuf::from).into();
        assert_eq!(arm_names(&dirs), ["full", "grounded", "solver-only"]);
        // `train-cpu-full` and `train-cpu-fuller` share `train-cpu-ful`: cut at the dash.
        let dirs: Vec<PathBuf> = ["a/train-cpu-full", "a/train-cpu-fuller"].map(PathBuf::from).into();
        assert_eq!(arm_names(&dirs), ["full", "fuller"]);
        assert_eq!(arm_names(&[PathBuf::from("runs/one")]), ["one"]);
    }

    #[test]
    fn an_arm_read_on_a_posthoc_set_takes_that_set_s_rows() {
        let dir = tempfile::tempdir().unwrap();
        let err = ArmRun::read_set("a", dir.path(), "eval-update0").unwrap_err().to_string();
        assert!(err.contains("posthoc/eval-update0.jsonl") && err.contains("nothing to compare"), "{err}");
        std::fs::create_dir_all(dir.path().join("posthoc")).unwrap();
        let rows: String = [0, 10, 40]
            .map(|u| serde_json::to_string(&HeldOutRow::from_records(u, &[], 1.0)).unwrap() + "\n")
            .concat();
        std::fs::write(posthoc_rows_path(dir.path(), "eval-update0"), rows).unwrap();
        std::fs::write(dir.path().join("heldout.jsonl"), serde_json::to_string(&HeldOutRow::from_records(0, &[], 1.0)).unwrap()).unwrap();
        let arm = ArmRun::read_set("a", dir.path(), "eval-update0").unwrap();
        assert_eq!(arm.heldout.iter().map(|r| r.update).collect::<Vec<_>>(), [0, 10, 40]);
        assert_eq!(ArmRun::read("a", dir.path()).unwrap().heldout.len(), 1);
    }

    #[test]
    fn kept_traces_add_a_task_by_task_line() {
        let dir = tempfile::tempdir().unwrap();
        let row = |u| serde_json::to_string(&HeldOutRow::from_records(u, &[], 1.0)).unwrap() + "\n";
        std::fs::write(dir.path().join("heldout.jsonl"), row(0) + &row(40)).unwrap();
        let line = |t: &str, solved: bool, faithful: bool| {
            format!("{{\"task_id\":\"{t}\",\"strategy\":\"multi-role\",\"solved\":{solved},\"faithfulness\":{{\"faithful\":{faithful}}}}}\n")
        };
        let arm = ArmRun::read("a", dir.path()).unwrap();
        assert!(!compare_table(&[arm]).contains("| a: task by task"), "no traces, no paired line");
        for (u, text) in [(0, line("t1", true, false) + &line("t2", false, false)), (40, line("t1", true, true) + &line("t2", true, true))] {
            let eval = dir.path().join(format!("heldout/update-{u:06}"));
            std::fs::create_dir_all(&eval).unwrap();
            std::fs::write(eval.join("trace.jsonl"), text).unwrap();
        }
        let arm = ArmRun::read("a", dir.path()).unwrap();
        let table = compare_table(&[arm.clone(), ArmRun { name: "b".into(), ..arm }]);
        assert!(table.contains("| a: task by task | | 1 gained, 0 lost of 2 (p = 1.000) | 2 gained, 0 lost of 2 (p = 0.500) |"), "{table}");
        assert!(table.contains("| b (update 40) against a (update 40) | 0 gained, 0 lost of 2 (p = 1.000) |"), "{table}");
    }

    #[test]
    fn running_means_skip_gaps_and_start_short() {
        let m = running_mean(&[1.0, f64::NAN, 3.0, 5.0], 2);
        assert_eq!(m[0], 1.0);
        assert_eq!(m[1], 1.0);
        assert_eq!(m[2], 3.0);
        assert_eq!(m[3], 4.0);
    }
}

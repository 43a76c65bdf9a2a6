//! Held-out evaluation inside a run: before the first update and every `eval-every` updates
//! (and after the last), the tasks of an eval config (`eval-config`, benchmark rows, greedy)
//! are solved by the parameters being trained. Each evaluation keeps its own trace under
//! `heldout/update-NNNNNN/`, so an interrupted one resumes where it stopped, and adds one
//! line to `heldout.jsonl`; `curves.svg` draws them beside the training curves.

use std::path::{Path, PathBuf};

use onebrain_eval::{roc_auc, wilson_interval, AgreementTotals, EvalConfig, FaithfulnessMetrics, TraceWriter};
use onebrain_roles::{config_base, EpisodeRecord, Services};
use serde::{Deserialize, Serialize};

use crate::batch::calibration_error;
use crate::error::TrainError;
use crate::logs::reopen_log;

/// The eval config of a run's held-out slice, loaded once.
pub(crate) struct HeldOut {
    pub(crate) cfg: EvalConfig,
    /// The eval config's folder: its relative paths (data, plugins) start there.
    pub(crate) base: PathBuf,
    /// Its plugins: the domains of its tasks and the faithfulness checker.
    pub(crate) services: Services,
}

impl HeldOut {
    /// Reads the eval config at `path` and loads its plugins and verifier.
    pub(crate) fn load(path: &Path) -> Result<HeldOut, TrainError> {
        let cfg = EvalConfig::from_file(path).map_err(|e| TrainError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let base = config_base(path);
        let services = Services::load(&cfg.solve_config(cfg.strategies[0]), &base)?;
        Ok(HeldOut {
            cfg,
            base,
            services,
        })
    }

    /// The config of the evaluation after `update` updates: its trace goes in the run folder.
    pub(crate) fn config_at(&self, run_dir: &Path, update: u64) -> EvalConfig {
        let mut cfg = self.cfg.clone();
        cfg.out_dir = run_dir.join("heldout").join(format!("update-{update:06}"));
        cfg
    }
}

/// One held-out evaluation: the line of `heldout.jsonl`. Counts, so that every rate can be
/// given with its interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldOutRow {
    /// Updates done when it ran (0: the base model).
    pub update: u64,
    /// Episodes (tasks × strategies) answered: every rate's denominator.
    pub tasks: usize,
    /// Episodes that stopped on an error of their own before an answer (a model error, such
    /// as a request the memory budget refused): counted apart, in no rate (a refused
    /// request counted as unsolved would read as a model that cannot solve).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unanswered: usize,
    /// Solved at the first attempt (b_0).
    pub solved_b0: usize,
    /// Solved by the end (b_T).
    pub solved: usize,
    /// Solved and faithful to the reference (C_i).
    pub faithful: usize,
    /// Episodes the faithfulness checker judged (those with a reference).
    pub checked: usize,
    /// Drift: the share of the solved, checked specs that are unfaithful.
    pub drift: Option<f64>,
    /// Solved with an empty plan: the goal already held in the initial state.
    pub solved_goal_at_init: usize,
    /// Solved, but with other objects than the task names (the checker's object test).
    pub solved_objects_changed: usize,
    /// What the returned problems share with the references (up to renaming), and how many state a
    /// goal that already holds (solved or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<AgreementTotals>,
    /// The Judge's ROC AUC on the held-out first attempts (needs both outcomes).
    pub judge_auc: Option<f64>,
    /// The Judge's expected calibration error there.
    pub judge_ece: Option<f64>,
    /// Seconds the evaluation took.
    pub secs: f64,
}

impl HeldOutRow {
    /// The row of the evaluation whose episodes are `records`.
    pub fn from_records(update: u64, all: &[EpisodeRecord], secs: f64) -> HeldOutRow {
        let (stopped, records): (Vec<&EpisodeRecord>, Vec<&EpisodeRecord>) =
            all.iter().partition(|r| r.stop_error().is_some());
        let reports: Vec<_> = records.iter().filter_map(|r| r.faithfulness.clone()).collect();
        let metrics = FaithfulnessMetrics::from_reports(&reports);
        let solved = || records.iter().filter(|r| r.solved);
        let judged: Vec<(f64, bool)> = records
            .iter()
            .filter_map(|r| r.judge_score.map(|s| (f64::from(s), r.b0)))
            .collect();
        let scores: Vec<f64> = judged.iter().map(|p| p.0).collect();
        let labels: Vec<bool> = judged.iter().map(|p| p.1).collect();
        HeldOutRow {
            update,
            tasks: records.len(),
            unanswered: stopped.len(),
            solved_b0: records.iter().filter(|r| r.b0).count(),
            solved: solved().count(),
            faithful: reports.iter().filter(|f| f.solvable && f.faithful).count(),
            checked: reports.len(),
            drift: metrics.drift,
            solved_goal_at_init: solved().filter(|r| r.final_plan.is_empty()).count(),
            solved_objects_changed: solved()
                .filter(|r| r.faithfulness.as_ref().is_some_and(|f| !f.objects_preserved))
                .count(),
            agreement: AgreementTotals::from_records(records.iter().copied()),
            judge_auc: roc_auc(&scores, &labels).ok(),
            judge_ece: calibration_error(&judged),
            secs,
        }
    }

    /// A rate of this row's episodes.
    pub fn rate(&self, k: usize) -> f64 {
        k as f64 / self.tasks.max(1) as f64
    }

    /// The one-line summary, with 95 % Wilson intervals.
    pub fn line(&self) -> String {
        let r = |k: usize| {
            let (lo, hi) = wilson_interval(k, self.tasks).unwrap_or((0.0, 0.0));
            format!("{k}/{} [{:.0}, {:.0}]", self.tasks, lo * 100.0, hi * 100.0)
        };
        let agreement = self.agreement.map_or(String::new(), |a| format!(" | {}", a.line()));
        let unanswered = match self.unanswered {
            0 => String::new(),
            n => format!(" | unanswered (model errors) {n}"),
        };
        format!(
            "held-out after {} updates: b0 {} bT {} Faithful {} drift {} | solved with the goal at init {}, objects changed {}{agreement}{unanswered} | {:.0} s",
            self.update,
            r(self.solved_b0),
            r(self.solved),
            r(self.faithful),
            self.drift.map_or("-".into(), |d| format!("{:.2}", d)),
            self.solved_goal_at_init,
            self.solved_objects_changed,
            self.secs
        )
    }
}

/// `heldout.jsonl` of a run folder.
#[derive(Debug)]
pub(crate) struct HeldOutLog {
    path: PathBuf,
    writer: TraceWriter,
}

impl HeldOutLog {
    /// The log of `run_dir`; rows past `updates` (evaluations of parameters a resumed run no
    /// longer has) are dropped.
    pub(crate) fn open(run_dir: &Path, updates: u64, notes: &mut Vec<String>) -> Result<HeldOutLog, TrainError> {
        let path = run_dir.join("heldout.jsonl");
        let writer = reopen_log(&path, |r: &HeldOutRow| r.update <= updates, notes)?;
        Ok(HeldOutLog { path, writer })
    }

    /// True when the evaluation after `update` updates is logged.
    pub(crate) fn has(&self, update: u64) -> Result<bool, TrainError> {
        Ok(read_rows(&self.path)?.iter().any(|r| r.update == update))
    }

    /// Syncs every row so far to the disk, before a checkpoint that counts them.
    pub(crate) fn sync(&mut self) -> Result<(), TrainError> {
        Ok(self.writer.sync()?)
    }

    pub(crate) fn append(&mut self, row: &HeldOutRow) -> Result<(), TrainError> {
        Ok(self.writer.append(row)?)
    }
}

/// The rows of a run folder's `heldout.jsonl` (none when there is no such file).
pub fn read_rows(path: &Path) -> Result<Vec<HeldOutRow>, TrainError> {
    Ok(onebrain_eval::read_jsonl(path)?.records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_roles::Mode;

    #[test]
    fn a_held_out_log_drops_rows_a_resumed_run_no_longer_has() {
        let dir = tempfile::tempdir().unwrap();
        let row = |update| HeldOutRow::from_records(update, &[], 1.0);
        let mut log = HeldOutLog::open(dir.path(), 0, &mut Vec::new()).unwrap();
        for u in [0, 2, 4] {
            log.append(&row(u)).unwrap();
        }
        assert!(log.has(4).unwrap());
        let log = HeldOutLog::open(dir.path(), 3, &mut Vec::new()).unwrap();
        assert!(log.has(2).unwrap() && !log.has(4).unwrap());
        assert_eq!(row(0).line().split(" | ").count(), 3);
    }

    /// An episode the model refused (a request past the memory budget) is not an unsolved
    /// answer: it is counted apart and out of every rate.
    #[test]
    fn a_model_error_is_counted_apart_from_the_answers() {
        let record = |solved: bool, error: Option<&str>| -> EpisodeRecord {
            EpisodeRecord {
                task_id: "t".into(),
                mode: Mode::Problem,
                b0: solved,
                solved,
                solver_calls: 1,
                planner_calls: 1,
                final_plan: vec!["(a)".into()],
                error: error.map(str::to_string),
                ..Default::default()
            }
        };
        let refused = Some("model error (actor): the request needs 9.1 GiB, past the memory budget of 8 GiB");
        let records = [record(true, None), record(false, None), record(false, refused)];
        let row = HeldOutRow::from_records(0, &records, 1.0);
        assert_eq!((row.tasks, row.unanswered, row.solved, row.solved_b0), (2, 1, 1, 1));
        assert_eq!(row.rate(row.solved), 0.5);
        assert!(row.line().contains("unanswered (model errors) 1"), "{}", row.line());
        // Rows written before the field read as none unanswered, and such rows write without it.
        let json = serde_json::to_value(HeldOutRow::from_records(0, &records[..2], 1.0)).unwrap();
        assert!(json.get("unanswered").is_none());
        assert_eq!(serde_json::from_value::<HeldOutRow>(json).unwrap().unanswered, 0);
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

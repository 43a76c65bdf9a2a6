//! The evaluation report, computed from trace records: the paper's Table 1 (success per
//! domain and their average), the faithfulness metrics, CSR(h) and Δ(h), the dominant
//! diagnostic per repair step, average solver calls, the Judge's scores by outcome with AUC,
//! ε̂ with its Hoeffding bound, where the time went, and solved and Faithful per domain and
//! size bucket (with Wilson intervals) where the trace gives the tasks' sizes. Written as
//! JSON, Markdown and SVG.

mod rate;
mod render;
mod size;
mod strategy;
mod summary;

use std::path::{Path, PathBuf};

use onebrain_roles::{EpisodeRecord, Strategy};
use serde::{Deserialize, Serialize};

use crate::trace::TraceRow;
pub use rate::Rate;
use size::size_rates;
pub use size::SizeRate;
pub use strategy::{JudgeReport, StrategyReport, TimingReport};
pub use summary::Summary;

/// Steps shown in CSR(h) and the heatmap: h = 0..=H_max.
pub const MAX_H: usize = 5;

/// The whole report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The run's name.
    pub name: String,
    /// The model (from the records).
    pub model: String,
    /// The mode(s) in the records.
    pub modes: Vec<String>,
    /// Domains, in order.
    pub domains: Vec<String>,
    /// One entry per strategy, in the paper's order.
    pub strategies: Vec<StrategyReport>,
}

/// The files [`Report::write`] produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportPaths {
    /// `report.json`.
    pub json: PathBuf,
    /// `report.md`.
    pub markdown: PathBuf,
    /// The SVG plots.
    pub plots: Vec<PathBuf>,
}

impl Report {
    /// Computes the report over `records` (any order; one strategy section each).
    pub fn from_records(
        name: &str,
        records: &[EpisodeRecord],
        delta: f64,
        checkpoints: usize,
    ) -> Report {
        let records: Vec<&EpisodeRecord> = records.iter().collect();
        Report::from_refs(name, &records, delta, checkpoints)
    }

    /// [`Report::from_records`] over an evaluation trace's rows, with solved and Faithful per
    /// domain and size bucket ([`StrategyReport::by_size`]) where any row gives its task's
    /// size; rows that do not go to the `unknown` bucket.
    pub fn from_rows(name: &str, rows: &[TraceRow], delta: f64, checkpoints: usize) -> Report {
        let records: Vec<&EpisodeRecord> = rows.iter().map(|r| &r.record).collect();
        let mut report = Report::from_refs(name, &records, delta, checkpoints);
        // A trace written before the sizes were recorded keeps the report it had.
        if rows.iter().any(|r| r.reference_objects.is_some()) {
            for x in &mut report.strategies {
                let answered: Vec<(&EpisodeRecord, Option<u32>)> = rows
                    .iter()
                    .filter(|r| r.record.strategy == x.strategy && r.record.stop_error().is_none())
                    .map(|r| (&r.record, r.reference_objects))
                    .collect();
                x.by_size = size_rates(&report.domains, &answered);
            }
        }
        report
    }

    fn from_refs(name: &str, records: &[&EpisodeRecord], delta: f64, checkpoints: usize) -> Report {
        let mut domains: Vec<String> = Vec::new();
        let mut modes: Vec<String> = Vec::new();
        for r in records {
            if !domains.contains(&r.domain) {
                domains.push(r.domain.clone());
            }
            if !modes.iter().any(|m| m == r.mode.as_str()) {
                modes.push(r.mode.as_str().to_string());
            }
        }
        let strategies = Strategy::ALL
            .into_iter()
            .filter_map(|s| {
                let rs: Vec<&EpisodeRecord> = records.iter().copied().filter(|r| r.strategy == s).collect();
                (!rs.is_empty()).then(|| StrategyReport::from_records(s, &rs, delta, checkpoints))
            })
            .collect();
        Report {
            name: name.to_string(),
            model: records.first().map(|r| r.model.clone()).unwrap_or_default(),
            modes,
            domains,
            strategies,
        }
    }

    /// Writes `report.json`, `report.md` and the SVG plots into `dir`, each replaced whole
    /// ([`onebrain_durable::write_atomic`]): a full disk or a kill leaves the previous file.
    pub fn write(&self, dir: &Path) -> Result<ReportPaths, onebrain_durable::Error> {
        std::fs::create_dir_all(dir).map_err(|e| onebrain_durable::Error::write(dir, e))?;
        let mut paths = ReportPaths {
            json: dir.join("report.json"),
            markdown: dir.join("report.md"),
            plots: Vec::new(),
        };
        for (name, content) in self.plots() {
            let p = dir.join(name);
            onebrain_durable::write_atomic(&p, content)?;
            paths.plots.push(p);
        }
        let json = serde_json::to_string_pretty(self).expect("a report serialises");
        onebrain_durable::write_atomic(&paths.json, json)?;
        onebrain_durable::write_atomic(&paths.markdown, self.markdown(&paths.plots))?;
        Ok(paths)
    }
}

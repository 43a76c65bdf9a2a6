//! The evaluation report, computed from trace records: the paper's Table 1 (success per
//! domain and their average), the faithfulness metrics, CSR(h) and Δ(h), the dominant
//! diagnostic per repair step, average solver calls, the Judge's scores by outcome with AUC,
//! ε̂ with its Hoeffding bound, where the time went, and solved and Faithful per domain and
//! size bucket (with Wilson intervals) where the trace gives the tasks' sizes. Written as
//! JSON, Markdown and SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use onebrain_core::{Category, FaithfulnessReport};
use onebrain_roles::{EpisodeRecord, Strategy};
use serde::{Deserialize, Serialize};

use crate::failures::{count_failures, FailedStep, FailureCause, FailureCount};
use crate::metrics::{
    disagreement_bound, is_undecided, roc_auc, wilson_interval, AgreementTotals, DisagreementBound, FaithfulnessMetrics,
    SizeBucket,
};
use crate::svg;
use crate::trace::TraceRow;

/// Steps shown in CSR(h) and the heatmap: h = 0..=H_max.
pub const MAX_H: usize = 5;

/// A success count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Successes.
    pub k: usize,
    /// Tasks.
    pub n: usize,
    /// k / n (0 when n = 0).
    pub rate: f64,
}

impl Rate {
    fn new(k: usize, n: usize) -> Rate {
        Rate {
            k,
            n,
            rate: if n > 0 { k as f64 / n as f64 } else { 0.0 },
        }
    }
}

/// Five-number summary and mean of a sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Mean (0 when empty).
    pub mean: f64,
    /// min, q1, median, q3, max (absent when empty).
    pub five: Option<[f64; 5]>,
}

impl Summary {
    fn of(values: &[f64]) -> Summary {
        let n = values.len();
        Summary {
            n,
            mean: if n > 0 {
                values.iter().sum::<f64>() / n as f64
            } else {
                0.0
            },
            five: svg::five_numbers(values),
        }
    }
}

/// The Judge's scores s_J(x, y_0), grouped by what became of y_0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeReport {
    /// y_0 was not solved.
    pub unsolved: Vec<f64>,
    /// y_0 was solved but the checker found it unfaithful.
    pub solved_unfaithful: Vec<f64>,
    /// y_0 was solved and faithful.
    pub solved_faithful: Vec<f64>,
    /// y_0 was solved, and no checker ran.
    pub solved_unchecked: Vec<f64>,
    /// ROC AUC of s_J against b_0; `None` when one class is missing (the reason in `auc_note`).
    pub auc: Option<f64>,
    /// Why there is no AUC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auc_note: Option<String>,
}

/// Where the time went, as means per task in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingReport {
    /// Wall time per episode.
    pub wall_ms: f64,
    /// Model generation.
    pub generation_ms: f64,
    /// Verifier calls (native checks + planner).
    pub verification_ms: f64,
    /// Inside the planner.
    pub planner_ms: f64,
    /// Judge forward passes.
    pub judge_ms: f64,
    /// Reward and checker plugins.
    pub plugins_ms: f64,
    /// Tokens generated per task.
    pub tokens_generated: f64,
    /// Prompt tokens per task.
    pub prompt_tokens: f64,
    /// Share of prompt tokens served by the model's prefix cache.
    pub prefix_cache_share: f64,
}

/// One domain's answered episodes in one size bucket: solved, and Faithful, of the same
/// episodes, each with its 95 % Wilson interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeRate {
    /// The domain, or `all` for every domain of the strategy together.
    pub domain: String,
    /// The bucket of the objects the tasks' reference problems declare.
    pub bucket: SizeBucket,
    /// Solved (b_T), of the answered episodes.
    pub solved: Rate,
    /// Its interval, as (low, high) shares.
    pub solved_interval: (f64, f64),
    /// Solved and faithful to the reference (C_i), of the same episodes: one the checker did
    /// not check or did not decide is not faithful, as in the held-out rows.
    pub faithful: Rate,
    /// Its interval.
    pub faithful_interval: (f64, f64),
    /// Episodes the checker reported on; with none, Faithful is no figure.
    pub checked: usize,
}

impl SizeRate {
    fn of(domain: &str, bucket: SizeBucket, records: &[&EpisodeRecord]) -> SizeRate {
        let n = records.len();
        let solved = records.iter().filter(|r| r.solved).count();
        let faithful = records
            .iter()
            .filter(|r| r.faithfulness.as_ref().is_some_and(|f| f.solvable && f.faithful))
            .count();
        let interval = |k| wilson_interval(k, n).unwrap_or((0.0, 0.0));
        SizeRate {
            domain: domain.to_string(),
            bucket,
            solved: Rate::new(solved, n),
            solved_interval: interval(solved),
            faithful: Rate::new(faithful, n),
            faithful_interval: interval(faithful),
            checked: records.iter().filter(|r| r.faithfulness.is_some()).count(),
        }
    }
}

/// The rows of the "By size" table for one strategy's answered `episodes` (each with its
/// task's object count): per domain in `domains`' order, its buckets smallest first, then,
/// with more than one domain, every domain together per bucket.
fn size_rates(domains: &[String], episodes: &[(&EpisodeRecord, Option<u32>)]) -> Vec<SizeRate> {
    let mut cells: BTreeMap<(usize, SizeBucket), Vec<&EpisodeRecord>> = BTreeMap::new();
    let mut all: BTreeMap<SizeBucket, Vec<&EpisodeRecord>> = BTreeMap::new();
    for &(r, objects) in episodes {
        let d = domains.iter().position(|d| *d == r.domain).unwrap_or(domains.len());
        let bucket = SizeBucket::of(objects);
        cells.entry((d, bucket)).or_default().push(r);
        all.entry(bucket).or_default().push(r);
    }
    let mut rows: Vec<SizeRate> = cells
        .iter()
        .map(|(&(_, bucket), rs)| SizeRate::of(&rs[0].domain, bucket, rs))
        .collect();
    if cells.keys().map(|k| k.0).collect::<std::collections::BTreeSet<_>>().len() > 1 {
        rows.extend(all.iter().map(|(&bucket, rs)| SizeRate::of("all", bucket, rs)));
    }
    rows
}

/// One strategy's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyReport {
    /// The strategy.
    pub strategy: Strategy,
    /// Episodes, answered or not ([`StrategyReport::unanswered`]).
    pub n: usize,
    /// Success (b_T) per domain, over the answered episodes; a domain with none is absent.
    pub success: BTreeMap<String, Rate>,
    /// Mean of the per-domain success rates (the paper's "Avg." column).
    pub average_success: f64,
    /// Faithful success (C_i) per domain, where a checker ran.
    pub faithful: BTreeMap<String, Rate>,
    /// Faithfulness metrics over every checked task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faithfulness: Option<FaithfulnessMetrics>,
    /// CSR(h): share of tasks solved within the first h + 1 verifier calls, h = 0..=5.
    pub csr: Vec<f64>,
    /// Δ(h) = CSR(h) − CSR(h − 1), Δ(0) = CSR(0).
    pub delta: Vec<f64>,
    /// Per step h, the dominant diagnostic category among unsolved verdicts at that step.
    pub dominant: Vec<BTreeMap<String, usize>>,
    /// Verifier calls per task (each a unit of the budget K).
    pub avg_solver_calls: f64,
    /// Calls that reached the planner (or the plan validator) per task.
    pub avg_planner_calls: f64,
    /// Editor repairs per task.
    pub avg_repairs: f64,
    /// The Judge's scores, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeReport>,
    /// What the answers share with the reference problems (up to renaming), where references exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<AgreementTotals>,
    /// ε̂ with its Hoeffding bound, where a checker ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<DisagreementBound>,
    /// Mean rewards (actor, editor, judge), where the reward plugin ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_rewards: Option<[f64; 3]>,
    /// Where the time went.
    pub timing: TimingReport,
    /// Episodes that ended with an error note (plugin failures on an answer included).
    pub errors: usize,
    /// Episodes that stopped on an error of their own before their answer
    /// ([`EpisodeRecord::stop_error`]: a model error, such as a request the memory budget
    /// refused): counted apart from the answers. `n` includes them; no rate, mean or
    /// table of answers does.
    #[serde(default)]
    pub unanswered: usize,
    /// The first of their errors, as the trace has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unanswered_error: Option<String>,
    /// The failed steps of those episodes, by step and cause ([`count_failures`](crate::count_failures)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureCount>,
    /// Solved and Faithful per domain and size bucket, over the answered episodes; empty
    /// where the trace gives no task's size ([`Report::from_rows`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_size: Vec<SizeRate>,
}

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

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n > 0 {
        s / n as f64
    } else {
        0.0
    }
}

/// The verifier-call index (0-based) at which the episode first succeeded.
fn success_attempt(r: &EpisodeRecord) -> Option<usize> {
    r.verified_steps()
        .position(|s| s.verdict.as_ref().is_some_and(|v| v.solved))
}

impl StrategyReport {
    /// Computes one strategy's results from its records. Those that stopped on an error of
    /// their own are counted apart; every other figure is over the answered ones.
    pub fn from_records(
        strategy: Strategy,
        all: &[&EpisodeRecord],
        delta: f64,
        checkpoints: usize,
    ) -> StrategyReport {
        // A refused request is not an answer: counted as unsolved, a run whose every request
        // was refused would report 0 % solved.
        let (stopped, records): (Vec<&EpisodeRecord>, Vec<&EpisodeRecord>) =
            all.iter().copied().partition(|r| r.stop_error().is_some());
        let records = records.as_slice();
        let n = records.len();
        let mut by_domain: BTreeMap<String, Vec<&EpisodeRecord>> = BTreeMap::new();
        for r in records {
            by_domain.entry(r.domain.clone()).or_default().push(r);
        }
        let success: BTreeMap<String, Rate> = by_domain
            .iter()
            .map(|(d, rs)| {
                (
                    d.clone(),
                    Rate::new(rs.iter().filter(|r| r.solved).count(), rs.len()),
                )
            })
            .collect();
        let average_success = mean(success.values().map(|r| r.rate));
        let faithful: BTreeMap<String, Rate> = by_domain
            .iter()
            .filter_map(|(d, rs)| {
                let checked: Vec<&FaithfulnessReport> = rs
                    .iter()
                    .filter_map(|r| r.faithfulness.as_ref())
                    .filter(|f| !is_undecided(f))
                    .collect();
                (!checked.is_empty()).then(|| {
                    (
                        d.clone(),
                        Rate::new(
                            checked.iter().filter(|f| f.solvable && f.faithful).count(),
                            checked.len(),
                        ),
                    )
                })
            })
            .collect();
        let reports: Vec<FaithfulnessReport> = records
            .iter()
            .filter_map(|r| r.faithfulness.clone())
            .collect();
        let faithfulness =
            (!reports.is_empty()).then(|| FaithfulnessMetrics::from_reports(&reports));
        let disagreement = disagreement_bound(&reports, delta, checkpoints).ok();

        let attempts: Vec<Option<usize>> = records.iter().map(|r| success_attempt(r)).collect();
        let csr: Vec<f64> = (0..=MAX_H)
            .map(|h| {
                if n == 0 {
                    0.0
                } else {
                    attempts
                        .iter()
                        .filter(|a| a.is_some_and(|a| a <= h))
                        .count() as f64
                        / n as f64
                }
            })
            .collect();
        let delta_h: Vec<f64> = csr
            .iter()
            .enumerate()
            .map(|(h, c)| if h == 0 { *c } else { c - csr[h - 1] })
            .collect();
        let dominant: Vec<BTreeMap<String, usize>> = (0..=MAX_H)
            .map(|h| {
                let mut m = BTreeMap::new();
                for r in records {
                    if let Some(step) = r.verified_steps().nth(h) {
                        if step.verdict.as_ref().is_some_and(|v| !v.solved) {
                            let c = step.dominant.map_or("none", |c| c.as_str());
                            *m.entry(c.to_string()).or_insert(0) += 1;
                        }
                    }
                }
                m
            })
            .collect();

        let judged: Vec<&&EpisodeRecord> =
            records.iter().filter(|r| r.judge_score.is_some()).collect();
        let judge = (!judged.is_empty()).then(|| {
            let mut j = JudgeReport::default();
            for r in &judged {
                let s = r.judge_score.expect("filtered") as f64;
                match (r.b0, &r.faithfulness) {
                    (false, _) => j.unsolved.push(s),
                    // Best-of-k may return another sample than y_0: no verdict on y_0.
                    (true, _) if r.selected.is_some_and(|i| i != 0) => j.solved_unchecked.push(s),
                    // When b_0 = 1 the returned spec is y_0, so its report is y_0's.
                    (true, Some(f)) if f.faithful => j.solved_faithful.push(s),
                    // No verdict: as if no checker had run.
                    (true, Some(f)) if is_undecided(f) => j.solved_unchecked.push(s),
                    (true, Some(_)) => j.solved_unfaithful.push(s),
                    (true, None) => j.solved_unchecked.push(s),
                }
            }
            let scores: Vec<f64> = judged
                .iter()
                .map(|r| r.judge_score.expect("filtered") as f64)
                .collect();
            let labels: Vec<bool> = judged.iter().map(|r| r.b0).collect();
            match roc_auc(&scores, &labels) {
                Ok(a) => j.auc = Some(a),
                Err(e) => j.auc_note = Some(e.to_string()),
            }
            j
        });

        let rewarded: Vec<_> = records.iter().filter_map(|r| r.rewards.as_ref()).collect();
        let mean_rewards = (!rewarded.is_empty()).then(|| {
            [
                mean(rewarded.iter().map(|r| r.actor as f64)),
                mean(rewarded.iter().map(|r| r.editor as f64)),
                mean(rewarded.iter().map(|r| r.judge as f64)),
            ]
        });
        let prompt_tokens: usize = records
            .iter()
            .flat_map(|r| &r.steps)
            .map(|s| s.prompt_tokens)
            .sum();
        let cached: usize = records
            .iter()
            .flat_map(|r| &r.steps)
            .map(|s| s.cached_prompt_tokens)
            .sum();
        let timing = TimingReport {
            wall_ms: mean(records.iter().map(|r| r.timings.wall_ms)),
            generation_ms: mean(records.iter().map(|r| r.timings.generation_ms)),
            verification_ms: mean(records.iter().map(|r| r.timings.verification_ms)),
            planner_ms: mean(records.iter().map(|r| r.timings.planner_ms)),
            judge_ms: mean(records.iter().map(|r| r.timings.judge_ms)),
            plugins_ms: mean(records.iter().map(|r| r.timings.plugins_ms)),
            tokens_generated: mean(
                records
                    .iter()
                    .map(|r| r.steps.iter().map(|s| s.output_tokens.len()).sum::<usize>() as f64),
            ),
            prompt_tokens: if n > 0 {
                prompt_tokens as f64 / n as f64
            } else {
                0.0
            },
            prefix_cache_share: if prompt_tokens > 0 {
                cached as f64 / prompt_tokens as f64
            } else {
                0.0
            },
        };
        StrategyReport {
            strategy,
            n: all.len(),
            success,
            average_success,
            faithful,
            faithfulness,
            agreement: AgreementTotals::from_records(records.iter().copied()),
            csr,
            delta: delta_h,
            dominant,
            avg_solver_calls: mean(records.iter().map(|r| r.solver_calls as f64)),
            avg_planner_calls: mean(records.iter().map(|r| r.planner_calls as f64)),
            avg_repairs: mean(records.iter().map(|r| r.repairs as f64)),
            judge,
            disagreement,
            mean_rewards,
            timing,
            errors: all.iter().filter(|r| r.error.is_some()).count(),
            failures: count_failures(all.iter().copied()),
            unanswered: stopped.len(),
            unanswered_error: stopped.first().and_then(|r| r.stop_error()).map(str::to_string),
            by_size: Vec::new(),
        }
    }
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

    /// The Markdown report (tables; the plots are linked).
    pub fn markdown(&self, plots: &[PathBuf]) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# {}\n", self.name);
        let n: usize = self.strategies.iter().map(|x| x.n).sum();
        let unanswered: usize = self.strategies.iter().map(|x| x.unanswered).sum();
        let stopped = match unanswered {
            0 => String::new(),
            u => format!(", {u} of them stopped on an error before their answer (counted apart, below)"),
        };
        let _ = writeln!(
            s,
            "Model `{}`, mode {}, {n} episodes{stopped}.\n",
            self.model,
            self.modes.join(", ")
        );
        let pct = |r: f64| format!("{:.1}", 100.0 * r);

        let _ = writeln!(s, "## Success (%, solved by the verifier)\n");
        let _ = writeln!(
            s,
            "| strategy | {} | Avg. | solver calls | planner calls |",
            self.domains.join(" | ")
        );
        let _ = writeln!(
            s,
            "|---|{}---:|---:|---:|",
            "---:|".repeat(self.domains.len())
        );
        for x in &self.strategies {
            let cells: Vec<String> = self
                .domains
                .iter()
                .map(|d| {
                    x.success.get(d).map_or("–".into(), |r| {
                        format!("{} ({}/{})", pct(r.rate), r.k, r.n)
                    })
                })
                .collect();
            // With no answer there is no rate and no mean: a dash, never 0.
            let (average, solver, planner) = match x.n - x.unanswered {
                0 => ("–".to_string(), "–".to_string(), "–".to_string()),
                _ => (pct(x.average_success), format!("{:.2}", x.avg_solver_calls), format!("{:.2}", x.avg_planner_calls)),
            };
            let _ = writeln!(s, "| {} | {} | {average} | {solver} | {planner} |", x.strategy, cells.join(" | "));
        }
        // On lines of their own, in the section the terminal shows: no rate counts them.
        for x in self.strategies.iter().filter(|x| x.unanswered > 0) {
            let _ = writeln!(
                s,
                "\n**{}: {} of {} episodes stopped on an error before their answer** and are in no rate of this report. The first: {}",
                x.strategy,
                x.unanswered,
                x.n,
                x.unanswered_error.as_deref().unwrap_or("(no message)")
            );
        }

        if self.strategies.iter().any(|x| x.faithfulness.is_some()) {
            let _ = writeln!(s, "\n## Faithfulness (%, reference checker)\n");
            let _ = writeln!(s, "| strategy | n | Solvability | Faithful | Drift | Gap | Goal | Schema-F1 | goal-weakening | type-drift | schema-drift | constraint-omission | ε̂ | bound |");
            let _ = writeln!(
                s,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for x in &self.strategies {
                if let Some(m) = &x.faithfulness {
                    let (e, b) = x.disagreement.map_or(("–".into(), "–".into()), |d| {
                        (format!("{:.3}", d.eps_hat), format!("{:.3}", d.bound))
                    });
                    let c = &m.drift_categories;
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} | {} | {:.3} | {} | {} | {} | {} | {e} | {b} |",
                        x.strategy,
                        m.n,
                        pct(m.solvability),
                        pct(m.faithful_success),
                        m.drift.map_or("–".into(), pct),
                        pct(m.gap),
                        pct(m.goal_preservation),
                        m.mean_schema_f1,
                        c.goal_weakening,
                        c.type_drift,
                        c.schema_drift,
                        c.constraint_omission
                    );
                }
            }
            for x in &self.strategies {
                if let Some(m) = x.faithfulness.as_ref().filter(|m| m.undecided > 0) {
                    let _ = writeln!(
                        s,
                        "\n**{}: undecided {} of {}**: the checker's budget ran out before it could decide and nothing it had established refutes the answer (see the explanations in the trace). In neither Faithful nor Drift, and not an error; n above counts the decided.",
                        x.strategy,
                        m.undecided,
                        m.n + m.undecided
                    );
                }
            }
            if self.strategies.iter().any(|x| x.agreement.is_some()) {
                let _ = writeln!(s, "\nWhat the answers share with the reference problems under the renaming of objects that shares the most facts (precision P, recall R, summed over answers; objects counted per type):\n");
                for x in &self.strategies {
                    if let Some(a) = &x.agreement {
                        let _ = writeln!(s, "- {}: {}", x.strategy, a.line());
                    }
                }
            }
            if let Some(d) = self.strategies.iter().find_map(|x| x.disagreement) {
                let _ = writeln!(s, "\nε̂ = share of tasks where the solver's verdict and faithfulness disagree; bound = ε̂ + sqrt(ln(k/δ)/2n), δ = {}, k = {}.", d.delta, d.checkpoints);
            }
            let _ = writeln!(
                s,
                "\n### How the checker decided goal equivalence (results)\n"
            );
            let _ = writeln!(
                s,
                "| strategy | exact | closure | undecided | Faithful by exact | Faithful by closure |"
            );
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
            for x in &self.strategies {
                if let Some(m) = &x.faithfulness {
                    let (d, f) = (&m.decisions, &m.faithful_decisions);
                    let share = |k: usize| match f.total() {
                        0 => format!("{k}"),
                        t => format!("{k} ({} %)", pct(k as f64 / t as f64)),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} |",
                        x.strategy,
                        d.exact,
                        d.closure,
                        d.undecided,
                        share(f.exact),
                        share(f.closure)
                    );
                }
            }
            let _ = writeln!(s, "\nexact = the same goal, or every reachable state compared; closure = each goal fact the other goal lacks proved implied from invariants of the reference task, or refuted by a reachable state; undecided = neither within the checker's bounds (never counted faithful; counted apart from the not faithful too when nothing else refutes the answer, the line above the table). The share in brackets is of the faithful results.");
            let _ = writeln!(s, "\n### Faithful success per domain (%)\n");
            let _ = writeln!(s, "| strategy | {} |", self.domains.join(" | "));
            let _ = writeln!(s, "|---|{}", "---:|".repeat(self.domains.len()));
            for x in self.strategies.iter().filter(|x| !x.faithful.is_empty()) {
                let cells: Vec<String> = self
                    .domains
                    .iter()
                    .map(|d| {
                        x.faithful.get(d).map_or("–".into(), |r| {
                            format!("{} ({}/{})", pct(r.rate), r.k, r.n)
                        })
                    })
                    .collect();
                let _ = writeln!(s, "| {} | {} |", x.strategy, cells.join(" | "));
            }
        }

        if self.strategies.iter().any(|x| !x.by_size.is_empty()) {
            size_table(&mut s, &self.strategies);
        }

        let _ = writeln!(
            s,
            "\n## Cumulative success CSR(h) and Δ(h) (%, h = verifier calls − 1)\n"
        );
        let hs: Vec<String> = (0..=MAX_H).map(|h| format!("h={h}")).collect();
        let _ = writeln!(s, "| strategy | {} |", hs.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(MAX_H + 1));
        for x in &self.strategies {
            let cells: Vec<String> = x
                .csr
                .iter()
                .zip(&x.delta)
                .map(|(c, d)| format!("{} (+{})", pct(*c), pct(*d)))
                .collect();
            let _ = writeln!(s, "| {} | {} |", x.strategy, cells.join(" | "));
        }

        let _ = writeln!(
            s,
            "\n## Dominant diagnostic among unsolved cases, per step\n"
        );
        for x in self
            .strategies
            .iter()
            .filter(|x| x.dominant.iter().any(|m| !m.is_empty()))
        {
            let _ = writeln!(s, "**{}**\n", x.strategy);
            let _ = writeln!(s, "| category | {} |", hs.join(" | "));
            let _ = writeln!(s, "|---|{}", "---:|".repeat(MAX_H + 1));
            for c in category_rows() {
                let cells: Vec<String> = x
                    .dominant
                    .iter()
                    .map(|m| m.get(&c).copied().unwrap_or(0).to_string())
                    .collect();
                if cells.iter().any(|v| v != "0") {
                    let _ = writeln!(s, "| {c} | {} |", cells.join(" | "));
                }
            }
            s.push('\n');
        }

        if self.strategies.iter().any(|x| x.judge.is_some()) {
            let _ = writeln!(s, "## Judge scores s_J(x, y_0)\n");
            let _ = writeln!(s, "| strategy | group | n | mean | median | AUC (vs b_0) |");
            let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
            for x in &self.strategies {
                if let Some(j) = &x.judge {
                    let auc = j.auc.map_or_else(
                        || format!("– ({})", j.auc_note.clone().unwrap_or_default()),
                        |a| format!("{a:.3}"),
                    );
                    for (g, v) in judge_groups(j) {
                        let sm = Summary::of(&v);
                        let med = sm.five.map_or("–".into(), |f| format!("{:.3}", f[2]));
                        let _ = writeln!(
                            s,
                            "| {} | {g} | {} | {:.3} | {med} | {auc} |",
                            x.strategy, sm.n, sm.mean
                        );
                    }
                }
            }
            s.push('\n');
        }
        if self.strategies.iter().any(|x| x.mean_rewards.is_some()) {
            let _ = writeln!(s, "## Mean rewards (reward plugin)\n");
            let _ = writeln!(s, "| strategy | R_A | R_E | Judge |");
            let _ = writeln!(s, "|---|---:|---:|---:|");
            for x in &self.strategies {
                if let Some([a, e, j]) = x.mean_rewards {
                    let _ = writeln!(s, "| {} | {a:.3} | {e:.3} | {j:.3} |", x.strategy);
                }
            }
            s.push('\n');
        }

        let _ = writeln!(s, "## Where the time goes (mean per task)\n");
        let _ = writeln!(s, "| strategy | wall s | generation s | verification s | (planner s) | judge s | plugins ms | tokens out | prompt tokens | prefix-cache share | errors |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for x in &self.strategies {
            let t = &x.timing;
            let _ = writeln!(
                s,
                "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0}% | {} |",
                x.strategy,
                t.wall_ms / 1e3,
                t.generation_ms / 1e3,
                t.verification_ms / 1e3,
                t.planner_ms / 1e3,
                t.judge_ms / 1e3,
                t.plugins_ms,
                t.tokens_generated,
                t.prompt_tokens,
                100.0 * t.prefix_cache_share,
                x.errors
            );
        }
        if self.strategies.iter().any(|x| !x.failures.is_empty()) {
            failure_table(&mut s, &self.strategies);
        }
        if !plots.is_empty() {
            let _ = writeln!(s, "\n## Plots\n");
            for p in plots {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let _ = writeln!(s, "![{name}]({name})");
            }
        }
        s
    }

    /// The SVG plots, as (file name, content).
    pub fn plots(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let names: Vec<String> = self.domains.clone();
        let bars: Vec<(String, Vec<f64>)> = self
            .strategies
            .iter()
            .map(|x| {
                (
                    x.strategy.to_string(),
                    names
                        .iter()
                        .map(|d| x.success.get(d).map_or(0.0, |r| r.rate))
                        .collect(),
                )
            })
            .collect();
        out.push((
            "success.svg".into(),
            svg::grouped_bars("Success per domain", "success rate", &names, &bars),
        ));
        let lines: Vec<(String, Vec<f64>)> = self
            .strategies
            .iter()
            .map(|x| (x.strategy.to_string(), x.csr.clone()))
            .collect();
        out.push((
            "csr.svg".into(),
            svg::line_chart(
                "Cumulative success CSR(h)",
                "h (verifier calls − 1)",
                "CSR",
                &lines,
            ),
        ));
        // The heatmap of the multi-role episode, else of the first strategy with diagnostics.
        if let Some(x) = self
            .strategies
            .iter()
            .find(|x| x.strategy == Strategy::MultiRole && x.dominant.iter().any(|m| !m.is_empty()))
            .or_else(|| {
                self.strategies
                    .iter()
                    .find(|x| x.dominant.iter().any(|m| !m.is_empty()))
            })
        {
            let rows = category_rows();
            let counts: Vec<Vec<usize>> = rows
                .iter()
                .map(|c| {
                    x.dominant
                        .iter()
                        .map(|m| m.get(c).copied().unwrap_or(0))
                        .collect()
                })
                .collect();
            let cols: Vec<String> = (0..=MAX_H).map(|h| h.to_string()).collect();
            out.push((
                "diagnostics.svg".into(),
                svg::heatmap(
                    &format!("Dominant diagnostic among unsolved ({})", x.strategy),
                    "repair step h",
                    &rows,
                    &cols,
                    &counts,
                ),
            ));
        }
        if let Some(x) = self.strategies.iter().find(|x| x.judge.is_some()) {
            let j = x.judge.as_ref().expect("found");
            let groups: Vec<(String, Vec<f64>)> = judge_groups(j)
                .into_iter()
                .map(|(g, v)| (g.to_string(), v))
                .collect();
            let title = match j.auc {
                Some(a) => format!("Judge scores s_J(x, y_0) by outcome (AUC {a:.3})"),
                None => "Judge scores s_J(x, y_0) by outcome".into(),
            };
            out.push(("judge.svg".into(), svg::box_plot(&title, "s_J", &groups)));
        }
        out
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

/// Solved and Faithful per strategy, domain and size bucket, with 95 % Wilson intervals.
fn size_table(s: &mut String, strategies: &[StrategyReport]) {
    let cell = |r: &Rate, (lo, hi): (f64, f64)| {
        format!("{:.1} ({}/{}) [{:.1}, {:.1}]", 100.0 * r.rate, r.k, r.n, 100.0 * lo, 100.0 * hi)
    };
    let _ = writeln!(s, "\n## By size (objects in the reference problem)\n");
    let _ = writeln!(s, "| strategy | domain | objects | n | solved % | Faithful % |");
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|");
    for x in strategies {
        for r in &x.by_size {
            let faithful = match r.checked {
                0 => "–".to_string(),
                _ => cell(&r.faithful, r.faithful_interval),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {faithful} |",
                x.strategy,
                r.domain,
                r.bucket.label(),
                r.solved.n,
                cell(&r.solved, r.solved_interval)
            );
        }
    }
    let _ = writeln!(s, "\nn = answered episodes; [low, high] = 95 % Wilson interval. The bucket counts the objects the task's reference problem declares (fewer than 3 count as 3–5; unknown: the trace does not say). Faithful = solved and faithful to the reference, of the same n: an episode the checker did not check or did not decide is not faithful.");
}

/// The failed steps by step and cause, one row per strategy and step that failed.
fn failure_table(s: &mut String, strategies: &[StrategyReport]) {
    let causes: Vec<&str> = FailureCause::ALL.iter().map(|c| c.as_str()).collect();
    let _ = writeln!(s, "\n## Failed steps (by step and cause)\n");
    let _ = writeln!(s, "| strategy | step | {} | total |", causes.join(" | "));
    let _ = writeln!(s, "|---|---|{}---:|", "---:|".repeat(causes.len()));
    for x in strategies {
        for step in FailedStep::ALL {
            let count = |cause: FailureCause| {
                x.failures.iter().find(|f| f.step == step && f.cause == cause).map_or(0, |f| f.count)
            };
            let cells: Vec<usize> = FailureCause::ALL.into_iter().map(count).collect();
            let total: usize = cells.iter().sum();
            if total > 0 {
                let cells: Vec<String> = cells.iter().map(usize::to_string).collect();
                let _ = writeln!(s, "| {} | {} | {} | {total} |", x.strategy, step.as_str(), cells.join(" | "));
            }
        }
    }
    let _ = writeln!(s, "\nOne count per episode and step, read from the episode's error: trap = a panic or other trap, non-finite = NaN or ±∞ refused, timeout = the wall-clock limit, fuel = the instruction budget, invalid = another value refused, reported = the plugin's own error, other = the rest (model errors among them).");
}

fn category_rows() -> Vec<String> {
    Category::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .chain(["none".to_string()])
        .collect()
}

fn judge_groups(j: &JudgeReport) -> Vec<(&'static str, Vec<f64>)> {
    let mut g = vec![
        ("unsolved", j.unsolved.clone()),
        ("solved-unfaithful", j.solved_unfaithful.clone()),
        ("solved-faithful", j.solved_faithful.clone()),
    ];
    if !j.solved_unchecked.is_empty() {
        g.push(("solved-unchecked", j.solved_unchecked.clone()));
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::Decision;

    #[test]
    fn the_faithfulness_section_says_how_much_of_faithful_rests_on_closure() {
        let rep = |faithful: bool, decision: Decision| FaithfulnessReport {
            solvable: true,
            faithful,
            goal_preserved: faithful,
            decision,
            ..Default::default()
        };
        let reports = [
            rep(true, Decision::Exact),
            rep(true, Decision::Exact),
            rep(true, Decision::Exact),
            rep(true, Decision::Closure),
            rep(false, Decision::Closure),
            rep(false, Decision::Undecided),
        ];
        let report = Report {
            domains: vec!["blocksworld".into()],
            strategies: vec![StrategyReport {
                strategy: Strategy::MultiRole,
                n: reports.len(),
                faithfulness: Some(FaithfulnessMetrics::from_reports(&reports)),
                ..Default::default()
            }],
            ..Default::default()
        };
        let md = report.markdown(&[]);
        assert!(
            md.contains("| strategy | exact | closure | undecided | Faithful by exact | Faithful by closure |"),
            "{md}"
        );
        assert!(
            md.contains("| multi-role | 3 | 2 | 1 | 3 (75.0 %) | 1 (25.0 %) |"),
            "{md}"
        );
    }

    #[test]
    fn the_size_table_has_a_row_per_domain_and_bucket_with_intervals() {
        let row = |domain: &str, bucket, solved, faithful, n, checked| SizeRate {
            domain: domain.into(),
            bucket,
            solved: Rate::new(solved, n),
            solved_interval: wilson_interval(solved, n).unwrap(),
            faithful: Rate::new(faithful, n),
            faithful_interval: wilson_interval(faithful, n).unwrap(),
            checked,
        };
        let report = Report {
            domains: vec!["logistics".into()],
            strategies: vec![StrategyReport {
                strategy: Strategy::MultiRole,
                by_size: vec![
                    row("logistics", SizeBucket::Large, 5, 0, 10, 10),
                    row("gripper", SizeBucket::Medium, 10, 10, 10, 0),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let md = report.markdown(&[]);
        assert!(md.contains("## By size (objects in the reference problem)"), "{md}");
        assert!(md.contains("| strategy | domain | objects | n | solved % | Faithful % |"), "{md}");
        // 5/10 → [23.7, 76.3], 0/10 → [0, 27.8] (the published Wilson values).
        assert!(md.contains("| multi-role | logistics | 10+ | 10 | 50.0 (5/10) [23.7, 76.3] | 0.0 (0/10) [0.0, 27.8] |"), "{md}");
        // No check: Faithful is no figure.
        assert!(md.contains("| multi-role | gripper | 6–9 | 10 | 100.0 (10/10) [72.2, 100.0] | – |"), "{md}");
        // The table sits before the CSR section; a report without sizes has none.
        assert!(md.find("## By size").unwrap() < md.find("## Cumulative success").unwrap());
        assert!(!Report::default().markdown(&[]).contains("By size"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["strategies"][0]["by_size"][0]["bucket"], "10+");
        assert!(serde_json::to_value(Report { strategies: vec![StrategyReport::default()], ..Default::default() }).unwrap()
            ["strategies"][0]
            .get("by_size")
            .is_none());
    }

    #[test]
    fn the_failure_table_has_a_row_per_failed_step_with_its_causes() {
        use crate::failures::{FailedStep as S, FailureCause as C};
        let row = |step, cause, count| FailureCount { step, cause, count };
        let report = Report {
            strategies: vec![StrategyReport {
                strategy: Strategy::MultiRole,
                errors: 5,
                failures: vec![row(S::Reward, C::Trap, 2), row(S::Reward, C::Timeout, 1), row(S::Checker, C::NonFinite, 3)],
                ..Default::default()
            }],
            ..Default::default()
        };
        let md = report.markdown(&[]);
        assert!(md.contains("| strategy | step | trap | non-finite | timeout | fuel | invalid | reported | other | total |"), "{md}");
        assert!(md.contains("| multi-role | reward | 2 | 0 | 1 | 0 | 0 | 0 | 0 | 3 |"), "{md}");
        assert!(md.contains("| multi-role | checker | 0 | 3 | 0 | 0 | 0 | 0 | 0 | 3 |"), "{md}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["strategies"][0]["failures"][2], serde_json::json!({"step": "checker", "cause": "non-finite", "count": 3}));
        assert!(!Report::default().markdown(&[]).contains("Failed steps"));
    }
}

//! One strategy's results, with the Judge's scores and where the time went.

use std::collections::BTreeMap;

use onebrain_core::FaithfulnessReport;
use onebrain_roles::{EpisodeRecord, Strategy};
use serde::{Deserialize, Serialize};

use super::{Rate, SizeRate, MAX_H};
use crate::failures::{count_failures, FailureCount};
use crate::metrics::{
    disagreement_bound, is_undecided, roc_auc, AgreementTotals, DisagreementBound, FaithfulnessMetrics,
};

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

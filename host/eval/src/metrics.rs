//! Faithfulness metrics over a set of results, what the answers share with the reference
//! problems up to renaming, the solver–correctness disagreement bound, and the Judge's ROC AUC.
//!
//! Every rate is a mean over the reports given. An empty set gives zeros (and `drift: None`),
//! not NaN, so a report over an empty split still serialises.

use onebrain_core::{Decision, Drift, FaithfulnessReport, Overlap};
use onebrain_roles::EpisodeRecord;
use serde::{Deserialize, Serialize};

/// What a set of answers shares with their reference problems, up to renaming: objects, initial
/// facts and goal literals, summed over the answers (micro-averaged precision and recall),
/// and how many answers state a goal that already holds in their own initial state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgreementTotals {
    /// Answers compared: a reference exists and the returned problem parses.
    pub answers: usize,
    /// Of those, answers whose goal holds in their initial state.
    pub goal_holds_initially: usize,
    /// Declared objects.
    pub objects: Overlap,
    /// Initial facts.
    pub init: Overlap,
    /// Goal literals.
    pub goal: Overlap,
}

impl AgreementTotals {
    /// The totals of the records that carry a [`onebrain_core::FactAgreement`]; `None` when
    /// none does.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Option<AgreementTotals> {
        let mut t = AgreementTotals::default();
        for a in records.into_iter().filter_map(|r| r.fact_agreement) {
            t.answers += 1;
            t.goal_holds_initially += usize::from(a.goal_holds_initially);
            t.objects.add(a.objects);
            t.init.add(a.init);
            t.goal.add(a.goal);
        }
        (t.answers > 0).then_some(t)
    }

    /// `init P 0.80 R 0.67, goal P 0.50 R 0.50, objects P 1.00 R 1.00, goal holds initially 3/8`.
    pub fn line(&self) -> String {
        let pr = |o: &Overlap| format!("P {:.2} R {:.2}", o.precision(), o.recall());
        format!(
            "init {}, goal {}, objects {}, goal holds initially {}/{}",
            pr(&self.init),
            pr(&self.goal),
            pr(&self.objects),
            self.goal_holds_initially,
            self.answers
        )
    }
}

/// Why a metric could not be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MetricsError {
    /// A bound over zero samples says nothing.
    #[error("no samples: the bound needs n ≥ 1")]
    NoSamples,
    /// δ must lie strictly between 0 and 1.
    #[error("confidence parameter δ = {0} is not in (0, 1)")]
    BadDelta(f64),
    /// The union bound needs at least one checkpoint.
    #[error("the union bound needs at least one checkpoint, got 0")]
    NoCheckpoints,
    /// ε̂ is a rate and must lie in [0, 1].
    #[error("empirical disagreement ε̂ = {0} is not in [0, 1]")]
    BadRate(f64),
    /// Scores and labels must pair up one to one.
    #[error("{scores} scores but {labels} labels")]
    LengthMismatch {
        /// How many scores were given.
        scores: usize,
        /// How many labels were given.
        labels: usize,
    },
    /// AUC compares positives with negatives; one class is missing.
    #[error("AUC needs both classes: {positives} positive and {negatives} negative labels")]
    OneClass {
        /// How many positive labels.
        positives: usize,
        /// How many negative labels.
        negatives: usize,
    },
    /// A score that is NaN cannot be ranked.
    #[error("score {index} is NaN")]
    NanScore {
        /// Its position in the input.
        index: usize,
    },
}

/// How many solvable-but-unfaithful results fell into each drift category.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DriftCounts {
    /// The goal is weaker than (or different from) the reference goal.
    pub goal_weakening: usize,
    /// Objects or their types differ.
    pub type_drift: usize,
    /// An action schema differs other than by a dropped precondition.
    pub schema_drift: usize,
    /// An action schema lost a precondition.
    pub constraint_omission: usize,
    /// Solvable and unfaithful with no category (e.g. a changed initial state, an undecided
    /// mapping): counted in Drift, shown apart so the categories still add up.
    pub unclassified: usize,
}

impl DriftCounts {
    /// The count for one category.
    pub fn get(&self, d: Drift) -> usize {
        match d {
            Drift::GoalWeakening => self.goal_weakening,
            Drift::TypeDrift => self.type_drift,
            Drift::SchemaDrift => self.schema_drift,
            Drift::ConstraintOmission => self.constraint_omission,
        }
    }

    fn add(&mut self, d: Option<Drift>) {
        match d {
            Some(Drift::GoalWeakening) => self.goal_weakening += 1,
            Some(Drift::TypeDrift) => self.type_drift += 1,
            Some(Drift::SchemaDrift) => self.schema_drift += 1,
            Some(Drift::ConstraintOmission) => self.constraint_omission += 1,
            None => self.unclassified += 1,
        }
    }

    /// All drifted results, categorised or not.
    pub fn total(&self) -> usize {
        self.goal_weakening
            + self.type_drift
            + self.schema_drift
            + self.constraint_omission
            + self.unclassified
    }
}

/// How the checker decided goal equivalence, over a set of results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionCounts {
    /// By the same goal literally, or by exhaustive comparison of reachable goal states.
    pub exact: usize,
    /// By closure: each fact one goal states and the other does not was proved implied from
    /// invariants of the reference task, or refuted by a reachable state a search found.
    pub closure: usize,
    /// A limit was hit and the checker did not guess.
    pub undecided: usize,
}

impl DecisionCounts {
    fn add(&mut self, d: Decision) {
        match d {
            Decision::Exact => self.exact += 1,
            Decision::Closure => self.closure += 1,
            Decision::Undecided => self.undecided += 1,
        }
    }

    /// All results counted.
    pub fn total(&self) -> usize {
        self.exact + self.closure + self.undecided
    }
}

/// The faithfulness metrics over a set of results (one [`FaithfulnessReport`] per task).
/// A result the checker left undecided (its budget ran out, nothing refuted) is neither
/// faithful nor not: it is counted in `undecided` and in `decisions`, and in no rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaithfulnessMetrics {
    /// How many decided results: the rates' denominator.
    pub n: usize,
    /// How many results the checker left undecided, apart from `n`.
    #[serde(default)]
    pub undecided: usize,
    /// Solvability = mean S_i.
    pub solvability: f64,
    /// FaithfulSuccess = mean C_i.
    pub faithful_success: f64,
    /// Drift = Σ S_i(1−C_i) / Σ S_i: the share of solved specs that are unfaithful; `None`
    /// when nothing was solved (the ratio is undefined, and 0 would read as "no drift").
    pub drift: Option<f64>,
    /// Gap = Solvability − FaithfulSuccess.
    pub gap: f64,
    /// Mean of `goal_preserved` over all results.
    pub goal_preservation: f64,
    /// Mean `schema_f1` over all results.
    pub mean_schema_f1: f64,
    /// Drift categories among the solvable, unfaithful results.
    pub drift_categories: DriftCounts,
    /// How goal equivalence was decided, over all results.
    pub decisions: DecisionCounts,
    /// How it was decided for the faithful results (C_i = 1): how much of FaithfulSuccess
    /// rests on closure rather than on exact comparison. An undecided result is never
    /// faithful, so `undecided` stays 0 here.
    #[serde(default)]
    pub faithful_decisions: DecisionCounts,
}

impl FaithfulnessMetrics {
    /// Computes every metric from the checker's reports. `faithful` is read as C_i, `solvable`
    /// as S_i; a report claiming faithful but not solvable is counted as unfaithful, since
    /// C_i requires S_i by definition.
    pub fn from_reports(reports: &[FaithfulnessReport]) -> FaithfulnessMetrics {
        let (open, decided): (Vec<&FaithfulnessReport>, Vec<&FaithfulnessReport>) =
            reports.iter().partition(|r| is_undecided(r));
        let n = decided.len();
        let mut m = FaithfulnessMetrics {
            n,
            undecided: open.len(),
            ..Default::default()
        };
        for r in &open {
            m.decisions.add(r.decision);
        }
        if n == 0 {
            return m;
        }
        let (mut solved, mut faithful, mut goal, mut f1) = (0usize, 0usize, 0usize, 0.0f64);
        for r in decided {
            let c = r.solvable && r.faithful;
            solved += r.solvable as usize;
            faithful += c as usize;
            goal += r.goal_preserved as usize;
            f1 += r.schema_f1;
            if r.solvable && !c {
                m.drift_categories.add(r.drift);
            }
            m.decisions.add(r.decision);
            if c {
                m.faithful_decisions.add(r.decision);
            }
        }
        let nf = n as f64;
        m.solvability = solved as f64 / nf;
        m.faithful_success = faithful as f64 / nf;
        m.gap = m.solvability - m.faithful_success;
        m.drift = (solved > 0).then(|| (solved - faithful) as f64 / solved as f64);
        m.goal_preservation = goal as f64 / nf;
        m.mean_schema_f1 = f1 / nf;
        m
    }
}

/// True when the checker left `r` undecided: no verdict, counted apart from both.
pub fn is_undecided(r: &FaithfulnessReport) -> bool {
    r.undecided && !r.faithful
}

/// The 95 % Wilson score interval of a rate of `k` in `n` (the interval the reports give;
/// unlike the normal approximation it stays inside [0, 1] and is honest at 0 of 10).
pub fn wilson_interval(k: usize, n: usize) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (z, n, p) = (1.96f64, n as f64, k as f64 / n as f64);
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// A task's size bucket: the objects its reference problem declares. The edges put
/// PlanBench BlocksWorld and Mystery BlocksWorld (3–5 blocks) in the first bucket, the
/// smaller generated and Planetarium tasks in the second, and PlanBench Logistics (8–24
/// objects, nearly all 10 or more) in the last, so each of the large evaluation's domains
/// spans at least two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SizeBucket {
    /// Up to 5 objects (fewer than 3 count here too).
    #[serde(rename = "3-5")]
    Small,
    /// 6 to 9 objects.
    #[serde(rename = "6-9")]
    Medium,
    /// 10 objects or more.
    #[serde(rename = "10+")]
    Large,
    /// The trace does not say: written before the count was recorded, or a task without a
    /// reference problem.
    #[serde(rename = "unknown")]
    Unknown,
}

impl SizeBucket {
    /// Every bucket, smallest first.
    pub const ALL: [SizeBucket; 4] = [SizeBucket::Small, SizeBucket::Medium, SizeBucket::Large, SizeBucket::Unknown];

    /// The bucket of a task whose reference problem declares `objects` objects.
    pub fn of(objects: Option<u32>) -> SizeBucket {
        match objects {
            None => SizeBucket::Unknown,
            Some(0..=5) => SizeBucket::Small,
            Some(6..=9) => SizeBucket::Medium,
            Some(_) => SizeBucket::Large,
        }
    }

    /// The bucket as the reports print it: `3–5`, `6–9`, `10+`, `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            SizeBucket::Small => "3–5",
            SizeBucket::Medium => "6–9",
            SizeBucket::Large => "10+",
            SizeBucket::Unknown => "unknown",
        }
    }
}

/// ε̂ and its high-probability upper bound on the true disagreement rate ε.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisagreementBound {
    /// ε̂: the share of results where the solver's verdict S_i and correctness C_i disagree.
    pub eps_hat: f64,
    /// How many results.
    pub n: usize,
    /// The overall confidence parameter δ.
    pub delta: f64,
    /// k: how many checkpoints share δ (each gets δ/k).
    pub checkpoints: usize,
    /// ε̂ + sqrt(ln(k/δ) / 2n), clamped to 1: holds with probability ≥ 1 − δ for all k at once.
    pub bound: f64,
}

/// The Hoeffding upper bound ε ≤ ε̂ + sqrt(ln(1/δ') / 2n) with δ' = δ/k, the union bound over
/// `checkpoints` evaluations sharing one δ. Clamped to 1, since ε is a rate.
pub fn hoeffding_bound(
    eps_hat: f64,
    n: usize,
    delta: f64,
    checkpoints: usize,
) -> Result<f64, MetricsError> {
    if n == 0 {
        return Err(MetricsError::NoSamples);
    }
    // NaN fails both range checks.
    if !(delta > 0.0 && delta < 1.0) {
        return Err(MetricsError::BadDelta(delta));
    }
    if checkpoints == 0 {
        return Err(MetricsError::NoCheckpoints);
    }
    if !(0.0..=1.0).contains(&eps_hat) {
        return Err(MetricsError::BadRate(eps_hat));
    }
    let per_checkpoint = delta / checkpoints as f64;
    let width = ((1.0 / per_checkpoint).ln() / (2.0 * n as f64)).sqrt();
    Ok((eps_hat + width).min(1.0))
}

/// ε̂ = (1/n) Σ 1[S_i ≠ C_i] over the decided `reports` (an undecided one has no C_i), with
/// its Hoeffding bound at confidence 1 − δ over `checkpoints` checkpoints.
pub fn disagreement_bound(
    reports: &[FaithfulnessReport],
    delta: f64,
    checkpoints: usize,
) -> Result<DisagreementBound, MetricsError> {
    let decided: Vec<&FaithfulnessReport> = reports.iter().filter(|r| !is_undecided(r)).collect();
    let n = decided.len();
    if n == 0 {
        return Err(MetricsError::NoSamples);
    }
    let disagree = decided
        .iter()
        .filter(|r| r.solvable != (r.solvable && r.faithful))
        .count();
    let eps_hat = disagree as f64 / n as f64;
    let bound = hoeffding_bound(eps_hat, n, delta, checkpoints)?;
    Ok(DisagreementBound {
        eps_hat,
        n,
        delta,
        checkpoints,
        bound,
    })
}

/// The ROC AUC of `scores` against `labels`: the probability that a random positive scores
/// above a random negative, ties counting one half (the Mann–Whitney U statistic over n⁺n⁻).
/// Computed from mid-ranks in O(n log n).
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> Result<f64, MetricsError> {
    if scores.len() != labels.len() {
        return Err(MetricsError::LengthMismatch {
            scores: scores.len(),
            labels: labels.len(),
        });
    }
    if let Some(index) = scores.iter().position(|s| s.is_nan()) {
        return Err(MetricsError::NanScore { index });
    }
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 {
        return Err(MetricsError::OneClass {
            positives,
            negatives,
        });
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Sum of the positives' ranks (1-based), tied groups sharing their mean rank.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += mid_rank * order[i..=j].iter().filter(|&&k| labels[k]).count() as f64;
        i = j + 1;
    }
    let (p, q) = (positives as f64, negatives as f64);
    Ok((rank_sum - p * (p + 1.0) / 2.0) / (p * q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_the_published_values() {
        // 0/10 → [0, 27.8 %], 10/10 → [72.2 %, 100 %], 5/10 → [23.7 %, 76.3 %].
        let r = |k, n| {
            let (lo, hi) = wilson_interval(k, n).unwrap();
            ((lo * 1000.0).round() / 10.0, (hi * 1000.0).round() / 10.0)
        };
        assert_eq!(r(0, 10), (0.0, 27.8));
        assert_eq!(r(10, 10), (72.2, 100.0));
        assert_eq!(r(5, 10), (23.7, 76.3));
        assert_eq!(wilson_interval(0, 0), None);
    }

    #[test]
    fn size_buckets_have_their_edges_where_the_reports_say() {
        let b = |n| SizeBucket::of(Some(n));
        assert_eq!([b(0), b(2), b(3), b(5)], [SizeBucket::Small; 4], "fewer than 3 go to the first bucket");
        assert_eq!([b(6), b(9)], [SizeBucket::Medium; 2]);
        assert_eq!([b(10), b(24), b(u32::MAX)], [SizeBucket::Large; 3]);
        assert_eq!(SizeBucket::of(None), SizeBucket::Unknown);
        let labels: Vec<&str> = SizeBucket::ALL.iter().map(|b| b.label()).collect();
        assert_eq!(labels, ["3–5", "6–9", "10+", "unknown"]);
        assert_eq!(serde_json::to_string(&SizeBucket::Large).unwrap(), "\"10+\"");
    }

    fn rep(
        solvable: bool,
        faithful: bool,
        goal: bool,
        f1: f64,
        drift: Option<Drift>,
        decision: Decision,
    ) -> FaithfulnessReport {
        FaithfulnessReport {
            solvable,
            faithful,
            goal_preserved: goal,
            schema_f1: f1,
            drift,
            decision,
            ..Default::default()
        }
    }

    /// Ten results worked by hand: S = 7, C = 4, goal preserved in 7, F1 sum 8.1.
    fn ten() -> Vec<FaithfulnessReport> {
        use Decision::*;
        vec![
            rep(true, true, true, 1.0, None, Exact),
            rep(true, true, true, 1.0, None, Exact),
            rep(true, true, true, 1.0, None, Closure),
            rep(true, true, true, 1.0, None, Exact),
            rep(true, false, false, 1.0, Some(Drift::GoalWeakening), Exact),
            rep(
                true,
                false,
                true,
                0.8,
                Some(Drift::ConstraintOmission),
                Exact,
            ),
            rep(true, false, true, 0.5, None, Undecided),
            rep(false, false, false, 0.9, None, Exact),
            rep(false, false, false, 0.9, None, Closure),
            rep(false, false, true, 0.0, None, Exact),
        ]
    }

    #[test]
    fn metrics_match_hand_computed_values() {
        let m = FaithfulnessMetrics::from_reports(&ten());
        assert_eq!(m.n, 10);
        assert!((m.solvability - 0.7).abs() < 1e-12);
        assert!((m.faithful_success - 0.4).abs() < 1e-12);
        // Drift = (7 − 4) / 7.
        assert!((m.drift.unwrap() - 3.0 / 7.0).abs() < 1e-12);
        assert!((m.gap - 0.3).abs() < 1e-12);
        assert!((m.goal_preservation - 0.7).abs() < 1e-12);
        assert!((m.mean_schema_f1 - 0.81).abs() < 1e-12);
        let d = m.drift_categories;
        assert_eq!(
            (
                d.goal_weakening,
                d.type_drift,
                d.schema_drift,
                d.constraint_omission,
                d.unclassified
            ),
            (1, 0, 0, 1, 1)
        );
        assert_eq!(d.total(), 3);
        assert_eq!(d.get(Drift::ConstraintOmission), 1);
        assert_eq!(
            m.decisions,
            DecisionCounts {
                exact: 7,
                closure: 2,
                undecided: 1
            }
        );
        // Of the four faithful results, one rests on closure.
        assert_eq!(
            m.faithful_decisions,
            DecisionCounts {
                exact: 3,
                closure: 1,
                undecided: 0
            }
        );
        assert_eq!(m.faithful_decisions.total(), 4);
    }

    /// A result whose budget ran out is neither faithful nor unfaithful. Ten
    /// results plus two undecided ones give the ten's rates, and the two on their own.
    #[test]
    fn undecided_results_are_in_no_rate() {
        let open = FaithfulnessReport {
            undecided: true,
            ..rep(true, false, false, 1.0, None, Decision::Undecided)
        };
        let mut all = ten();
        all.insert(3, open.clone());
        all.push(open);
        let m = FaithfulnessMetrics::from_reports(&all);
        let base = FaithfulnessMetrics::from_reports(&ten());
        assert_eq!((m.n, m.undecided), (10, 2));
        assert_eq!((m.solvability, m.faithful_success, m.drift), (base.solvability, base.faithful_success, base.drift));
        assert_eq!(m.drift_categories, base.drift_categories);
        assert_eq!(m.decisions.undecided, base.decisions.undecided + 2);
        let b = disagreement_bound(&all, 0.05, 1).unwrap();
        assert_eq!((b.n, b.eps_hat), (10, disagreement_bound(&ten(), 0.05, 1).unwrap().eps_hat));
        // Only undecided: no rate at all, and no bound.
        let only = FaithfulnessMetrics::from_reports(&all[3..4]);
        assert_eq!((only.n, only.undecided, only.drift), (0, 1, None));
        assert!(disagreement_bound(&all[3..4], 0.05, 1).is_err());
    }

    #[test]
    fn drift_is_undefined_without_solved_results_and_empty_sets_are_zero() {
        let m = FaithfulnessMetrics::from_reports(&[rep(
            false,
            false,
            false,
            0.0,
            None,
            Decision::Exact,
        )]);
        assert_eq!(m.drift, None);
        assert_eq!(m.solvability, 0.0);
        let e = FaithfulnessMetrics::from_reports(&[]);
        assert_eq!((e.n, e.solvability, e.drift), (0, 0.0, None));
    }

    #[test]
    fn faithful_without_solvable_counts_as_unfaithful() {
        let m = FaithfulnessMetrics::from_reports(&[rep(
            false,
            true,
            true,
            1.0,
            None,
            Decision::Exact,
        )]);
        assert_eq!(m.faithful_success, 0.0);
    }

    #[test]
    fn hoeffding_bound_matches_the_formula() {
        // n = 200, δ = 0.05, k = 1: sqrt(ln 20 / 400) = 0.0865…
        let b = hoeffding_bound(0.1, 200, 0.05, 1).unwrap();
        assert!((b - (0.1 + (20f64.ln() / 400.0).sqrt())).abs() < 1e-12);
        assert!((b - 0.186_541_9).abs() < 1e-6, "{b}");
        // Five checkpoints: each gets δ/5 = 0.01, so ln 100.
        let b5 = hoeffding_bound(0.1, 200, 0.05, 5).unwrap();
        assert!((b5 - (0.1 + (100f64.ln() / 400.0).sqrt())).abs() < 1e-12);
        assert!(b5 > b);
        assert_eq!(hoeffding_bound(0.9, 1, 0.05, 1).unwrap(), 1.0);
    }

    #[test]
    fn hoeffding_bound_rejects_bad_parameters() {
        assert_eq!(
            hoeffding_bound(0.1, 0, 0.05, 1),
            Err(MetricsError::NoSamples)
        );
        assert_eq!(
            hoeffding_bound(0.1, 10, 0.0, 1),
            Err(MetricsError::BadDelta(0.0))
        );
        assert_eq!(
            hoeffding_bound(0.1, 10, 1.0, 1),
            Err(MetricsError::BadDelta(1.0))
        );
        assert!(matches!(
            hoeffding_bound(0.1, 10, f64::NAN, 1),
            Err(MetricsError::BadDelta(_))
        ));
        assert_eq!(
            hoeffding_bound(0.1, 10, 0.05, 0),
            Err(MetricsError::NoCheckpoints)
        );
        assert_eq!(
            hoeffding_bound(1.5, 10, 0.05, 1),
            Err(MetricsError::BadRate(1.5))
        );
    }

    #[test]
    fn disagreement_counts_solved_but_unfaithful() {
        let b = disagreement_bound(&ten(), 0.1, 2).unwrap();
        assert!((b.eps_hat - 0.3).abs() < 1e-12);
        assert!((b.bound - (0.3 + (20f64.ln() / 20.0).sqrt())).abs() < 1e-12);
        assert_eq!((b.n, b.checkpoints), (10, 2));
        assert_eq!(
            disagreement_bound(&[], 0.1, 1),
            Err(MetricsError::NoSamples)
        );
    }

    #[test]
    fn auc_of_hand_computed_cases() {
        // One inverted pair of four: 0.35 (positive) < 0.4 (negative).
        assert_eq!(
            roc_auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]).unwrap(),
            0.75
        );
        // Perfect separation and its reverse.
        assert_eq!(
            roc_auc(&[0.9, 0.8, 0.1, 0.2], &[true, true, false, false]).unwrap(),
            1.0
        );
        assert_eq!(
            roc_auc(&[0.1, 0.2, 0.9, 0.8], &[true, true, false, false]).unwrap(),
            0.0
        );
        // All tied: every pair counts one half.
        assert_eq!(
            roc_auc(&[0.5; 5], &[true, false, true, false, false]).unwrap(),
            0.5
        );
        // Pairs (p, n): (0.7, 0.7) tie = ½, (0.7, 0.2) = 1, (0.9, 0.7) = 1, (0.9, 0.2) = 1 → 3.5 / 4.
        assert_eq!(
            roc_auc(&[0.7, 0.9, 0.7, 0.2], &[true, true, false, false]).unwrap(),
            0.875
        );
    }

    #[test]
    fn auc_matches_the_pairwise_definition() {
        let scores = [0.3, 0.3, 0.1, 0.9, 0.5, 0.5, 0.5, 0.2, 0.8, 0.3];
        let labels = [
            true, false, false, true, true, false, true, false, true, true,
        ];
        let mut sum = 0.0;
        let mut pairs = 0.0;
        for i in 0..scores.len() {
            for j in 0..scores.len() {
                if labels[i] && !labels[j] {
                    pairs += 1.0;
                    sum += if scores[i] > scores[j] {
                        1.0
                    } else if scores[i] == scores[j] {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        assert!((roc_auc(&scores, &labels).unwrap() - sum / pairs).abs() < 1e-12);
    }

    #[test]
    fn auc_rejects_bad_input() {
        assert_eq!(
            roc_auc(&[0.1], &[true, false]),
            Err(MetricsError::LengthMismatch {
                scores: 1,
                labels: 2
            })
        );
        assert_eq!(
            roc_auc(&[0.1, 0.2], &[true, true]),
            Err(MetricsError::OneClass {
                positives: 2,
                negatives: 0
            })
        );
        assert_eq!(
            roc_auc(&[0.1, f64::NAN], &[true, false]),
            Err(MetricsError::NanScore { index: 1 })
        );
    }

    #[test]
    fn metrics_serialise_with_kebab_case_categories() {
        let v = serde_json::to_value(FaithfulnessMetrics::from_reports(&ten())).unwrap();
        assert_eq!(v["drift_categories"]["goal-weakening"], 1);
        assert_eq!(v["decisions"]["undecided"], 1);
        assert_eq!(v["faithful_decisions"]["closure"], 1);
        // A report written before the field existed still reads.
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("faithful_decisions");
        let back: FaithfulnessMetrics = serde_json::from_value(old).unwrap();
        assert_eq!(back.faithful_decisions, DecisionCounts::default());
    }
}

//! The report rendered: Markdown tables and SVG plots.

use std::fmt::Write as _;
use std::path::PathBuf;

use onebrain_core::Category;
use onebrain_roles::Strategy;

use super::{JudgeReport, Rate, Report, StrategyReport, Summary, MAX_H};
use crate::failures::{FailedStep, FailureCause};
use crate::svg;

impl Report {
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
    use onebrain_core::{Decision, FaithfulnessReport};

    use super::super::SizeRate;
    use super::*;
    use crate::failures::FailureCount;
    use crate::metrics::{wilson_interval, FaithfulnessMetrics, SizeBucket};

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

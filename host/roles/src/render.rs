//! What the terminal shows of an episode: its events as they happen, what a finished answer
//! gets wrong against the task's reference, and two episodes of one task side by side.

use std::fmt::Write as _;

use onebrain_core::Overlap;

use crate::extract::Mode;
use crate::record::{EpisodeRecord, Event};

/// How many of the checker's reasons a finished episode prints.
const WHY_LINES: usize = 4;

/// One event as the terminal shows it (several lines for generations and verdicts).
pub fn render_event(e: &Event) -> String {
    let mut s = String::new();
    match e {
        Event::Started { task_id, strategy } => {
            let _ = write!(s, "== {task_id} ({strategy})");
        }
        Event::Generated {
            index,
            role,
            kind,
            text,
            tokens,
            secs,
            ..
        } => {
            let _ = writeln!(
                s,
                "-- step {index}: {role} ({kind}), {tokens} tokens in {secs:.1} s"
            );
            for line in text.trim().lines().take(60) {
                let _ = writeln!(s, "   | {line}");
            }
            s.pop();
        }
        Event::Verified { index, verdict, .. } => {
            let planner = if verdict.solver_time_ms > 0 {
                format!(", planner {} ms", verdict.solver_time_ms)
            } else {
                String::new()
            };
            if verdict.solved {
                let _ = write!(
                    s,
                    "   verifier (step {index}): solved, {} steps ({} ms{planner})",
                    verdict.plan.len(),
                    verdict.time_ms
                );
            } else {
                let _ = write!(
                    s,
                    "   verifier (step {index}): not solved, {:?} ({} ms{planner})",
                    verdict.outcome, verdict.time_ms
                );
                for d in verdict.diagnostics.iter().filter(|d| d.is_error()).take(3) {
                    let at = match (d.line, d.column) {
                        (Some(l), Some(c)) => format!(" at {l}:{c}"),
                        _ => String::new(),
                    };
                    let _ = write!(
                        s,
                        "\n     [{}]{at} {}",
                        d.category,
                        d.message.lines().next().unwrap_or_default()
                    );
                }
            }
        }
        Event::Judged { index, score, .. } => {
            let _ = write!(s, "   judge (step {index}): s_J = {score:.3}");
        }
        Event::Finished(rec) => {
            let _ = write!(
                s,
                "== {}: {} after {} verifier call(s), {} repair(s), {:.1} s",
                rec.task_id,
                if rec.solved { "solved" } else { "not solved" },
                rec.solver_calls,
                rec.repairs,
                rec.timings.wall_ms / 1e3
            );
            if let Some(i) = rec.selected {
                let _ = write!(s, "\n   returned: sample {i} of {}, picked without a reference", rec.solver_calls);
            }
            if let Some(r) = &rec.rewards {
                let _ = write!(
                    s,
                    "\n   rewards: actor {:.2}, editor {:.2}, judge {:.2}",
                    r.actor, r.editor, r.judge
                );
            }
            if let Some(f) = &rec.faithfulness {
                let _ = write!(s, "\n   {}", faithfulness_line(rec));
                for why in f.explanation.iter().take(WHY_LINES) {
                    let _ = write!(s, "\n     - {why}");
                }
            }
            if let Some(err) = &rec.error {
                let _ = write!(s, "\n   note: {err}");
            }
            if let Some(spec) = &rec.final_spec {
                let _ = write!(s, "\n-- final problem:\n{}", spec.problem.trim());
                if rec.mode == crate::Mode::Full {
                    let _ = write!(s, "\n-- final domain:\n{}", spec.domain.trim());
                }
            }
            if !rec.final_plan.is_empty() {
                let _ = write!(s, "\n-- plan:\n{}", rec.final_plan.join("\n"));
            }
        }
    }
    s
}

/// `faithful: yes (…)`, or `faithful: no: ` and what differs from the reference.
pub fn faithfulness_line(rec: &EpisodeRecord) -> String {
    match &rec.faithfulness {
        None if rec.stop_error().is_some() => "faithful: unknown (the episode stopped on an error before its answer)".into(),
        None => "faithful: unknown (no reference to compare with)".into(),
        Some(f) if f.faithful => {
            "faithful: yes (the goal, objects and actions match the task's reference, and the plan replays there)".into()
        }
        Some(_) => format!("faithful: no: {}", what_differs(rec).join("; ")),
    }
}

/// What a finished answer gets wrong against the task's reference, most telling first: no
/// answer or no solution, a goal that holds before any action (the planner's empty plan),
/// objects and facts missing or invented (under the renaming of objects that shares the
/// most facts), then the checker's drift category. Empty for a faithful answer or one with
/// no reference.
pub fn what_differs(rec: &EpisodeRecord) -> Vec<String> {
    let Some(f) = rec.faithfulness.as_ref().filter(|f| !f.faithful) else { return Vec::new() };
    if rec.final_spec.is_none() {
        return vec!["the model wrote no PDDL".into()];
    }
    let mut out = Vec::new();
    if !f.solvable {
        out.push("not solved by the verifier".into());
    }
    let mut counted = [false; 3];
    if let Some(a) = &rec.fact_agreement {
        if a.goal_holds_initially {
            out.push("its goal already holds in its initial state (the plan is empty)".into());
        }
        for (i, (what, overlap)) in [("object", a.objects), ("initial fact", a.init), ("goal fact", a.goal)].into_iter().enumerate() {
            if let Some(line) = missing_and_invented(what, overlap) {
                out.push(line);
                counted[i] = true;
            }
        }
    }
    // Where no renaming of the objects makes the two initial states equal, the checker stops
    // there: it never compares the goal or replays the plan, so those verdicts are false
    // without being refuted and say nothing about the answer.
    let stopped_at_init = !f.init_preserved && !f.undecided;
    // The checker's verdicts, where the counts above did not already say it.
    if f.solvable && !f.objects_preserved && !counted[0] {
        out.push("the objects or their types differ".into());
    }
    if f.solvable && stopped_at_init && f.objects_preserved && !counted[1] {
        out.push("the initial state differs from the task's under every renaming of the objects".into());
    }
    if f.solvable && !f.goal_preserved && !counted[2] && !stopped_at_init {
        out.push("the goal is not the task's goal".into());
    }
    if let Some(d) = f.drift {
        out.push(format!("drift: {}", d.as_str()));
    }
    if rec.mode == Mode::Full && !f.schema_consistent {
        out.push(format!("the action schemas differ (schema F1 {:.2})", f.schema_f1));
    }
    if f.solvable && !f.plan_replay_ok && !stopped_at_init {
        out.push("its plan does not solve the task".into());
    }
    if out.is_empty() {
        out.push("not faithful (the checker gave no reason)".into());
    }
    out
}

/// `2 of 7 initial facts missing, 1 invented`, or nothing when the two sides agree.
fn missing_and_invented(what: &str, o: Overlap) -> Option<String> {
    let missing = o.reference.saturating_sub(o.shared);
    let invented = o.candidate.saturating_sub(o.shared);
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    match (missing, invented) {
        (0, 0) => None,
        (m, 0) => Some(format!("{m} of {} {what}{} missing", o.reference, plural(o.reference))),
        (0, i) => Some(format!("{i} {what}{} invented", plural(i))),
        (m, i) => Some(format!("{m} of {} {what}{} missing, {i} invented", o.reference, plural(o.reference))),
    }
}

/// Episodes of one task as columns under their labels (`base`, a checkpoint), a row per
/// figure: whether and when it was solved, the plan, the Judge, and what each answer gets
/// right and wrong against the task's reference.
pub fn side_by_side(columns: &[(&str, &EpisodeRecord)]) -> String {
    let cell = |f: &dyn Fn(&EpisodeRecord) -> String| columns.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let agreement = |r: &EpisodeRecord, pick: fn(&onebrain_core::FactAgreement) -> Overlap| {
        r.fact_agreement.map_or("-".to_string(), |a| {
            let o = pick(&a);
            format!("{} of {} stated, {} invented", o.shared, o.reference, o.candidate.saturating_sub(o.shared))
        })
    };
    let rows: Vec<(&str, Vec<String>)> = vec![
        ("solved", cell(&|r| match (r.solved, r.first_success) {
            (true, Some(k)) => format!("yes, at verifier call {}", k + 1),
            (true, None) => "yes".into(),
            (false, _) => format!("no, after {} verifier call(s)", r.solver_calls),
        })),
        ("plan", cell(&|r| if r.solved { format!("{} step(s)", r.final_plan.len()) } else { "-".into() })),
        ("Judge's last score", cell(&|r| r.judge_score.map_or("-".into(), |s| format!("{s:.2}")))),
        ("faithful", cell(&|r| match &r.faithfulness {
            Some(f) => if f.faithful { "yes".into() } else { "no".into() },
            None => "unknown".into(),
        })),
        ("goal holds at the start", cell(&|r| {
            r.fact_agreement.map_or("-".into(), |a| if a.goal_holds_initially { "yes".into() } else { "no".into() })
        })),
        ("objects", cell(&|r| agreement(r, |a| a.objects))),
        ("initial facts", cell(&|r| agreement(r, |a| a.init))),
        ("goal facts", cell(&|r| agreement(r, |a| a.goal))),
    ];
    let label_width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 2;
    let widths: Vec<usize> = (0..columns.len())
        .map(|c| rows.iter().map(|(_, cells)| cells[c].chars().count()).chain([columns[c].0.chars().count()]).max().unwrap_or(0) + 3)
        .collect();
    let header: Vec<String> = columns.iter().map(|(l, _)| l.to_string()).collect();
    let mut out = String::new();
    for (label, cells) in std::iter::once(("", header)).chain(rows) {
        let mut row = format!("{label:<label_width$}");
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(row, "{cell:<width$}");
        }
        let _ = writeln!(out, "{}", row.trim_end());
    }
    for (label, rec) in columns {
        let differs = what_differs(rec);
        if !differs.is_empty() {
            let _ = writeln!(out, "{label}, not faithful: {}", differs.join("; "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use onebrain_core::{Checker, Spec};

    use super::*;
    use crate::strategy::Strategy;

    const DOMAIN: &str = include_str!("../../../guests/blocksworld/domain.pddl");
    const TASK: &str = "(define (problem p) (:domain blocksworld-4ops) (:objects a b c)
        (:init (clear a) (clear b) (clear c) (ontable a) (ontable b) (ontable c) (handempty))
        (:goal (and (on a b))))";
    /// The planner's favourite answer: the goal is one of the initial facts, and `c` is gone.
    const GAMED: &str = "(define (problem p) (:domain blocksworld-4ops) (:objects a b)
        (:init (clear a) (clear b) (ontable a) (ontable b) (handempty))
        (:goal (and (clear a))))";

    /// A finished, solved episode whose final problem is `problem` with `plan`, checked
    /// against [`TASK`] by the reference checker, as the episode's finalizer does.
    fn finished(problem: &str, plan: &[&str]) -> EpisodeRecord {
        let reference = Spec { domain: DOMAIN.into(), problem: TASK.into() };
        let candidate = Spec { domain: DOMAIN.into(), problem: problem.into() };
        let plan: Vec<String> = plan.iter().map(|s| s.to_string()).collect();
        let checker = onebrain_faithful::ReferenceChecker::default();
        EpisodeRecord {
            task_id: "blocksworld/test".into(),
            domain: "blocksworld".into(),
            strategy: Strategy::MultiRole,
            mode: Mode::Problem,
            model: "test".into(),
            task_text: String::new(),
            steps: Vec::new(),
            b0: true,
            solved: true,
            first_success: Some(0),
            selected: None,
            repairs: 0,
            solver_calls: 1,
            planner_calls: 1,
            faithfulness: Some(checker.check(&reference, &candidate, Some(&plan)).unwrap()),
            fact_agreement: Some(onebrain_faithful::fact_agreement(TASK, problem).unwrap()),
            final_spec: Some(candidate),
            final_plan: plan,
            judge_score: Some(0.75),
            rewards: None,
            timings: Default::default(),
            repeated_repairs: 0,
            discarded_repeats: 0,
            error: None,
            failures: Vec::new(),
        }
    }

    #[test]
    fn a_gamed_answer_says_what_differs_instead_of_no_drift() {
        let rec = finished(GAMED, &[]);
        let differs = what_differs(&rec);
        assert!(differs.iter().any(|d| d.contains("goal already holds")), "{differs:?}");
        assert!(differs.contains(&"1 of 3 objects missing".to_string()), "{differs:?}");
        assert!(differs.contains(&"1 of 1 goal fact missing, 1 invented".to_string()), "{differs:?}");
        let line = faithfulness_line(&rec);
        assert!(line.starts_with("faithful: no: ") && !line.contains("drift: none"), "{line}");
    }

    /// Regression (found in a demo): an answer whose goal and objects are the task's but
    /// whose initial state no renaming matches was reported as "the goal is not the task's
    /// goal; its plan does not solve the task", verdicts the checker never reached.
    #[test]
    fn an_unmatched_initial_state_does_not_claim_the_goal_or_plan_differ() {
        let extra_fact = TASK.replace("(handempty))", "(handempty) (on c a))");
        let rec = finished(&extra_fact, &["(pick-up a)", "(stack a b)"]);
        let f = rec.faithfulness.as_ref().unwrap();
        assert!(!f.faithful && !f.init_preserved && f.objects_preserved, "{f:?}");
        assert_eq!(what_differs(&rec), vec!["1 initial fact invented".to_string()]);
    }

    #[test]
    fn a_faithful_answer_says_so_and_lists_nothing() {
        let rec = finished(TASK, &["(pick-up a)", "(stack a b)"]);
        assert!(what_differs(&rec).is_empty(), "{:?}", what_differs(&rec));
        assert!(faithfulness_line(&rec).starts_with("faithful: yes"), "{}", faithfulness_line(&rec));
    }

    #[test]
    fn side_by_side_puts_each_episode_in_its_column() {
        let (base, trained) = (finished(GAMED, &[]), finished(TASK, &["(pick-up a)", "(stack a b)"]));
        let table = side_by_side(&[("base", &base), ("trained", &trained)]);
        let row = |label: &str| table.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label}: {table}"));
        let cells = |label: &str| row(label).split_whitespace().skip(label.split_whitespace().count()).collect::<Vec<_>>().join(" ");
        assert_eq!(cells("faithful"), "no yes", "{table}");
        assert_eq!(cells("goal holds at the start"), "yes no", "{table}");
        assert_eq!(cells("plan"), "0 step(s) 2 step(s)", "{table}");
        assert_eq!(cells("objects"), "2 of 3 stated, 0 invented 3 of 3 stated, 0 invented", "{table}");
        assert!(table.contains("base, not faithful: ") && !table.contains("trained, not faithful"), "{table}");
    }
}

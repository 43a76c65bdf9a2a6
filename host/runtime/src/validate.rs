//! What the host accepts from a plugin, one function per world. Every call
//! goes through these (not only `plugins check`'s smoke call), so a plugin
//! that behaves on the smoke input and poisons real episodes is caught on
//! the call that poisons. A refusal is [`PluginErrorKind::Invalid`] (or
//! [`PluginErrorKind::NonFinite`] for NaN and ±∞, or [`PluginErrorKind::Identity`]),
//! which names the plugin and its version.
//!
//! Strings are escaped here too (see `text.rs`): one-line strings (messages,
//! explanations) lose every control character; texts (PDDL, statements)
//! keep their newlines and tabs.

use onebrain_core::{Diagnostic, FaithfulnessReport, Rewards, Spec, Task};

use crate::error::PluginErrorKind;
use crate::limits::Limits;
use crate::text::{escape_text, is_identifier, message};

/// The longest task id accepted (ids name files and lines in reports).
pub(crate) const MAX_TASK_ID_BYTES: usize = 256;

fn invalid(msg: impl Into<String>) -> PluginErrorKind {
    PluginErrorKind::Invalid(msg.into())
}

fn non_finite(msg: impl Into<String>) -> PluginErrorKind {
    PluginErrorKind::NonFinite(msg.into())
}

/// `reward`: each reward finite and within ±`limits.reward_bound`, and per-step Editor
/// rewards, when given, one for each of the episode's `editor_steps` repairs.
pub(crate) fn rewards(r: Rewards, editor_steps: u32, limits: &Limits) -> Result<Rewards, PluginErrorKind> {
    let bound = limits.reward_bound;
    let per_step = r.editor_steps.iter().flatten().enumerate().map(|(i, &v)| (format!("editor step {}", i + 1), v));
    let totals = [("actor", r.actor), ("editor", r.editor), ("judge", r.judge)].map(|(n, v)| (n.to_string(), v));
    for (role, v) in totals.into_iter().chain(per_step) {
        if !v.is_finite() {
            return Err(non_finite(format!("the {role} reward is {v}, not a finite number")));
        }
        if v.abs() > bound {
            return Err(invalid(format!("the {role} reward {v} is outside [-{bound}, {bound}]")));
        }
    }
    if let Some(steps) = &r.editor_steps {
        if steps.len() != editor_steps as usize {
            return Err(invalid(format!(
                "{} per-step editor rewards for an episode of {editor_steps} editor steps",
                steps.len()
            )));
        }
    }
    Ok(r)
}

/// `domain-adapter` `name()`: an identifier, and the plugin's own name (its
/// manifest's, which is its folder's): a plugin cannot answer for another domain.
pub(crate) fn domain_name(reported: String, manifest: &str) -> Result<String, PluginErrorKind> {
    if !is_identifier(&reported) {
        return Err(invalid(format!(
            "name() returned `{}`, not 1 to 64 ASCII letters, digits, `-` or `_`",
            message(&reported, 64)
        )));
    }
    if reported != manifest {
        return Err(PluginErrorKind::Identity { manifest: manifest.to_string(), reported });
    }
    Ok(reported)
}

/// `domain-adapter` texts (description, domain PDDL, `describe`): newlines
/// and tabs kept, other control characters escaped. Their size is under the
/// output cap already.
pub(crate) fn text(s: String) -> String {
    match escape_text(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(o) => o,
    }
}

/// `domain-adapter` `generate`: an id of printable ASCII, the adapter's own
/// domain name (a task cannot be routed to another plugin), texts escaped.
pub(crate) fn task(t: Task, domain: &str) -> Result<Task, PluginErrorKind> {
    if t.id.is_empty() || t.id.len() > MAX_TASK_ID_BYTES || !t.id.chars().all(|c| c.is_ascii_graphic()) {
        return Err(invalid(format!(
            "task id `{}` is not 1 to {MAX_TASK_ID_BYTES} printable ASCII characters",
            message(&t.id, 64)
        )));
    }
    if t.domain != domain {
        return Err(invalid(format!(
            "task {} names domain `{}`, but this plugin is `{domain}`",
            t.id,
            message(&t.domain, 64)
        )));
    }
    Ok(Task {
        text: text(t.text),
        reference: t.reference.map(|s| Spec { domain: text(s.domain), problem: text(s.problem) }),
        ..t
    })
}

/// `diagnostic-parser`: every message one escaped line within the message cap.
pub(crate) fn diagnostics(ds: Vec<Diagnostic>, limits: &Limits) -> Vec<Diagnostic> {
    let cap = limits.message_bytes();
    ds.into_iter().map(|d| Diagnostic { message: message(&d.message, cap), ..d }).collect()
}

/// The most diagnostics one `review` may answer. The Editor's prompt lists eight in all,
/// so a reviewer that answers more than twice that is not writing for it (WIT 0.4.0 says so).
pub(crate) const MAX_REVIEW_DIAGNOSTICS: usize = 16;

/// `diagnostic-parser`'s `review`: at most [`MAX_REVIEW_DIAGNOSTICS`], none with an empty
/// message, every message one escaped line within the message cap.
pub(crate) fn review(ds: Vec<Diagnostic>, limits: &Limits) -> Result<Vec<Diagnostic>, PluginErrorKind> {
    if ds.len() > MAX_REVIEW_DIAGNOSTICS {
        return Err(invalid(format!(
            "{} diagnostics from one review, more than the {MAX_REVIEW_DIAGNOSTICS} the host accepts",
            ds.len()
        )));
    }
    if let Some(i) = ds.iter().position(|d| d.message.trim().is_empty()) {
        return Err(invalid(format!("review diagnostic {} of {} has an empty message", i + 1, ds.len())));
    }
    Ok(diagnostics(ds, limits))
}

/// `faithfulness-checker`: a self-consistent report. C_i (faithful) means
/// solvable and every test passed; a drift is reported only for a solvable,
/// unfaithful spec; undecided only for a solvable spec whose goal decision is
/// undecided, with neither; F1 is a number in [0, 1]. Explanations are escaped lines.
pub(crate) fn report(r: FaithfulnessReport, limits: &Limits) -> Result<FaithfulnessReport, PluginErrorKind> {
    if !(0.0..=1.0).contains(&r.schema_f1) {
        let refuse: fn(String) -> PluginErrorKind = if r.schema_f1.is_finite() { invalid } else { non_finite };
        return Err(refuse(format!("schema_f1 is {}, not a number in [0, 1]", r.schema_f1)));
    }
    if r.faithful {
        let failed: Vec<&str> = [
            ("solvable", r.solvable),
            ("goal_preserved", r.goal_preserved),
            ("objects_preserved", r.objects_preserved),
            ("schema_consistent", r.schema_consistent),
            ("plan_replay_ok", r.plan_replay_ok),
        ]
        .into_iter()
        .filter(|(_, ok)| !ok)
        .map(|(name, _)| name)
        .collect();
        if !failed.is_empty() {
            return Err(invalid(format!("the report says faithful but not {}", failed.join(", "))));
        }
    }
    if r.undecided {
        // Undecided is a third verdict: never beside faithful or a drift, never on an
        // unsolved spec (that is decided: not faithful), and only with an undecided goal.
        let why = if r.faithful {
            Some("faithful")
        } else if !r.solvable {
            Some("not solvable")
        } else if r.drift.is_some() {
            Some("drifted")
        } else if r.decision != onebrain_core::Decision::Undecided {
            Some("decided")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(invalid(format!("the report says undecided for a spec it also calls {why}")));
        }
    }
    if let Some(d) = r.drift {
        if r.faithful || !r.solvable {
            return Err(invalid(format!(
                "the report names a drift ({d:?}) for a spec that is {}",
                if r.faithful { "faithful" } else { "not solvable" }
            )));
        }
    }
    let cap = limits.message_bytes();
    Ok(FaithfulnessReport { explanation: r.explanation.iter().map(|e| message(e, cap)).collect(), ..r })
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::Drift;

    #[test]
    fn rewards_must_be_finite_and_bounded() {
        let l = Limits::default();
        let r = |actor| Rewards { actor, ..Rewards::default() };
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert!(matches!(rewards(r(bad), 0, &l), Err(PluginErrorKind::NonFinite(_))), "{bad}");
        }
        for bad in [1e30, 100.5, -101.0] {
            assert!(matches!(rewards(r(bad), 0, &l), Err(PluginErrorKind::Invalid(_))), "{bad}");
        }
        for good in [0.0, 1.3, -100.0, 100.0] {
            assert!(rewards(r(good), 0, &l).is_ok(), "{good}");
        }
        let tight = Limits { reward_bound: 1.0, ..l };
        assert!(rewards(r(1.3), 0, &tight).is_err());
        let e = rewards(Rewards { judge: f32::NAN, ..Rewards::default() }, 0, &Limits::default()).unwrap_err();
        assert!(e.to_string().contains("judge reward is NaN"), "{e}");
    }

    #[test]
    fn per_step_editor_rewards_are_checked_one_by_one_and_counted() {
        let l = Limits::default();
        let steps = |v: Vec<f32>| Rewards { editor_steps: Some(v), ..Rewards::default() };
        assert!(rewards(steps(vec![-0.1, 0.9]), 2, &l).is_ok());
        let e = rewards(steps(vec![-0.1, f32::NAN]), 2, &l).unwrap_err();
        assert!(e.to_string().contains("editor step 2 reward is NaN"), "{e}");
        let e = rewards(steps(vec![0.0, 1e9]), 2, &l).unwrap_err();
        assert!(e.to_string().contains("editor step 2 reward"), "{e}");
        let e = rewards(steps(vec![0.5]), 2, &l).unwrap_err();
        assert!(e.to_string().contains("1 per-step editor rewards for an episode of 2 editor steps"), "{e}");
        // No list at all is the paper's terminal reward, whatever the episode's length.
        assert!(rewards(Rewards::default(), 5, &l).is_ok());
    }

    #[test]
    fn reports_must_be_self_consistent() {
        let l = Limits::default();
        let good = FaithfulnessReport {
            solvable: true,
            faithful: true,
            goal_preserved: true,
            objects_preserved: true,
            schema_consistent: true,
            plan_replay_ok: true,
            schema_f1: 1.0,
            ..Default::default()
        };
        assert!(report(good.clone(), &l).is_ok());
        let unsolved = FaithfulnessReport { solvable: false, ..good.clone() };
        let e = report(unsolved, &l).unwrap_err().to_string();
        assert!(e.contains("faithful but not solvable"), "{e}");
        for (f1, kind) in [(f64::NAN, "non-finite"), (1.5, "invalid"), (-0.1, "invalid"), (f64::INFINITY, "non-finite")] {
            let e = report(FaithfulnessReport { schema_f1: f1, ..good.clone() }, &l).unwrap_err();
            assert_eq!(e.failure_kind().as_str(), kind, "{f1}");
        }
        let drifted = FaithfulnessReport { drift: Some(Drift::GoalWeakening), ..good.clone() };
        assert!(report(drifted, &l).is_err());
        let honest = FaithfulnessReport {
            faithful: false,
            goal_preserved: false,
            drift: Some(Drift::GoalWeakening),
            explanation: vec!["goal (on a b) is missing\x1b[2K".into()],
            ..good
        };
        let r = report(honest, &l).unwrap();
        assert_eq!(r.explanation, ["goal (on a b) is missing\\u{1b}[2K"]);
        // An unsolved spec: nothing else has to hold.
        assert!(report(FaithfulnessReport::default(), &l).is_ok());
    }

    #[test]
    fn undecided_is_a_verdict_of_its_own() {
        use onebrain_core::Decision;
        let l = Limits::default();
        let undecided = FaithfulnessReport {
            solvable: true,
            objects_preserved: true,
            init_preserved: true,
            schema_consistent: true,
            plan_replay_ok: true,
            schema_f1: 1.0,
            decision: Decision::Undecided,
            undecided: true,
            ..Default::default()
        };
        assert!(report(undecided.clone(), &l).is_ok());
        for (bad, why) in [
            (FaithfulnessReport { faithful: true, goal_preserved: true, ..undecided.clone() }, "faithful"),
            (FaithfulnessReport { solvable: false, ..undecided.clone() }, "not solvable"),
            (FaithfulnessReport { drift: Some(Drift::GoalWeakening), ..undecided.clone() }, "drifted"),
            (FaithfulnessReport { decision: Decision::Closure, ..undecided }, "decided"),
        ] {
            let e = report(bad, &l).unwrap_err().to_string();
            assert!(e.contains(&format!("undecided for a spec it also calls {why}")), "{e}");
        }
    }

    #[test]
    fn domain_names_and_tasks_belong_to_the_plugin() {
        assert_eq!(domain_name("gripper".into(), "gripper").unwrap(), "gripper");
        assert!(matches!(domain_name("blocksworld".into(), "impostor"), Err(PluginErrorKind::Identity { .. })));
        assert!(matches!(domain_name("blocks\x1b".into(), "blocks"), Err(PluginErrorKind::Invalid(_))));
        let t = Task { id: "g/seed-1".into(), domain: "g".into(), text: "pick\r\nup\x1b[31m".into(), reference: None };
        assert_eq!(task(t.clone(), "g").unwrap().text, "pick\nup\\u{1b}[31m");
        assert!(task(Task { domain: "blocksworld".into(), ..t.clone() }, "g").is_err());
        assert!(task(Task { id: "a b".into(), ..t.clone() }, "g").is_err());
        assert!(task(Task { id: String::new(), ..t }, "g").is_err());
    }

    #[test]
    fn a_review_is_short_and_says_something() {
        let l = Limits::default();
        let warning = |m: &str| Diagnostic::warning(onebrain_core::Category::ObjectType, m);
        let out = review(vec![warning("object \"table\" is not named\n\x1b[2J")], &l).unwrap();
        assert_eq!(out[0].message, "object \"table\" is not named\\n\\u{1b}[2J");
        let e = review(vec![warning("x"); MAX_REVIEW_DIAGNOSTICS + 1], &l).unwrap_err().to_string();
        assert!(e.contains("17 diagnostics from one review, more than the 16"), "{e}");
        assert!(review(vec![warning("x"); MAX_REVIEW_DIAGNOSTICS], &l).is_ok());
        let e = review(vec![warning("x"), warning(" \t")], &l).unwrap_err().to_string();
        assert!(e.contains("review diagnostic 2 of 2 has an empty message"), "{e}");
    }

    #[test]
    fn diagnostic_messages_are_escaped_lines() {
        let d = Diagnostic::error(onebrain_core::Category::Syntax, "bad\ntoken \x1b]0;x\x07");
        let out = diagnostics(vec![d], &Limits::default());
        assert_eq!(out[0].message, "bad\\ntoken \\u{1b}]0;x\\u{7}");
    }
}

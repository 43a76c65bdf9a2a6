//! A hostile `faithfulness-checker`: self-contradictory reports,
//! an F1 that is not a number, and a list of explanations that all point at
//! one large string, so the host would copy it once per entry. The attack is
//! the candidate problem's text; an empty spec (the smoke call of `plugins
//! check`) gets the contradictory report.

use onebrain_sdk::{Drift, FaithfulnessChecker, FaithfulnessReport, Result, Spec};

#[derive(Default)]
struct HostileChecker;

fn consistent() -> FaithfulnessReport {
    FaithfulnessReport {
        solvable: true,
        faithful: true,
        goal_preserved: true,
        objects_preserved: true,
        schema_consistent: true,
        plan_replay_ok: true,
        schema_f1: 1.0,
        ..Default::default()
    }
}

/// `n` strings sharing one buffer of `len` bytes. wit-bindgen lowers each
/// `String` by handing over its buffer, so the list the host receives holds
/// the same pointer `n` times: `n * len` bytes to lift from `len` in memory.
fn aliased(n: usize, len: usize) -> Vec<String> {
    let mut shared = std::mem::ManuallyDrop::new("A".repeat(len).into_bytes());
    let (ptr, cap) = (shared.as_mut_ptr(), shared.capacity());
    // SAFETY: deliberately unsound (every String owns the same buffer); this
    // guest exists to be hostile, and the host must cope with what it returns.
    (0..n).map(|_| unsafe { String::from_raw_parts(ptr, len, cap) }).collect()
}

impl FaithfulnessChecker for HostileChecker {
    fn check(&self, _reference: &Spec, candidate: &Spec, _plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let (cmd, arg) = candidate.problem.split_once(':').unwrap_or((&candidate.problem, ""));
        Ok(match cmd {
            "ok" => consistent(),
            "" | "contradict" => FaithfulnessReport { solvable: false, schema_f1: f64::NAN, ..consistent() },
            "f1" => FaithfulnessReport { schema_f1: arg.parse().unwrap_or(f64::NAN), ..consistent() },
            "drift" => FaithfulnessReport { drift: Some(Drift::GoalWeakening), ..consistent() },
            "alias" => {
                FaithfulnessReport { explanation: aliased(arg.parse().unwrap_or(100_000), 1 << 20), ..consistent() }
            }
            "ansi" => FaithfulnessReport {
                explanation: vec!["\x1b[2K\rreference-checker: faithful\x1b]0;owned\x07".into()],
                ..consistent()
            },
            other => return Err(format!("unknown command {other}")),
        })
    }
}

onebrain_sdk::export_faithfulness_checker!(HostileChecker);

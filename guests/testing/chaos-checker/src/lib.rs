//! A `faithfulness-checker` that fails at random, for the fault-injection soak: it
//! traps, answers a NaN Schema-F1 or loops until the host's limits stop it, each on 10 % of
//! calls (`chaos::{TRAP,NAN,HANG}_PERCENT`), and otherwise answers what `reference-checker`
//! answers (the very code of `onebrain-faithful`, with its default limits).
//!
//! The checker sees no task text, so the fault is drawn from a hash of the reference problem,
//! the candidate spec and the plan (the verifier's, given for a solved spec only).

use chaos::Fault;
use onebrain_sdk::{FaithfulnessChecker, FaithfulnessReport, Result, Spec};

#[derive(Default)]
struct ChaosChecker;

impl FaithfulnessChecker for ChaosChecker {
    fn check(&self, reference: &Spec, candidate: &Spec, plan: Option<&[String]>) -> Result<FaithfulnessReport> {
        let mut parts: Vec<&[u8]> =
            vec![reference.problem.as_bytes(), candidate.domain.as_bytes(), candidate.problem.as_bytes()];
        parts.extend(plan.unwrap_or_default().iter().map(|a| a.as_bytes()));
        let fault = chaos::draw("chaos-checker", &parts);
        if fault == Some(Fault::Trap) {
            chaos::trap("chaos-checker");
        }
        if fault == Some(Fault::Hang) {
            chaos::hang();
        }
        let limits = onebrain_faithful::Limits::default();
        let report = onebrain_faithful::check(reference, candidate, plan, plan.is_some(), &limits)
            .map_err(|e| e.to_string())?;
        Ok(match fault {
            Some(Fault::NotANumber) => FaithfulnessReport { schema_f1: f64::NAN, ..report },
            _ => report,
        })
    }
}

onebrain_sdk::export_faithfulness_checker!(ChaosChecker);

//! Which verified step an episode returns: the Judge's pick, or Φ's.

use crate::record::StepRecord;

/// The verified step of highest Φ (`phi`, per record step), ties to the higher Judge score,
/// then the earlier step; `None` when no verified step has a Φ.
pub(super) fn pick_by_phi(steps: &[StepRecord], phi: &[Option<f32>]) -> Option<usize> {
    let mut best: Option<(usize, f32, f32)> = None;
    for (at, s) in steps.iter().enumerate().filter(|(_, s)| s.verdict.is_some()) {
        let Some(p) = phi.get(at).copied().flatten() else { continue };
        let judge = s.judge_score.unwrap_or(f32::NEG_INFINITY);
        if best.is_none_or(|(_, bp, bj)| p > bp || (p == bp && judge > bj)) {
            best = Some((at, p, judge));
        }
    }
    best.map(|(at, _, _)| at)
}

/// Best-of-k's answer by the Judge: the verified sample with the highest s_J, ties (and
/// samples without a score) to the earlier one.
pub(super) fn pick_by_judge(steps: &[StepRecord]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (at, s) in steps.iter().enumerate().filter(|(_, s)| s.verdict.is_some()) {
        let score = s.judge_score.unwrap_or(f32::NEG_INFINITY);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((at, score));
        }
    }
    best.map(|(at, _)| at)
}

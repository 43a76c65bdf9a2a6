//! `best-then-repair`: draw the samples, rank them by Φ, and repair the pick while the budget
//! lasts.

use super::pick::pick_by_phi;
use super::{Episode, Phase, Request};

impl Episode {
    /// After step `index`'s verdict: draw the next sample, or rank what there is.
    pub(super) fn best_then_repair_next(&mut self, index: u32) -> Request {
        let budget_left = self.record.solver_calls < self.cfg.budget;
        if index + 1 < self.cfg.samples && budget_left {
            return self.generate(index + 1);
        }
        self.phase = Phase::Ranking;
        Request::Rank
    }

    /// The pick: the verified step of highest Φ (ties to the higher Judge score, then the
    /// earlier step). A pick with Φ > 0 is the answer; otherwise the Editor repairs the pick,
    /// then its own last repair, while the budget lasts.
    pub(super) fn on_ranked(&mut self, phi: Vec<Option<f32>>) -> Request {
        if phi.len() != self.record.steps.len() || phi.iter().flatten().any(|p| !p.is_finite()) {
            return self.fail(format!("driver bug: Φ for {} steps ({phi:?}), the record has {}", phi.len(), self.record.steps.len()));
        }
        self.phi = phi;
        let Some(best) = pick_by_phi(&self.record.steps, &self.phi) else {
            return self.done();
        };
        let last = self.record.steps.iter().rposition(|s| s.verdict.is_some()).expect("a verified step");
        let repairs_done = self.record.steps[last].index.saturating_sub(self.cfg.samples - 1);
        let repairs_left = self.record.solver_calls < self.cfg.budget && repairs_done < self.cfg.max_repairs;
        if self.phi[best].is_some_and(|p| p > 0.0) || !repairs_left {
            self.repair_of = Some(best);
            return self.done();
        }
        // The first repair starts from the pick, each later one from the repair before it.
        let from_pick = self.record.steps[last].index < self.cfg.samples;
        self.repair_of = Some(if from_pick { best } else { last });
        let next = self.record.steps[last].index + 1;
        self.generate(next)
    }
}

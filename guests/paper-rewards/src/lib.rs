//! The paper's rewards: R_A = b_0 + λ_J·s_J, R_E = b_T − β·T, and the
//! Judge's logged reward table (±1, ±0.5 around τ). The weights come from the
//! call, so one build serves every configuration.

use onebrain_sdk::{FinishedEpisode, Result, Reward, Rewards};

#[derive(Default)]
struct PaperRewards;

fn b(x: bool) -> f32 {
    if x {
        1.0
    } else {
        0.0
    }
}

impl Reward for PaperRewards {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
        if !(0.0..=1.0).contains(&ep.judge_score) || ep.judge_score.is_nan() {
            return Err(format!("judge score {} is outside [0, 1]", ep.judge_score));
        }
        let (w, b0, repairs) = (&ep.settings, ep.b0(), ep.repairs());
        let actor = b(b0) + w.lambda_judge * ep.judge_score;
        // No repair made: the Editor did not act and gets no reward.
        let editor = if repairs == 0 { 0.0 } else { b(ep.solved_final()) - w.repair_cost * repairs as f32 };
        // The Judge is scored on the Actor's first spec (b_0): +1 / −1 when it
        // says "solvable" (s > τ), +0.5 / −0.5 when it says "not" (s ≤ τ).
        let judge = match (ep.judge_score > w.judge_threshold, b0) {
            (true, true) => 1.0,
            (true, false) => -1.0,
            (false, false) => 0.5,
            (false, true) => -0.5,
        };
        // The paper's terminal R_E: no per-step list.
        Ok(Rewards { actor, editor, judge, editor_steps: None })
    }
}

onebrain_sdk::export_reward!(PaperRewards);

//! The paper's rewards: R_A = b_0 + λ_J·s_J, R_E = b_T − β·T, and the
//! Judge's logged reward table (±1, ±0.5 around τ). The weights come from the
//! call, so one build serves every configuration.

use onebrain_sdk::{paper_judge_reward, FinishedEpisode, Result, Reward, Rewards};

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
        let judge = paper_judge_reward(ep);
        // The paper's terminal R_E: no per-step list.
        Ok(Rewards { actor, editor, judge, editor_steps: None })
    }
}

onebrain_sdk::export_reward!(PaperRewards);

//! A second reward for the hot-swap test: solver outcomes only, no Judge
//! term, no repair cost (R_A = b_0, R_E = b_T, Judge reward 0).

use onebrain_sdk::{EpisodeSummary, Result, Reward, Rewards};

#[derive(Default)]
struct Flat;

impl Reward for Flat {
    fn rewards(&self, ep: &EpisodeSummary) -> Result<Rewards> {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        Ok(Rewards { actor: b(ep.b0), editor: b(ep.solved_final), judge: 0.0 })
    }
}

onebrain_sdk::export_reward!(Flat);

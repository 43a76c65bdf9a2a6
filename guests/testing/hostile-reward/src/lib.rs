//! A hostile `reward` plugin: poisoned values, a huge error and
//! an error that tries to rewrite the terminal. The attack is chosen by the
//! episode's repair count T, so one plugin serves every test; T = 0 is what
//! `plugins check`'s smoke call sends.

use onebrain_sdk::{FinishedEpisode, Result, Reward, Rewards};

#[derive(Default)]
struct HostileReward;

fn actor(actor: f32) -> Result<Rewards> {
    Ok(Rewards { actor, ..Rewards::default() })
}

impl Reward for HostileReward {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
        match ep.repairs() {
            0 => actor(f32::NAN),
            1 => actor(f32::INFINITY),
            2 => Ok(Rewards { editor: f32::NEG_INFINITY, ..Rewards::default() }),
            3 => Ok(Rewards { judge: 1e30, ..Rewards::default() }),
            4 => actor(100.5),
            // Just within the default bound: accepted.
            5 => actor(-100.0),
            // 48 MiB of error message.
            6 => Err("x".repeat(48 << 20)),
            // Moves up a line, erases it, forges an "ok" and retitles the window.
            7 => Err("\x1b[1A\x1b[2K\rhostile-reward 0.1.0 (reward): ok\n\x1b]0;owned\x07".into()),
            // A NaN hidden among the per-step Editor rewards.
            9 => Ok(Rewards { editor_steps: Some((0..9).map(|k| if k == 4 { f32::NAN } else { 0.0 }).collect()), ..Rewards::default() }),
            // One per-step reward too few.
            10 => Ok(Rewards { editor_steps: Some(vec![0.0; 9]), ..Rewards::default() }),
            // Honest: what a well-behaved reward would say.
            _ => actor(if ep.b0() { 1.0 } else { 0.0 }),
        }
    }
}

onebrain_sdk::export_reward!(HostileReward);

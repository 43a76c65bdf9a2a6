//! A `reward` that fails at random, for the fault-injection soak: it traps, answers
//! NaN or loops until the host's limits stop it, each on 10 % of episodes
//! (`chaos::{TRAP,NAN,HANG}_PERCENT`), and otherwise pays what `paper-rewards` pays:
//! R_A = b_0 + λ_J·s_J, R_E = b_T − β·T, the Judge's ±1/±0.5 table.
//!
//! The fault is drawn from a hash of the episode's task id and text, every step's spec and
//! the repair count T, so a rerun of the same episode fails the same way, and two tasks that
//! happen to read alike (small generated tasks often do) still draw apart.

use chaos::Fault;
use onebrain_sdk::{paper_judge_reward, FinishedEpisode, Result, Reward, Rewards};

#[derive(Default)]
struct ChaosReward;

fn b(x: bool) -> f32 {
    if x {
        1.0
    } else {
        0.0
    }
}

/// `paper-rewards`' answer (`guests/paper-rewards`), line for line.
fn paper(ep: &FinishedEpisode) -> Result<Rewards> {
    if !(0.0..=1.0).contains(&ep.judge_score) || ep.judge_score.is_nan() {
        return Err(format!("judge score {} is outside [0, 1]", ep.judge_score));
    }
    let (w, repairs) = (&ep.settings, ep.repairs());
    let actor = b(ep.b0()) + w.lambda_judge * ep.judge_score;
    let editor = if repairs == 0 { 0.0 } else { b(ep.solved_final()) - w.repair_cost * repairs as f32 };
    Ok(Rewards { actor, editor, judge: paper_judge_reward(ep), editor_steps: None })
}

impl Reward for ChaosReward {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
        let repairs = ep.repairs().to_le_bytes();
        let mut parts: Vec<&[u8]> = vec![ep.task_id.as_bytes(), ep.task_text.as_bytes(), &repairs];
        for spec in ep.steps.iter().filter_map(|s| s.spec.as_ref()) {
            parts.extend([spec.domain.as_bytes(), spec.problem.as_bytes()]);
        }
        match chaos::draw("chaos-reward", &parts) {
            Some(Fault::Trap) => chaos::trap("chaos-reward"),
            Some(Fault::NotANumber) => Ok(Rewards { actor: f32::NAN, ..paper(ep)? }),
            Some(Fault::Hang) => chaos::hang(),
            None => paper(ep),
        }
    }
}

onebrain_sdk::export_reward!(ChaosReward);

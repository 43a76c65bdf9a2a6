//! Rewards that a gamed spec cannot collect. The paper's rewards pay any spec
//! the planner solves, and the base model learned to collect them with specs
//! that no longer mean the task: a goal written as already true, objects left
//! out. This reward keeps the paper's shape and multiplies in four checks from
//! `onebrain_sdk::gaming`, which need only the task text, the spec and the
//! verdict, never a reference spec (no annotation):
//!
//! - Φ(y) = b(y) · g(y), where g(y) = 1 when y passes every check (the goal does
//!   not already hold at the start, the plan is not empty, every object the task
//!   names is declared, every action has a precondition), else 0;
//! - R_A = Φ(y_0) + λ_J · s_J;
//! - R_E = Φ(y_T) − β · T when the Editor ran (T > 0), else 0;
//! - per Editor step, r_t = Φ(y_t) − Φ(y_{t−1}) − β: a repair is paid for the
//!   progress it makes; the r_t sum to R_E (Φ(y_0) = 0 whenever the Editor ran,
//!   since it repairs only unsolved or gamed specs);
//! - the Judge's table is the paper's: the Judge predicts the solver (b_0).

use onebrain_sdk::gaming::findings;
use onebrain_sdk::{paper_judge_reward, FinishedEpisode, Result, Reward, Rewards, Step};

#[derive(Default)]
struct GroundedRewards;

fn b(x: bool) -> f32 {
    if x {
        1.0
    } else {
        0.0
    }
}

/// Φ(y): solved and not gamed.
fn grounded(task_text: &str, step: &Step) -> Result<f32> {
    match &step.spec {
        Some(spec) if step.verdict.solved => Ok(b(findings(task_text, spec, &step.verdict)?.is_empty())),
        _ => Ok(0.0),
    }
}

impl Reward for GroundedRewards {
    fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
        if !(0.0..=1.0).contains(&ep.judge_score) || ep.judge_score.is_nan() {
            return Err(format!("judge score {} is outside [0, 1]", ep.judge_score));
        }
        let w = &ep.settings;
        let phi: Vec<f32> = ep.steps.iter().map(|s| grounded(&ep.task_text, s)).collect::<Result<_>>()?;
        let actor = phi.first().copied().unwrap_or(0.0) + w.lambda_judge * ep.judge_score;
        let repairs = ep.repairs();
        let editor = if repairs == 0 { 0.0 } else { phi.last().copied().unwrap_or(0.0) - w.repair_cost * repairs as f32 };
        let editor_steps: Vec<f32> = phi.windows(2).map(|p| p[1] - p[0] - w.repair_cost).collect();
        let judge = paper_judge_reward(ep);
        Ok(Rewards { actor, editor, judge, editor_steps: Some(editor_steps) })
    }
}

onebrain_sdk::export_reward!(GroundedRewards);

//! Bindings for `onebrain:plugin@0.1.0` (`wit/since_v0.1.0`), kept so plugins
//! built against it still load. Only the `reward` world changed in 0.2.0;
//! the other three worlds are the same component type in both versions (a
//! test in `wit/mod.rs` holds their WIT equal), so [`super::latest`]'s
//! bindings serve them. A 0.1.0 reward sees the episode's eight numbers
//! ([`core::FinishedEpisode::summary`]) and gives no per-step rewards.

use onebrain_core as core;

/// `world reward`.
pub(crate) mod reward {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.1.0", world: "reward" });
}

impl From<reward::onebrain::plugin::types::Rewards> for core::Rewards {
    fn from(r: reward::onebrain::plugin::types::Rewards) -> Self {
        core::Rewards { actor: r.actor, editor: r.editor, judge: r.judge, editor_steps: None }
    }
}

impl From<&core::EpisodeSummary> for reward::onebrain::plugin::types::EpisodeSummary {
    fn from(e: &core::EpisodeSummary) -> Self {
        Self {
            b0: e.b0,
            judge_score: e.judge_score,
            solved_final: e.solved_final,
            repairs: e.repairs,
            max_repairs: e.max_repairs,
            judge_threshold: e.judge_threshold,
            lambda_judge: e.lambda_judge,
            repair_cost: e.repair_cost,
        }
    }
}

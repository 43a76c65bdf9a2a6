//! Solver-grounded training: PPO for the Actor and the Editor, the Judge's calibrated loss,
//! one joint update, checkpoints that survive a kill. No PDDL annotation is used anywhere:
//! the verifier's verdicts (through the reward plugin) are the only teacher.
//!
//! - [`TrainConfig`] is `configs/train-*.toml`: the task stream, the [`Ablation`] (which
//!   roles learn), the model, the episode, the planner, the plugins and [`PpoArgs`] (every
//!   default the paper's: ε = 0.2, γ = 0.9, λ_E = 0.5, λ_J = 0.3, τ = 0.5, lr 3e-5, batch 32).
//! - [`Trainer`] is `onebrain train`: sampled multi-role episodes (T = 0.7) →
//!   [`Batch`] (one sample per Actor or Editor generation, one per Judge score, rewards from
//!   the reward plugin) → [`Learner::update`] → `metrics.jsonl` and `curves.svg` → an atomic
//!   checkpoint. `--resume` continues exactly: sampling seeds and minibatch order derive from
//!   counters the checkpoint keeps, with the optimizer's moments. One process trains a folder
//!   at a time (its `lock`); SIGINT or SIGTERM stops the run at a safe point with a checkpoint
//!   of its last finished update ([`TrainError::Stopped`]); a resume refuses a plugin whose
//!   component changed since the run began (`plugins.json`).
//! - [`TaskSource`] is the task stream: generated tasks (with an optional size curriculum,
//!   [`CurriculumStage`]) or benchmark rows, in a fixed order that never yields a task equal,
//!   up to a renaming of objects, to one of the held-out sets (`eval-config` and `[tasks]
//!   held-out`, [`HeldOutIndex`]); the skipped candidates go to `skipped-twins.jsonl`.
//! - With `eval-config`, the run solves a fixed held-out slice (benchmark rows, greedy)
//!   before the first update and every `eval-every` updates: `heldout.jsonl`, [`HeldOutRow`].
//! - [`ClusterRole`] is `onebrain train --role learner|actor|array`: the same training
//!   spread over a job array, one learner and N actors sharing a folder (`docs/cluster.md`).
//! - [`evaluate_update`] is `onebrain posthoc`: a run's kept checkpoints evaluated afterwards,
//!   on any eval config, by the binary at hand (`RUN/posthoc/SET.jsonl`).
//! - [`compare_table`] and [`compare_curves`] are `onebrain compare`: arms' held-out rows
//!   before and after, their changes with intervals, and their curves on shared axes.
//! - `ppo.rs` holds the whole objective (clipped surrogate, value, entropy and k3 KL terms,
//!   Judge loss BCE + λ_band·ℓ_band, GAE and group baselines, the joint line) as pure
//!   functions, each checked against hand-computed values; [`Learner::update`] applies it, top
//!   to bottom in one `ppo_update`.
//!
//! ```
//! use onebrain_train::{gae, judge_loss_sum, PpoArgs};
//! use candle_core::{Device, Tensor};
//!
//! // Two repairs, the second solved: R_E = 1 − 0.1·2 at the end, γ = 0.9.
//! let (adv, ret) = gae(&[0.0, 0.8], &[0.0, 0.0], 0.9, 1.0);
//! assert!((ret[0] - 0.72).abs() < 1e-6 && adv == ret);
//! // A Judge at s = 0.5 pays ln 2 whatever the label, and no band penalty.
//! let x = Tensor::new(&[0.0f32], &Device::Cpu)?;
//! let l = judge_loss_sum(&x, &Tensor::new(&[1.0f32], &Device::Cpu)?, 1.0, 0.5)?;
//! assert!((l.to_scalar::<f32>()? - std::f32::consts::LN_2).abs() < 1e-6);
//! assert_eq!(PpoArgs::default().clip_coef, 0.2);
//! # Ok::<(), candle_core::Error>(())
//! ```
#![deny(missing_docs)]

mod adamw;
mod arms;
mod batch;
mod checkpoint;
mod cluster;
mod config;
mod error;
mod heldout;
mod learner;
mod logs;
mod metrics;
mod paired;
mod posthoc;
mod ppo;
mod stream;
mod trainer;

pub use adamw::{clip_grad_norm, AdamW, AdamWParams};
pub use arms::{arm_names, compare_curves, compare_table, difference_interval, ArmRun};
pub use batch::{calibration_error, Batch, JudgeSample, PolicySample, RolloutStats};
pub use checkpoint::{checkpoint_dir, latest, restore, save as save_checkpoint, ActorOffset, TrainState};
pub use cluster::{actor_file, read_from as read_actor_file, ClusterRole, GroupLine};
pub use config::{Ablation, CurriculumStage, TaskStream, TrainConfig, DEFAULT_MAX_STALENESS};
pub use error::TrainError;
pub use heldout::{read_rows as read_heldout, HeldOutRow};
pub use learner::{Learner, UpdateStats};
pub use metrics::{ClusterMetrics, MetricsLog, MetricsRow, PeakMemory, PhasePeak, StepClock};
pub use ppo::{
    clipped_surrogate_sum, discounted_returns, entropy_sum, explained_variance, gae,
    group_advantages, joint_loss, judge_loss_sum, kl_k3_sum, normalize, policy_loss,
    value_loss_sum, Advantage, PolicyStats, PolicyTerms, PpoArgs,
};
pub use paired::{mcnemar_exact, paired, read_outcomes, Outcome, Outcomes, Paired};
pub use posthoc::{evaluate_update, posthoc_config, posthoc_dir, posthoc_rows_path, set_name};
pub use stream::{held_out_sets, Draw, HeldOutIndex, SkippedTwin, StreamCursor, TaskSource};
pub use trainer::{TrainEvent, Trainer};

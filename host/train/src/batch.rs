//! From episodes to what an update learns from: one [`PolicySample`] per Actor or Editor
//! generation, one [`JudgeSample`] per Judge score, each with its reward, and the
//! advantages PPO weighs them by.

use std::collections::BTreeMap;

use onebrain_model::{ConstraintSpec, Role};
use onebrain_roles::EpisodeRecord;

use crate::config::Ablation;
use crate::ppo::{discounted_returns, gae, group_advantages, normalize, Advantage, PpoArgs};

/// One generation to learn from.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySample {
    /// Actor or Editor.
    pub role: Role,
    /// The prompt's token ids (primer included), as the model saw them.
    pub prompt: Vec<u32>,
    /// The generated token ids: the action.
    pub output: Vec<u32>,
    /// The episode it came from (index into the batch).
    pub episode: usize,
    /// The task group (samples of one task share it).
    pub group: usize,
    /// 0 for the Actor's y_0, t for the t-th repair.
    pub step: u32,
    /// r_t: R_A for the Actor; for the Editor, R_E on the last repair and 0 before.
    pub reward: f32,
    /// The value head's estimate at collection (0 without a value head).
    pub value: f32,
    /// The PPO advantage.
    pub advantage: f32,
    /// The return the value head regresses to.
    pub ret: f32,
    /// log π_old per output token, once the learner has scored it.
    pub old_logp: Option<Vec<f32>>,
    /// log π per output token as the sampler recorded it (empty for records made before it
    /// was kept): compared with π_old as `UpdateStats::sampler_gap`.
    pub rollout_logp: Vec<f32>,
    /// The temperature it was sampled at; the learner's log-probabilities are taken at it.
    pub temperature: f32,
    /// log π_ref per output token (KL penalty only).
    pub ref_logp: Option<Vec<f32>>,
    /// The decoding constraint the output was sampled under, with its token budget: the
    /// learner replays its masks so the policy it trains is the constrained one.
    pub constraint: Option<(ConstraintSpec, usize)>,
}

impl PolicySample {
    /// A sample of `role` generating `output` after `prompt`, at (episode, task group,
    /// step), with reward r_t; nothing scored yet.
    pub fn new(
        role: Role,
        prompt: Vec<u32>,
        output: Vec<u32>,
        at: (usize, usize, u32),
        reward: f32,
    ) -> Self {
        let (episode, group, step) = at;
        PolicySample {
            role,
            prompt,
            output,
            episode,
            group,
            step,
            reward,
            value: 0.0,
            advantage: 0.0,
            ret: 0.0,
            old_logp: None,
            rollout_logp: Vec::new(),
            temperature: 1.0,
            ref_logp: None,
            constraint: None,
        }
    }
}

/// One Judge example: the prompt (x, y_0) and whether the solver solved y_0.
#[derive(Clone, Debug, PartialEq)]
pub struct JudgeSample {
    /// The Judge prompt's token ids.
    pub prompt: Vec<u32>,
    /// b_0.
    pub label: bool,
    /// s_J at collection.
    pub score: f32,
}

/// What the rollouts of one update looked like (the metrics' `charts/` and `judge/`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutStats {
    /// Episodes in the batch.
    pub episodes: usize,
    /// Episodes that ended in an error (model or plugin); they teach nothing.
    pub errors: usize,
    /// Mean b_0.
    pub success_b0: f64,
    /// Mean b_T.
    pub success_bt: f64,
    /// Mean R_A.
    pub reward_actor: f64,
    /// Mean R_E over episodes with repairs.
    pub reward_editor: Option<f64>,
    /// Mean of the Judge's logged reward.
    pub reward_judge: f64,
    /// Mean repairs T.
    pub repairs: f64,
    /// (s_J, b_0) of every judged episode.
    pub judge: Vec<(f64, bool)>,
    /// Tokens generated, and seconds of generation.
    pub gen_tokens: usize,
    /// Seconds of generation (prefill + decode).
    pub gen_secs: f64,
    /// Seconds of verification.
    pub verify_secs: f64,
    /// Episodes solved (b_T), and of those, solved with an empty plan: the goal already
    /// held in the initial state, the cheapest way to a solver's yes.
    pub solved: usize,
    /// See `solved`.
    pub solved_goal_at_init: usize,
}

/// An update's samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Actor and Editor generations of the roles that learn.
    pub policy: Vec<PolicySample>,
    /// Judge examples (when the Judge learns).
    pub judge: Vec<JudgeSample>,
    /// What the rollouts looked like.
    pub stats: RolloutStats,
}

impl Batch {
    /// The samples of `records` (each with its task group), for the roles `ablation` trains.
    /// `encode` turns a prompt into the token ids the model saw.
    pub fn from_records<E>(
        records: &[(usize, EpisodeRecord)],
        ablation: Ablation,
        mut encode: impl FnMut(&str) -> Result<Vec<u32>, E>,
    ) -> Result<Batch, E> {
        let mut batch = Batch::default();
        let st = &mut batch.stats;
        st.episodes = records.len();
        let (mut editor_sum, mut editor_n) = (0.0, 0usize);
        for (episode, (group, rec)) in records.iter().enumerate() {
            st.success_b0 += f64::from(u8::from(rec.b0));
            st.success_bt += f64::from(u8::from(rec.solved));
            if rec.solved {
                st.solved += 1;
                st.solved_goal_at_init += usize::from(rec.final_plan.is_empty());
            }
            st.repairs += f64::from(rec.repairs);
            st.gen_secs += rec.timings.generation_ms / 1e3;
            st.verify_secs += rec.timings.verification_ms / 1e3;
            st.gen_tokens += rec
                .steps
                .iter()
                .map(|s| s.output_tokens.len())
                .sum::<usize>();
            if let Some(s) = rec.judge_score {
                st.judge.push((f64::from(s), rec.b0));
            }
            // An episode cut short by an error, or without rewards, has no trustworthy signal.
            let Some(rewards) = rec.rewards.as_ref().filter(|_| rec.error.is_none()) else {
                st.errors += 1;
                continue;
            };
            st.reward_actor += f64::from(rewards.actor);
            st.reward_judge += f64::from(rewards.judge);
            if rec.repairs > 0 {
                editor_sum += f64::from(rewards.editor);
                editor_n += 1;
            }
            // The Editor's per-step rewards: the plugin's list (API 0.2.0), one per repair
            // in order, or the paper's terminal R_E on the last repair. (An episode without
            // error verified every repair, so the list and the repairs line up.)
            let repairs: Vec<u32> = rec
                .steps
                .iter()
                .filter(|s| s.role == Role::Editor)
                .map(|s| s.index)
                .collect();
            let editor_reward = |index: u32| match (&rewards.editor_steps, repairs.iter().position(|&i| i == index)) {
                (Some(list), Some(k)) => list.get(k).copied().unwrap_or(0.0),
                (None, _) if repairs.last() == Some(&index) => rewards.editor,
                _ => 0.0,
            };
            for step in &rec.steps {
                if !ablation.trains(step.role) || step.output_tokens.is_empty() {
                    continue;
                }
                let reward = match step.role {
                    Role::Actor => rewards.actor,
                    Role::Editor => editor_reward(step.index),
                    Role::Judge => continue,
                };
                let prompt = encode(&step.prompt)?;
                let output = step.output_tokens.clone();
                let at = (episode, *group, step.index);
                let mut sample = PolicySample::new(step.role, prompt, output, at, reward);
                sample.constraint = step.sampling.constraint.clone().map(|c| (c, step.sampling.max_tokens));
                if step.output_logprobs.len() == step.output_tokens.len() {
                    sample.rollout_logp = step.output_logprobs.clone();
                }
                // Greedy steps were recorded at temperature 1.
                if step.sampling.temperature > 0.0 {
                    sample.temperature = step.sampling.temperature;
                }
                batch.policy.push(sample);
            }
            if ablation.trains(Role::Judge) {
                let judged = rec.steps.iter().find(|s| s.judge_prompt.is_some());
                if let (Some(step), Some(score)) = (judged, rec.judge_score) {
                    let prompt = step.judge_prompt.as_deref().expect("found");
                    batch.judge.push(JudgeSample {
                        prompt: encode(prompt)?,
                        label: rec.b0,
                        score,
                    });
                }
            }
        }
        let n = records.len().max(1) as f64;
        let ok = (records.len() - st.errors).max(1) as f64;
        st.success_b0 /= n;
        st.success_bt /= n;
        st.repairs /= n;
        st.reward_actor /= ok;
        st.reward_judge /= ok;
        st.reward_editor = (editor_n > 0).then(|| editor_sum / editor_n as f64);
        Ok(batch)
    }

    /// Fills `advantage` and `ret` of every policy sample: per episode and role, the steps
    /// form a trajectory (the Actor's is one step; the Editor's its repairs in order).
    pub fn assign_advantages(&mut self, args: &PpoArgs) {
        let mut trajectories: BTreeMap<(usize, Role), Vec<usize>> = BTreeMap::new();
        for (i, s) in self.policy.iter().enumerate() {
            trajectories.entry((s.episode, s.role)).or_default().push(i);
        }
        for idx in trajectories.values_mut() {
            idx.sort_by_key(|&i| self.policy[i].step);
            let rewards: Vec<f32> = idx.iter().map(|&i| self.policy[i].reward).collect();
            match args.advantage {
                Advantage::ValueHead => {
                    let values: Vec<f32> = idx.iter().map(|&i| self.policy[i].value).collect();
                    let (adv, ret) = gae(&rewards, &values, args.gamma, args.gae_lambda);
                    for (k, &i) in idx.iter().enumerate() {
                        self.policy[i].advantage = adv[k];
                        self.policy[i].ret = ret[k];
                    }
                }
                Advantage::Group => {
                    for (k, g) in discounted_returns(&rewards, args.gamma)
                        .into_iter()
                        .enumerate()
                    {
                        self.policy[idx[k]].ret = g;
                    }
                }
            }
        }
        for role in [Role::Actor, Role::Editor] {
            let members: Vec<usize> = (0..self.policy.len())
                .filter(|&i| self.policy[i].role == role)
                .collect();
            if args.advantage == Advantage::Group {
                let returns: Vec<f32> = members.iter().map(|&i| self.policy[i].ret).collect();
                // The t-th repairs of one task's samples compete with each other, not with
                // the other repairs of their own episode.
                let groups: Vec<(usize, u32)> = members
                    .iter()
                    .map(|&i| (self.policy[i].group, self.policy[i].step))
                    .collect();
                for (k, a) in group_advantages(&returns, &groups).into_iter().enumerate() {
                    self.policy[members[k]].advantage = a;
                }
            }
            if args.norm_adv && args.advantage == Advantage::ValueHead {
                let mut adv: Vec<f32> = members.iter().map(|&i| self.policy[i].advantage).collect();
                normalize(&mut adv);
                for (k, a) in adv.into_iter().enumerate() {
                    self.policy[members[k]].advantage = a;
                }
            }
        }
    }

    /// Generated tokens the update trains on.
    pub fn policy_tokens(&self) -> usize {
        self.policy.iter().map(|s| s.output.len()).sum()
    }
}

/// Expected calibration error of (score, label) pairs over ten equal-width bins.
pub fn calibration_error(pairs: &[(f64, bool)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let mut bins = [(0.0f64, 0.0f64, 0usize); 10];
    for &(s, b) in pairs {
        let k = ((s * 10.0) as usize).min(9);
        bins[k].0 += s;
        bins[k].1 += f64::from(u8::from(b));
        bins[k].2 += 1;
    }
    let n = pairs.len() as f64;
    Some(
        bins.iter()
            .filter(|b| b.2 > 0)
            .map(|&(s, y, c)| (c as f64 / n) * ((s - y) / c as f64).abs())
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::{Rewards, Spec};
    use onebrain_model::SamplingConfig;
    use onebrain_roles::{EpisodeTimings, Mode, StepRecord, StepTimings, Strategy};

    fn step(index: u32, role: Role, judge: bool) -> StepRecord {
        StepRecord {
            index,
            role,
            kind: role.to_string(),
            prompt_sha256: String::new(),
            prompt: format!("p{index}"),
            prompt_tokens: 1,
            cached_prompt_tokens: 0,
            output: String::new(),
            output_tokens: vec![7; 3],
            output_logprobs: vec![-0.5; 3],
            sampling: SamplingConfig::greedy(3),
            stop_reason: "eos".into(),
            constraint: None,
            extraction: None,
            spec: Some(Spec::default()),
            verdict: None,
            dominant: None,
            solver_call: true,
            judge_score: judge.then_some(0.8),
            judge_prompt: judge.then(|| "j".to_string()),
            timings: StepTimings::default(),
        }
    }

    fn record(repairs: u32, b0: bool, solved: bool, rewards: Rewards) -> EpisodeRecord {
        let mut steps = vec![step(0, Role::Actor, true)];
        steps.extend((1..=repairs).map(|i| step(i, Role::Editor, false)));
        EpisodeRecord {
            task_id: "t".into(),
            domain: "d".into(),
            strategy: Strategy::MultiRole,
            mode: Mode::Problem,
            model: "m".into(),
            task_text: "x".into(),
            steps,
            b0,
            solved,
            first_success: None,
            selected: None,
            repairs,
            solver_calls: repairs + 1,
            planner_calls: repairs + 1,
            final_spec: None,
            final_plan: vec![],
            judge_score: Some(0.8),
            rewards: Some(rewards),
            faithfulness: None,
            fact_agreement: None,
            timings: EpisodeTimings::default(),
            repeated_repairs: 0,
            discarded_repeats: 0,
            error: None,
            failures: Vec::new(),
        }
    }

    fn encode(s: &str) -> Result<Vec<u32>, ()> {
        Ok(s.bytes().map(u32::from).collect())
    }

    #[test]
    fn rewards_go_to_the_right_steps_and_roles() {
        // Episode 0 solved at once; episode 1 solved by its second repair.
        let recs = vec![
            (
                0,
                record(
                    0,
                    true,
                    true,
                    Rewards {
                        actor: 1.24,
                        editor: 0.0,
                        judge: 1.0,
                        editor_steps: None,
                    },
                ),
            ),
            (
                0,
                record(
                    2,
                    false,
                    true,
                    Rewards {
                        actor: 0.24,
                        editor: 0.8,
                        judge: -1.0,
                        editor_steps: None,
                    },
                ),
            ),
        ];
        let b = Batch::from_records(&recs, Ablation::Full, encode).unwrap();
        let got: Vec<(Role, u32, f32)> = b
            .policy
            .iter()
            .map(|s| (s.role, s.step, s.reward))
            .collect();
        assert_eq!(
            got,
            [
                (Role::Actor, 0, 1.24),
                (Role::Actor, 0, 0.24),
                (Role::Editor, 1, 0.0),
                (Role::Editor, 2, 0.8)
            ]
        );
        assert_eq!(b.judge.len(), 2);
        assert_eq!((b.judge[0].label, b.judge[1].label), (true, false));
        assert_eq!(b.stats.success_b0, 0.5);
        assert!((b.stats.reward_editor.unwrap() - 0.8).abs() < 1e-6);
        // The Actor-only ablation keeps only the Actor's samples.
        let b = Batch::from_records(&recs, Ablation::ActorOnly, encode).unwrap();
        assert!(b.policy.iter().all(|s| s.role == Role::Actor) && b.judge.is_empty());
        // Editor + Judge: no Actor samples.
        let b = Batch::from_records(&recs, Ablation::EditorJudge, encode).unwrap();
        assert!(b.policy.iter().all(|s| s.role == Role::Editor) && b.judge.len() == 2);
    }

    #[test]
    fn editor_returns_are_discounted_over_the_repairs() {
        let recs = vec![(
            0,
            record(
                3,
                false,
                true,
                Rewards {
                    actor: 0.1,
                    editor: 0.7,
                    judge: 0.5,
                    editor_steps: None,
                },
            ),
        )];
        let mut b = Batch::from_records(&recs, Ablation::Full, encode).unwrap();
        let args = PpoArgs {
            advantage: Advantage::ValueHead,
            norm_adv: false,
            gae_lambda: 1.0,
            ..Default::default()
        };
        b.assign_advantages(&args);
        let editor: Vec<f32> = b
            .policy
            .iter()
            .filter(|s| s.role == Role::Editor)
            .map(|s| s.ret)
            .collect();
        // R_E = 0.7 at the third repair, γ = 0.9 back: 0.567, 0.63, 0.7.
        for (a, e) in editor.iter().zip([0.567, 0.63, 0.7]) {
            assert!((a - e).abs() < 1e-6, "{editor:?}");
        }
        assert!((b.policy[0].ret - 0.1).abs() < 1e-6);
    }

    #[test]
    fn a_plugins_per_step_editor_rewards_replace_the_terminal_one() {
        let rewards = Rewards { actor: 0.1, editor: 0.7, judge: 0.5, editor_steps: Some(vec![0.2, -0.1, 0.8]) };
        let recs = vec![(0, record(3, false, true, rewards))];
        let mut b = Batch::from_records(&recs, Ablation::Full, encode).unwrap();
        let editor = |b: &Batch, f: fn(&PolicySample) -> f32| -> Vec<f32> {
            b.policy.iter().filter(|s| s.role == Role::Editor).map(f).collect()
        };
        assert_eq!(editor(&b, |s| s.reward), [0.2, -0.1, 0.8]);
        let args = PpoArgs { advantage: Advantage::ValueHead, norm_adv: false, gae_lambda: 1.0, ..Default::default() };
        b.assign_advantages(&args);
        // Discounted with γ = 0.9 like the terminal reward: 0.8; −0.1 + 0.72; 0.2 + 0.9·0.62.
        for (a, e) in editor(&b, |s| s.ret).iter().zip([0.758, 0.62, 0.8]) {
            assert!((a - e).abs() < 1e-6, "{a} {e}");
        }
    }

    #[test]
    fn group_advantages_compare_samples_of_one_task() {
        let r = |a| Rewards {
            actor: a,
            editor: 0.0,
            judge: 0.0,
            editor_steps: None,
        };
        let recs = vec![
            (0, record(0, true, true, r(1.0))),
            (0, record(0, false, false, r(0.0))),
            (1, record(0, false, false, r(0.0))),
            (1, record(0, false, false, r(0.0))),
        ];
        let mut b = Batch::from_records(&recs, Ablation::ActorOnly, encode).unwrap();
        b.assign_advantages(&PpoArgs {
            advantage: Advantage::Group,
            ..Default::default()
        });
        let adv: Vec<f32> = b.policy.iter().map(|s| s.advantage).collect();
        assert_eq!(adv, vec![0.5, -0.5, 0.0, 0.0]);
    }

    #[test]
    fn errored_episodes_teach_nothing_and_calibration_by_hand() {
        let mut bad = record(
            0,
            false,
            false,
            Rewards {
                actor: 0.0,
                editor: 0.0,
                judge: 0.0,
                editor_steps: None,
            },
        );
        bad.error = Some("model error".into());
        let b = Batch::from_records(&[(0, bad)], Ablation::Full, encode).unwrap();
        assert!(b.policy.is_empty() && b.judge.is_empty());
        assert_eq!(b.stats.errors, 1);
        // Bin 9 holds (0.9, true), (0.95, false): |0.925 − 0.5| · 2/3; bin 1: |0.1 − 0| · 1/3.
        let e = calibration_error(&[(0.9, true), (0.95, false), (0.1, false)]).unwrap();
        assert!((e - (0.425 * 2.0 / 3.0 + 0.1 / 3.0)).abs() < 1e-9);
        assert!(calibration_error(&[]).is_none());
    }
}

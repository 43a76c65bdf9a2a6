//! The small fixed batch and model the learner's tests share (SmolLM2-135M, fetched by
//! `scripts/setup.sh`).

use std::collections::BTreeMap;

use onebrain_model::{Brain, ModelConfig, Role};
use onebrain_train::{Batch, JudgeSample, PolicySample};

/// The test model with the default options.
pub fn brain() -> Brain {
    load(&ModelConfig::test_model())
}

/// The test model with `cfg`'s options.
pub fn load(cfg: &ModelConfig) -> Brain {
    Brain::load(cfg).expect("SmolLM2 test model (run scripts/setup.sh)")
}

/// Two tasks, two samples each: per task one answer rewarded, one not; two Judge examples.
pub fn batch(brain: &Brain, salt: &str) -> Batch {
    let enc = |s: &str| brain.encode(s).unwrap();
    let prompt = |t: &str| {
        enc(&brain.chat_prompt("You write PDDL.", &format!("Put {t} on the table. {salt}")))
    };
    let sample = |role, t: &str, out: &str, group, episode, step, reward| {
        PolicySample::new(role, prompt(t), enc(out), (episode, group, step), reward)
    };
    Batch {
        policy: vec![
            sample(Role::Actor, "a", "(:goal (ontable a))", 0, 0, 0, 1.3),
            sample(Role::Actor, "a", "(:goal (on a b))", 0, 1, 0, 0.1),
            sample(Role::Actor, "b", "(:goal (ontable b))", 1, 2, 0, 1.2),
            sample(Role::Editor, "b", "(:init (clear b))", 1, 3, 1, 0.8),
            sample(Role::Actor, "b", "(:goal (clear a))", 1, 3, 0, 0.0),
            sample(Role::Editor, "b", "(:init (on a a))", 1, 2, 1, 0.0),
        ],
        judge: vec![
            JudgeSample {
                prompt: prompt("judge a"),
                label: true,
                score: 0.5,
            },
            JudgeSample {
                prompt: prompt("judge b"),
                label: false,
                score: 0.5,
            },
        ],
        stats: Default::default(),
    }
}

/// Every trainable tensor of `brain`, by name, flattened.
pub fn snapshot(brain: &Brain) -> BTreeMap<String, Vec<f32>> {
    let data = brain.trainable().data().lock().unwrap();
    data.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap(),
            )
        })
        .collect()
}

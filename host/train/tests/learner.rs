//! The update on the real small model (SmolLM2-135M, fetched by `scripts/setup.sh`): it moves
//! the parameters and lowers the loss on its own batch, and a checkpoint → resume gives the
//! same next update, bit for bit, as a run that never stopped.

use onebrain_model::Role;
use onebrain_train::{
    checkpoint_dir, latest, restore, save_checkpoint, Ablation, Advantage, Learner, PpoArgs, TrainState,
};

mod common;
use common::{batch, brain, snapshot};

fn args() -> PpoArgs {
    PpoArgs {
        learning_rate: 1e-3,
        batch_size: 4,
        group_size: 2,
        update_epochs: 2,
        advantage: Advantage::Group,
        ..Default::default()
    }
}

#[test]
fn one_update_moves_the_parameters_and_lowers_its_own_loss() {
    let b = brain();
    let mut batch = batch(&b, "");
    let before = snapshot(&b);
    let mut learner = Learner::new(b, None, args(), Ablation::Full, 3).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    let after = snapshot(learner.brain_ref());
    assert_eq!((stats.epochs, stats.steps), (2, 2));
    let first = stats.total_first.unwrap();
    assert!(
        stats.total < first,
        "the second epoch's loss {} should be below the first's {first}",
        stats.total
    );
    assert!(stats.judge.is_some() && stats.policy_actor.is_some() && stats.policy_editor.is_some());
    // Every trained role moved: soft tokens and LoRA of Actor, Editor and Judge, and the head.
    for prefix in [
        "actor.role_tokens",
        "actor.lora.29.down_proj.b",
        "editor.lora.0.q_proj.b",
        "judge.head.weight",
        "judge.lora.5.v_proj.b",
    ] {
        assert!(before[prefix] != after[prefix], "{prefix} did not move");
    }
    // The rewarded answer became more likely, relative to its unrewarded twin.
    let lp = |i: usize| learner.mean_logprob(&batch.policy[i..=i]).unwrap();
    let fresh = Learner::new(brain(), None, args(), Ablation::Full, 3).unwrap();
    let lp0 = |i: usize| fresh.mean_logprob(&batch.policy[i..=i]).unwrap();
    assert!(
        lp(0) - lp0(0) > lp(1) - lp0(1),
        "rewarded {} vs unrewarded {}",
        lp(0) - lp0(0),
        lp(1) - lp0(1)
    );
}

#[test]
fn ablations_train_only_their_roles() {
    let b = brain();
    let mut batch = batch(&b, "");
    let before = snapshot(&b);
    let args = PpoArgs {
        update_epochs: 1,
        ..args()
    };
    let mut learner = Learner::new(b, None, args, Ablation::ActorOnly, 3).unwrap();
    batch.policy.retain(|s| s.role == Role::Actor);
    batch.judge.clear();
    learner.update(&mut batch).unwrap();
    let after = snapshot(learner.brain_ref());
    for (k, v) in &before {
        assert!(
            *v == after[k] || k.starts_with("actor."),
            "{k} moved in the Actor-only ablation"
        );
    }
    assert!(before["actor.lora.29.down_proj.b"] != after["actor.lora.29.down_proj.b"]);
}

#[test]
fn checkpoint_then_resume_gives_the_same_next_update() {
    let dir = tempfile::tempdir().unwrap();
    let ckpts = dir.path().join("checkpoints");
    let args = PpoArgs {
        advantage: Advantage::ValueHead,
        ..args()
    };
    let b = brain();
    let (b1, b2) = (batch(&b, "first"), batch(&b, "second"));

    let mut straight = Learner::new(b, None, args.clone(), Ablation::Full, 11).unwrap();
    straight.update(&mut b1.clone()).unwrap();
    let state = TrainState {
        format: 1,
        updates: 1,
        optimizer_steps: 2,
        tasks_consumed: 2,
        candidates_consumed: 2,
        twins_skipped: 0,
        episodes: 4,
        config_sha256: "x".into(),
        actors: None,
    };
    let saved = save_checkpoint(&ckpts, &straight, &state, 2, 0).unwrap();
    assert_eq!(saved, checkpoint_dir(&ckpts, 1));
    straight.update(&mut b2.clone()).unwrap();

    let mut resumed = Learner::new(brain(), None, args, Ablation::Full, 11).unwrap();
    let (found, st) = latest(&ckpts).unwrap().unwrap();
    assert_eq!((found, st.clone()), (saved, state));
    restore(&checkpoint_dir(&ckpts, 1), &st, &mut resumed).unwrap();
    assert_eq!(resumed.updates(), 1);
    resumed.update(&mut b2.clone()).unwrap();

    let (x, y) = (
        snapshot(straight.brain_ref()),
        snapshot(resumed.brain_ref()),
    );
    for (k, v) in &x {
        assert!(*v == y[k], "{k} differs after resume");
    }
    assert_eq!(straight.state().1, resumed.state().1);
    let (a, b) = (straight.state().0, resumed.state().0);
    assert_eq!(a.len(), b.len());
    for (k, t) in &a {
        let x = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let y = b[k].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(x == y, "optimizer state {k} differs after resume");
    }
}

#[test]
fn a_detached_prompt_update_lowers_the_loss_and_moves_the_role_tokens() {
    let b = brain();
    let mut batch = batch(&b, "");
    let before = snapshot(&b);
    let args = PpoArgs {
        detach_prompt: true,
        ..args()
    };
    let mut learner = Learner::new(b, None, args, Ablation::Full, 3).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    assert!(
        stats.total < stats.total_first.unwrap(),
        "{} vs {:?}",
        stats.total,
        stats.total_first
    );
    let after = snapshot(learner.brain_ref());
    assert!(before["actor.lora.29.down_proj.b"] != after["actor.lora.29.down_proj.b"]);
    assert!(before["judge.head.weight"] != after["judge.head.weight"]);
    // The role tokens sit in the prompt's head, yet get a gradient: the tail attends to
    // their keys and values, recomputed in the graph.
    for role in ["actor", "editor", "judge"] {
        let k = format!("{role}.role_tokens");
        assert!(before[&k] != after[&k], "{k} did not move");
    }
}

#[test]
fn a_head_only_judge_moves_its_head_alone_and_keeps_the_samplers_states() {
    let b = brain();
    let mut batch = batch(&b, "");
    // Both candidates solved: whatever their states, the head must raise both scores.
    for j in &mut batch.judge {
        j.label = true;
    }
    let prompts: Vec<Vec<u32>> = batch.judge.iter().map(|j| j.prompt.clone()).collect();
    let before = snapshot(&b);
    let args = PpoArgs {
        judge_head_only: true,
        detach_prompt: true,
        ..args()
    };
    let mut learner = Learner::new(b, None, args, Ablation::Full, 3).unwrap();
    let states_before = learner.brain().judge_features(&prompts).unwrap();
    let scores_before = learner.brain().judge_tokens(&prompts).unwrap();
    let stats = learner.update(&mut batch).unwrap();
    assert!(stats.judge.is_some_and(f32::is_finite), "{:?}", stats.judge);
    let after = snapshot(learner.brain_ref());
    for (name, value) in &before {
        let moved = *value != after[name];
        if name.starts_with("judge.head.") || name == "actor.lora.29.down_proj.b" {
            assert!(moved, "{name} did not move");
        } else if name.starts_with("judge.") {
            assert!(!moved, "{name} moved, though a head-only Judge keeps its role parameters");
        }
    }
    // The states the sampler scores with are the ones the head learned on, at every update.
    assert_eq!(learner.brain().judge_features(&prompts).unwrap(), states_before);
    let scores_after = learner.brain().judge_tokens(&prompts).unwrap();
    for (s0, s1) in scores_before.iter().zip(&scores_after) {
        assert!(s1 > s0, "a solved candidate's score fell: {scores_before:?} -> {scores_after:?}");
    }
}

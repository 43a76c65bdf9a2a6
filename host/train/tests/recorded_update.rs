//! Two updates recorded bit for bit: every [`UpdateStats`] figure, the trainable parameters,
//! the optimizer's state and the batch's scored fields, on SmolLM2-135M. The figures were
//! recorded before `Learner::update` was rewritten as one `ppo_update`, so a rewrite that
//! moves code without changing what it computes passes, and any change to the arithmetic
//! (the order of a sum, an RNG draw, a missing term) fails.
//!
//! Two configurations between them cover every loss term and both forward paths:
//! - [`group_advantages_on_detached_prompts`]: the training runs' path: group advantages,
//!   π_old from the first minibatch's forward and a scoring pass, `detach-prompt` with
//!   `judge-head-only`, `free-transposed` and `recompute-blocks`;
//! - [`value_head_entropy_and_kl_on_the_full_path`]: a value head (GAE), an entropy bonus and
//!   a KL penalty to a frozen reference, on the full differentiable path with the Judge's
//!   whole prompt.
//!
//! Both run 2 epochs × 2 minibatches of Actor, Editor and Judge samples, twice (about 190 s
//! in all on 2 busy cores, most of it the full path's).

use onebrain_model::{Brain, ModelConfig};
use onebrain_train::{Ablation, Advantage, Batch, Learner, PpoArgs, UpdateStats};

mod common;
use common::{batch, brain, load, snapshot};

/// FNV-1a over bytes: one number that changes with any bit of what it reads.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, b: &[u8]) {
        for x in b {
            self.0 = (self.0 ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn floats(&mut self, v: &[f32]) {
        for x in v {
            self.bytes(&x.to_bits().to_le_bytes());
        }
    }
}

/// Sum, sum of squares (as f64, in name order) and a hash of the bits of named tensors.
fn checksum<'a>(named: impl Iterator<Item = (&'a String, Vec<f32>)>) -> String {
    let (mut sum, mut sq, mut h) = (0f64, 0f64, Fnv::new());
    for (name, v) in named {
        h.bytes(name.as_bytes());
        h.floats(&v);
        for x in &v {
            sum += f64::from(*x);
            sq += f64::from(*x) * f64::from(*x);
        }
    }
    format!("sum {sum:e} sumsq {sq:e} fnv {:016x}", h.0)
}

/// What one update computed, as text: its statistics (timings zeroed), the trainable
/// parameters, the optimizer's state (with the value heads) and the batch's scored fields.
fn record(learner: &Learner, batch: &Batch, mut stats: UpdateStats) -> String {
    stats.secs = 0.0;
    stats.score_secs = 0.0;
    stats.judge_states_secs = 0.0;
    let params = snapshot(learner.brain_ref());
    let (state, steps) = learner.state();
    let mut state: Vec<(String, Vec<f32>)> = state
        .into_iter()
        .map(|(k, t)| (k, t.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
        .collect();
    state.sort_by(|a, b| a.0.cmp(&b.0));
    let mut scored = Fnv::new();
    for s in &batch.policy {
        scored.floats(&[s.value, s.advantage, s.ret]);
        for logp in [&s.old_logp, &s.ref_logp] {
            match logp {
                Some(v) => scored.floats(v),
                None => scored.bytes(b"none"),
            }
        }
    }
    format!(
        "{stats:?}\nparams {}\noptimizer steps {steps} {}\nbatch fnv {:016x}",
        checksum(params.iter().map(|(k, v)| (k, v.clone()))),
        checksum(state.iter().map(|(k, v)| (k, v.clone()))),
        scored.0
    )
}

/// Runs two updates of `learner`, on the fixture batch and on one with other prompts, and
/// checks each against its recording.
fn check(mut learner: Learner, recorded: [&str; 2]) {
    let mut found = Vec::new();
    for (salt, want) in ["", "again"].into_iter().zip(recorded) {
        let mut b = batch(learner.brain_ref(), salt);
        let stats = learner.update(&mut b).unwrap();
        let got = record(&learner, &b, stats);
        eprintln!("{got}\n");
        found.push(got == want);
    }
    assert!(found.iter().all(|&ok| ok), "an update differs from its recording (printed above): {found:?}");
}

/// The recording for this CPU's level: `gemm`'s f32 kernels (the backward's products and the
/// optimizer's inputs) sum in another order with AVX-512 (x86-64-v4, as `pulp` detects it)
/// than with AVX2 (v3), so each level has its own bits. The int8 kernels agree across levels
/// bit for bit (`cpu_matmul::tests`).
fn by_level(v4: [&'static str; 2], v3: [&'static str; 2]) -> [&'static str; 2] {
    #[cfg(target_arch = "x86_64")]
    {
        let v4_cpu = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512cd")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl");
        if v4_cpu { v4 } else { v3 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    panic!("updates are recorded on x86-64 only (levels v3 and v4)")
}

fn two_by_two() -> PpoArgs {
    PpoArgs {
        learning_rate: 1e-3,
        batch_size: 4,
        group_size: 2,
        update_epochs: 2,
        num_minibatches: 2,
        ..Default::default()
    }
}

#[test]
fn group_advantages_on_detached_prompts() {
    let b = load(&ModelConfig {
        free_transposed: true,
        recompute_blocks: onebrain_model::RecomputeBlocks::Always,
        ..ModelConfig::test_model()
    });
    let args = PpoArgs {
        advantage: Advantage::Group,
        detach_prompt: true,
        judge_head_only: true,
        ..two_by_two()
    };
    check(Learner::new(b, None, args, Ablation::Full, 5).unwrap(), by_level(GROUP_DETACHED_V4, GROUP_DETACHED_V3));
}

#[test]
fn value_head_entropy_and_kl_on_the_full_path() {
    let args = PpoArgs {
        advantage: Advantage::ValueHead,
        ent_coef: 0.01,
        kl_coef: 0.05,
        ..two_by_two()
    };
    let reference: Brain = brain();
    check(Learner::new(brain(), Some(reference), args, Ablation::Full, 7).unwrap(), by_level(VALUE_KL_FULL_V4, VALUE_KL_FULL_V3));
}

// Recorded on x86-64-v4 CPUs (a Zen 4 and a Xeon, the same bits) on the code before the
// rewrite, twice with the same result; f32 and f64 print as the shortest text that reads
// back to the same bits.
const GROUP_DETACHED_V4: [&str; 2] = [
    concat!(
        "UpdateStats { policy_actor: Some(-0.35490987), policy_editor: Some(-0.010666672), value: None, judge: Some(1.0708055), total: -0.039001524, total_first: Some(0.8195025), entropy: Some(5.2735014), approx_kl: 0.79917675, clipfrac: 0.65217394, first_abs_log_ratio: Some(0.0), old_logp_source: \"first-forward+scoring-pass\", sampler_gap: None, kl_ref: None, explained_variance: None, grad_norm: 11.913776, epochs: 2, steps: 4, dropped_steps: 0, tokens: 139, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 9, secs: 0.0 }\n",
        "params sum -3.9413598334363776e1 sumsq 1.5612792085786846e3 fnv 8e9379daf9e4c879\n",
        "optimizer steps 4 sum -5.269394910678741e-2 sumsq 2.0819617785760016e-3 fnv 207cb079cd7cdb5f\n",
        "batch fnv 6ae994a82bfe519d"
    ),
    concat!(
        "UpdateStats { policy_actor: Some(-0.08219983), policy_editor: Some(0.4419184), value: None, judge: Some(1.116513), total: 0.47371328, total_first: Some(-0.07165435), entropy: Some(5.110074), approx_kl: 0.8890983, clipfrac: 0.73913044, first_abs_log_ratio: Some(0.0), old_logp_source: \"first-forward+scoring-pass\", sampler_gap: None, kl_ref: None, explained_variance: None, grad_norm: 12.308018, epochs: 2, steps: 4, dropped_steps: 0, tokens: 139, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 12, secs: 0.0 }\n",
        "params sum -3.1758069176507526e1 sumsq 1.581285915688458e3 fnv 0b002a59ce13eb7d\n",
        "optimizer steps 8 sum -5.8926495654511996e-2 sumsq 2.907568482877888e-3 fnv 9683d7e0a6c5b936\n",
        "batch fnv fefa3a49fafe03f3"
    ),
];

const VALUE_KL_FULL_V4: [&str; 2] = [
    concat!(
        "UpdateStats { policy_actor: Some(0.6974993), policy_editor: Some(-0.010691198), value: Some(0.10280844), judge: Some(0.51137155), total: 0.8455652, total_first: Some(1.1647192), entropy: Some(5.068853), approx_kl: 0.9617893, clipfrac: 0.73913044, first_abs_log_ratio: Some(0.0), old_logp_source: \"scoring-pass\", sampler_gap: None, kl_ref: Some(4.770091), explained_variance: Some(0.0), grad_norm: 17.29762, epochs: 2, steps: 4, dropped_steps: 0, tokens: 714, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 0, secs: 0.0 }\n",
        "params sum -3.998139573499111e1 sumsq 1.5610261217940001e3 fnv 218f89a3e7d2e746\n",
        "optimizer steps 4 sum -4.079580601275275e-2 sumsq 1.3866662460981534e-2 fnv 1b3b839c67f8f19d\n",
        "batch fnv 4fdd168b63e3d826"
    ),
    concat!(
        "UpdateStats { policy_actor: Some(30.081684), policy_editor: Some(0.26072755), value: Some(0.11652226), judge: Some(1.1805326), total: 30.566208, total_first: Some(1.101016), entropy: Some(5.5701313), approx_kl: 4.773294, clipfrac: 0.72727275, first_abs_log_ratio: Some(0.0), old_logp_source: \"scoring-pass\", sampler_gap: None, kl_ref: Some(2.0013807), explained_variance: Some(-0.017769098), grad_norm: 1028.154, epochs: 2, steps: 4, dropped_steps: 0, tokens: 714, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 0, secs: 0.0 }\n",
        "params sum -3.670438588470746e1 sumsq 1.576819040932097e3 fnv 2ada20abbbff6acf\n",
        "optimizer steps 8 sum -1.7646822430542256e-1 sumsq 2.0701609727302263e-2 fnv a9936490ca1d50fb\n",
        "batch fnv e7ebbd71c80ec113"
    ),
];

// Recorded on an x86-64-v3 CPU (a Zen 3, AVX2 and no AVX-512) on the rewritten code, which
// gives the v4 recordings' bits on v4 CPUs: the first update's scored batch is the same bits
// as there, and the f32 kernels' other order of sums shows in what the update computes.
const GROUP_DETACHED_V3: [&str; 2] = [
    concat!(
        "UpdateStats { policy_actor: Some(-0.3576027), policy_editor: Some(-0.010666672), value: None, judge: Some(1.0713632), total: -0.041527033, total_first: Some(0.8195025), entropy: Some(5.2544127), approx_kl: 0.84157944, clipfrac: 0.65217394, first_abs_log_ratio: Some(0.0), old_logp_source: \"first-forward+scoring-pass\", sampler_gap: None, kl_ref: None, explained_variance: None, grad_norm: 11.919051, epochs: 2, steps: 4, dropped_steps: 0, tokens: 139, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 9, secs: 0.0 }\n",
        "params sum -3.9370738981795895e1 sumsq 1.5613965907422396e3 fnv c270ff8c959ad08f\n",
        "optimizer steps 4 sum -5.3788714985597216e-2 sumsq 2.0170416759800196e-3 fnv 2563ce9a75c5e190\n",
        "batch fnv 6ae994a82bfe519d"
    ),
    concat!(
        "UpdateStats { policy_actor: Some(-0.09223293), policy_editor: Some(0.46101803), value: None, judge: Some(1.1216576), total: 0.4747734, total_first: Some(-0.071816966), entropy: Some(5.121851), approx_kl: 0.85369325, clipfrac: 0.7826087, first_abs_log_ratio: Some(0.0), old_logp_source: \"first-forward+scoring-pass\", sampler_gap: None, kl_ref: None, explained_variance: None, grad_norm: 12.3416195, epochs: 2, steps: 4, dropped_steps: 0, tokens: 139, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 12, secs: 0.0 }\n",
        "params sum -3.0698060755534968e1 sumsq 1.5807712437591947e3 fnv 81e7e411d3061570\n",
        "optimizer steps 8 sum -6.1583062785578846e-2 sumsq 2.878801139296525e-3 fnv 25381c4af65a042f\n",
        "batch fnv 99ea0bd4a0f354cc"
    ),
];

const VALUE_KL_FULL_V3: [&str; 2] = [
    concat!(
        "UpdateStats { policy_actor: Some(0.6974993), policy_editor: Some(-0.010691198), value: Some(0.10280845), judge: Some(0.51137155), total: 0.8455652, total_first: Some(1.1647192), entropy: Some(5.068853), approx_kl: 0.9617893, clipfrac: 0.73913044, first_abs_log_ratio: Some(0.0), old_logp_source: \"scoring-pass\", sampler_gap: None, kl_ref: Some(4.770091), explained_variance: Some(0.0), grad_norm: 17.29762, epochs: 2, steps: 4, dropped_steps: 0, tokens: 714, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 0, secs: 0.0 }\n",
        "params sum -3.998139573499111e1 sumsq 1.5610261217940001e3 fnv 218f89a3e7d2e746\n",
        "optimizer steps 4 sum -4.079579994552135e-2 sumsq 1.3866662680551622e-2 fnv 11c54e050761f987\n",
        "batch fnv 4fdd168b63e3d826"
    ),
    concat!(
        "UpdateStats { policy_actor: Some(22.780422), policy_editor: Some(0.23550358), value: Some(0.11742702), judge: Some(1.178495), total: 23.251722, total_first: Some(1.101016), entropy: Some(5.555701), approx_kl: 3.6474874, clipfrac: 0.6818182, first_abs_log_ratio: Some(0.0), old_logp_source: \"scoring-pass\", sampler_gap: None, kl_ref: Some(2.1745706), explained_variance: Some(-0.017769098), grad_norm: 801.71234, epochs: 2, steps: 4, dropped_steps: 0, tokens: 714, skipped: 0, score_secs: 0.0, judge_states_secs: 0.0, prompt_heads_kept: 0, prompt_heads_computed: 0, secs: 0.0 }\n",
        "params sum -3.6735581128860176e1 sumsq 1.5767545563262372e3 fnv f8c8159f92d2a531\n",
        "optimizer steps 8 sum -1.746235157186861e-1 sumsq 2.0889907495559242e-2 fnv aeeed93d7269c24b\n",
        "batch fnv fe0f5778599dad0f"
    ),
];

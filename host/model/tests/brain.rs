//! End-to-end tests of the backbone on SmolLM2-135M (the test model). They skip with a
//! message when `scripts/setup.sh --models test` has not been run.

use std::path::Path;

use rand::{rngs::StdRng, SeedableRng};

mod common;
use common::seeded_normal;

use onebrain_model::{
    resolve_model, Brain, Error, ExportFormat, Generation, LearnerWeights, ModelConfig, RecomputeBlocks, Role, SamplingConfig, StopReason, Tensor,
    TEST_MODEL_FILE,
};

fn smol(cfg: ModelConfig) -> Option<Brain> {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    Some(Brain::load(&ModelConfig { path: TEST_MODEL_FILE.into(), ..cfg }).expect("load SmolLM2"))
}

const SYSTEM: &str = "You are a helpful assistant.";
const QUESTION: &str = "What is the capital of France? Answer in one sentence.";

/// Gives every LoRA B a small random value, as after some training: with B = 0 the
/// adapters are exact no-ops and A receives no gradient.
fn perturb_adapters(brain: &Brain, std: f32) {
    let mut rng = StdRng::seed_from_u64(7);
    for (name, var) in all_vars(brain) {
        if name.ends_with(".b") && name.contains(".lora.") {
            var.set(&seeded_normal(&mut rng, std, var.dims())).unwrap();
        }
    }
}

fn all_vars(brain: &Brain) -> Vec<(String, onebrain_model::Var)> {
    let data = brain.trainable().data().lock().unwrap();
    let mut v: Vec<_> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn generates_sensible_text_in_all_roles_and_judge_is_a_probability() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let counts = brain.param_counts();
    assert!((counts.role_fraction() - 0.0167).abs() < 0.002, "{counts:?}");
    let prompt = brain.chat_prompt(SYSTEM, QUESTION);
    for role in Role::ALL {
        let g = brain.generate(role, &prompt, &SamplingConfig::greedy(24)).unwrap();
        assert!(g.text.contains("Paris"), "{role}: {:?}", g.text);
        assert!(!g.tokens.is_empty() && g.tokens.len() <= 24);
    }
    let s = brain.judge(&format!("{prompt}The capital of France is Paris.")).unwrap();
    assert!(s > 0.0 && s < 1.0, "{s}");
}

#[test]
fn prefix_reuse_gives_the_same_tokens_as_a_cold_run() {
    let Some(mut warm) = smol(ModelConfig::default()) else { return };
    let Some(mut cold) = smol(ModelConfig { prefix_cache_entries: 0, ..Default::default() }) else { return };
    let task = "Stack block a on block b. Blocks: a, b, c.";
    let first = warm.chat_prompt(SYSTEM, &format!("{task}\nWrite the goal."));
    let second = warm.chat_prompt(SYSTEM, &format!("{task}\nList the objects."));
    let s = SamplingConfig::greedy(16);
    let g1 = warm.generate(Role::Editor, &first, &s).unwrap();
    assert_eq!(g1.cached_prompt_tokens, 0);
    let g2 = warm.generate(Role::Editor, &second, &s).unwrap();
    let shared = warm.encode(&first).unwrap().iter().zip(warm.encode(&second).unwrap()).take_while(|(a, b)| **a == *b).count();
    assert_eq!(g2.cached_prompt_tokens, shared, "the common prefix is reused");
    assert!(g2.prefill_tokens < g2.prompt_tokens);
    let c2 = cold.generate(Role::Editor, &second, &s).unwrap();
    assert_eq!(c2.cached_prompt_tokens, 0);
    assert_eq!(g2.tokens, c2.tokens, "reuse must not change the output");
    // The same prompt again reuses everything but its last token.
    let g3 = warm.generate(Role::Editor, &second, &s).unwrap();
    assert_eq!(g3.cached_prompt_tokens, g3.prompt_tokens - 1);
    assert_eq!(g3.tokens, c2.tokens);
}

fn batch_prompts(brain: &Brain) -> Vec<String> {
    vec![
        brain.chat_prompt(SYSTEM, QUESTION),
        brain.chat_prompt(SYSTEM, "Name three primary colors."),
        brain.chat_prompt("You answer briefly.", "What is 2 + 2?"),
        brain.chat_prompt("You answer briefly.", "Say hello."),
    ]
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

#[test]
fn batched_generation_on_dense_weights_is_exact() {
    // With a trainable backbone, generation runs on dense f32 weights: batching (left
    // padding, per-row positions, masks, row retirement) must then change nothing.
    let cfg = ModelConfig { train_backbone: true, prefix_cache_entries: 0, ..Default::default() };
    let Some(mut brain) = smol(cfg) else { return };
    let prompts = batch_prompts(&brain);
    assert_batch_is_exact(&mut brain, &prompts);
}

/// On dense weights a batch's next-token logits equal each prompt's alone (to 1e-3) and its
/// greedy tokens are the same; returns the batch's generations.
fn assert_batch_is_exact(brain: &mut Brain, prompts: &[String]) -> Vec<Generation> {
    let rows: Vec<Vec<u32>> = prompts.iter().map(|p| brain.encode(p).unwrap()).collect();
    let batch = brain.next_token_logits(Role::Actor, &rows).unwrap();
    for (row, b) in rows.iter().zip(&batch) {
        let single = brain.next_token_logits(Role::Actor, &[row.clone()]).unwrap().remove(0);
        assert!(max_diff(&single, b) < 1e-3, "batched logits differ by {}", max_diff(&single, b));
    }
    let s = SamplingConfig::greedy(10);
    let batch = brain.generate_batch(Role::Actor, prompts, &s).unwrap();
    for (p, b) in prompts.iter().zip(&batch) {
        let single = brain.generate(Role::Actor, p, &s).unwrap();
        assert_eq!(b.tokens, single.tokens, "{:?} vs {:?}", b.text, single.text);
    }
    batch
}

/// The Judge scores each of `rows`, batched, as it scores that row alone (to 1e-4).
fn assert_judge_scores_as_alone(brain: &mut Brain, rows: &[Vec<u32>]) {
    let scores = brain.judge_tokens(rows).unwrap();
    for (row, got) in rows.iter().zip(scores) {
        let alone = brain.judge_tokens(&[row.clone()]).unwrap()[0];
        assert!((got - alone).abs() < 1e-4, "{got} vs {alone}");
    }
}

/// Two "domains" (long system texts) with two questions each: the batch prefills each
/// domain's head once and runs the four tails after heads of different lengths, which must
/// change nothing on dense weights.
#[test]
fn prompts_of_two_domains_prefill_their_heads_once_and_decode_as_alone() {
    let cfg = ModelConfig { train_backbone: true, prefix_cache_entries: 0, ..Default::default() };
    let Some(mut brain) = smol(cfg) else { return };
    let (geo, maths) = (
        "You are a geography tutor. You answer questions about countries, capitals, rivers and mountains in one short, precise sentence, and you never add a second sentence.",
        "You are a patient arithmetic teacher for children. Answer with the number first.",
    );
    let prompts = vec![
        brain.chat_prompt(geo, QUESTION),
        brain.chat_prompt(maths, "What is 2 + 2?"),
        brain.chat_prompt(geo, "Which river flows through Cairo?"),
        brain.chat_prompt(maths, "What is 3 + 5?"),
    ];
    let batch = assert_batch_is_exact(&mut brain, &prompts);
    let rows: Vec<Vec<u32>> = prompts.iter().map(|p| brain.encode(p).unwrap()).collect();
    // Each domain's head once: fewer positions than the prompts' tokens (one group would
    // compute at least that: its shared head is the chat template's first tokens, and every
    // row's tail is padded to the longest).
    let total: usize = rows.iter().map(Vec::len).sum();
    assert!(batch[0].prefill_tokens < total, "{} positions prefilled for {total} prompt tokens", batch[0].prefill_tokens);
    assert_judge_scores_as_alone(&mut brain, &rows);
}

/// Two domains whose questions differ much in length (a repair of a long spec beside one of
/// a short spec): each domain's tails run as a batch of their own, the short ones unpadded,
/// and the caches join into one batch for decoding, which must change nothing on dense
/// weights.
#[test]
fn short_tails_beside_long_ones_prefill_as_their_own_batch_and_decode_as_alone() {
    let cfg = ModelConfig { train_backbone: true, prefix_cache_entries: 0, ..Default::default() };
    let Some(mut brain) = smol(cfg) else { return };
    let (geo, maths) = (
        "You are a geography tutor. You answer questions about countries, capitals, rivers and mountains in one short, precise sentence.",
        "You are a patient arithmetic teacher for children. Answer with the number first.",
    );
    let story = "Every morning the farmer walks to the market with a basket of eggs and a basket of pears, sells half of each, and gives one pear to the miller's daughter. ";
    let long_question = |n: usize, what: &str| format!("{what} {}How many pears are left after {n} days?", story.repeat(n));
    let prompts = vec![
        brain.chat_prompt(geo, QUESTION),
        brain.chat_prompt(maths, &long_question(6, "First story.")),
        brain.chat_prompt(geo, "Which river flows through Cairo?"),
        brain.chat_prompt(maths, &long_question(5, "A second, shorter story.")),
    ];
    let batch = assert_batch_is_exact(&mut brain, &prompts);
    let rows: Vec<Vec<u32>> = prompts.iter().map(|p| brain.encode(p).unwrap()).collect();
    // One batch of tails would pad all four rows to the longest maths tail (after the two
    // maths prompts' common head): at least that many positions.
    let shared = rows[1].iter().zip(&rows[3]).take_while(|(a, b)| a == b).count();
    let longest_tail = rows[1].len().max(rows[3].len()) - shared;
    assert!(longest_tail > 200, "{longest_tail}");
    let computed = batch[0].prefill_tokens;
    assert!(computed < rows.len() * longest_tail, "{computed} positions prefilled; one batch of tails computes {}", rows.len() * longest_tail);
    assert_judge_scores_as_alone(&mut brain, &rows);
}

#[test]
fn the_judge_reuses_a_state_only_under_the_parameters_that_computed_it() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let prompts = chat_rows(&brain, &[QUESTION, "Which river flows through Cairo?"]);
    let batched = brain.judge_features(&prompts).unwrap();
    // Kept: asked again, alone, a prompt gets the very state its batch computed.
    assert_eq!(brain.judge_features(&prompts[1..]).unwrap()[0], batched[1]);
    // Other Judge parameters (a step, a loaded checkpoint) compute a state of their own.
    perturb_adapters(&brain, 0.05);
    let moved = brain.judge_features(&prompts[1..]).unwrap().remove(0);
    assert!(max_diff(&moved, &batched[1]) > 1e-3, "a state of the old parameters was reused");
    // Forgotten with the prompt caches: computed again, the same state.
    brain.clear_prefix_cache();
    let again = brain.judge_features(&prompts[1..]).unwrap().remove(0);
    assert!(max_diff(&again, &moved) < 1e-5, "{}", max_diff(&again, &moved));
}

#[test]
fn batched_generation_matches_one_at_a_time() {
    let Some(mut brain) = smol(ModelConfig { prefix_cache_entries: 0, ..Default::default() }) else { return };
    let prompts = batch_prompts(&brain);
    // Quantized kernels quantize activations differently per call shape (in blocks of 32
    // for one row, of 256 in the tiled multi-row kernels), so logits move by a unit or two
    // between batch shapes (as between quantized and dense, whose test allows 3): compare
    // logits with that tolerance; a batching fault (a wrong mask or position) moves them by
    // far more. The third prompt's first token is a 0.2-logit tie between "To" and "The",
    // so greedy tokens may legitimately differ.
    let rows: Vec<Vec<u32>> = prompts.iter().map(|p| brain.encode(p).unwrap()).collect();
    let batch = brain.next_token_logits(Role::Actor, &rows).unwrap();
    for (row, b) in rows.iter().zip(&batch) {
        let single = brain.next_token_logits(Role::Actor, &[row.clone()]).unwrap().remove(0);
        assert!(max_diff(&single, b) < 3.0, "batched logits differ by {}", max_diff(&single, b));
    }
    // Greedy continuations can flip at such near-ties, so check the answers' content.
    let batch = brain.generate_batch(Role::Actor, &prompts, &SamplingConfig::greedy(12)).unwrap();
    assert_eq!(batch.len(), 4);
    assert!(batch[0].text.contains("Paris"), "{:?}", batch[0].text);
    assert!(batch.iter().all(|g| !g.tokens.is_empty()));
    // Sampling: the same seed reproduces, rows of a batch draw with different seeds.
    let s = SamplingConfig { temperature: 1.0, top_p: 0.95, max_tokens: 12, seed: 3, ..Default::default() };
    let same = vec![prompts[1].clone(), prompts[1].clone(), prompts[1].clone()];
    let a = brain.generate_batch(Role::Actor, &same, &s).unwrap();
    let b = brain.generate_batch(Role::Actor, &same, &s).unwrap();
    let toks = |v: &[Generation]| v.iter().map(|g| g.tokens.clone()).collect::<Vec<_>>();
    assert_eq!(toks(&a), toks(&b));
    assert!(a.iter().any(|g| g.tokens != a[0].tokens), "rows sample independently");
}

#[test]
fn stop_strings_and_max_tokens_end_generation() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let prompt = brain.chat_prompt(SYSTEM, QUESTION);
    let s = SamplingConfig { stop: vec!["Paris".into()], ..SamplingConfig::greedy(24) };
    let g = brain.generate(Role::Actor, &prompt, &s).unwrap();
    assert_eq!(g.stop_reason, StopReason::StopString("Paris".into()));
    assert!(!g.text.contains("Paris") && !g.text.is_empty(), "{:?}", g.text);
    let g = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(3)).unwrap();
    assert_eq!(g.tokens.len(), 3);
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    assert!(matches!(brain.generate(Role::Actor, "", &SamplingConfig::greedy(3)), Err(Error::EmptyInput(_))));
    let bad = SamplingConfig { top_p: 2.0, ..Default::default() };
    assert!(matches!(brain.generate(Role::Actor, &prompt, &bad), Err(Error::InvalidConfig(_))));
    let huge = "word ".repeat(9000);
    assert!(matches!(brain.generate(Role::Actor, &huge, &SamplingConfig::greedy(3)), Err(Error::ContextOverflow { .. })));
}

/// A request whose estimated memory passes the config's budget is refused with
/// the figures, before prefill, and the model goes on serving requests that fit.
#[test]
fn a_request_past_the_memory_budget_is_refused_with_its_figures() {
    let Some(mut brain) = smol(ModelConfig { memory_budget_mb: Some(700), ..Default::default() }) else { return };
    assert_eq!(brain.memory_budget_mib(), 700);
    let prompt = brain.chat_prompt(SYSTEM, QUESTION);
    let long = brain.chat_prompt(SYSTEM, &"(on a b) ".repeat(1000));
    let n = brain.encode(&long).unwrap().len();
    let est = brain.memory_estimate(1, n + 4 + 3);
    assert!(est.total_mib() > 700.0 && est.kv_mib > 0.0 && est.work_mib > 0.0, "{est:?}");
    match brain.generate(Role::Actor, &long, &SamplingConfig::greedy(3)) {
        Err(e @ Error::OverBudget { rows: 1, budget_mib: 700, .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("past the memory budget of 700 MiB") && msg.contains(&format!("{} positions", n + 7)), "{msg}");
        }
        other => panic!("expected OverBudget, got {other:?}"),
    }
    // Eight rows of a short prompt fit; the same rows with room for 7,000 tokens each do not.
    let rows = vec![prompt.clone(); 8];
    assert_eq!(brain.generate_batch(Role::Actor, &rows, &SamplingConfig::greedy(2)).unwrap().len(), 8);
    let wide = SamplingConfig { max_tokens: 7000, ..SamplingConfig::greedy(2) };
    assert!(matches!(brain.generate_batch(Role::Actor, &rows, &wide), Err(Error::OverBudget { rows: 8, .. })));
    assert!(matches!(brain.judge(&long), Err(Error::OverBudget { .. })));
    assert!(brain.judge(&prompt).is_ok());
    assert!(ModelConfig { memory_budget_mb: Some(0), ..Default::default() }.validate().is_err());
}

/// The prefix cache's KV buffers count against the budget. A long prompt that
/// fits alone, but not beside another long prompt's cached KV, evicts that entry instead
/// of being refused; within the budget the cache keeps serving.
#[test]
fn cached_prefixes_give_way_to_a_request_under_the_memory_budget() {
    let Some(probe) = smol(ModelConfig::default()) else { return };
    let first = probe.chat_prompt(SYSTEM, &"(on a b) ".repeat(250));
    let second = probe.chat_prompt(SYSTEM, &"(on c d) ".repeat(250));
    let n = probe.encode(&first).unwrap().len();
    assert_eq!(probe.encode(&second).unwrap().len(), n, "the two requests are estimated alike");
    let one = probe.memory_estimate(1, n + 4 + 1).total_mib();
    drop(probe);
    // Room for one long request and half of another's cached keys and values, not two.
    let est = |budget: f64| ModelConfig { memory_budget_mb: Some(budget as usize), ..Default::default() };
    let kv_mib = 30.0 * 2.0 * 192.0 * 4.0 * n as f64 / (1 << 20) as f64;
    let Some(mut brain) = smol(est(one + kv_mib / 2.0)) else { return };
    let greedy = SamplingConfig::greedy(1);
    brain.generate(Role::Actor, &first, &greedy).unwrap();
    assert!(brain.generate(Role::Actor, &first, &greedy).unwrap().cached_prompt_tokens >= n - 1, "within the budget the cache serves");
    brain.generate(Role::Actor, &second, &greedy).expect("the cached entry gives way");
    let again = brain.generate(Role::Actor, &first, &greedy).unwrap();
    assert!(again.cached_prompt_tokens < n / 2, "the first prompt's entry was evicted: {} cached", again.cached_prompt_tokens);
}

#[test]
fn differentiable_logits_agree_with_the_quantized_path() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    perturb_adapters(&brain, 0.02);
    let prompt = brain.chat_prompt(SYSTEM, QUESTION);
    let tokens = brain.encode(&prompt).unwrap();
    for role in [Role::Actor, Role::Judge] {
        let quant = brain.next_token_logits(role, &[tokens.clone()]).unwrap().remove(0);
        let dense = brain.logits(role, &tokens).unwrap();
        let last: Vec<f32> = dense.get(tokens.len() - 1).unwrap().to_vec1().unwrap();
        assert_eq!(onebrain_model::argmax(&quant), onebrain_model::argmax(&last));
        let n = quant.len() as f64;
        let mean = |v: &[f32]| v.iter().map(|x| *x as f64).sum::<f64>() / n;
        let (mq, md) = (mean(&quant), mean(&last));
        let cov: f64 = quant.iter().zip(&last).map(|(a, b)| (*a as f64 - mq) * (*b as f64 - md)).sum();
        let vq: f64 = quant.iter().map(|a| (*a as f64 - mq).powi(2)).sum();
        let vd: f64 = last.iter().map(|b| (*b as f64 - md).powi(2)).sum();
        let corr = cov / (vq * vd).sqrt();
        let max_diff = quant.iter().zip(&last).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("{role}: correlation {corr:.5}, max |Δlogit| {max_diff:.3}");
        assert!(corr > 0.99, "correlation {corr}");
        assert!(max_diff < 3.0, "max diff {max_diff}");
    }
}

fn assert_every_grad(brain: &Brain, grads: &candle_core::backprop::GradStore, skip: impl Fn(&str) -> bool) -> usize {
    let mut checked = 0;
    for (name, var) in all_vars(brain) {
        if skip(&name) {
            continue;
        }
        let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("no gradient for {name}"));
        let n = g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(n > 0.0 && n.is_finite(), "zero or non-finite gradient for {name}: {n}");
        checked += 1;
    }
    checked
}

fn joint_loss(brain: &Brain) -> Tensor {
    let prompt = brain.chat_prompt(SYSTEM, "Stack a on b.");
    let cont = brain.encode("(on a b)").unwrap();
    let a = brain.sequence_logprobs(Role::Actor, &prompt, &cont).unwrap();
    assert_eq!(a.dims(), &[cont.len()]);
    assert!(a.to_vec1::<f32>().unwrap().iter().all(|x| *x <= 0.0 && x.is_finite()));
    let e = brain.sequence_logprobs(Role::Editor, &prompt, &cont).unwrap();
    let j = brain.judge_logit(&format!("{prompt}(on a b)")).unwrap();
    ((a.sum_all().unwrap() + e.sum_all().unwrap()).unwrap().neg().unwrap() + j).unwrap()
}

#[test]
fn gradients_reach_every_role_parameter() {
    let Some(brain) = smol(ModelConfig::default()) else { return };
    perturb_adapters(&brain, 0.01);
    let grads = joint_loss(&brain).backward().unwrap();
    let n = assert_every_grad(&brain, &grads, |_| false);
    assert_eq!(n, 3 * (1 + 30 * 7 * 2) + 2);
}

#[test]
fn separate_full_backbones_train_apart() {
    let cfg = ModelConfig { train_backbone: true, separate_models: true, role_tokens: 2, ..Default::default() };
    let Some(brain) = smol(cfg) else { return };
    perturb_adapters(&brain, 0.01);
    // Only the Actor's loss: its backbone copy and its role get gradients, the others none.
    let prompt = brain.chat_prompt(SYSTEM, "Stack a on b.");
    let cont = brain.encode("(on a b)").unwrap();
    let loss = brain.sequence_logprobs(Role::Actor, &prompt, &cont).unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    let n = assert_every_grad(&brain, &grads, |name| !name.starts_with("actor."));
    assert!(n > 30 * 9 + 3, "{n} actor parameters");
    for (name, var) in all_vars(&brain) {
        if name.starts_with("judge.backbone.") || name.starts_with("editor.backbone.") {
            assert!(grads.get(var.as_tensor()).is_none(), "{name} got a gradient from the Actor's loss");
        }
    }
    let grads = joint_loss(&brain).backward().unwrap();
    let total = assert_every_grad(&brain, &grads, |_| false);
    assert_eq!(total, brain.trainable().all_vars().len());
}

#[test]
fn checkpoint_and_peft_export_round_trip() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    perturb_adapters(&brain, 0.05);
    let dir = tempfile::tempdir().unwrap();
    brain.save(&dir.path().join("ckpt")).unwrap();
    let peft = dir.path().join("peft-actor");
    brain.export(Role::Actor, ExportFormat::Peft, &peft).unwrap();
    brain.export(Role::Judge, ExportFormat::Peft, &dir.path().join("peft-judge")).unwrap();

    // PEFT's layout and key names.
    let cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(peft.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(cfg["peft_type"], "LORA");
    assert_eq!(cfg["task_type"], "CAUSAL_LM");
    assert_eq!(cfg["r"], brain.lora_rank());
    assert_eq!(cfg["target_modules"].as_array().unwrap().len(), 7);
    let w = candle_core::safetensors::load(peft.join("adapter_model.safetensors"), &candle_core::Device::Cpu).unwrap();
    assert_eq!(w.len(), 30 * 7 * 2);
    let r = brain.lora_rank();
    assert_eq!(w["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].dims(), &[r, 576]);
    assert_eq!(w["base_model.model.model.layers.29.self_attn.k_proj.lora_B.weight"].dims(), &[192, r]);
    assert_eq!(w["base_model.model.model.layers.3.mlp.down_proj.lora_A.weight"].dims(), &[r, 1536]);
    assert_eq!(w["base_model.model.model.layers.3.mlp.gate_proj.lora_B.weight"].dims(), &[1536, r]);

    let prompt = brain.chat_prompt(SYSTEM, QUESTION);
    let want = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();

    // A fresh brain gets the same values back, through either route.
    let Some(mut fresh) = smol(ModelConfig { init_seed: 99, ..Default::default() }) else { return };
    fresh.load_trainable(&dir.path().join("ckpt")).unwrap();
    for ((na, a), (nb, b)) in all_vars(&brain).iter().zip(all_vars(&fresh)) {
        assert_eq!(na, &nb);
        let d = (a.as_tensor() - b.as_tensor()).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(d, 0.0, "{na}");
    }
    let Some(mut via_peft) = smol(ModelConfig { init_seed: 7, ..Default::default() }) else { return };
    via_peft.import_peft(Role::Actor, &peft).unwrap();
    let orig = all_vars(&brain);
    for (name, var) in all_vars(&via_peft).into_iter().filter(|(n, _)| n.starts_with("actor.")) {
        let (_, o) = orig.iter().find(|(n, _)| *n == name).unwrap();
        let d = (o.as_tensor() - var.as_tensor()).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(d, 0.0, "{name}");
    }
    let got = via_peft.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();
    assert_eq!(got.tokens, want.tokens);

    // Mismatches are typed errors.
    let Some(mut other) = smol(ModelConfig { lora_rank: Some(3), ..Default::default() }) else { return };
    assert!(matches!(other.load_trainable(&dir.path().join("ckpt")), Err(Error::CheckpointMismatch { .. })));
    assert!(matches!(other.import_peft(Role::Actor, &peft), Err(Error::CheckpointMismatch { .. })));
    assert!(matches!(other.load_trainable(&dir.path().join("nothing")), Err(Error::Io { .. })));
}

/// A run trained with PEFT's small adapters (rank 8 on q_proj and v_proj) loads under a
/// config written for the base model, which names neither: the checkpoint gives its shape
/// (the demo's side by side failed on "LoRA rank 8 vs 19"). A checkpoint from before
/// brain.json recorded the targets gives them by its parameters' names.
#[test]
fn a_checkpoint_loads_in_its_own_shape_under_a_base_config() {
    let trained_cfg = ModelConfig { lora_rank: Some(8), lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]), ..Default::default() };
    let Some(mut trained) = smol(trained_cfg) else { return };
    perturb_adapters(&trained, 0.05);
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("update-000030");
    trained.save(&ckpt).unwrap();
    let base_cfg = ModelConfig { path: TEST_MODEL_FILE.into(), ..Default::default() };
    let Some(mut plain) = smol(base_cfg.clone()) else { return };
    assert!(matches!(plain.load_trainable(&ckpt), Err(Error::CheckpointMismatch { .. })), "the base shape differs");

    let prompt = trained.chat_prompt(SYSTEM, QUESTION);
    let want = trained.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();
    let mut old_format: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(ckpt.join("brain.json")).unwrap()).unwrap();
    assert_eq!(old_format["lora_targets"], serde_json::json!(["q_proj", "v_proj"]));
    for recorded in [true, false] {
        if !recorded {
            old_format.as_object_mut().unwrap().remove("lora_targets");
            std::fs::write(ckpt.join("brain.json"), old_format.to_string()).unwrap();
        }
        let shaped = onebrain_model::with_checkpoint_shape(&base_cfg, &ckpt).unwrap();
        assert_eq!((shaped.lora_rank, shaped.lora_targets.clone()), (Some(8), Some(vec!["q_proj".to_string(), "v_proj".to_string()])));
        let mut loaded = Brain::load(&shaped).unwrap();
        loaded.load_trainable(&ckpt).unwrap();
        let got = loaded.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();
        assert_eq!(got.tokens, want.tokens, "recorded targets: {recorded}");
    }
}

/// Truncated backpropagation through the prompt: the same log-probabilities and Judge logit
/// as the full differentiable path, gradients in every adapter and in the role tokens.
///
/// `agree(a, b, what)` is the bar for log-probabilities, `entropy_tol` for entropies: exact to
/// float rounding on dense weights. On the sampler's quantized weights every product rounds
/// its input to 8 bits, so a different split of the attention's sums (one pass against head
/// then tail) can move a value across a rounding step, and the step grows through 30 layers:
/// there the bar is the distribution, not the last bits.
fn check_prompt_head_and_tail(brain: &Brain, agree: &dyn Fn(&[f32], &[f32], &str), entropy_tol: f32) {
    perturb_adapters(&brain, 0.01);
    let prompt = brain.encode(&brain.chat_prompt(SYSTEM, QUESTION)).unwrap();
    let cont = brain.encode("Paris is the capital.").unwrap();
    let full = brain.batch_logprobs(Role::Actor, &[(prompt.clone(), cont.clone())]).unwrap();
    let head = brain.prompt_head(Role::Actor, &prompt[..prompt.len() - 1]).unwrap();
    assert_eq!((head.role(), head.tokens()), (Role::Actor, &prompt[..prompt.len() - 1]));
    // A head grown from a shorter one holds the same keys and values.
    let short = brain.prompt_head(Role::Actor, &prompt[..prompt.len() / 2]).unwrap();
    let grown = brain.extend_prompt_head(Role::Actor, &prompt[..prompt.len() - 1], Some(&short)).unwrap();
    let via = brain.tail_logprobs(&grown, &prompt[prompt.len() - 1..], &cont).unwrap();
    let tail = brain.tail_logprobs(&head, &prompt[prompt.len() - 1..], &cont).unwrap();
    let (a, b) = (full.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap(), tail.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    agree(&a, &b, "full vs head + tail");
    let c = via.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    agree(&b, &c, "head vs grown head");
    // The entropy (PPO's bonus) agrees too, and lies in (0, ln vocab].
    let (ea, eb) = (full.entropy.flatten_all().unwrap().to_vec1::<f32>().unwrap(), tail.entropy.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    assert!(max_diff(&ea, &eb) < entropy_tol, "{ea:?} vs {eb:?}");
    let ln_v = (brain.arch().vocab_size as f32).ln();
    assert!(eb.iter().all(|&e| e > 0.0 && e <= ln_v + 1e-3), "{eb:?}");
    let grads = tail.logprobs.sum_all().unwrap().backward().unwrap();
    for (name, var) in all_vars(&brain) {
        let got = grads.get(var.as_tensor()).is_some();
        // The role tokens too: their keys and values are recomputed in the graph.
        let expect = name.starts_with("actor.lora.") || name == "actor.role_tokens";
        assert_eq!(got, expect, "{name}");
    }
    // The Judge on the same split.
    let jhead = brain.prompt_head(Role::Judge, &prompt[..prompt.len() - 4]).unwrap();
    let tail_logit = brain.judge_tail_logit(&jhead, &prompt[prompt.len() - 4..]).unwrap().to_scalar::<f32>().unwrap();
    let full_logit = brain.judge_logits(&[prompt.clone()]).unwrap().to_vec1::<f32>().unwrap()[0];
    let judge_p = |l: f32| 1.0 / (1.0 + (-l).exp());
    agree(&[judge_p(tail_logit).ln()], &[judge_p(full_logit).ln()], "Judge");
    assert!(brain.judge_tail_logit(&head, &prompt[..1]).is_err(), "an Actor head cannot feed the Judge");
}

#[test]
fn prompt_head_and_tail_match_the_full_path_on_dense_weights() {
    let Some(brain) = smol(ModelConfig { learner_weights: LearnerWeights::Dense, ..Default::default() }) else { return };
    assert!(!brain.learns_on_sampler_weights());
    check_prompt_head_and_tail(&brain, &|a, b, what| assert!(max_diff(a, b) < 1e-3, "{what}: {a:?} vs {b:?}"), 1e-2);
}

#[test]
fn prompt_head_and_tail_match_the_full_path_on_the_samplers_weights() {
    let Some(brain) = smol(ModelConfig::default()) else { return };
    // Probabilities within 0.05 of each other: a wrong position, mask or role token moves
    // them by far more (the continuation's tokens go from likely to unlikely).
    let agree = |a: &[f32], b: &[f32], what: &str| {
        let gap = a.iter().zip(b).map(|(x, y)| (x.exp() - y.exp()).abs()).fold(0f32, f32::max);
        eprintln!("{what}: largest probability gap {gap}");
        assert!(gap < 0.05, "{what}: {a:?} vs {b:?}");
    };
    // Entropies over SmolLM2's 49,152 tokens carry the 8-bit rounding of every logit: their
    // gap was 0.086 here, and 0.20 once the MLP's sigmoid took its exponential from our
    // vectorized e^x instead of libm's (the same function in both paths, a different
    // realization of the rounding). A wrong position or mask moves the probabilities above.
    check_prompt_head_and_tail(&brain, &agree, 0.25);
}

/// A prompt head is computed in chunks of columns, as prefill is (a long head at once would
/// hold its length squared in attention scores per head): a head run 7 positions at a time
/// holds the same keys and values as one run at once.
#[test]
fn a_prompt_head_in_chunks_matches_one_at_once() {
    let Some(brain) = smol(ModelConfig { learner_weights: LearnerWeights::Dense, ..Default::default() }) else { return };
    perturb_adapters(&brain, 0.01);
    let prompt = brain.encode(&brain.chat_prompt(SYSTEM, QUESTION)).unwrap();
    assert!(prompt.len() > 3 * 7, "{}", prompt.len());
    let cont = brain.encode("Paris is the capital.").unwrap();
    let head = &prompt[..prompt.len() - 1];
    let logprobs = |columns| {
        let h = brain.extend_prompt_head_in_chunks(Role::Actor, head, None, columns).unwrap();
        let lp = brain.tail_logprobs(&h, &prompt[prompt.len() - 1..], &cont).unwrap();
        lp.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    };
    let (chunked, whole) = (logprobs(Some(7)), logprobs(Some(usize::MAX)));
    assert!(max_diff(&chunked, &whole) < 1e-4, "{chunked:?} vs {whole:?}");
    assert_eq!(logprobs(None), whole, "a short head is one chunk");
}

/// The heads a training step's rollouts keep: the learner reads the keys and values the
/// sampler prefilled (from a padded batch of prompts of different lengths, in f16) and gets
/// the log-probabilities of a head it computes itself; a head serves every lookup under the
/// parameters it was computed with (a PPO update's scoring pass and first minibatch), and a
/// lookup under other parameters drops it. `agree` is the bar for the log-probabilities.
fn check_kept_prompt_heads(mut brain: Brain, agree: &dyn Fn(&[f32], &[f32])) {
    perturb_adapters(&brain, 0.01);
    let rows = chat_rows(&brain, &[QUESTION, "Which river flows through Cairo, and into which sea?"]);
    assert_ne!(rows[0].len(), rows[1].len(), "rows of different lengths: a padded batch");
    let greedy = vec![SamplingConfig::greedy(6); 2];
    brain.keep_prompt_heads(&[Role::Actor]);
    let gens = brain.generate_rows(Role::Actor, &rows, &greedy).unwrap();
    brain.keep_prompt_heads(&[]);
    assert!(brain.kept_prompt_head_bytes() > 0, "nothing kept");
    for (row, g) in rows.iter().zip(&gens) {
        let (head, tail) = row.split_at(row.len() - 1);
        let before = brain.kept_prompt_head_bytes();
        let read = brain.extend_prompt_head(Role::Actor, head, None).unwrap();
        assert!(read.was_kept(), "the kept head was not read");
        let again = brain.extend_prompt_head(Role::Actor, head, None).unwrap();
        assert!(again.was_kept(), "a kept head serves every lookup under its parameters");
        assert_eq!(brain.kept_prompt_head_bytes(), before);
        let computed = brain.extend_prompt_head_in_chunks(Role::Actor, head, None, None).unwrap();
        assert!(!computed.was_kept());
        let lp = |h| brain.tail_logprobs(h, tail, &g.tokens).unwrap().logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(lp(&read), lp(&again));
        agree(&lp(&read), &lp(&computed));
    }
    // Under other parameters (a step since): not read, and dropped.
    let kept = brain.kept_prompt_head_bytes();
    assert!(kept > 0);
    perturb_adapters(&brain, 0.02);
    let head = &rows[0][..rows[0].len() - 1];
    assert!(!brain.extend_prompt_head(Role::Actor, head, None).unwrap().was_kept(), "a head of old parameters was read");
    assert!(brain.kept_prompt_head_bytes() < kept, "a head of old parameters stays held");
    // Turned off, generation keeps nothing; the prompt caches' clear drops what is kept.
    let left = brain.kept_prompt_head_bytes();
    brain.generate_rows(Role::Actor, &rows[1..], &greedy[..1]).unwrap();
    assert_eq!(brain.kept_prompt_head_bytes(), left);
    brain.clear_prefix_cache();
    assert_eq!(brain.kept_prompt_head_bytes(), 0);
}

/// Each question as the token ids of a chat prompt under [`SYSTEM`].
fn chat_rows(brain: &Brain, questions: &[&str]) -> Vec<Vec<u32>> {
    questions.iter().map(|q| brain.encode(&brain.chat_prompt(SYSTEM, q)).unwrap()).collect()
}

/// An update frees generation's cached prompt prefixes before its forward passes: that
/// forgets the prefixes alone, and the heads the rollouts kept are still there and still read.
#[test]
fn forgetting_prompt_prefixes_keeps_the_kept_heads() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let rows = chat_rows(&brain, &[QUESTION, "Which river flows through Cairo, and into which sea?"]);
    brain.keep_prompt_heads(&[Role::Actor]);
    brain.generate_rows(Role::Actor, &rows, &vec![SamplingConfig::greedy(4); 2]).unwrap();
    brain.keep_prompt_heads(&[]);
    let kept = brain.kept_prompt_head_bytes();
    assert!(kept > 0, "nothing kept");
    assert!(brain.cached_prefix_bytes() > 0, "generation cached no prompt prefix");
    brain.forget_prompt_prefixes();
    assert_eq!(brain.cached_prefix_bytes(), 0, "the prefixes are still held");
    assert_eq!(brain.kept_prompt_head_bytes(), kept, "a kept head went with the prefixes");
    let head = &rows[0][..rows[0].len() - 1];
    assert!(brain.extend_prompt_head(Role::Actor, head, None).unwrap().was_kept(), "the kept head is no longer read");
}

/// On dense weights generation's arithmetic is exact: a kept head differs from a computed
/// one by its f16 rounding alone. A wrong slot (padding kept, a position dropped, another
/// row's keys) moves the log-probabilities by far more.
#[test]
fn kept_prompt_heads_on_dense_weights_give_the_computed_heads_log_probabilities() {
    let cfg = ModelConfig { train_backbone: true, prefix_cache_entries: 0, ..Default::default() };
    let Some(brain) = smol(cfg) else { return };
    check_kept_prompt_heads(brain, &|a, b| {
        eprintln!("dense: {a:?} vs {b:?}");
        assert!(max_diff(a, b) < 5e-3, "kept vs computed head: {a:?} vs {b:?}");
    });
}

/// On the sampler's tiles every product rounds its input to 8 bits, so any change of the
/// arithmetic (a batch's split, f16 keys) can move a value across a rounding step, and the
/// step grows through 30 layers: the bar is the distribution, as for a prompt head computed
/// in another split (`prompt_head_and_tail_match_the_full_path_on_the_samplers_weights`).
/// On the VNNI kernel the largest gap is 0.07 (0.05 with f32 keys); the dense test above
/// is the exact one.
#[test]
fn kept_prompt_heads_on_the_samplers_weights_give_the_computed_heads_distribution() {
    let Some(brain) = smol(ModelConfig::default()) else { return };
    if !brain.learns_on_sampler_weights() {
        eprintln!("SKIPPED: the learner does not run the sampler's weights here");
        return;
    }
    check_kept_prompt_heads(brain, &|a, b| {
        let gap = a.iter().zip(b).map(|(x, y)| (x.exp() - y.exp()).abs()).fold(0f32, f32::max);
        eprintln!("tiles: largest probability gap {gap}");
        assert!(gap < 0.15, "kept vs computed head: {a:?} vs {b:?}");
    });
}

/// Recomputing each block in the backward (`recompute-blocks`) gives the same
/// log-probabilities bit for bit as the plain graph, and the same gradient in every adapter and
/// in the role tokens (whose keys and values enter each block from the front of the cache), up
/// to the order its sums are added.
#[test]
fn recomputed_blocks_give_the_plain_graphs_logprobs_and_gradients() {
    let cfg = |recompute_blocks| ModelConfig {
        lora_rank: Some(8),
        lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]),
        recompute_blocks,
        ..Default::default()
    };
    let (Some(plain), Some(recomputed)) = (smol(cfg(RecomputeBlocks::Never)), smol(cfg(RecomputeBlocks::Always))) else { return };
    perturb_adapters(&plain, 0.01);
    perturb_adapters(&recomputed, 0.01);
    let prompt = plain.encode(&plain.chat_prompt(SYSTEM, QUESTION)).unwrap();
    let cont = plain.encode("Paris is the capital of France.").unwrap();
    let split = prompt.len() - 1;
    let run = |brain: &Brain| {
        let head = brain.prompt_head(Role::Actor, &prompt[..split]).unwrap();
        let lp = brain.tail_logprobs(&head, &prompt[split..], &cont).unwrap();
        let values = lp.logprobs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        // A loss that weighs positions differently, as an advantage does.
        let w: Vec<f32> = (0..values.len()).map(|i| 1.0 - 0.3 * i as f32).collect();
        let w = Tensor::new(w.as_slice(), lp.logprobs.device()).unwrap().reshape(lp.logprobs.shape()).unwrap();
        let grads = (&lp.logprobs * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let per_var: Vec<(String, Vec<f32>)> = all_vars(brain)
            .into_iter()
            .filter_map(|(name, var)| {
                let g = grads.get(var.as_tensor())?;
                Some((name, g.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
            })
            .collect();
        (values, per_var)
    };
    let (want_lp, want_grads) = run(&plain);
    let (got_lp, got_grads) = run(&recomputed);
    assert_eq!(got_lp, want_lp, "log-probabilities, bit for bit");
    let names = |g: &[(String, Vec<f32>)]| g.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got_grads), names(&want_grads));
    assert!(want_grads.len() > 4 * 30, "every layer's q and v adapters: {:?}", names(&want_grads));
    assert!(want_grads.iter().any(|(n, _)| n == "actor.role_tokens"), "{:?}", names(&want_grads));
    for ((name, got), (_, want)) in got_grads.iter().zip(&want_grads) {
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.0, "{name} has a gradient");
        assert!(max_diff(got, want) <= 1e-4 * scale, "{name}: {} against a largest {scale}", max_diff(got, want));
    }
}

/// The learner's Wᵀ copies can be freed between updates (`free-transposed`): the
/// bytes come back, and the next backward builds them again to the same gradient, bit for bit.
#[test]
fn freed_transposes_are_rebuilt_to_the_same_gradient() {
    let cfg = ModelConfig { lora_rank: Some(8), lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]), ..Default::default() };
    let Some(brain) = smol(cfg) else { return };
    if !brain.learns_on_sampler_weights() {
        eprintln!("SKIPPED: this CPU runs candle's quantized blocks, whose Wᵀ copies are not ours to free");
        return;
    }
    perturb_adapters(&brain, 0.01);
    brain.prepare_training().unwrap();
    let kept = brain.transposed_bytes();
    assert!(kept > 0, "prepare_training builds every block's Wᵀ");
    let prompt = brain.encode(&brain.chat_prompt(SYSTEM, QUESTION)).unwrap();
    let cont = brain.encode("Paris.").unwrap();
    let grads = |brain: &Brain| {
        let lp = brain.batch_logprobs(Role::Actor, &[(prompt.clone(), cont.clone())]).unwrap();
        let store = lp.logprobs.sum_all().unwrap().backward().unwrap();
        all_vars(brain)
            .into_iter()
            .filter_map(|(name, var)| Some((name, store.get(var.as_tensor())?.flatten_all().unwrap().to_vec1::<f32>().unwrap())))
            .collect::<Vec<_>>()
    };
    let before = grads(&brain);
    assert!(!before.is_empty());
    // The backward may add the output matrix's (built where a position needs the whole row).
    let held = brain.transposed_bytes();
    assert!(held >= kept);
    assert_eq!(brain.forget_transposed(), held, "every kept byte is freed");
    assert_eq!(brain.transposed_bytes(), 0);
    assert_eq!(grads(&brain), before, "rebuilt, the same gradient");
    assert_eq!(brain.transposed_bytes(), held, "the backward built them again");
    brain.forget_transposed();
    brain.prepare_training().unwrap();
    assert_eq!(brain.transposed_bytes(), kept, "and so does the next update's preparation");
}

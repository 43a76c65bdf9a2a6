//! Batched rows on SmolLM2-135M: a row decoded inside a batch gives what it gives
//! alone (its own seed, sampling config and constraint; forced tokens fed one per step at
//! batch > 1), the recorded log-probabilities are those of the distribution sampled from,
//! and the batched Judge scores as the single one does. Skips when the test model is absent.
//!
//! Where a row's arithmetic in the batch is its batch-1 arithmetic (rows of one prompt, no
//! padding, no forced tokens: every product and the decode attention are per row), the
//! quantized path must agree bit for bit. Elsewhere (left padding, chunked prefill, forced
//! tokens fed in one pass at batch 1 and one per step in a batch) only the last bits of the
//! f32 arithmetic differ, but the quantized path rounds every activation to 8 bits before
//! each product, which turns such differences into logit changes of up to a unit or two (see
//! brain.rs's `batched_generation_matches_one_at_a_time`); those comparisons run on dense
//! weights, where the same differences stay below 1e-3.

use std::path::Path;
use std::time::Instant;

use rand::{rngs::StdRng, SeedableRng};

mod common;
use common::{seeded_normal, DOMAIN, PRIMER};

use onebrain_model::{
    resolve_model, Brain, ConstraintSpec, Generation, GrammarLimits, ModelConfig, Role, SamplingConfig, StopReason,
    TEST_MODEL_FILE,
};

/// BlocksWorld with long, distinct predicate names: once an answer has written the first
/// piece of one, the grammar forces the rest (plain BlocksWorld forces nothing; Logistics'
/// long names forced 90 of 385 tokens in `onebrain bench constraint`).
const LONG_DOMAIN: &str = "(define (domain blocksworld)
  (:requirements :strips)
  (:predicates (nothing-on-top ?x) (resting-on-table ?x) (gripper-is-empty) (currently-holding ?x) (stacked-upon ?x ?y))
  (:action pick-up :parameters (?x)
    :precondition (and (nothing-on-top ?x) (resting-on-table ?x) (gripper-is-empty))
    :effect (and (currently-holding ?x) (not (nothing-on-top ?x)) (not (resting-on-table ?x)) (not (gripper-is-empty))))
  (:action stack :parameters (?x ?y)
    :precondition (and (currently-holding ?x) (nothing-on-top ?y))
    :effect (and (not (currently-holding ?x)) (not (nothing-on-top ?y)) (nothing-on-top ?x) (gripper-is-empty) (stacked-upon ?x ?y))))";

fn smol(cfg: ModelConfig) -> Option<Brain> {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    Some(Brain::load(&ModelConfig { path: TEST_MODEL_FILE.into(), ..cfg }).expect("load SmolLM2"))
}

/// A problem-mode prompt for a task; tasks differ in length, so a batch of them is padded.
fn task_prompt(brain: &Brain, task: &str) -> Vec<u32> {
    domain_prompt(brain, DOMAIN, task)
}

fn domain_prompt(brain: &Brain, domain: &str, task: &str) -> Vec<u32> {
    let user = format!("## Domain PDDL\n```pddl\n{domain}\n```\n## Task\n{task}\n## Instruction\nWrite the PDDL problem.");
    brain.encode(&format!("{}{PRIMER}", brain.chat_prompt("You write PDDL.", &user))).unwrap()
}

const TASKS: [&str; 3] = [
    "Blocks a, b and c are on the table and clear; the hand is empty. Stack a on b and b on c.",
    "Block a is on b; b and c are on the table. Put c on a.",
    "Four blocks a, b, c and d lie on the table, all clear, and the hand is empty. Build the tower a on b on c on d, a at the top.",
];

/// Quantized weights (the generation path of every run).
fn quantized() -> Option<Brain> {
    smol(ModelConfig { prefix_cache_entries: 0, ..Default::default() })
}

/// Dense f32 weights (a trainable backbone): batching moves logits by rounding only.
fn dense() -> Option<Brain> {
    smol(ModelConfig { train_backbone: true, prefix_cache_entries: 0, ..Default::default() })
}

fn spec() -> ConstraintSpec {
    domain_spec(DOMAIN)
}

fn domain_spec(domain: &str) -> ConstraintSpec {
    ConstraintSpec::Problem { domain: domain.into(), prefix: PRIMER.into(), limits: GrammarLimits::default(), avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] }
}

fn constrained(temperature: f32, seed: u64, max_tokens: usize) -> SamplingConfig {
    SamplingConfig { temperature, top_p: 1.0, seed, max_tokens, constraint: Some(spec()), ..Default::default() }
}

/// [`constrained`] under [`LONG_DOMAIN`], whose answers have forced tokens.
fn forcing(temperature: f32, seed: u64, max_tokens: usize) -> SamplingConfig {
    SamplingConfig { constraint: Some(domain_spec(LONG_DOMAIN)), ..constrained(temperature, seed, max_tokens) }
}

/// Gives every LoRA B a small random value, as after some training (fresh adapters are
/// skipped entirely, and then the batched LoRA products would go untested).
fn perturb_adapters(brain: &Brain) {
    let mut rng = StdRng::seed_from_u64(7);
    let data = brain.trainable().data().lock().unwrap();
    let mut vars: Vec<_> = data.iter().collect();
    vars.sort_by(|a, b| a.0.cmp(b.0));
    for (name, var) in vars {
        if name.ends_with(".b") && name.contains(".lora.") {
            var.set(&seeded_normal(&mut rng, 0.02, var.dims())).unwrap();
        }
    }
}

/// Compares a batch row with the same row alone: the same tokens, stop reason and forced
/// count, and log-probabilities within `tol`. Returns the largest log-probability gap.
fn same_row(what: &str, batched: &Generation, alone: &Generation, tol: f32) -> f32 {
    assert_eq!(batched.tokens, alone.tokens, "{what}: tokens differ\nbatched: {:?}\nalone:   {:?}", batched.text, alone.text);
    assert_eq!(batched.text, alone.text, "{what}");
    assert_eq!(batched.stop_reason, alone.stop_reason, "{what}");
    assert_eq!(batched.logprobs.len(), batched.tokens.len(), "{what}");
    assert_eq!(
        batched.constraint.as_ref().map(|c| c.forced),
        alone.constraint.as_ref().map(|c| c.forced),
        "{what}: forced tokens"
    );
    let gap = batched.logprobs.iter().zip(&alone.logprobs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(gap <= tol, "{what}: log-probabilities differ by {gap}");
    gap
}

/// The text of a constrained answer parses as a problem over the domain.
fn assert_valid_problem(g: &Generation) {
    let text = format!("{}{}", PRIMER.trim_start_matches("```pddl\n"), g.text);
    onebrain_pddl::parse_problem(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(g.stop_reason, StopReason::Complete, "{text}");
}

#[test]
fn a_group_without_forced_tokens_decodes_bit_for_bit_as_at_batch_1() {
    // A group: one prompt, seeds s .. s + G, at the training temperature, adapters as after
    // training. The rows share the prompt's cache rows (no padding) and feed one token per
    // step, so on the quantized path each row's arithmetic is its batch-1 arithmetic.
    let Some(mut brain) = quantized() else { return };
    perturb_adapters(&brain);
    let p = task_prompt(&brain, TASKS[0]);
    const G: usize = 4;
    let samplings: Vec<SamplingConfig> = (0..G as u64)
        .map(|i| SamplingConfig { temperature: 0.7, top_p: 1.0, seed: 100 + i, max_tokens: 32, ..Default::default() })
        .collect();
    let batch = brain.generate_rows(Role::Actor, &vec![p.clone(); G], &samplings).unwrap();
    assert_eq!(batch.len(), G);
    assert!(batch[0].prefill_tokens < 2 * p.len(), "the shared prompt is prefilled once");
    for (i, (g, s)) in batch.iter().zip(&samplings).enumerate() {
        let alone = brain.generate_rows(Role::Actor, &[p.clone()], std::slice::from_ref(s)).unwrap().remove(0);
        assert!(!g.tokens.is_empty(), "row {i}");
        same_row(&format!("row {i}"), g, &alone, 0.0);
    }
    assert!(batch.iter().any(|g| g.tokens != batch[0].tokens), "rows sample with their own seeds");
    // `generate_tokens` is `generate_rows` with seeds s.seed + i.
    let s = SamplingConfig { temperature: 0.9, top_p: 1.0, seed: 40, max_tokens: 12, ..Default::default() };
    let wrapped = brain.generate_tokens(Role::Actor, &[p.clone(), p.clone()], &s).unwrap();
    for (i, g) in wrapped.iter().enumerate() {
        let own = SamplingConfig { seed: 40 + i as u64, ..s.clone() };
        let alone = brain.generate_rows(Role::Actor, &[p.clone()], &[own]).unwrap().remove(0);
        assert_eq!(g.tokens, alone.tokens, "row {i} of generate_tokens samples with seed s.seed + {i}");
    }
}

#[test]
fn rows_with_their_own_prompts_and_configs_match_their_batch_1_runs() {
    // Different tasks (left padding, per-row positions and masks), a group of two (one
    // prompt, prefilled once), per-row temperature, seed, token cap, stop strings and
    // constraint, with forced tokens fed one per step: each row as alone, on dense weights.
    let Some(mut brain) = dense() else { return };
    let long = |task: &str| domain_prompt(&brain, LONG_DOMAIN, task);
    let prompts: Vec<Vec<u32>> = vec![
        long(TASKS[0]),
        long(TASKS[1]),
        task_prompt(&brain, TASKS[2]),
        task_prompt(&brain, TASKS[1]),
        long(TASKS[0]),
        long(TASKS[2]),
        long(TASKS[2]),
    ];
    let samplings = vec![
        forcing(0.7, 1, 100),
        forcing(0.0, 2, 100),
        constrained(1.2, 3, 100),
        SamplingConfig { temperature: 0.8, top_p: 1.0, seed: 4, max_tokens: 30, stop: vec!["(:init".into()], ..Default::default() },
        forcing(0.7, 5, 9),
        forcing(1.0, 6, 100),
        forcing(0.7, 7, 100),
    ];
    let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
    assert!(lens.iter().any(|&l| l != lens[0]), "the batch needs padding: {lens:?}");
    let batch = brain.generate_rows(Role::Actor, &prompts, &samplings).unwrap();
    assert_eq!(batch[4].tokens.len(), 9, "row 4's own cap");
    assert_eq!(batch[4].stop_reason, StopReason::MaxTokens);
    assert!(batch[3].constraint.is_none() && batch[0].constraint.is_some());
    let mut worst = 0f32;
    for (i, g) in batch.iter().enumerate() {
        let alone = brain.generate_rows(Role::Actor, &prompts[i..=i], &samplings[i..=i]).unwrap().remove(0);
        worst = worst.max(same_row(&format!("row {i}"), g, &alone, 1e-3));
        if samplings[i].constraint.is_some() && i != 4 {
            assert_valid_problem(g);
        }
        eprintln!("row {i}: {} tokens, {:?} forced", g.tokens.len(), g.constraint.as_ref().map(|c| c.forced));
    }
    eprintln!("dense rows: max |Δ log π| batch vs alone {worst:.2e}");
    let forced: u32 = batch.iter().filter_map(|g| g.constraint.as_ref()).map(|c| c.forced).sum();
    assert!(forced >= 5, "only {forced} forced tokens: the test needs some");
    // A bad row config fails the call before any work.
    let mut bad = samplings.clone();
    bad[2].top_p = 0.0;
    assert!(brain.generate_rows(Role::Actor, &prompts, &bad).is_err());
    assert!(brain.generate_rows(Role::Actor, &prompts, &samplings[..2]).is_err(), "one config per prompt");
}

#[test]
fn forced_tokens_at_batch_4_are_fed_without_sampling() {
    // Rows of one prompt on the quantized path: the grammar forces tokens (`(:init`, closing
    // parentheses, …); in a batch they enter one per step, without drawing from the row's
    // RNG, with log-probability 0, and the answer is grammar-valid. Up to the end of the
    // first forced run the batch-1 arithmetic is the same, so the rows agree bit for bit up
    // to there (batch 1 then feeds forced tokens in one pass, which moves later logits).
    let Some(mut brain) = quantized() else { return };
    let p = domain_prompt(&brain, LONG_DOMAIN, TASKS[2]);
    let samplings = vec![forcing(0.0, 0, 160), forcing(1.0, 7, 160), forcing(1.0, 8, 160), forcing(0.7, 9, 160)];
    let batch = brain.generate_rows(Role::Actor, &vec![p.clone(); 4], &samplings).unwrap();
    let mut total_forced = 0;
    for (i, g) in batch.iter().enumerate() {
        assert_valid_problem(g);
        let forced = g.constraint.as_ref().unwrap().forced as usize;
        total_forced += forced;
        let certain = g.logprobs.iter().filter(|&&l| l == 0.0).count();
        assert!(certain >= forced, "row {i}: {certain} zero log-probabilities for {forced} forced tokens");
        assert!(g.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0), "row {i}: {:?}", g.logprobs);
        let alone = brain.generate_rows(Role::Actor, &[p.clone()], &samplings[i..=i]).unwrap().remove(0);
        let Some(first_forced) = alone.logprobs.iter().position(|&l| l == 0.0) else {
            // Nothing forced: the same arithmetic throughout.
            same_row(&format!("row {i}"), g, &alone, 0.0);
            continue;
        };
        let run_end = first_forced + alone.logprobs[first_forced..].iter().take_while(|&&l| l == 0.0).count();
        let common = g.tokens.iter().zip(&alone.tokens).take_while(|(a, b)| a == b).count();
        assert!(common >= run_end.min(alone.tokens.len()), "row {i}: diverges at {common}, before the first forced run ends at {run_end}");
        assert_eq!(g.logprobs[..first_forced], alone.logprobs[..first_forced], "row {i}");
        let gap: f32 = g.logprobs[..common].iter().zip(&alone.logprobs[..common]).map(|(a, b)| (a - b).abs()).sum::<f32>() / common as f32;
        eprintln!(
            "row {i}: {} tokens ({forced} forced), the batch-1 run agrees on the first {common} (mean |Δ log π| there {gap:.1e}) of its {}",
            g.tokens.len(),
            alone.tokens.len()
        );
    }
    assert!(total_forced >= 4, "only {total_forced} forced tokens: the test needs some");
}

#[test]
fn recorded_logprobs_are_taken_at_the_sampling_temperature() {
    // Recompute the first few tokens' log-probabilities from the logits of the same path
    // (the prompt plus the tokens before), masked by the replayed constraint and divided by
    // T: they must match; at T = 1 they would be off by far more than the tolerance. Dense
    // weights: recomputing a position by prefill instead of decode changes rounding only.
    let Some(mut brain) = dense() else { return };
    let p = task_prompt(&brain, TASKS[0]);
    let t = 0.6f32;
    let s = constrained(t, 3, 40);
    let g = brain.generate_rows(Role::Actor, &[p.clone(), p.clone()], &[s.clone(), constrained(0.6, 4, 40)]).unwrap().remove(0);
    let masks = brain.constraint_masks(&spec(), s.max_tokens, &g.tokens).unwrap();
    let lp = |logits: &[f32], tok: u32, t: f64| -> f64 {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let z: f64 = logits.iter().map(|&l| (f64::from(l - max) / t).exp()).sum();
        f64::from(logits[tok as usize] - max) / t - z.ln()
    };
    let (mut checked, mut far_at_1) = (0, 0f64);
    for j in 0..g.tokens.len().min(12) {
        if masks[j].num_set() == 1 {
            assert_eq!(g.logprobs[j], 0.0, "token {j} was forced");
            continue;
        }
        let mut ctx = p.clone();
        ctx.extend_from_slice(&g.tokens[..j]);
        let mut logits = brain.next_token_logits(Role::Actor, &[ctx]).unwrap().remove(0);
        for (i, l) in logits.iter_mut().enumerate() {
            if !masks[j].is_allowed(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        let want = lp(&logits, g.tokens[j], f64::from(t));
        assert!((f64::from(g.logprobs[j]) - want).abs() < 2e-3, "token {j}: recorded {} vs log softmax(l / T) {want}", g.logprobs[j]);
        far_at_1 = far_at_1.max((f64::from(g.logprobs[j]) - lp(&logits, g.tokens[j], 1.0)).abs());
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} sampled tokens among the first 12");
    assert!(far_at_1 > 1e-2, "T = 0.6 and T = 1 should differ somewhere ({far_at_1})");
}

#[test]
fn the_batched_judge_scores_each_prompt_as_the_single_judge_does() {
    let Some(mut brain) = dense() else { return };
    // A head with weights large enough that scores spread over (0, 1): with the fresh head's
    // near-zero weights every score is ~0.5, and a wrong row would go unnoticed.
    {
        let data = brain.trainable().data().lock().unwrap();
        let w = data.get("judge.head.weight").expect("the Judge head");
        let mut rng = StdRng::seed_from_u64(3);
        w.set(&seeded_normal(&mut rng, 0.3, w.dims())).unwrap();
    }
    let head = brain.chat_prompt("You judge PDDL.", "## Task\nStack a on b.\n## Candidate\n");
    let short = [
        "(define (problem p) (:domain bw) (:objects a b) (:init (clear a)) (:goal (on a b)))",
        "(define (problem p))",
        "I do not know.",
        "(define (problem p))",
        "(:init (ontable a) (ontable b) (clear a) (clear b) (handempty)) (:goal (and (on a b)))",
    ];
    // Long candidates too: more positions than one forward of the batch's tails holds
    // (2,048), so the prefill runs them in chunks of columns.
    let long: Vec<String> = (0..4).map(|i| format!("{}\n; candidate {i}\n{DOMAIN}", LONG_DOMAIN.repeat(i % 2 + 1))).collect();
    let prompts: Vec<String> = short.iter().map(|c| c.to_string()).chain(long).map(|c| format!("{head}{c}")).collect();
    let longest_tail = prompts.iter().map(|p| brain.encode(p).unwrap().len()).max().unwrap() - brain.encode(&head).unwrap().len();
    assert!(prompts.len() * longest_tail > 2 * 2048, "{} padded tail positions", prompts.len() * longest_tail);
    let batch = brain.judge_batch(&prompts).unwrap();
    assert_eq!(batch.len(), prompts.len());
    for (p, b) in prompts.iter().zip(&batch) {
        let alone = brain.judge(p).unwrap();
        assert!((alone - b).abs() < 1e-3, "batched {b} vs alone {alone}");
    }
    assert_eq!(batch[1], batch[3], "a repeated prompt scores the same");
    let spread = batch.iter().fold(0f32, |m, x| m.max(*x)) - batch.iter().fold(1f32, |m, x| m.min(*x));
    assert!(spread > 0.05, "the scores must differ for the comparison to mean something: {batch:?}");
    assert!(brain.judge_batch(&[]).unwrap().is_empty());
    // The features a head fitted elsewhere reads (`judge_features`) are the ones the head
    // scores: σ(w·h + b) of each is its prompt's score.
    let tokens: Vec<Vec<u32>> = prompts.iter().map(|p| brain.encode(p).unwrap()).collect();
    let features = brain.judge_features(&tokens).unwrap();
    let (w, b) = {
        let data = brain.trainable().data().lock().unwrap();
        let w: Vec<f32> = data["judge.head.weight"].as_tensor().to_vec1().unwrap();
        let b: Vec<f32> = data["judge.head.bias"].as_tensor().to_vec1().unwrap();
        (w, b[0])
    };
    for (h, score) in features.iter().zip(&batch) {
        let z: f32 = h.iter().zip(&w).map(|(x, y)| x * y).sum::<f32>() + b;
        let from_features = 1.0 / (1.0 + (-z).exp());
        assert!((from_features - score).abs() < 1e-4, "σ(w·h + b) {from_features} vs score {score}");
    }
    assert!(brain.judge_features(&[]).unwrap().is_empty());
}

/// Wall time of 16 constrained rows (4 prompts × 4 seeds) as one batch and as 16 batch-1
/// calls. A measurement, not a check: `cargo test --release -p onebrain-model --test
/// batched_rows -- --ignored --nocapture`.
#[test]
#[ignore]
fn time_16_constrained_rows_batched_and_one_at_a_time() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let tasks = [TASKS[0], TASKS[1], TASKS[2], TASKS[0]];
    let mut prompts = Vec::new();
    let mut samplings = Vec::new();
    for (k, task) in tasks.iter().enumerate() {
        let task = format!("{task} (Task {k}.)");
        for i in 0..4 {
            prompts.push(task_prompt(&brain, &task));
            samplings.push(constrained(0.7, (10 * k + i) as u64, 160));
        }
    }
    brain.clear_prefix_cache();
    let t = Instant::now();
    let batch = brain.generate_rows(Role::Actor, &prompts, &samplings).unwrap();
    let batched = t.elapsed().as_secs_f64();
    let tokens: usize = batch.iter().map(|g| g.tokens.len()).sum();
    brain.clear_prefix_cache();
    let t = Instant::now();
    let mut single_tokens = 0;
    for (p, s) in prompts.iter().zip(&samplings) {
        single_tokens += brain.generate_rows(Role::Actor, &[p.clone()], std::slice::from_ref(s)).unwrap()[0].tokens.len();
    }
    let single = t.elapsed().as_secs_f64();
    eprintln!(
        "16 rows: batched {batched:.1} s ({tokens} tokens, {:.1} tok/s), one at a time {single:.1} s ({single_tokens} tokens, {:.1} tok/s)",
        tokens as f64 / batched,
        single_tokens as f64 / single
    );
}

/// Greedy means reproducible: a row's arithmetic may not depend on the rows beside
/// it. Six prompts of two domains and several lengths (sharing the chat template, a domain or
/// a task text with each other, and one sharing nothing but the template), each decoded
/// greedily alone, beside 2, 7 and 15 other rows (other padding, other prefix groups, other
/// orders, rows retiring at other steps), give the same next-token logits and
/// log-probabilities bit for bit and the same tokens, forced tokens and adapters included.
fn assert_greedy_rows_are_batch_invariant(mut brain: Brain) {
    perturb_adapters(&brain);
    let greedy = |constraint: Option<ConstraintSpec>, max_tokens| SamplingConfig { temperature: 0.0, max_tokens, constraint, ..Default::default() };
    let chat = |brain: &Brain, user: &str| brain.encode(&brain.chat_prompt("You answer briefly.", user)).unwrap();
    let mut prompts: Vec<Vec<u32>> = vec![
        domain_prompt(&brain, DOMAIN, TASKS[0]),
        domain_prompt(&brain, LONG_DOMAIN, TASKS[2]),
        domain_prompt(&brain, DOMAIN, TASKS[1]),
        chat(&brain, "Name three primary colors."),
        domain_prompt(&brain, LONG_DOMAIN, TASKS[0]),
        domain_prompt(&brain, DOMAIN, TASKS[2]),
    ];
    let mut samplings = vec![
        greedy(Some(spec()), 40),
        greedy(Some(domain_spec(LONG_DOMAIN)), 40),
        greedy(Some(spec()), 40),
        greedy(None, 40),
        greedy(Some(domain_spec(LONG_DOMAIN)), 40),
        greedy(Some(spec()), 40),
    ];
    let checked = prompts.len();
    // Ten neighbours of other lengths and caps (their rows retire at other steps).
    for k in 0..10 {
        let task = format!("{} (Task {k}.)", TASKS[k % 3].repeat(1 + k % 2));
        match k % 5 {
            4 => prompts.push(chat(&brain, &format!("Count to {}.", 3 + k))),
            _ => prompts.push(domain_prompt(&brain, if k % 2 == 0 { DOMAIN } else { LONG_DOMAIN }, &task)),
        }
        samplings.push(match k % 5 {
            4 => greedy(None, 12 + 3 * k),
            _ if k % 2 == 0 => greedy(Some(spec()), 12 + 3 * k),
            _ => greedy(Some(domain_spec(LONG_DOMAIN)), 12 + 3 * k),
        });
    }
    let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
    assert!(lens.iter().collect::<std::collections::BTreeSet<_>>().len() >= 12, "rows of many lengths: {lens:?}");
    let pick = |rows: &[usize]| -> (Vec<Vec<u32>>, Vec<SamplingConfig>) {
        (rows.iter().map(|&i| prompts[i].clone()).collect(), rows.iter().map(|&i| samplings[i].clone()).collect())
    };
    // Batches of 16, 8 (the checked rows in another order among two neighbours) and 3 rows.
    let batches: Vec<Vec<usize>> = vec![(0..16).collect(), vec![9, 5, 2, 14, 0, 4, 1, 3], vec![4, 0, 3]];
    let mut runs = Vec::new();
    for rows in &batches {
        let (p, s) = pick(rows);
        let logits = brain.next_token_logits(Role::Actor, &p).unwrap();
        let generated = brain.generate_rows(Role::Actor, &p, &s).unwrap();
        runs.push((rows, logits, generated));
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let mut forced = 0;
    for i in 0..checked {
        let (p, s) = pick(&[i]);
        let alone_logits = brain.next_token_logits(Role::Actor, &p).unwrap().remove(0);
        let alone = brain.generate_rows(Role::Actor, &p, &s).unwrap().remove(0);
        assert!(!alone.tokens.is_empty(), "row {i}");
        for (rows, logits, generated) in &runs {
            let Some(at) = rows.iter().position(|&r| r == i) else { continue };
            let what = format!("row {i} of {}", rows.len());
            let differ = logits[at].iter().zip(&alone_logits).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{what}: {differ} next-token logits differ from the row's alone");
            same_row(&what, &generated[at], &alone, 0.0);
            assert_eq!(bits(&generated[at].logprobs), bits(&alone.logprobs), "{what}: log-probabilities");
        }
        forced += alone.constraint.as_ref().map_or(0, |c| c.forced);
    }
    assert!(forced >= 4, "only {forced} forced tokens: the test needs some");
}

#[test]
fn greedy_rows_are_batch_invariant_on_the_samplers_weights() {
    let Some(brain) = smol(ModelConfig::test_model()) else { return };
    assert_greedy_rows_are_batch_invariant(brain);
}

#[test]
fn greedy_rows_are_batch_invariant_on_dense_weights() {
    let Some(brain) = smol(ModelConfig { train_backbone: true, ..ModelConfig::test_model() }) else { return };
    assert_greedy_rows_are_batch_invariant(brain);
}

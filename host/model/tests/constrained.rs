//! Grammar-constrained generation on SmolLM2-135M: every answer is a well-formed problem over
//! the domain's vocabulary that ends where the grammar does, and the learner's log-probabilities
//! under the replayed masks are the sampler's. Skips when the test model is absent.

use std::path::Path;

mod common;
use common::{DOMAIN, PRIMER};

use onebrain_model::{resolve_model, Brain, ConstraintSpec, GrammarLimits, ModelConfig, Role, SamplingConfig, StopReason, TEST_MODEL_FILE};

fn smol(cfg: ModelConfig) -> Option<Brain> {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    Some(Brain::load(&ModelConfig { path: TEST_MODEL_FILE.into(), ..cfg }).expect("load SmolLM2"))
}

fn prompt(brain: &Brain) -> String {
    let user = format!(
        "## Domain PDDL\n```pddl\n{DOMAIN}\n```\n## Task\nBlocks a, b and c are on the table and clear; the hand is empty. \
         Stack a on b and b on c.\n## Instruction\nWrite the PDDL problem."
    );
    format!("{}{PRIMER}", brain.chat_prompt("You write PDDL.", &user))
}

fn spec(limits: GrammarLimits) -> ConstraintSpec {
    ConstraintSpec::Problem { domain: DOMAIN.into(), prefix: PRIMER.into(), limits, avoid: vec![], forbid_goal_at_init: false, init_mutex: vec![] }
}

#[test]
fn constrained_answers_parse_use_the_domain_and_end_with_the_grammar() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let p = prompt(&brain);
    let domain = onebrain_pddl::parse_domain(DOMAIN).unwrap();
    for (temperature, seed) in [(0.0, 0), (0.7, 1), (0.7, 2), (1.2, 3)] {
        let s = SamplingConfig {
            temperature,
            top_p: 0.95,
            seed,
            max_tokens: 200,
            constraint: Some(spec(GrammarLimits::default())),
            ..Default::default()
        };
        let g = brain.generate(Role::Actor, &p, &s).unwrap();
        let text = format!("{}{}", PRIMER.trim_start_matches("```pddl\n"), g.text);
        let problem = onebrain_pddl::parse_problem(&text).unwrap_or_else(|e| panic!("T={temperature}: {e}\n{text}"));
        assert_eq!(g.stop_reason, StopReason::Complete, "T={temperature}:\n{text}");
        assert!(g.tokens.len() < 200, "no answer runs to the cap");
        // No undeclared predicate, no wrong arity, no undeclared object: by construction.
        let declared: Vec<&str> = problem.objects.iter().map(|o| o.name.as_str()).collect();
        for atom in problem.init.iter().chain(problem.goal.iter().map(|l| &l.atom)) {
            let pred = domain.predicate(&atom.predicate).unwrap_or_else(|| panic!("{} undeclared", atom.predicate));
            assert_eq!(pred.params.len(), atom.args.len(), "{text}");
            assert!(atom.args.iter().all(|a| declared.contains(&a.name.as_str())), "{text}");
        }
        let mut seen = std::collections::HashSet::new();
        assert!(problem.init.iter().all(|a| seen.insert(a.to_string())), "a repeated init fact:\n{text}");
        let stats = g.constraint.as_ref().expect("constraint stats");
        assert!(stats.masks > 0 && stats.stage_switches == 1, "{stats:?}");
        assert_eq!(g.logprobs.len(), g.tokens.len());
        eprintln!("T={temperature}: {} tokens ({} forced), mask {:.0} µs/token\n{text}", g.tokens.len(), stats.forced, stats.mask_us / f64::from(stats.masks));
    }
}

#[test]
fn the_learner_recomputes_the_samplers_constrained_logprobs() {
    // A trainable backbone makes generation and the learner run the same dense weights.
    let Some(mut brain) = smol(ModelConfig { train_backbone: true, ..Default::default() }) else { return };
    let p = prompt(&brain);
    let spec = spec(GrammarLimits::default());
    let s = SamplingConfig { temperature: 0.7, top_p: 0.95, seed: 5, max_tokens: 160, constraint: Some(spec.clone()), ..Default::default() };
    let g = brain.generate(Role::Actor, &p, &s).unwrap();
    assert!(!g.tokens.is_empty());
    let masks = brain.constraint_masks(&spec, s.max_tokens, &g.tokens).unwrap();
    assert_eq!(masks.len(), g.tokens.len());
    for (t, m) in g.tokens.iter().zip(&masks) {
        assert!(m.is_allowed(*t), "every sampled token is allowed by its replayed mask");
    }
    let prompt_ids = brain.encode(&p).unwrap();
    let items = [(prompt_ids, g.tokens.clone())];
    // The sampler records log-probabilities at its temperature; the learner takes them there.
    let lp = brain.batch_logprobs_masked(Role::Actor, &items, &[Some(&masks)], s.temperature).unwrap();
    let recomputed: Vec<f32> = lp.logprobs.squeeze(0).unwrap().to_vec1().unwrap();
    let free: Vec<f32> = brain
        .batch_logprobs_masked(Role::Actor, &items, &[], s.temperature)
        .unwrap()
        .logprobs
        .squeeze(0)
        .unwrap()
        .to_vec1()
        .unwrap();
    let mut worst = 0f32;
    for (j, (a, b)) in g.logprobs.iter().zip(&recomputed).enumerate() {
        assert!(b.is_finite() && *b > -50.0, "token {j} has probability zero under the learner's mask: {b}");
        worst = worst.max((a - b).abs());
        // Renormalising over the allowed set never lowers a token's probability.
        assert!(*b >= free[j] - 1e-3, "token {j}: masked {b} < unmasked {}", free[j]);
    }
    eprintln!("max |Δ log π| sampler vs learner: {worst:.2e}");
    assert!(worst < 2e-3, "the learner's constrained log-probabilities are the sampler's (max diff {worst})");
    // Forced tokens are certain under the constraint.
    let forced = g.constraint.as_ref().unwrap().forced;
    let certain = recomputed.iter().filter(|x| x.abs() < 1e-6).count() as u32;
    assert!(certain >= forced, "{certain} certain tokens, {forced} forced");
}

/// `full` mode on greedy SmolLM2: the answer is a domain and then a problem, ends where the
/// grammar does, and every literal of the domain's actions and every fact of the problem uses
/// a predicate the answer declared, with its arity. Before the domain guard, greedy decoding
/// filled `(:types def def def …)` until the cap and never reached the problem.
#[test]
fn a_full_answer_is_a_domain_then_a_problem_over_its_predicates() {
    let Some(mut brain) = smol(ModelConfig::default()) else { return };
    let user = "## Task\nBlocks a and b are on the table. Put a on b.\n## Instruction\nWrite the PDDL domain and problem: two ```pddl code blocks.";
    let primer = "```pddl\n(define (domain ";
    let p = format!("{}{primer}", brain.chat_prompt("You write PDDL.", user));
    let s = SamplingConfig {
        max_tokens: 1000,
        // Bounds that fit a two-block task: with the defaults (64 objects) greedy SmolLM2
        // declares `function-10xT … function-70` and has no budget left for the goal.
        constraint: Some(ConstraintSpec::Full {
            limits: GrammarLimits { max_objects: 8, max_init: 16, max_goal: 8, ..GrammarLimits::default() },
            avoid: vec![],
            forbid_goal_at_init: false,
        }),
        ..Default::default()
    };
    let g = brain.generate(Role::Actor, &p, &s).unwrap();
    let text = format!("(define (domain {}", g.text);
    // The domain is the first balanced form; the grammar allows any case and spacing, so a
    // search for `(define` would miss `(\n\ndefiNe` (found in CI).
    let split = first_form_end(&text).unwrap_or_else(|| panic!("the domain never closes:\n{text}"));
    let domain_text = &text[..split];
    let problem_at = split + text[split..].find('(').unwrap_or_else(|| panic!("no problem after the domain:\n{text}"));
    let domain = onebrain_pddl::parse_domain(domain_text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let problem = onebrain_pddl::parse_problem(&text[problem_at..]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for a in &domain.actions {
        for l in a.precondition.iter().chain(&a.effect) {
            let pred = domain.predicate(&l.atom.predicate).unwrap_or_else(|| panic!("{} is not declared:\n{text}", l.atom.predicate));
            assert_eq!(pred.params.len(), l.atom.args.len(), "{text}");
            for t in l.atom.args.iter().filter(|t| t.name.starts_with('?')) {
                assert!(a.params.iter().any(|p| p.name.eq_ignore_ascii_case(&t.name)), "{} is not a parameter of {}:\n{text}", t.name, a.name);
            }
        }
    }
    for atom in problem.init.iter().chain(problem.goal.iter().map(|l| &l.atom)) {
        let pred = domain.predicate(&atom.predicate).unwrap_or_else(|| panic!("{} is not in the answer's domain:\n{text}", atom.predicate));
        assert_eq!(pred.params.len(), atom.args.len(), "{text}");
    }
    assert_eq!(g.stop_reason, StopReason::Complete, "{text}");
    eprintln!("{} tokens, {:?}\n{text}", g.tokens.len(), g.constraint);
}

/// The end of `text`'s first balanced parenthesised form (PDDL `;` comments skipped).
fn first_form_end(text: &str) -> Option<usize> {
    let (mut depth, mut comment) = (0usize, false);
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'\n' => comment = false,
            _ if comment => {}
            b';' => comment = true,
            b'(' => depth += 1,
            b')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

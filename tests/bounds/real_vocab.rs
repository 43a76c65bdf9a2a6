//! llguidance's limits (`onebrain_grammar::parser_limits`) hold with the models' real
//! vocabularies, not only with the byte vocabulary of `host/grammar/tests/bounds.rs`: a token
//! mask over Qwen's 151,936 tokens walks a much larger trie. The grammars over reference
//! problems and domains, read token by token as the model's tokenizer splits them, need at
//! most a tenth of each limit. Skipped, with a message, for a model file that is absent
//! (`scripts/setup.sh --models test` fetches SmolLM2, `--models default` the 1.5B, `--models all`
//! the 0.5B too).

use std::path::{Path, PathBuf};

use onebrain_grammar::{domain_file, parser_limits, problem_file, Limits, Objects, ParserFigures, Vocabulary};
use onebrain_model::{Brain, ModelConfig, DEFAULT_MODEL_FILE, QUICK_MODEL_FILE, TEST_MODEL_FILE};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (domain, problem) pairs: the fixtures, and PlanBench's largest Logistics instance where the
/// benchmark data is present.
fn specs() -> Vec<(String, String)> {
    // Comments dropped: the problem grammars, like a model's answer, have none.
    let read = |p: PathBuf| {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        text.lines().map(|l| l.split(';').next().unwrap_or("")).collect::<Vec<_>>().join("\n")
    };
    let f = |n: &str| repo().join("tests/fixtures").join(n);
    let mut out = vec![
        (read(f("blocks-domain.pddl")), read(f("blocks-problem-hard.pddl"))),
        (read(f("gripper-domain.pddl")), read(f("gripper-problem.pddl"))),
    ];
    let logistics = repo().join("../shared/data/planbench/logistics");
    if logistics.is_dir() {
        let mut problems: Vec<PathBuf> = std::fs::read_dir(logistics.join("instances")).unwrap().flatten().map(|e| e.path()).collect();
        problems.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));
        out.push((read(logistics.join("domain.pddl")), read(problems[0].clone())));
    } else {
        eprintln!("skipping PlanBench Logistics: ../shared/data is absent");
    }
    out
}

#[test]
fn grammars_need_a_tenth_of_llguidances_limits_with_real_vocabularies() {
    let limits = parser_limits();
    for file in [TEST_MODEL_FILE, DEFAULT_MODEL_FILE, QUICK_MODEL_FILE] {
        let path = repo().join(".cache/models").join(file);
        if !path.is_file() {
            eprintln!("skipping {file}: absent (scripts/setup.sh)");
            continue;
        }
        let brain = Brain::load(&ModelConfig { path, ..ModelConfig::default() }).expect("the model loads");
        let env = brain.token_env().unwrap();
        let mut most = ParserFigures::default();
        for (domain, problem) in specs() {
            let d = onebrain_pddl::parse_domain(&domain).unwrap();
            let v = Vocabulary::of(&d);
            let objects: Vec<(String, String)> = onebrain_pddl::parse_problem(&problem)
                .unwrap()
                .objects
                .iter()
                .map(|o| (o.name.to_ascii_lowercase(), o.ty.to_ascii_lowercase()))
                .collect();
            let grammars = [
                (problem_file(&v, &Objects::Unknown, &Limits::default()), problem.trim()),
                (problem_file(&v, &Objects::Declared(&objects), &Limits::default()), problem.trim()),
                (domain_file(), domain.trim()),
            ];
            for (lark, text) in grammars {
                let f = env.figures(&lark, text).unwrap_or_else(|e| panic!("{file}: {e}"));
                most.step_items = most.step_items.max(f.step_items);
                most.step_lexer_fuel = most.step_lexer_fuel.max(f.step_lexer_fuel);
                most.lexer_states = most.lexer_states.max(f.lexer_states);
            }
        }
        eprintln!("{file}: the most any grammar needed: {most:?}");
        assert!(most.step_items * 10 <= limits.step_max_items, "{file}: {most:?}");
        assert!(most.step_lexer_fuel * 10 <= limits.step_lexer_fuel, "{file}: {most:?}");
        assert!(most.lexer_states * 10 <= limits.max_lexer_states, "{file}: {most:?}");
    }
}

//! The Editor told what disagrees with the text. With a diagnostic reviewer (the
//! `text-diagnostics` plugin, through the real plugin host), what it finds in an unsolved
//! spec reaches the Editor's prompt beside the verifier's own diagnostics; without one, the
//! prompt is what it was. A reviewer that traps, hangs or answers garbage leaves a warning
//! naming it, and every episode still runs to its last repair.

use std::sync::Arc;

use onebrain_core::{Category, DiagnosticParser, Diagnostic, Outcome, Spec, Task, Verdict, Verifier};
use onebrain_roles::{
    episode_input, run_episode, run_pipelined, Episode, EpisodeConfig, EpisodeInput, EpisodeRecord, Finalizer,
    Mode, Role, Strategy,
};
use onebrain_runtime::{
    HostOptions, InstancePolicy, Limits, PluginHost, PluginManifest, PluginRegistry, WasmDiagnosticParser,
    WasmDomainAdapter, World,
};
use onebrain_verifier::{ReviewedVerifier, VerifierPool};

mod common;
use common::{build, root, FixedAnswer};

/// Writes the rest of PlanBench BlocksWorld instance 2's problem as the 1.5B often does:
/// the table declared as a block, `(on b table)` for `(ontable b)`.
fn table_as_block() -> FixedAnswer {
    FixedAnswer {
        name: "table-as-block",
        text: "a b c d table)\n  (:init (handempty) (on a b) (on b table) (ontable c) (on d c) (clear a) (clear d))\n  (:goal (and (on c a))))\n```",
        judge: 0.5,
    }
}

/// The planner's side: never solved, one error of its own.
struct Unsolvable;

impl Verifier for Unsolvable {
    fn verify(&self, _: &Spec) -> Verdict {
        Verdict::new(Outcome::Unsolvable, vec![], vec![Diagnostic::error(Category::Unreachable, "the goal is unreachable")])
    }
}

struct Plugins {
    host: PluginHost,
    registry: PluginRegistry,
}

impl Plugins {
    fn new(limits: Limits) -> Plugins {
        build();
        let host = PluginHost::new(HostOptions { limits, ..HostOptions::default() }).unwrap();
        let registry = PluginRegistry::discover(&[root().join("plugins")]).unwrap();
        Plugins { host, registry }
    }

    fn domain(&self) -> WasmDomainAdapter {
        let blocksworld = self.host.load(self.registry.get("blocksworld").unwrap()).unwrap();
        WasmDomainAdapter::new(&blocksworld, InstancePolicy::Reuse).unwrap()
    }

    fn reviewer(&self, manifest: &PluginManifest) -> Arc<dyn DiagnosticParser> {
        Arc::new(WasmDiagnosticParser::reviewer(&self.host.load(manifest).unwrap(), InstancePolicy::Reuse).unwrap())
    }
}

/// PlanBench BlocksWorld instance 2's statement, read in place; `None` without the data.
fn planbench_instance_2() -> Option<String> {
    let path = root().join("../shared/data/planbench/blocksworld/nl_tasks_blocksworld.jsonl");
    let Ok(rows) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: benchmark data not found at {}", path.display());
        return None;
    };
    let row: serde_json::Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
    assert_eq!(row["instance_id"], 2);
    Some(row["nl_statement"].as_str().unwrap().to_string())
}

fn input(domain: &WasmDomainAdapter, text: &str) -> EpisodeInput {
    let task = Task { id: "planbench/blocksworld/2".into(), domain: "blocksworld".into(), text: text.into(), reference: None };
    episode_input(domain, task).unwrap()
}

fn config() -> EpisodeConfig {
    EpisodeConfig { strategy: Strategy::MultiRole, mode: Mode::Problem, max_repairs: 2, budget: 3, ..Default::default() }
}

fn editor_prompts(rec: &EpisodeRecord) -> Vec<&str> {
    rec.steps.iter().filter(|s| s.role == Role::Editor).map(|s| s.prompt.as_str()).collect()
}

#[test]
fn the_editor_reads_what_disagrees_with_a_real_blocksworld_text() {
    let Some(text) = planbench_instance_2() else { return };
    let plugins = Plugins::new(Limits::default());
    let domain = plugins.domain();
    let cfg = config();
    let reviewer = plugins.reviewer(plugins.registry.get("text-diagnostics").unwrap());
    let reviewed = ReviewedVerifier::new(Arc::new(Unsolvable), vec![reviewer]);
    let run = |verifier: &dyn Verifier| {
        let episode = Episode::new(input(&domain, &text), &cfg, "table-as-block");
        run_episode(episode, &cfg, &mut table_as_block(), verifier, &Finalizer::default(), &mut |_| {})
    };

    let rec = run(&reviewed);
    assert_eq!((rec.solved, rec.repairs), (false, 2), "{rec:?}");
    let first = rec.steps[0].verdict.as_ref().unwrap();
    let messages: Vec<&str> = first.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "the goal is unreachable",
            "object \"table\" is not named in the task text",
            "the text states (ontable b), the problem does not",
        ]
    );
    // The Editor sees them as it sees the planner's: category, position, message.
    let (line, column) = (first.diagnostics[1].line.unwrap(), first.diagnostics[1].column.unwrap());
    for prompt in editor_prompts(&rec) {
        assert!(prompt.contains("- [unreachable] : the goal is unreachable"), "{prompt}");
        let table = format!("- [object-type] problem line {line}, column {column}: object \"table\" is not named in the task text");
        assert!(prompt.contains(&table), "{prompt}");
        assert!(prompt.contains("- [goal-constraint] : the text states (ontable b), the problem does not"), "{prompt}");
    }
    // The verdict is the planner's still.
    assert!(rec.steps.iter().filter_map(|s| s.verdict.as_ref()).all(|v| v.outcome == Outcome::Unsolvable));

    // Without a reviewer (a config that lists none): the planner's diagnostics alone.
    let plain = run(&Unsolvable);
    let diags = &plain.steps[0].verdict.as_ref().unwrap().diagnostics;
    assert_eq!(diags.len(), 1);
    for prompt in editor_prompts(&plain) {
        assert!(!prompt.contains("task text") && !prompt.contains("the text states"), "{prompt}");
    }
}

/// `hostile-parser`'s review misbehaves as its task text says; here, in the pipelined driver
/// that eval and training run, with a short wall clock for the one that never returns.
#[test]
fn a_reviewer_that_traps_hangs_or_answers_garbage_leaves_a_warning_and_the_episodes_run_on() {
    let plugins = Plugins::new(Limits { timeout_ms: 300, ..Limits::default() });
    let domain = plugins.domain();
    let cfg = config();
    let wasm = root().join("guests/target/wasm32-wasip2/release/hostile_parser.wasm");
    let hostile = plugins.reviewer(&PluginManifest::for_component(&wasm, World::DiagnosticParser));
    let pool = VerifierPool::new(Arc::new(ReviewedVerifier::new(Arc::new(Unsolvable), vec![hostile])), 1);
    let commands = ["trap", "loop", "flood", "blank", "ansi"];
    let episodes: Vec<Episode> = commands.iter().map(|c| Episode::new(input(&domain, c), &cfg, "table-as-block")).collect();
    let mut records: Vec<EpisodeRecord> = Vec::new();
    run_pipelined(episodes, &cfg, &mut table_as_block(), &pool, &Finalizer::default(), 2, &mut |_| {}, &mut |r| {
        records.push(r);
        Ok::<(), ()>(())
    })
    .unwrap();

    assert_eq!(records.len(), commands.len(), "every episode is recorded");
    for r in &records {
        let command = r.task_text.as_str();
        assert_eq!((r.repairs, r.error.as_deref()), (2, None), "{command}: every repair ran, no episode error");
        for step in r.steps.iter().filter_map(|s| s.verdict.as_ref()) {
            assert_eq!(step.outcome, Outcome::Unsolvable, "{command}");
            let review = step.diagnostics.last().unwrap();
            let expected = match command {
                "trap" => "diagnostic reviewer plugin failed, its review skipped: plugin hostile_parser@0.0.0 trapped",
                "loop" => "diagnostic reviewer plugin failed, its review skipped: plugin hostile_parser@0.0.0 timed out",
                "flood" => "returned an invalid value: 1000 diagnostics from one review, more than the 16",
                "blank" => "returned an invalid value: review diagnostic 2 of 2 has an empty message",
                _ => "\\u{1b}[2J\\u{1b}[Hsolved: true\\n",
            };
            assert!(review.message.contains(expected), "{command}: {}", review.message);
            assert!(!review.message.contains('\x1b') && !review.message.contains('\n'), "{command}: {:?}", review.message);
        }
        // The Editor reads the failure as a warning, after the planner's error.
        for prompt in editor_prompts(r) {
            assert!(prompt.contains("- [unreachable] : the goal is unreachable\n- ["), "{command}: {prompt}");
        }
    }
    let trap = records.iter().find(|r| r.task_text == "trap").unwrap();
    let message = &trap.steps[0].verdict.as_ref().unwrap().diagnostics[1].message;
    assert!(message.contains("review trapped on purpose"), "the guest's panic message is kept: {message}");
}

/// The config switch: `diagnostic-reviewers = ["text-diagnostics"]` in `[plugins]` puts the
/// review into the verifier `Services::load` builds, the one `solve`, `eval` and `train` use;
/// without the line (as in most shipped configs) the verdict is the verifier's alone. The
/// spec is one the native checks reject (an undeclared object), so Fast Downward is not run.
#[test]
fn one_config_line_turns_the_review_on() {
    use onebrain_roles::{SolveConfig, Services};
    let Some(text) = planbench_instance_2() else { return };
    if !root().join(".venv").is_dir() && std::env::var_os("ONEBRAIN_FAST_DOWNWARD").is_none() {
        eprintln!("skipping: Fast Downward is absent (scripts/setup.sh)");
        return;
    }
    build();
    let spec = Spec {
        domain: std::fs::read_to_string(root().join("guests/blocksworld/domain.pddl")).unwrap(),
        problem: "(define (problem p) (:domain blocksworld-4ops)\n(:objects a b c d table)\n\
                  (:init (handempty) (on a b) (on b table) (ontable c) (on d c) (clear a) (clear d))\n\
                  (:goal (and (on c e))))"
            .into(),
    };
    let verdict = |reviewers: &str| {
        let cfg = SolveConfig::from_toml(&format!("[plugins]\nplugin-dirs = [\"plugins\"]\n{reviewers}")).unwrap();
        let services = Services::load(&cfg, &root()).unwrap();
        services.verifier.verify_task(&text, &spec)
    };
    let plain = verdict("");
    assert_eq!(plain.outcome, Outcome::Rejected, "{plain:?}");
    let reviewed = verdict("diagnostic-reviewers = [\"text-diagnostics\"]\n");
    assert_eq!((reviewed.outcome, &reviewed.plan), (plain.outcome, &plain.plan));
    let added: Vec<&str> = reviewed.diagnostics[plain.diagnostics.len()..].iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        added,
        [
            "object \"table\" is not named in the task text",
            "the text's goal asks for (on c a), the problem's goal does not",
            "the text states (ontable b), the problem does not",
        ]
    );
    assert_eq!(&reviewed.diagnostics[..plain.diagnostics.len()], &plain.diagnostics[..], "the verifier's own come first, unchanged");
    // A plugin of another world is refused by the config, naming it.
    let cfg = SolveConfig::from_toml("[plugins]\nplugin-dirs = [\"plugins\"]\ndiagnostic-reviewers = [\"paper-rewards\"]\n").unwrap();
    let e = Services::load(&cfg, &root()).err().expect("a reward is not a reviewer").to_string();
    assert!(e.contains("paper-rewards"), "{e}");
}

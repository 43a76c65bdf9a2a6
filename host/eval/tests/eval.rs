//! The report from a prepared trace (numbers checked by hand), and a run that is killed
//! mid-write and resumed.

use std::path::Path;
use std::sync::Arc;

use onebrain_core::{
    BoxError, Category, Diagnostic, DomainAdapter, Drift, FaithfulnessReport, Outcome, Spec, Task,
    Verdict, Verifier,
};
use onebrain_eval::{
    merge_eval, read_trace, read_trace_rows, run_eval_with, EvalConfig, EvalError, Progress, Report, Shard, ShardError,
    SizeBucket, TraceRow, TraceWriter,
};
use onebrain_roles::{
    EpisodeRecord, EpisodeTimings, Finalizer, Generation, LanguageModel, Mode, Role,
    SamplingConfig, Services, StepRecord, StepTimings, StopReason, Strategy,
};

fn verdict(category: Option<Category>) -> Verdict {
    Verdict {
        solved: category.is_none(),
        outcome: if category.is_none() {
            Outcome::Solved
        } else {
            Outcome::Rejected
        },
        plan: if category.is_none() {
            vec!["(a)".into()]
        } else {
            vec![]
        },
        diagnostics: category
            .map(|c| vec![Diagnostic::error(c, "x")])
            .unwrap_or_default(),
        time_ms: 10,
        solver_time_ms: 4,
        solver_output: None,
    }
}

/// A record whose verified steps end as `steps` says (`None` = solved).
fn record(
    task: &str,
    domain: &str,
    strategy: Strategy,
    steps: &[Option<Category>],
    judge: Option<f32>,
    faith: Option<FaithfulnessReport>,
) -> EpisodeRecord {
    let steps: Vec<StepRecord> = steps
        .iter()
        .enumerate()
        .map(|(i, c)| StepRecord {
            index: i as u32,
            role: if i == 0 { Role::Actor } else { Role::Editor },
            kind: "actor".into(),
            prompt_sha256: String::new(),
            prompt: String::new(),
            prompt_tokens: 100,
            cached_prompt_tokens: 25,
            output: String::new(),
            output_tokens: vec![1; 10],
            output_logprobs: Vec::new(),
            sampling: SamplingConfig::greedy(10),
            stop_reason: "eos".into(),
            constraint: None,
            extraction: None,
            spec: Some(Spec::default()),
            verdict: Some(verdict(*c)),
            dominant: *c,
            solver_call: true,
            judge_score: None,
            judge_prompt: None,
            timings: StepTimings::default(),
        })
        .collect();
    let solved_at = steps
        .iter()
        .position(|s| s.verdict.as_ref().unwrap().solved);
    EpisodeRecord {
        task_id: task.into(),
        domain: domain.into(),
        strategy,
        mode: Mode::Problem,
        model: "m".into(),
        task_text: String::new(),
        b0: solved_at == Some(0),
        solved: solved_at.is_some(),
        first_success: solved_at.map(|i| i as u32),
        selected: None,
        repairs: steps.len() as u32 - 1,
        solver_calls: steps.len() as u32,
        planner_calls: steps.len() as u32,
        steps,
        final_spec: Some(Spec::default()),
        final_plan: vec![],
        judge_score: judge,
        rewards: None,
        faithfulness: faith,
        fact_agreement: None,
        timings: EpisodeTimings {
            wall_ms: 1000.0,
            generation_ms: 800.0,
            verification_ms: 100.0,
            planner_ms: 40.0,
            judge_ms: 50.0,
            plugins_ms: 2.0,
        },
        repeated_repairs: 0,
        discarded_repeats: 0,
        error: None,
        failures: Vec::new(),
    }
}

fn faithful() -> Option<FaithfulnessReport> {
    Some(FaithfulnessReport {
        solvable: true,
        faithful: true,
        goal_preserved: true,
        schema_f1: 1.0,
        ..Default::default()
    })
}

#[test]
fn report_from_a_prepared_trace_matches_hand_computed_numbers() {
    use Category::*;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let weakened = FaithfulnessReport {
        solvable: true,
        drift: Some(Drift::GoalWeakening),
        schema_f1: 1.0,
        ..Default::default()
    };
    let records = vec![
        record(
            "a/1",
            "A",
            Strategy::MultiRole,
            &[None],
            Some(0.9),
            faithful(),
        ),
        record(
            "a/2",
            "A",
            Strategy::MultiRole,
            &[Some(Syntax), Some(GoalConstraint), None],
            Some(0.3),
            Some(weakened),
        ),
        record(
            "b/1",
            "B",
            Strategy::MultiRole,
            &[
                Some(Syntax),
                Some(Syntax),
                Some(ObjectType),
                Some(ObjectType),
                Some(Unreachable),
                Some(Unreachable),
            ],
            Some(0.6),
            Some(FaithfulnessReport::default()),
        ),
        record(
            "b/2",
            "B",
            Strategy::MultiRole,
            &[Some(PreconditionEffect), None],
            Some(0.2),
            faithful(),
        ),
        record("a/1", "A", Strategy::Direct, &[None], None, None),
    ];
    let mut w = TraceWriter::open(&trace).unwrap();
    for r in &records {
        w.append(r).unwrap();
    }
    drop(w);
    // A killed writer's torn line is dropped on reading.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"task_id\": \"a/3\", \"dom"))
        .unwrap();
    let contents = read_trace(&trace).unwrap();
    assert!(contents.torn_tail);
    assert_eq!(contents.records, records);

    let report = Report::from_records("prepared", &contents.records, 0.05, 1);
    assert_eq!(report.domains, ["A", "B"]);
    assert_eq!(
        report
            .strategies
            .iter()
            .map(|s| s.strategy)
            .collect::<Vec<_>>(),
        [Strategy::Direct, Strategy::MultiRole]
    );
    let mr = &report.strategies[1];
    assert_eq!(mr.n, 4);
    assert_eq!(
        (mr.success["A"].k, mr.success["A"].n, mr.success["B"].k),
        (2, 2, 1)
    );
    assert!((mr.average_success - 0.75).abs() < 1e-12, "(1.0 + 0.5) / 2");
    assert_eq!(mr.csr, [0.25, 0.5, 0.75, 0.75, 0.75, 0.75]);
    assert_eq!(mr.delta, [0.25, 0.25, 0.25, 0.0, 0.0, 0.0]);
    let at = |h: usize, c: &str| mr.dominant[h].get(c).copied().unwrap_or(0);
    assert_eq!((at(0, "syntax"), at(0, "precondition-effect")), (2, 1));
    assert_eq!((at(1, "goal-constraint"), at(1, "syntax")), (1, 1));
    assert_eq!(
        (
            at(2, "object-type"),
            at(3, "object-type"),
            at(4, "unreachable"),
            at(5, "unreachable")
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(
        mr.dominant[2].values().sum::<usize>(),
        1,
        "only b/1 is still unsolved at h = 2"
    );
    assert_eq!((mr.avg_solver_calls, mr.avg_repairs), (3.0, 2.0));
    let j = mr.judge.as_ref().unwrap();
    assert_eq!(
        (
            j.unsolved.clone(),
            j.solved_faithful.clone(),
            j.solved_unfaithful.len()
        ),
        (
            vec![0.30000001192092896, 0.6000000238418579, 0.20000000298023224],
            vec![0.8999999761581421],
            0
        )
    );
    assert_eq!(j.auc, Some(1.0));
    let f = mr.faithfulness.as_ref().unwrap();
    assert_eq!(
        (f.solvability, f.faithful_success, f.gap),
        (0.75, 0.5, 0.25)
    );
    assert!((f.drift.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(f.drift_categories.goal_weakening, 1);
    assert_eq!((mr.faithful["A"].k, mr.faithful["B"].k), (1, 1));
    let d = mr.disagreement.unwrap();
    assert_eq!(d.eps_hat, 0.25);
    // 0.25 + sqrt(ln(20) / 8) = 0.25 + 0.611940...
    assert!((d.bound - 0.861_940).abs() < 1e-5, "{}", d.bound);
    assert_eq!(
        (
            mr.timing.wall_ms,
            mr.timing.generation_ms,
            mr.timing.prefix_cache_share
        ),
        (1000.0, 800.0, 0.25)
    );
    assert_eq!(mr.timing.tokens_generated, 30.0, "(10 + 30 + 60 + 20) / 4");

    let direct = &report.strategies[0];
    assert_eq!((direct.average_success, direct.success.len()), (1.0, 1));
    assert!(direct.judge.is_none() && direct.faithfulness.is_none());

    let paths = report.write(dir.path()).unwrap();
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    assert!(
        md.contains("| multi-role | 100.0 (2/2) | 50.0 (1/2) | 75.0 | 3.00 | 3.00 |"),
        "{md}"
    );
    assert!(md.contains("| direct | 100.0 (1/1) | – | 100.0 |"), "{md}");
    assert!(
        md.contains("| multi-role | 25.0 (+25.0) | 50.0 (+25.0) | 75.0 (+25.0) | 75.0 (+0.0)"),
        "{md}"
    );
    assert!(
        md.contains("| multi-role | 4 | 75.0 | 50.0 | 33.3 | 25.0 |"),
        "{md}"
    );
    let names: Vec<String> = paths
        .plots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["success.svg", "csr.svg", "diagnostics.svg", "judge.svg"]
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(json["strategies"][1]["csr"][2], 0.75);
}

// ------------------------------------------------------------------------------- resume

const DOMAIN: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";
/// The answer after the problem-mode primer `(define (problem task) (:domain bw) (:objects `.
const TAIL: &str =
    "a b) (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))";

struct Toy;
impl DomainAdapter for Toy {
    fn name(&self) -> String {
        "toy".into()
    }
    fn description(&self) -> Result<String, BoxError> {
        Ok("Blocks.".into())
    }
    fn domain_pddl(&self) -> Result<String, BoxError> {
        Ok(DOMAIN.into())
    }
    fn generate(&self, seed: u64, _size: u32) -> Result<Task, BoxError> {
        Ok(Task {
            id: format!("toy/seed-{seed}"),
            domain: "toy".into(),
            text: format!("Task {seed}: put a on b."),
            reference: Some(Spec {
                domain: DOMAIN.into(),
                problem: format!("(define (problem p) (:domain bw) (:objects {TAIL}"),
            }),
        })
    }
    fn describe(&self, _: &str) -> Result<String, BoxError> {
        Ok(String::new())
    }
}

struct Native;
impl Verifier for Native {
    fn verify(&self, spec: &Spec) -> Verdict {
        let errs: Vec<_> = onebrain_pddl::check_sources(&spec.domain, &spec.problem)
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        let solved = errs.is_empty();
        let plan = if solved {
            vec!["(pick-up a)".into(), "(stack a b)".into()]
        } else {
            vec![]
        };
        Verdict {
            solved,
            outcome: if solved {
                Outcome::Solved
            } else {
                Outcome::Rejected
            },
            plan,
            diagnostics: errs,
            time_ms: 1,
            solver_time_ms: 1,
            solver_output: None,
        }
    }
}

/// A generation of `text`, as a scripted model returns it.
fn scripted(text: String) -> Generation {
    Generation {
        text,
        tokens: vec![1, 2, 3],
        prompt_tokens: 9,
        cached_prompt_tokens: 0,
        prefill_tokens: 9,
        prefill_secs: 0.0,
        decode_secs: 0.0,
        stop_reason: StopReason::Eos,
        logprobs: Vec::new(),
        constraint: None,
    }
}

/// Writes the right problem for whichever task it is asked about, except the task with
/// seed 4; counts its calls.
struct Echo(Arc<std::sync::atomic::AtomicUsize>);
impl LanguageModel for Echo {
    fn generate(
        &mut self,
        _: Role,
        prompt: &str,
        _: &SamplingConfig,
    ) -> Result<Generation, BoxError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert!(prompt.contains("put a on b"));
        if prompt.contains("Task 4:") {
            // The task with seed 4 always fails: its goal names an object never declared.
            return Ok(scripted(TAIL.replace("(on a b)", "(on a c)")));
        }
        Ok(scripted(TAIL.into()))
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "echo".into()
    }
}

fn run(
    cfg: &EvalConfig,
    base: &Path,
) -> (usize, Vec<(usize, usize, bool)>, onebrain_eval::EvalOutcome) {
    run_shard(cfg, base, None)
}

/// [`run`], of one shard.
fn run_shard(
    cfg: &EvalConfig,
    base: &Path,
    shard: Option<Shard>,
) -> (usize, Vec<(usize, usize, bool)>, onebrain_eval::EvalOutcome) {
    try_run(cfg, base, shard).unwrap()
}

fn try_run(
    cfg: &EvalConfig,
    base: &Path,
    shard: Option<Shard>,
) -> Result<(usize, Vec<(usize, usize, bool)>, onebrain_eval::EvalOutcome), EvalError> {
    let services = Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer {
            reward: None,
            checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())),
        },
        plugins: Vec::new(),
    };
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = calls.clone();
    let mut model = None;
    let mut planned = Vec::new();
    let out = run_eval_with(
        cfg,
        base,
        &services,
        &mut || Ok(Box::new(Echo(c2.clone())) as Box<dyn LanguageModel>),
        &mut model,
        shard,
        &mut |p| {
            if let Progress::Planned {
                total,
                done,
                torn_tail,
            } = p
            {
                planned.push((*total, *done, *torn_tail));
            }
        },
    )?;
    Ok((
        calls.load(std::sync::atomic::Ordering::SeqCst),
        planned,
        out,
    ))
}

#[test]
fn a_killed_run_resumes_from_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EvalConfig::from_toml(
        "name = \"toy\"\nout-dir = \"out\"\nstrategies = [\"multi-role\", \"llm+p\"]\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 3\n[episode]\nmode = \"problem\"",
    )
    .unwrap();
    let (calls, planned, out) = run(&cfg, dir.path());
    assert_eq!((calls, out.ran, out.skipped), (6, 6, 0));
    assert_eq!(planned, [(6, 0, false)]);
    let full = std::fs::read_to_string(&out.trace_path).unwrap();
    assert_eq!(full.lines().count(), 6);
    assert!(
        out.summary.contains("| multi-role | 100.0 (3/3) |"),
        "{}",
        out.summary
    );
    assert!(out.report_paths.markdown.is_file() && out.report_paths.plots.len() >= 3);
    // Each row carries its task's size, from the reference problem (`a b`: 2 objects), and
    // the report has them by size.
    let rows = read_trace_rows(&out.trace_path).unwrap().records;
    assert!(rows.iter().all(|r| r.reference_objects == Some(2)), "{:?}", rows.iter().map(|r| r.reference_objects).collect::<Vec<_>>());
    let md = std::fs::read_to_string(&out.report_paths.markdown).unwrap();
    assert!(md.contains("| multi-role | toy | 3–5 | 3 | 100.0 (3/3) [43.8, 100.0] | 100.0 (3/3) [43.8, 100.0] |"), "{md}");

    // Kill it in the middle of the fourth line: three records and a torn tail remain.
    let lines: Vec<&str> = full.lines().collect();
    let torn = format!(
        "{}\n{}",
        lines[..3].join("\n"),
        &lines[3][..lines[3].len() / 2]
    );
    std::fs::write(&out.trace_path, torn).unwrap();
    let (calls, planned, out2) = run(&cfg, dir.path());
    assert_eq!(planned, [(6, 3, true)]);
    assert_eq!((calls, out2.ran, out2.skipped), (3, 3, 3));
    let contents = read_trace(&out2.trace_path).unwrap();
    assert!(
        !contents.torn_tail,
        "the torn line was cut before appending"
    );
    assert_eq!(contents.records.len(), 6);
    assert_eq!(contents.done().len(), 6, "every (task, strategy) pair once");
    let faithful = contents
        .records
        .iter()
        .filter(|r| r.faithfulness.as_ref().is_some_and(|f| f.faithful))
        .count();
    assert_eq!(faithful, 6, "the checker ran on every episode");

    // Nothing left: no model load, the report is rewritten from the trace.
    let (calls, planned, out3) = run(&cfg, dir.path());
    assert_eq!((calls, out3.ran, planned[0].1), (0, 0, 6));
}

// ---------------------------------------------------------------------------- shards

/// Five tasks (seed 4 fails every time) under two strategies: ten episodes.
const SHARD_CONFIG: &str = "name = \"toy\"\nout-dir = \"out\"\nstrategies = [\"multi-role\", \"llm+p\"]\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 5\n[episode]\nmode = \"problem\"";

/// A report's JSON without its timings, which no two runs share.
fn untimed(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for s in v["strategies"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("timing").expect("a timing block");
    }
    v
}

/// What an episode decided, without its timings.
fn outcomes(trace: &Path) -> Vec<(String, Strategy, bool, bool, u32, Option<Spec>)> {
    let mut v: Vec<_> = read_trace(trace)
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.task_id, r.strategy, r.solved, r.b0, r.solver_calls, r.final_spec))
        .collect();
    v.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    v
}

#[test]
fn two_shards_merge_to_the_report_of_one_unsharded_run() {
    let cfg = EvalConfig::from_toml(SHARD_CONFIG).unwrap();
    let whole = tempfile::tempdir().unwrap();
    let (_, _, one) = run(&cfg, whole.path());
    assert_eq!(one.ran, 10);
    assert!(one.summary.contains("80.0 (4/5)"), "seed 4 fails: {}", one.summary);

    let split = tempfile::tempdir().unwrap();
    let shard = |s: &str| Some(s.parse::<Shard>().unwrap());
    match merge_eval(&cfg, split.path()) {
        Err(EvalError::Shard(ShardError::NoShards { .. })) => {}
        other => panic!("a merge before any shard ran: {other:?}"),
    }
    let (_, planned, first) = run_shard(&cfg, split.path(), shard("0/2"));
    assert_eq!((planned, first.ran), (vec![(5, 0, false)], 5));
    assert!(first.trace_path.ends_with("out/shards/0-of-2/trace.jsonl"), "{}", first.trace_path.display());
    match merge_eval(&cfg, split.path()) {
        Err(EvalError::Shard(ShardError::Incomplete { missing: 5, total: 10, which })) => {
            assert!(which.contains("shard 1/2 never ran"), "{which}")
        }
        other => panic!("a merge with a shard missing: {other:?}"),
    }
    let (_, _, second) = run_shard(&cfg, split.path(), shard("1/2"));
    assert_eq!(second.ran, 5);
    let (merged, out) = merge_eval(&cfg, split.path()).unwrap();
    assert_eq!((merged.shards, merged.total, merged.appended), (2, 10, 10));
    assert_eq!(out.trace_path, split.path().join("out/trace.jsonl"));
    assert_eq!(untimed(&out.report_paths.json), untimed(&one.report_paths.json));
    assert_eq!(outcomes(&out.trace_path), outcomes(&one.trace_path));
    // The merge keeps each row's size, so the merged report has its table by size too.
    assert!(read_trace_rows(&out.trace_path).unwrap().records.iter().all(|r| r.reference_objects == Some(2)));
    assert!(untimed(&out.report_paths.json)["strategies"][0]["by_size"].is_array());

    // Merging again adds nothing; a shard run again finds its work done, in the run's trace.
    assert_eq!(merge_eval(&cfg, split.path()).unwrap().0.appended, 0);
    assert_eq!(read_trace(&out.trace_path).unwrap().records.len(), 10);
    let (calls, _, again) = run_shard(&cfg, split.path(), shard("0/2"));
    assert_eq!((calls, again.ran, again.skipped), (0, 0, 5));

    // Another config's shards are refused: by the merge, and by a shard run in their folder.
    let mut other = cfg.clone();
    other.episode.max_tokens += 1;
    match merge_eval(&other, split.path()) {
        Err(EvalError::Shard(ShardError::Foreign { why, .. })) => assert!(why.contains("config digest"), "{why}"),
        other => panic!("a merge under another config: {other:?}"),
    }
    match try_run(&other, split.path(), shard("1/2")) {
        Err(EvalError::Shard(ShardError::Foreign { path, .. })) => assert!(path.ends_with("shards/1-of-2/shard.json")),
        other => panic!("a shard under another config: {:?}", other.map(|o| o.2)),
    }
    // Parallelism is not the config's meaning: a shard may run with its own.
    let mut wider = cfg.clone();
    wider.in_flight = 4;
    wider.solver.workers = 3;
    assert!(try_run(&wider, split.path(), shard("1/2")).is_ok());
}

// ------------------------------------------------------------------ domains given in prose

/// Answers in `full` mode: the domain after the primer `(define (domain `, then the problem.
struct FullEcho;
impl LanguageModel for FullEcho {
    fn generate(&mut self, _: Role, _: &str, _: &SamplingConfig) -> Result<Generation, BoxError> {
        let domain = DOMAIN.strip_prefix("(define (domain ").unwrap();
        Ok(scripted(format!("{domain}\n```\n```pddl\n(define (problem p) (:domain bw) (:objects {TAIL}\n```")))
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "full-echo".into()
    }
}

/// A folder of tasks whose domains are given only in prose: `NAME.domain.txt`,
/// `NAME.problem.txt` and, in the reference folder, `NAME.domain.pddl`, `NAME.problem.pddl`.
fn text_folder(dir: &Path) {
    let tasks = dir.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::write(tasks.join("stack.domain.txt"), "Blocks lie on a table; a hand picks one up and stacks it on another.").unwrap();
    std::fs::write(tasks.join("stack.problem.txt"), "Blocks a and b are on the table. Put a on b.").unwrap();
    let refs = dir.join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("stack.domain.pddl"), DOMAIN).unwrap();
    std::fs::write(refs.join("stack.problem.pddl"), format!("(define (problem p) (:domain bw) (:objects {TAIL}")).unwrap();
}

const TEXT_FOLDER_CONFIG: &str = "name = \"prose\"\nout-dir = \"out\"\ndata = \".\"\nstrategies = [\"multi-role\", \"self-refine\"]\n[[benchmarks]]\ndomain = \"prose\"\nsource = \"text-folder\"\nfolder = \"tasks\"\nreference-folder = \"refs\"\nsample = 5\n[episode]\nmode = \"full\"";

#[test]
fn a_text_folder_benchmark_runs_in_full_mode_without_a_plugin() {
    let dir = tempfile::tempdir().unwrap();
    text_folder(dir.path());
    let cfg = EvalConfig::from_toml(TEXT_FOLDER_CONFIG).unwrap();
    // The only plugin is `toy`: the text-folder needs none.
    let services = Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer { reward: None, checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())) },
        plugins: Vec::new(),
    };
    let mut model = None;
    let out = run_eval_with(
        &cfg,
        dir.path(),
        &services,
        &mut || Ok(Box::new(FullEcho) as Box<dyn LanguageModel>),
        &mut model,
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((out.ran, out.skipped), (2, 0));
    let records = read_trace(&out.trace_path).unwrap().records;
    assert_eq!(records.len(), 2);
    for r in &records {
        assert_eq!((r.task_id.as_str(), r.domain.as_str()), ("text-folder/prose/stack", "prose"));
        assert_eq!(r.mode, Mode::Full);
        assert!(r.solved, "{:?}", r.steps[0].verdict);
        let f = r.faithfulness.as_ref().expect("the reference folder is given");
        assert!(f.faithful, "{f:?}");
        // The prose is the prompt's domain section, and no plugin's domain PDDL is shown.
        let prompt = &r.steps[0].prompt;
        assert!(prompt.contains("a hand picks one up") && prompt.contains("Put a on b"), "{prompt}");
        assert!(!prompt.contains("(:action"), "{prompt}");
    }
}

#[test]
fn text_folder_mistakes_are_clear_errors_naming_the_file() {
    let cfg = |extra: &str| EvalConfig::from_toml(&TEXT_FOLDER_CONFIG.replace("mode = \"full\"", extra));
    let err = cfg("mode = \"problem\"").unwrap_err().to_string();
    assert!(err.contains("text-folder") && err.contains("full"), "{err}");
    let err = EvalConfig::from_toml(&TEXT_FOLDER_CONFIG.replace("\"self-refine\"", "\"direct\"")).unwrap_err().to_string();
    assert!(err.contains("direct"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    text_folder(dir.path());
    let b = &EvalConfig::from_toml(TEXT_FOLDER_CONFIG).unwrap().benchmarks[0];
    assert_eq!(b.text_inputs(dir.path()).unwrap().len(), 1);
    let tasks = dir.path().join("tasks");
    let refs = dir.path().join("refs");
    let expect_err = |needle: &str| {
        let err = b.text_inputs(dir.path()).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    };
    // A reference that does not parse names the file and the line.
    std::fs::write(refs.join("stack.problem.pddl"), "(define (problem p)\n  (:domain bw)\n  (:objects a").unwrap();
    expect_err("stack.problem.pddl");
    std::fs::remove_file(refs.join("stack.problem.pddl")).unwrap();
    expect_err("stack.problem.pddl");
    // A task without its domain text, an empty text, a domain text without its task.
    std::fs::write(tasks.join("lone.problem.txt"), "Do it.").unwrap();
    expect_err("lone.domain.txt");
    std::fs::write(tasks.join("lone.domain.txt"), "\n  \n").unwrap();
    expect_err("lone.domain.txt is empty");
    std::fs::remove_file(tasks.join("lone.problem.txt")).unwrap();
    expect_err("lone.domain.txt has no lone.problem.txt");
    std::fs::remove_dir_all(&tasks).unwrap();
    expect_err("tasks");
}

// --------------------------------------------------------- errors that are not answers

/// The memory budget's refusal, as `Brain` words it.
const REFUSAL: &str = "16 row(s) of 1757 positions need an estimated 7216 MiB (weights 1801, keys and values 4612, work 803), past the memory budget of 4096 MiB (model.memory-budget-mb)";

/// [`Echo`]'s answers, but every request whose prompt contains one of `refused` is refused
/// as the memory budget refuses one.
struct Refuses(Vec<&'static str>);
impl LanguageModel for Refuses {
    fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation, BoxError> {
        if self.0.iter().any(|r| prompt.contains(r)) {
            return Err(REFUSAL.into());
        }
        Echo(Default::default()).generate(role, prompt, s)
    }
    fn judge(&mut self, _: &str) -> Result<f32, BoxError> {
        Ok(0.7)
    }
    fn name(&self) -> String {
        "refuses".into()
    }
}

/// Three toy tasks (seeds 1 to 3) under multi-role, the model refusing the prompts that
/// contain one of `refused`.
fn run_refusing(dir: &Path, refused: Vec<&'static str>) -> onebrain_eval::EvalOutcome {
    let cfg = EvalConfig::from_toml(
        "name = \"toy\"\nout-dir = \"out\"\n[[benchmarks]]\ndomain = \"toy\"\nsource = \"generated\"\nsize = 2\nsample = 3\n[episode]\nmode = \"problem\"",
    )
    .unwrap();
    let services = Services {
        verifier: Arc::new(Native),
        domains: vec![Arc::new(Toy) as Arc<dyn DomainAdapter>],
        finalizer: Finalizer { reward: None, checker: Some(Arc::new(onebrain_faithful::ReferenceChecker::default())) },
        plugins: Vec::new(),
    };
    let mut model = None;
    let mut load = || Ok(Box::new(Refuses(refused.clone())) as Box<dyn LanguageModel>);
    run_eval_with(&cfg, dir, &services, &mut load, &mut model, None, &mut |_| {}).unwrap()
}

/// Regression: a request the memory budget refused was counted as an unsolved answer and
/// checked as "the model wrote no PDDL", so a run whose every request was refused reported
/// 0 % solved. Such an episode is an error: in the trace with no faithfulness report, and in
/// the report apart from the answers, in no rate's denominator.
#[test]
fn a_refused_request_is_an_error_apart_from_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_refusing(dir.path(), vec!["Task 2:"]);
    assert_eq!((out.ran, out.episodes, out.unanswered), (3, 3, 1));
    assert!(out.no_answers().is_none(), "two episodes answered");
    let records = read_trace(&out.trace_path).unwrap().records;
    let refused = records.iter().find(|r| r.task_text.starts_with("Task 2:")).unwrap();
    assert_eq!(refused.error.as_deref(), Some(format!("model error (actor): {REFUSAL}").as_str()));
    assert_eq!(refused.stop_error(), refused.error.as_deref());
    assert!(refused.faithfulness.is_none(), "no answer to check: {:?}", refused.faithfulness);
    assert!(records.iter().filter(|r| r.task_id != refused.task_id).all(|r| r.stop_error().is_none() && r.solved));

    // 2 of 2 answers solved and faithful, the refusal on a line of its own.
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&out.report_paths.json).unwrap()).unwrap();
    let x = &report.strategies[0];
    assert_eq!((x.n, x.unanswered, x.errors), (3, 1, 1));
    assert_eq!((x.success["toy"].k, x.success["toy"].n), (2, 2));
    assert_eq!((x.faithful["toy"].k, x.faithful["toy"].n), (2, 2));
    assert_eq!(x.faithfulness.as_ref().unwrap().n, 2);
    assert_eq!(x.csr[0], 1.0);
    assert_eq!(x.unanswered_error.as_deref(), refused.error.as_deref());
    assert!(out.summary.contains("| multi-role | 100.0 (2/2) | 100.0 |"), "{}", out.summary);
    assert!(
        out.summary.contains("**multi-role: 1 of 3 episodes stopped on an error before their answer**")
            && out.summary.contains(REFUSAL),
        "{}",
        out.summary
    );
    let md = std::fs::read_to_string(&out.report_paths.markdown).unwrap();
    assert!(md.contains("3 episodes, 1 of them stopped on an error before their answer"), "{md}");
    assert!(md.contains("| multi-role | model | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 1 |"), "the failure table: {md}");
}

/// A run whose every request was refused has no answer; `no_answers` gives the
/// error `onebrain eval` exits with, naming the refusal. The report shows no 0 %.
#[test]
fn a_run_with_every_request_refused_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_refusing(dir.path(), vec!["Task"]);
    assert_eq!((out.episodes, out.unanswered), (3, 3));
    let err = out.no_answers().expect("no episode answered").to_string();
    assert!(err.starts_with("none of the 3 episode(s) in "), "{err}");
    assert!(err.contains(&format!("the first: model error (actor): {REFUSAL}")), "{err}");
    assert!(err.contains("remove it to run them again"), "{err}");
    assert!(out.summary.contains("| multi-role | – | – |"), "{}", out.summary);
    assert!(!out.summary.contains("0.0"), "{}", out.summary);
    for r in read_trace(&out.trace_path).unwrap().records {
        assert!(r.faithfulness.is_none() && r.stop_error().is_some(), "{r:?}");
    }
}

/// A trace from an older build, whose refused episodes carry the checker's "the model
/// wrote no PDDL", reports them apart as well; a record without an error reads and writes
/// back byte for byte, as a resumed run compares it.
#[test]
fn an_old_trace_with_refused_episodes_reports_them_apart() {
    let mut old = record("a/1", "A", Strategy::MultiRole, &[Some(Category::Syntax)], None, Some(FaithfulnessReport {
        explanation: vec!["the model wrote no PDDL".into()],
        ..Default::default()
    }));
    old.steps.clear();
    (old.final_spec, old.solver_calls, old.planner_calls) = (None, 0, 0);
    old.error = Some(format!("model error (actor): {REFUSAL}"));
    let line = serde_json::to_string(&old).unwrap();
    let answered = serde_json::to_string(&record("a/2", "A", Strategy::MultiRole, &[None], None, faithful())).unwrap();
    let back: EpisodeRecord = serde_json::from_str(&answered).unwrap();
    assert!(!answered.contains("\"error\""), "{answered}");
    assert_eq!(serde_json::to_string(&back).unwrap(), answered);

    let records: Vec<EpisodeRecord> = [line, answered].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let report = Report::from_records("old", &records, 0.05, 1);
    let x = &report.strategies[0];
    assert_eq!((x.n, x.unanswered), (2, 1));
    assert_eq!((x.success["A"].k, x.success["A"].n, x.faithful["A"].n), (1, 1, 1));
    assert_eq!(x.faithfulness.as_ref().unwrap().faithful_success, 1.0);
}

/// A plugin's failure on an answer leaves the answer counted: only the episode's own error
/// stops it, and a plugin's message cannot pass for one.
#[test]
fn a_plugin_failure_on_an_answer_is_no_stop_error() {
    use onebrain_roles::{FailedPlugin, PluginFailure};
    let mut r = record("a/1", "A", Strategy::MultiRole, &[None], None, None);
    let f = PluginFailure { plugin: FailedPlugin::Checker, kind: None, message: "model error (actor): imitated".into() };
    r.error = Some(format!("faithfulness checker: {}", f.message));
    r.failures = vec![f.clone()];
    assert_eq!(r.stop_error(), None);
    r.error = Some(format!("model error (judge): {REFUSAL}; faithfulness checker: {}", f.message));
    assert_eq!(r.stop_error(), Some(format!("model error (judge): {REFUSAL}").as_str()));
    let x = &Report::from_records("p", &[r], 0.05, 1).strategies[0];
    assert_eq!((x.unanswered, x.errors, x.success.len()), (1, 1, 0));
}

// ------------------------------------------------------------------------------- by size

/// A trace row of `record` with its task's size.
fn row(record: EpisodeRecord, objects: Option<u32>) -> TraceRow {
    TraceRow { record, reference_objects: objects }
}

#[test]
fn the_report_counts_solved_and_faithful_per_domain_and_size_bucket() {
    let solved = |task: &str, domain: &str| record(task, domain, Strategy::MultiRole, &[None], None, faithful());
    let unfaithful = |task: &str, domain: &str| {
        record(task, domain, Strategy::MultiRole, &[None], None, Some(FaithfulnessReport { solvable: true, ..Default::default() }))
    };
    let failed = |task: &str, domain: &str| record(task, domain, Strategy::MultiRole, &[Some(Category::Syntax)], None, None);
    let mut refused = failed("a/9", "A");
    refused.error = Some(format!("model error (actor): {REFUSAL}"));
    let rows = vec![
        row(solved("a/1", "A"), Some(2)),     // fewer than 3: the first bucket
        row(unfaithful("a/2", "A"), Some(5)), // solved, not faithful
        row(failed("a/3", "A"), Some(6)),
        row(solved("a/4", "A"), Some(9)),
        row(solved("b/1", "B"), Some(10)),
        row(failed("b/2", "B"), Some(24)),
        row(solved("b/3", "B"), None),        // the trace does not say
        row(refused, Some(4)),                // no answer: in no row
    ];
    let report = Report::from_rows("sizes", &rows, 0.05, 1);
    let cells: Vec<(String, SizeBucket, usize, usize, usize)> = report.strategies[0]
        .by_size
        .iter()
        .map(|r| (r.domain.clone(), r.bucket, r.solved.n, r.solved.k, r.faithful.k))
        .collect();
    let c = |d: &str, b, n, k, f| (d.to_string(), b, n, k, f);
    assert_eq!(
        cells,
        [
            c("A", SizeBucket::Small, 2, 2, 1),
            c("A", SizeBucket::Medium, 2, 1, 1),
            c("B", SizeBucket::Large, 2, 1, 1),
            c("B", SizeBucket::Unknown, 1, 1, 1),
            c("all", SizeBucket::Small, 2, 2, 1),
            c("all", SizeBucket::Medium, 2, 1, 1),
            c("all", SizeBucket::Large, 2, 1, 1),
            c("all", SizeBucket::Unknown, 1, 1, 1),
        ]
    );
    let small = &report.strategies[0].by_size[0];
    // 1 of 2: Wilson [9.5 %, 90.5 %].
    assert_eq!(
        ((small.faithful_interval.0 * 1000.0).round(), (small.faithful_interval.1 * 1000.0).round()),
        (95.0, 905.0)
    );
    let md = report.markdown(&[]);
    assert!(md.contains("| multi-role | A | 3–5 | 2 | 100.0 (2/2) [34.2, 100.0] | 50.0 (1/2) [9.5, 90.5] |"), "{md}");
    assert!(md.contains("| multi-role | all | 10+ | 2 | 50.0 (1/2) [9.5, 90.5] | 50.0 (1/2) [9.5, 90.5] |"), "{md}");
    // Every other section is the report of the bare records.
    let records: Vec<EpisodeRecord> = rows.iter().map(|r| r.record.clone()).collect();
    let mut plain = Report::from_records("sizes", &records, 0.05, 1);
    assert!(plain.strategies[0].by_size.is_empty());
    plain.strategies[0].by_size = report.strategies[0].by_size.clone();
    assert_eq!(plain, report);
    // Rows of a trace written before the sizes: no table.
    let old: Vec<TraceRow> = records.into_iter().map(|r| row(r, None)).collect();
    assert!(Report::from_rows("old", &old, 0.05, 1).strategies[0].by_size.is_empty());
}

#[test]
fn a_trace_row_is_the_record_with_its_size_beside_it_and_old_traces_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let old = record("a/1", "A", Strategy::MultiRole, &[None], Some(0.5), faithful());
    let new = row(record("a/2", "A", Strategy::MultiRole, &[None], None, None), Some(7));
    let mut w = TraceWriter::open(&trace).unwrap();
    w.append(&old).unwrap();
    w.append(&new).unwrap();
    drop(w);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The size is one more top-level field of the line; a row without one is the bare record.
    assert!(lines[1].ends_with(",\"reference_objects\":7}"), "{}", lines[1]);
    assert_eq!(serde_json::to_string(&row(old.clone(), None)).unwrap(), lines[0]);
    let rows = read_trace_rows(&trace).unwrap().records;
    assert_eq!(rows, [row(old.clone(), None), new.clone()]);
    // Readers of the bare record (training, `onebrain plugins`) read both lines.
    assert_eq!(read_trace(&trace).unwrap().records, [old, new.record]);
}

use std::path::Path;

use crate::harness::{build_plugins, model_ready, repo, TestCommand};

/// An eval config in `dir`: two strategies on one generated BlocksWorld task, SmolLM2.
fn write_config(dir: &Path) -> std::path::PathBuf {
    let plugins = repo().join("plugins");
    let cache = repo().join(".cache/components");
    let text = format!(
        r#"name = "cli test"
out-dir = "run"
strategies = ["multi-role", "llm+p"]
in-flight = 2
checker = "native"

[[benchmarks]]
domain = "blocksworld"
source = "generated"
first-seed = 7
size = 3
sample = 1

[model]
path = "SmolLM2-135M-Instruct.Q4_1.gguf"

[episode]
mode = "problem"
budget = 2
max-repairs = 1
max-tokens = 40

[solver]
timeout-s = 20

[plugins]
plugin-dirs = [{plugins:?}]
cache-dir = {cache:?}
reward = "paper-rewards"
domains = ["blocksworld"]
"#
    );
    let path = dir.join("eval.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs, writes the report with its plots next to the trace, and resumes without redoing work.
#[test]
fn eval_runs_reports_and_resumes_from_the_trace() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let out = TestCommand::new(&["eval", "--config"]).arg(&cfg).stdout();
    assert!(
        out.contains("ran 2 episode(s), 0 found in the trace"),
        "{out}"
    );
    assert!(
        out.contains("multi-role") && out.contains("llm+p"),
        "the success table: {out}"
    );
    let run = dir.path().join("run");
    let trace = std::fs::read_to_string(run.join("trace.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 2);
    for line in trace.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(rec["solver_calls"].as_u64().unwrap() <= 2, "budget K = 2");
        assert_eq!(rec["task_id"], "generated/blocksworld/seed-7-size-3");
    }
    let files: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().any(|f| f.ends_with(".md")), "{files:?}");
    assert!(
        files
            .iter()
            .any(|f| f.ends_with(".json") && !f.ends_with(".jsonl")),
        "{files:?}"
    );
    assert!(
        files.iter().filter(|f| f.ends_with(".svg")).count() >= 2,
        "{files:?}"
    );

    // A second run finds both episodes in the trace and only rewrites the report.
    let again = TestCommand::new(&["eval", "--config"]).arg(&cfg).stdout();
    assert!(
        again.contains("ran 0 episode(s), 2 found in the trace"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("trace.jsonl")).unwrap(),
        trace
    );

    // A killed run leaves a torn last line: it is dropped and that episode runs again.
    let torn = format!(
        "{}\n{{\"task_id\": \"blocksw",
        trace.lines().next().unwrap()
    );
    std::fs::write(run.join("trace.jsonl"), torn).unwrap();
    let (stdout, stderr) = TestCommand::new(&["eval", "--config"])
        .arg(&cfg)
        .output_text();
    assert!(stderr.contains("torn last line"), "{stderr}");
    assert!(
        stdout.contains("ran 1 episode(s), 1 found in the trace"),
        "{stdout}"
    );
}

/// `--seed` sets the run's base seed (one draw of pass@k: scripts/pass-at-k.sh) and
/// `--out-dir` keeps the draw apart from the config's own run. Regression: every
/// episode of a run sampled with the base seed itself, so all its tasks drew the same random
/// numbers; each now has a seed of its own, from the base seed, its strategy and its task.
#[test]
fn eval_seed_draws_episodes_with_seeds_of_their_own() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let first_seeds = |seed: &str| -> Vec<u64> {
        let draw = dir.path().join(format!("draw-{seed}"));
        TestCommand::new(&["eval", "--seed", seed, "--out-dir"]).arg(&draw).arg("--config").arg(&cfg).stdout();
        let trace = std::fs::read_to_string(draw.join("trace.jsonl")).unwrap();
        let mut seeds: Vec<u64> = trace
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["steps"][0]["sampling"]["seed"].as_u64().unwrap())
            .collect();
        seeds.sort();
        seeds
    };
    let five = first_seeds("5");
    assert!(!dir.path().join("run").exists(), "the draws went to their own folders");
    assert_eq!(five.len(), 2);
    assert_ne!(five[0], five[1], "the run's two episodes share a seed: {five:?}");
    assert_ne!(first_seeds("6"), five, "another base seed, other episode seeds");
}

/// `--in-flight` overrides the config's; none at all cannot run and is refused up front.
#[test]
fn eval_in_flight_must_be_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let err = TestCommand::new(&["eval", "--in-flight", "0", "--config"]).arg(&cfg).fails_with(2);
    assert!(err.contains("--in-flight") && err.contains("0"), "{err}");
}

#[test]
fn eval_report_only_needs_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/trace.jsonl"), "").unwrap();
    let out = TestCommand::new(&["eval", "--report-only", "--config"])
        .arg(&cfg)
        .stdout();
    assert!(out.contains("report: "), "{out}");
}

#[test]
fn eval_config_errors_name_the_file() {
    let err = TestCommand::new(&["eval", "--config", "no/such.toml"]).fails_with(1);
    assert!(err.contains("no/such.toml"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("e.toml");
    std::fs::write(&cfg, "out-dir = \"x\"\nbenchmarks = []\n").unwrap();
    let err = TestCommand::new(&["eval", "--config"])
        .arg(&cfg)
        .fails_with(1);
    assert!(err.contains("benchmarks"), "{err}");
}

/// The job-array script, run as two local processes at once (as two array tasks would be),
/// then its merge job: the merged run holds the episodes and report of one unsharded run.
#[test]
fn the_array_script_shards_an_eval_over_two_processes_and_merges_it() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let whole = tempfile::tempdir().unwrap();
    let cfg = write_config(whole.path());
    TestCommand::new(&["eval", "--config"]).arg(&cfg).stdout();
    let split = tempfile::tempdir().unwrap();
    let split_cfg = write_config(split.path());
    let array_task = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new("bash");
        crate::harness::one_compute_thread(&mut cmd)
            .arg(repo().join("scripts/eval-array.sbatch"))
            .current_dir(repo())
            .env("CONFIG", &split_cfg)
            .env("ONEBRAIN", env!("CARGO_BIN_EXE_onebrain"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    };
    let shards: Vec<std::process::Child> = ["0", "1"]
        .iter()
        .map(|k| {
            array_task(&[("SLURM_ARRAY_TASK_ID", k), ("SLURM_ARRAY_TASK_COUNT", "2")])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in shards {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("ran 1 episode(s)") && stdout.contains("--merge"), "{stdout}");
    }
    let merge = array_task(&[("MERGE", "1")]).output().unwrap();
    let stdout = String::from_utf8_lossy(&merge.stdout);
    assert!(merge.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&merge.stderr));
    assert!(stdout.contains("merged 2 shard(s): 2 episode(s) added, 2 in the run"), "{stdout}");

    // Greedy decoding: each episode decides the same in its shard as in the whole run.
    let decided = |dir: &Path| {
        let trace = std::fs::read_to_string(dir.join("run/trace.jsonl")).unwrap();
        let mut v: Vec<(String, String, bool, u64)> = trace
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|r| (r["task_id"].to_string(), r["strategy"].to_string(), r["solved"].as_bool().unwrap(), r["solver_calls"].as_u64().unwrap()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(decided(split.path()), decided(whole.path()));
    assert_eq!(decided(split.path()).len(), 2);

    // The shards' folders stay, each with its manifest; a shard of another N is refused.
    for k in 0..2 {
        assert!(split.path().join(format!("run/shards/{k}-of-2/shard.json")).is_file());
    }
    let err = TestCommand::new(&["eval", "--shard", "2/2", "--config"]).arg(&split_cfg).fails_with(2);
    assert!(err.contains("K/N"), "{err}");
}

/// The fault-injection soak (`configs/eval-soak.toml`) cut to 8 episodes. Its
/// reward and checker (`chaos-reward`, `chaos-checker`) trap, answer NaN or hang until the
/// host's limits stop them, each on 10 % of calls. Every episode reaches the trace, the run
/// ends normally, and the report's failure table counts exactly the plugin calls the records
/// show failed (a record without rewards, or without a faithfulness report), each for a cause
/// the plugins inject.
#[test]
fn soak_records_every_episode_and_counts_each_failed_step() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    build_plugins();
    let configs = repo().join("configs");
    let mut cfg = onebrain_eval::EvalConfig::from_file(&configs.join("eval-soak.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    cfg.out_dir = dir.path().join("run");
    for b in &mut cfg.benchmarks {
        b.sample = 2;
    }
    // The copy lives elsewhere: its relative paths become absolute ones.
    let p = &mut cfg.plugins;
    p.plugin_dirs = p.plugin_dirs.iter().map(|d| configs.join(d)).collect();
    p.cache_dir = p.cache_dir.as_ref().map(|d| configs.join(d));
    for plugin in [&mut p.reward, &mut p.checker] {
        let path = plugin.as_ref().expect("the soak names a reward and a checker");
        *plugin = Some(configs.join(path).to_string_lossy().into_owned());
    }
    let path = dir.path().join("eval-soak.toml");
    std::fs::write(&path, toml::to_string(&cfg).unwrap()).unwrap();

    let out = TestCommand::new(&["eval", "--config"]).arg(&path).stdout();
    assert!(out.contains("ran 8 episode(s), 0 found in the trace"), "{out}");
    let run = dir.path().join("run");
    let trace = std::fs::read_to_string(run.join("trace.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut ids: Vec<&str> = records.iter().map(|r| r["task_id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8, "every episode once: {ids:?}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    let strategy = &report["strategies"][0];
    let rows = strategy["failures"].as_array().cloned().unwrap_or_default();
    let counted = |step: &str| {
        rows.iter().filter(|r| r["step"] == step).map(|r| r["count"].as_u64().unwrap() as usize).sum::<usize>()
    };
    let absent = |field: &str| records.iter().filter(|r| r.get(field).is_none_or(|v| v.is_null())).count();
    assert_eq!(counted("reward"), absent("rewards"), "{rows:?}");
    assert_eq!(counted("checker"), absent("faithfulness"), "{rows:?}");
    assert_eq!(counted("model") + counted("other"), 0, "{rows:?}");
    // Each record names its failed calls with their kinds, which are the ones the plugins
    // inject, and the table is those kinds counted (the words of `error` play no part).
    let injected = ["trap", "non-finite", "timeout", "fuel"];
    let mut kinds: std::collections::BTreeMap<(String, String), u64> = Default::default();
    for r in &records {
        let failures = r.get("failures").and_then(|f| f.as_array()).cloned().unwrap_or_default();
        assert_eq!(r.get("error").is_some_and(|e| !e.is_null()), !failures.is_empty(), "{r}");
        for f in &failures {
            let (plugin, kind) = (f["plugin"].as_str().unwrap(), f["kind"].as_str().unwrap_or("none"));
            assert!(["reward", "checker"].contains(&plugin) && injected.contains(&kind), "{f}");
            *kinds.entry((plugin.to_string(), kind.to_string())).or_default() += 1;
        }
    }
    let table: std::collections::BTreeMap<(String, String), u64> = rows
        .iter()
        .map(|r| ((r["step"].as_str().unwrap().to_string(), r["cause"].as_str().unwrap().to_string()), r["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(table, kinds, "{rows:?}");
    let errors = records.iter().filter(|r| r.get("error").is_some_and(|e| !e.is_null())).count();
    assert_eq!(strategy["errors"].as_u64().unwrap() as usize, errors);
    // 16 plugin calls at 30 % each: all honest has odds 0.7^16, 0.3 %. The draws hash the
    // model's greedy answers, so a given machine sees the same ones on every run.
    assert!(errors > 0, "no fault was injected in 8 episodes");
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("## Failed steps (by step and cause)"), "{md}");
}

/// With every request refused by the memory budget, `eval` wrote each episode as
/// an unsolved answer ("the model wrote no PDDL"), reported 0 % solved and exited 0. Now the
/// episodes are errors apart from the answers, and the run exits 1 with the refusal.
#[test]
fn an_eval_whose_every_request_is_refused_exits_with_the_refusal() {
    if let Some(why) = model_ready() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let text = std::fs::read_to_string(&cfg).unwrap();
    // Below the weights alone: every request is refused before its prefill.
    let text = text.replace("[model]\n", "[model]\nmemory_budget_mb = 64\n");
    std::fs::write(&cfg, text).unwrap();
    let err = TestCommand::new(&["eval", "--config"]).arg(&cfg).fails_with(1);
    assert!(err.contains("none of the 2 episode(s) in "), "{err}");
    assert!(err.contains("model error (actor): ") && err.contains("past the memory budget of 64 MiB"), "{err}");
    let run = dir.path().join("run");
    for line in std::fs::read_to_string(run.join("trace.jsonl")).unwrap().lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(rec["error"].as_str().unwrap().starts_with("model error (actor): "), "{rec}");
        assert!(rec.get("faithfulness").is_none(), "no answer to check: {rec}");
    }
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("1 of 1 episodes stopped on an error before their answer"), "{md}");
    assert!(!md.contains("0.0 (0/1)"), "{md}");
}

//! Held-out evaluations after a run (`onebrain posthoc`): a run's kept checkpoints solve an
//! eval config's tasks with the binary at hand, so that every arm's rows, before and after,
//! come from one build and one set of tasks, including sets the run never evaluated (such as
//! the held-out slice and the update-0 set at updates 0, 10, 20, 30 and 40).
//!
//! Each evaluation is an ordinary, resumable eval run in `RUN/posthoc/SET/update-NNNNNN/`
//! (SET: the eval config's file stem), solved by the run's own `[model]` (its role tokens,
//! adapters and their initial values) with the checkpoint's parameters on top, or none for
//! update 0: the parameters the run started from. Its row goes to `RUN/posthoc/SET.jsonl`,
//! which `onebrain compare --set SET` reads as it reads `heldout.jsonl`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use onebrain_eval::{EvalConfig, Progress};
use onebrain_roles::config_base;

use crate::checkpoint::checkpoint_dir;
use crate::error::TrainError;
use crate::heldout::{read_rows, HeldOutRow};
use crate::TrainConfig;

/// The folder of a run's post-hoc evaluations on the eval config named `set`.
pub fn posthoc_dir(run_dir: &Path, set: &str) -> PathBuf {
    run_dir.join("posthoc").join(set)
}

/// The log of those evaluations' rows, one per update.
pub fn posthoc_rows_path(run_dir: &Path, set: &str) -> PathBuf {
    run_dir.join("posthoc").join(format!("{set}.jsonl"))
}

/// The set's name: the eval config's file stem (`configs/eval-heldout.toml` → `eval-heldout`).
pub fn set_name(eval_config: &Path) -> Result<String, TrainError> {
    eval_config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| TrainError::Config(format!("{}: not an eval config file", eval_config.display())))
}

/// The eval config that evaluates `run_dir`'s parameters after `update` updates on the tasks
/// of `eval_config` (its `[model]` replaced by the run's, its out-dir by the post-hoc one).
pub fn posthoc_config(run_dir: &Path, eval_config: &Path, update: u64) -> Result<EvalConfig, TrainError> {
    let file = |path: &Path, message: String| TrainError::ConfigFile { path: path.to_path_buf(), message };
    let run_json = run_dir.join("config.json");
    let text = std::fs::read_to_string(&run_json).map_err(|e| file(&run_json, format!("not a run folder: {e}")))?;
    let run: TrainConfig = serde_json::from_str(&text).map_err(|e| file(&run_json, e.to_string()))?;
    let mut cfg = EvalConfig::from_file(eval_config).map_err(|e| file(eval_config, e.to_string()))?;
    cfg.model = run.model;
    cfg.checkpoint = match update {
        0 => None,
        u => {
            let dir = checkpoint_dir(&run_dir.join("checkpoints"), u);
            if !dir.is_dir() {
                return Err(TrainError::Checkpoint {
                    path: dir,
                    reason: format!(
                        "no checkpoint of update {u} in the run: only the newest and every \
                         `keep-checkpoints-every`-th are kept"
                    ),
                });
            }
            Some(std::path::absolute(&dir).map_err(|e| TrainError::io(&dir, e))?)
        }
    };
    cfg.out_dir = std::path::absolute(posthoc_dir(run_dir, &set_name(eval_config)?))
        .map_err(|e| TrainError::io(run_dir, e))?
        .join(format!("update-{update:06}"));
    Ok(cfg)
}

/// Evaluates the parameters after `update` updates on `eval_config`'s tasks (resuming the
/// evaluation's trace if one is there) and writes its row into the set's log, replacing an
/// older row of the same update. `adjust` sets what changes no answer (`in-flight`, the
/// device) before it runs.
pub fn evaluate_update(
    run_dir: &Path,
    eval_config: &Path,
    update: u64,
    adjust: impl FnOnce(&mut EvalConfig),
    progress: &mut dyn FnMut(&Progress),
) -> Result<HeldOutRow, TrainError> {
    let mut cfg = posthoc_config(run_dir, eval_config, update)?;
    adjust(&mut cfg);
    // One process evaluates a run on a set at a time (a training run may go on meanwhile: it
    // never writes `posthoc/`).
    let set = set_name(eval_config)?;
    let _lock = onebrain_durable::FolderLock::acquire(&posthoc_dir(run_dir, &set))?;
    let t0 = Instant::now();
    let outcome = onebrain_eval::run_eval(&cfg, &config_base(eval_config), None, progress)?;
    if let Some(e) = outcome.no_answers() {
        return Err(e.into());
    }
    let records = onebrain_eval::read_trace(&outcome.trace_path)?.records;
    let row = HeldOutRow::from_records(update, &records, t0.elapsed().as_secs_f64());
    let log = posthoc_rows_path(run_dir, &set);
    let mut rows: Vec<HeldOutRow> = read_rows(&log)?.into_iter().filter(|r| r.update != update).collect();
    rows.push(row.clone());
    rows.sort_by_key(|r| r.update);
    let text: String = rows.iter().map(|r| serde_json::to_string(r).expect("a row serialises") + "\n").collect();
    // Replaced whole, so that a kill or a full disk mid-write keeps the old rows.
    onebrain_durable::write_atomic(&log, text)?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_folder(dir: &Path) {
        let mut run = TrainConfig::default();
        run.model.path = "the-run's-model.gguf".into();
        run.model.role_tokens = 3;
        std::fs::write(dir.join("config.json"), serde_json::to_string(&run).unwrap()).unwrap();
        std::fs::create_dir_all(dir.join("checkpoints/update-000010")).unwrap();
    }

    fn eval_config(dir: &Path) -> PathBuf {
        let path = dir.join("eval-slice.toml");
        let text = "name = \"slice\"\nout-dir = \"elsewhere\"\nstrategies = [\"multi-role\"]\n\
                    [[benchmarks]]\ndomain = \"blocksworld\"\nsource = \"planbench\"\nset = \"blocksworld\"\nsample = 1\n\
                    [model]\npath = \"another.gguf\"\n";
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_posthoc_evaluation_runs_the_run_s_model_and_checkpoint_into_the_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path());
        let eval = eval_config(dir.path());
        let cfg = posthoc_config(dir.path(), &eval, 10).unwrap();
        assert_eq!(cfg.model.path, PathBuf::from("the-run's-model.gguf"));
        assert_eq!(cfg.model.role_tokens, 3);
        assert!(cfg.checkpoint.unwrap().ends_with("checkpoints/update-000010"));
        assert!(cfg.out_dir.ends_with("posthoc/eval-slice/update-000010"), "{}", cfg.out_dir.display());
        // Update 0: the parameters the run started from, no checkpoint.
        assert!(posthoc_config(dir.path(), &eval, 0).unwrap().checkpoint.is_none());
    }

    #[test]
    fn a_second_posthoc_of_one_set_is_refused_naming_the_holder_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path());
        let eval = eval_config(dir.path());
        let held = onebrain_durable::FolderLock::acquire(&posthoc_dir(dir.path(), "eval-slice")).unwrap();
        let err = evaluate_update(dir.path(), &eval, 10, |_| {}, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("posthoc/eval-slice is in use by another onebrain process (pid "), "{err}");
        assert!(!posthoc_rows_path(dir.path(), "eval-slice").exists());
        assert!(!posthoc_dir(dir.path(), "eval-slice").join("update-000010").exists());
        // Released with its holder: the next one gets past the lock (and on to the evaluation).
        drop(held);
        let err = evaluate_update(dir.path(), &eval, 10, |_| {}, &mut |_| {}).unwrap_err().to_string();
        assert!(!err.contains("in use"), "{err}");
    }

    #[test]
    fn a_checkpoint_the_run_did_not_keep_is_named_and_explained() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path());
        let err = posthoc_config(dir.path(), &eval_config(dir.path()), 7).unwrap_err().to_string();
        assert!(err.contains("update-000007") && err.contains("keep-checkpoints-every"), "{err}");
        let err = posthoc_config(&dir.path().join("nothing"), &eval_config(dir.path()), 0).unwrap_err().to_string();
        assert!(err.contains("config.json") && err.contains("not a run folder"), "{err}");
    }
}

#!/usr/bin/env bash
# Every evaluation the sizes arm's tables need, each an ordinary resumable `onebrain eval` or
# `onebrain posthoc` run: rerun the script after a stop and each continues from its trace, and
# the finished ones are skipped. Run it beside nothing else that is timed.
#
#   ONEBRAIN_BIN=/work/runs/arm-src/target/release/onebrain scripts/sizes-arm-evals.sh [PART...]
#
# PARTs (default: all, in this order):
#   base      the base model on the large set and the slice: the single greedy answer
#             (configs/eval-large.toml; the slice's is the run's own update-0 row), then
#             best-of-k and the combined method, SEEDS draws each
#   posthoc   the arm's kept checkpoints (updates 20, 40, 60) on the large set and the slice
#   trained   the combined method with the arm's last checkpoint, SEEDS draws on both sets
# RUN (default /work/runs/train-1.5b-sizes) is the arm's run folder, OUT (default /work/runs)
# where the evaluations go, COMMITTED (default results/train-1.5b-sizes/evals) where
# scripts/arms-sync.sh keeps their copies, to restore a missing one from, SEEDS (default
# "0 1 2") the draws. The tables come from scripts/draws.py over the folders this writes
# (results/train-1.5b-sizes/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ONEBRAIN_BIN:-target/release/onebrain}
run=${RUN:-/work/runs/train-1.5b-sizes}
out=${OUT:-/work/runs}
committed_root=${COMMITTED:-results/train-1.5b-sizes/evals}
seeds=${SEEDS:-0 1 2}
parts=${*:-base posthoc trained}

say() { echo "== $(date -u +%FT%TZ) $*" >&2; }

# One evaluation into $1 with the rest as `onebrain eval` arguments; skipped when its report
# is written (a finished run), resumed from its trace otherwise.
eval_into() {
  local dir=$1
  shift
  if [ -f "$dir/report.md" ]; then
    say "done already: $dir"
    return 0
  fi
  # A machine that lost $out resumes from what scripts/arms-sync.sh committed.
  local committed=$committed_root/${dir#"$out"/}
  if [ ! -d "$dir" ] && [ -f "$committed/trace.jsonl.gz" ]; then
    say "restoring $dir from $committed"
    mkdir -p "$dir"
    find "$committed" -maxdepth 1 -type f ! -name trace.jsonl.gz -exec cp {} "$dir"/ \;
    gunzip -c "$committed/trace.jsonl.gz" > "$dir/trace.jsonl"
  fi
  say "eval $dir"
  "$bin" eval --out-dir "$dir" "$@"
}

last_checkpoint() {
  ls -d "$run"/checkpoints/update-* 2>/dev/null | sort | tail -1
}

for part in $parts; do
  case $part in
    base)
      eval_into "$out/eval-large-base" --config configs/eval-large.toml
      for method in best-of-k combined; do
        for seed in $seeds; do
          eval_into "$out/eval-large-$method-base/seed-$seed" --config "configs/eval-large-$method.toml" --seed "$seed"
          eval_into "$out/eval-heldout-$method-base/seed-$seed" --config "configs/eval-heldout-$method.toml" --seed "$seed"
        done
      done
      ;;
    posthoc)
      for set in eval-large eval-heldout; do
        say "posthoc $run $set"
        "$bin" posthoc --run "$run" --config "configs/$set.toml" --updates 20,40,60
      done
      ;;
    trained)
      ckpt=$(last_checkpoint)
      [ -n "$ckpt" ] || { echo "sizes-arm-evals: $run has no checkpoint yet" >&2; exit 1; }
      tag=$(basename "$ckpt")
      for seed in $seeds; do
        eval_into "$out/eval-large-combined-$tag/seed-$seed" --config configs/eval-large-combined.toml --seed "$seed" --checkpoint "$ckpt"
        eval_into "$out/eval-heldout-combined-$tag/seed-$seed" --config configs/eval-heldout-combined.toml --seed "$seed" --checkpoint "$ckpt"
      done
      ;;
    *)
      echo "sizes-arm-evals: unknown part $part (base, posthoc, trained)" >&2
      exit 2
      ;;
  esac
done

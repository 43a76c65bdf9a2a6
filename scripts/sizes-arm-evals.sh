#!/usr/bin/env bash
# Every evaluation the sizes arm's tables need, each an ordinary resumable `onebrain eval` or
# `onebrain posthoc` run: rerun the script after a stop and each continues from its trace, and
# the finished ones are skipped. Run it beside nothing else that is timed.
#
#   ONEBRAIN_BIN=/work/runs/arm-src/target/release/onebrain scripts/sizes-arm-evals.sh [PART...]
#
# PARTs (default: all, in this order, which is the order of what the tables need most):
#   greedy      the base model's single greedy answer on the large set
#               (configs/eval-large.toml; the slice's is the run's own update-0 row)
#   posthoc     the arm's kept checkpoints (updates 20, 40, 60) on the large set and the
#               slice, those that exist; every later evaluation of any part checks again
#               before it starts, so a checkpoint written meanwhile goes first
#   combined    the base model with the combined method on both sets, SEEDS draws each
#   trained     the combined method with the arm's update-60 checkpoint, SEEDS draws on both
#               sets (skipped until that checkpoint exists)
#   best-of-k   the base model with best-of-k on both sets, SEEDS draws each
#   base        greedy, combined and best-of-k
# RUN (default /work/runs/train-1.5b-sizes) is the arm's run folder, OUT (default /work/runs)
# where the evaluations go, COMMITTED (default results/train-1.5b-sizes) where
# scripts/arms-sync.sh keeps their copies (evals/ and posthoc/), to restore a missing one
# from, SEEDS (default "0 1 2") the draws. The tables come from scripts/draws.py over the
# folders this writes (results/train-1.5b-sizes/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ONEBRAIN_BIN:-target/release/onebrain}
run=${RUN:-/work/runs/train-1.5b-sizes}
out=${OUT:-/work/runs}
committed_root=${COMMITTED:-results/train-1.5b-sizes}
seeds=${SEEDS:-0 1 2}
parts=${*:-greedy posthoc combined trained best-of-k}
last_update=60

say() { echo "== $(date -u +%FT%TZ) $*" >&2; }

# Compute threads for the next evaluation: one while the arm trains (beside it on two busy
# cores a second buys nothing: results/bench-pool), every core once it has finished.
threads() {
  if pgrep -f "onebrain train .*--out-dir $run" > /dev/null; then
    echo 1
  else
    nproc
  fi
}

# A machine that lost the evaluation folder $1 resumes it from what scripts/arms-sync.sh
# committed in $2: its files, and its trace unzipped.
restore() {
  local dir=$1 committed=$2
  if [ ! -d "$dir" ] && [ -f "$committed/trace.jsonl.gz" ]; then
    say "restoring $dir from $committed"
    mkdir -p "$dir"
    find "$committed" -maxdepth 1 -type f ! -name trace.jsonl.gz -exec cp {} "$dir"/ \;
    gunzip -c "$committed/trace.jsonl.gz" > "$dir/trace.jsonl"
  fi
}

# The base model's evaluations with the sampled method $1 on both sets, SEEDS draws each.
sampled_base() {
  local method=$1 seed
  for seed in $seeds; do
    eval_into "$out/eval-large-$method-base/seed-$seed" --config "configs/eval-large-$method.toml" --seed "$seed"
    eval_into "$out/eval-heldout-$method-base/seed-$seed" --config "configs/eval-heldout-$method.toml" --seed "$seed"
  done
}

# One evaluation into $1 with the rest as `onebrain eval` arguments; skipped when its report
# is written (a finished run), resumed from its trace otherwise. A kept checkpoint that the
# arm wrote while the evaluation before ran gets its post-hoc evaluations first.
eval_into() {
  local dir=$1
  shift
  if [ -f "$dir/report.md" ]; then
    say "done already: $dir"
    return 0
  fi
  posthoc_kept
  restore "$dir" "$committed_root/evals/${dir#"$out"/}"
  say "eval $dir"
  RAYON_NUM_THREADS=$(threads) "$bin" eval --out-dir "$dir" "$@"
}

checkpoint() {
  printf '%s/checkpoints/update-%06d' "$run" "$1"
}

# The post-hoc evaluation folder of set $2 at update $3 under the run folder (or its
# committed copy) $1.
posthoc_dir() {
  printf '%s/posthoc/%s/update-%06d' "$1" "$2" "$3"
}

# The post-hoc evaluations (large set and slice) of every kept checkpoint that exists. One
# with its report written is skipped without starting the binary, so this runs before each
# evaluation and catches a checkpoint as soon as the evaluation before it ends.
posthoc_kept() {
  local update set
  for update in 20 40 $last_update; do
    if [ ! -d "$(checkpoint "$update")" ]; then
      continue
    fi
    for set in eval-large eval-heldout; do
      [ -f "$(posthoc_dir "$run" "$set" "$update")/report.md" ] && continue
      restore "$(posthoc_dir "$run" "$set" "$update")" "$(posthoc_dir "$committed_root" "$set" "$update")"
      say "posthoc $run $set update $update"
      RAYON_NUM_THREADS=$(threads) "$bin" posthoc --run "$run" --config "configs/$set.toml" --updates "$update"
    done
  done
}

parts=${parts//base/greedy combined best-of-k}
for part in $parts; do
  case $part in
    greedy)
      eval_into "$out/eval-large-base" --config configs/eval-large.toml
      ;;
    posthoc)
      posthoc_kept
      ;;
    combined)
      sampled_base combined
      ;;
    best-of-k)
      sampled_base best-of-k
      ;;
    trained)
      ckpt=$(checkpoint $last_update)
      if [ ! -d "$ckpt" ]; then
        say "trained: no checkpoint of update $last_update in $run yet, skipped"
        continue
      fi
      tag=$(basename "$ckpt")
      for seed in $seeds; do
        eval_into "$out/eval-large-combined-$tag/seed-$seed" --config configs/eval-large-combined.toml --seed "$seed" --checkpoint "$ckpt"
        eval_into "$out/eval-heldout-combined-$tag/seed-$seed" --config configs/eval-heldout-combined.toml --seed "$seed" --checkpoint "$ckpt"
      done
      ;;
    *)
      echo "sizes-arm-evals: unknown part $part (greedy, posthoc, combined, trained, best-of-k, base)" >&2
      exit 2
      ;;
  esac
done

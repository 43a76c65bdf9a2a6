#!/usr/bin/env bash
# Puts the sizes arm and its evaluations back to work on this machine, from whatever is
# left of them: run it from `main` at the start of a session.
#
#   scripts/sizes-arm-resume.sh            RUNS=/work/runs by default
#
# - The arm's own tree: a worktree of ARM_COMMIT (a9bdb2e, the commit the arm runs on) in
#   RUNS/arm-src, with its release binary and plugins built there (about 10 min cold), and
#   the models and Python environment of `main` linked in. Kept when it is there. From
#   update 34 on, the binary has one change on top of a9bdb2e: the compute pool of
#   host/kernels/src/pool.rs (as of POOL_COMMIT) in place of candle's barrier pool at the
#   same 13 call sites. Its chunks are candle's, so its numbers are too; its waits give the
#   core away, so the arm loses less to whatever runs beside it (results/bench-pool).
# - The run folder RUNS/train-1.5b-sizes: restored from results/train-1.5b-sizes when it is
#   missing (config, metrics, held-out lines, twins, the committed checkpoints and the
#   episode log unzipped), so that `--resume` goes on from the newest committed checkpoint.
# - The arm: `onebrain train --resume` in the background (log RUNS/train-1.5b-sizes.log),
#   unless it has all its updates. A second one cannot start beside a running one: the run
#   folder's lock (`flock`) refuses it, naming the holder.
# - The evaluations: scripts/sizes-arm-evals.sh (main's copy) from the arm's tree, `nice -n
#   10` so the arm keeps the cores, and the same for their session's autogroup where the
#   kernel groups by session (log RUNS/evals.log), SEEDS="0 1" unless SEEDS says more.
#   Each resumes from its trace, or from the copy scripts/arms-sync.sh committed.
#   Each evaluation runs on one compute thread while the arm trains (beside the arm on two
#   busy cores a second buys nothing: results/bench-pool, "One SmolLM2 answer beside the
#   1.5B arm"), and on every core once the arm has finished.
# Before stopping a session: `RUNS=/work/runs scripts/arms-sync.sh` and commit
# (results/train-1.5b-sizes/README.md says what to trim and keep).
set -euo pipefail
cd "$(dirname "$0")/.."
main=$PWD
runs=${RUNS:-/work/runs}
arm_commit=${ARM_COMMIT:-a9bdb2e}
pool_commit=${POOL_COMMIT:-e0836bc}
src=$runs/arm-src
run=$runs/train-1.5b-sizes
results=$main/results/train-1.5b-sizes
updates=60

say() { echo "== $(date -u +%FT%TZ) sizes-arm-resume: $*" >&2; }

mkdir -p "$runs"
if [ ! -x "$src/target/release/onebrain" ]; then
  say "building the arm's tree ($arm_commit) in $src"
  scripts/setup.sh --models default --no-plugins &
  setup=$!
  [ -d "$src" ] || git worktree add "$src" "$arm_commit"
  # The pool's port, once: a kept tree without it (made before update 34) gets it too.
  if [ ! -f "$src/host/model/src/pool.rs" ]; then
    grep -rl 'barrier_pool().execute_chunked' "$src/host/model/src" | xargs sed -i \
      's/candle_core::utils::barrier_pool().execute_chunked(/crate::pool::execute_chunked(/'
    sed -i 's/candle_core::utils::barrier_pool().execute_chunked(/onebrain_model::pool::execute_chunked(/' \
      "$src/host/train/src/learner.rs"
    # After the call sites, so that the pool's own way back to candle's stays as it is.
    git show "$pool_commit:host/kernels/src/pool.rs" > "$src/host/model/src/pool.rs"
    sed -i 's/^mod paths;/mod paths;\npub mod pool;/' "$src/host/model/src/lib.rs"
  fi
  (cd "$src" && cargo build --release -p onebrain-cli && scripts/build-plugins.sh)
  wait "$setup"
fi
mkdir -p "$src/.cache"
ln -sfn "$main/.cache/models" "$src/.cache/models"
ln -sfn "$main/.venv" "$src/.venv"
# The configs name the data as ../../shared/data from RUNS/arm-src/configs.
[ -e "$runs/shared" ] || ln -sfn "$(cd "$main/../shared" && pwd)" "$runs/shared"
# A new file, not the old one rewritten: a running copy of the script reads its file as it goes.
cp "$main/scripts/sizes-arm-evals.sh" "$src/scripts/.sizes-arm-evals.sh.$$"
mv "$src/scripts/.sizes-arm-evals.sh.$$" "$src/scripts/sizes-arm-evals.sh"

if [ ! -d "$run" ]; then
  say "restoring $run from $results"
  mkdir -p "$run"
  cp -r "$results"/{config.json,metrics.jsonl,heldout.jsonl,heldout,skipped-twins.jsonl,checkpoints} "$run"/
  gunzip -c "$results/episodes.jsonl.gz" > "$run/episodes.jsonl"
fi

done_updates=$(wc -l < "$run/metrics.jsonl")
if [ "$done_updates" -ge "$updates" ]; then
  say "the arm has all $updates updates"
elif pgrep -f "onebrain train .*--out-dir $run" > /dev/null; then
  say "the arm is running already"
else
  say "resuming the arm at update $((done_updates + 1)) of $updates"
  (cd "$src" && setsid nohup target/release/onebrain train --config configs/train-1.5b-sizes.toml \
    --out-dir "$run" --resume >> "$runs/train-1.5b-sizes.log" 2>&1 < /dev/null &)
fi

if pgrep -f "sizes-arm-evals.sh" > /dev/null; then
  say "the evaluations are running already"
else
  say "starting the evaluations (log $runs/evals.log)"
  (cd "$src" && COMMITTED="$results" OUT="$runs" RUN="$run" SEEDS="${SEEDS:-0 1}" \
    ONEBRAIN_BIN=target/release/onebrain setsid nohup nice -n 10 scripts/sizes-arm-evals.sh \
    >> "$runs/evals.log" 2>&1 < /dev/null &)
fi

# With autogroup scheduling on (as on these machines' kernels), the scheduler shares the CPU between
# sessions first, and `nice` orders threads only within a session: the evaluations, a session
# of their own (setsid), took a whole core beside the arm whatever their nice value. Their
# session's own nice value is what puts them behind the arm.
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
  sleep 1
  for pid in $(pgrep -f "sizes-arm-evals.sh"); do
    echo 10 > "/proc/$pid/autogroup" 2>/dev/null && say "the evaluations' session: $(cat "/proc/$pid/autogroup")"
  done
fi

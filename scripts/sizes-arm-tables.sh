#!/usr/bin/env bash
# The sizes arm's tables, from the finished evaluations committed in results/train-1.5b-sizes
# (scripts/arms-sync.sh copies them there): one file per held-out set, each every method
# with what it has so far, against the base model's single greedy answer.
#
#   scripts/sizes-arm-tables.sh            writes RESULTS/tables-large.md and tables-slice.md
#
# The methods, each where its evaluations have finished (a folder with its report.md):
#   base                the base model's greedy answer: the large set's own evaluation, and on
#                       the slice the run's held-out episode before the first update
#   update-N            the arm's checkpoint of update N (20, 40, 60), greedy, post hoc
#   combined-base       the combined method on the base model, one draw per seed
#   combined-update-60  the combined method on the last checkpoint, one draw per seed
#   best-of-k-base      best-of-k on the base model, one draw per seed
# scripts/draws.py makes each table: per draw with Wilson intervals, mean and range over
# draws, per domain and size bucket, and each method against `base` draw by draw (Newcombe
# interval and exact McNemar p).
set -euo pipefail
cd "$(dirname "$0")/.."
results=${RESULTS:-results/train-1.5b-sizes}

finished() {
  local dir
  for dir in "$@"; do
    [ -f "$dir/report.md" ] && echo "$dir"
  done
  return 0
}

table() {
  local set=$1 base=$2 out=$3 update
  local args=(base: "$base")
  for update in 20 40 60; do
    local dir
    dir=$(finished "$(printf '%s/posthoc/eval-%s/update-%06d' "$results" "$set" "$update")")
    [ -n "$dir" ] && args+=("update-$update:" "$dir")
  done
  local method tag
  for method in combined-base combined-update-000060 best-of-k-base; do
    mapfile -t draws < <(finished "$results/evals/eval-$set-$method"/seed-*)
    tag=${method/update-000060/update-60}
    ((${#draws[@]})) && args+=("$tag:" "${draws[@]}")
  done
  {
    echo "<!-- scripts/sizes-arm-tables.sh: scripts/draws.py ${args[*]} -->"
    python3 scripts/draws.py "${args[@]}"
  } > "$out"
  echo "sizes-arm-tables: $out (${args[*]//$results\//})" >&2
}

table large "$results/evals/eval-large-base" "$results/tables-large.md"
table heldout "$results/heldout/update-000000" "$results/tables-slice.md"

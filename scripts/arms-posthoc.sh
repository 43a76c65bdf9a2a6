#!/usr/bin/env bash
# The reward comparison's held-out rows after the runs, every arm's by one binary: the
# parameters each arm started from (update 0) and its kept checkpoints, on the held-out
# slice (greedy, K = 3) and on the update-0 set (64 generated tasks, T = 0.7, seeds per
# episode). Resumable: rerun it after a stop and each evaluation continues from its trace.
#
#   ONEBRAIN_BIN=target/release/onebrain scripts/arms-posthoc.sh RUN [RUN...]
#
# UPDATES (default 0,10,20,30,40) and SETS (default eval-heldout eval-update0) choose what
# runs. Every arm starts from the same parameters (one model config, one init seed), so
# update 0 runs once, in the first arm, and the others take a copy of its trace. Compare
# with `onebrain compare --set eval-heldout RUN...`.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 RUN [RUN...]" >&2; exit 2; }
# The run folders as absolute paths: the script runs from the repository's root.
runs=()
for run in "$@"; do runs+=("$(realpath "$run")"); done
set -- "${runs[@]}"
cd "$(dirname "$0")/.."
bin=${ONEBRAIN_BIN:-target/release/onebrain}
updates=${UPDATES:-0,10,20,30,40}
sets=${SETS:-eval-heldout eval-update0}
first=$1
# Whether two runs' config.json name the same [model] (and so the same initial parameters).
same_model() {
  python3 -c 'import json, sys; a, b = (json.load(open(p))["model"] for p in sys.argv[1:]); sys.exit(a != b)' "$1" "$2"
}
for set in $sets; do
  for run in "$@"; do
    base=$first/posthoc/$set/update-000000
    if [ "$run" != "$first" ] && [ -f "$base/trace.jsonl" ] && [ ! -e "$run/posthoc/$set/update-000000" ]; then
      if same_model "$first/config.json" "$run/config.json"; then
        mkdir -p "$run/posthoc/$set" && cp -r "$base" "$run/posthoc/$set/"
      else
        echo "$run: another [model] than $first's: its update 0 runs on its own" >&2
      fi
    fi
    echo "== $(date -u +%FT%TZ) $run $set updates $updates" >&2
    "$bin" posthoc --run "$run" --config "configs/$set.toml" --updates "$updates"
  done
done

#!/usr/bin/env bash
# pass@k and best-of-k without gold: run one sampling eval config k times, draw j
# with `--seed j`, then score the k draws of every task together.
#
#   scripts/pass-at-k.sh configs/eval-update0-pass8.toml 8 ../runs/eval-update0-pass8
#
# Each draw is an ordinary, resumable `onebrain eval` run in OUT/seed-J; rerunning the script
# after a stop finishes the draws left and skips the done ones. Extra arguments go to every
# `onebrain eval` (`--checkpoint DIR` scores a trained policy's draws). The summary comes
# from scripts/pass-at-k.py; its selectors read what each trace records (the Judge's score,
# the config's reward).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 CONFIG K OUT [onebrain eval arguments…]" >&2
  exit 2
fi
config=$1 k=$2 out=$3
shift 3
bin=${ONEBRAIN_BIN:-target/release/onebrain}
for ((j = 0; j < k; j++)); do
  echo "== draw $j of $k: $out/seed-$j" >&2
  "$bin" eval --config "$config" --seed "$j" --out-dir "$out/seed-$j" "$@"
done
python3 "$(dirname "$0")/pass-at-k.py" "$out"/seed-*/ | tee "$out/pass-at-k.md"

#!/usr/bin/env bash
# The main job (`make demo`): the combined inference method (configs/solve-combined.toml:
# four Actor answers, each verified and scored by the Judge, one picked by its agreement with
# the task's text, and the Editor's repairs of a pick worth nothing, under the grammar and its
# guards), with the default model (Qwen2.5-Coder-1.5B) on a few PlanBench tasks read in place
# from ../shared/data, in `problem` mode (the domain plugin gives the domain). Each step is
# printed as it happens: the model's output, the verifier's verdict and diagnostics, the
# Judge's score, the pick, the Editor's repair, then faithfulness, final PDDL and plan.
#
# Each task runs twice, side by side: the base model, then the same model with the role
# parameters of the 1.5B arm measured best on the held-out sets (committed under results/;
# results/train-1.5b-sizes/README.md has its tables). The table after each pair says, for
# both, whether it was solved, how long the plan is, and whether the answer still means the
# task; if not, what differs (a goal that already holds, objects or facts missing or
# invented). DEMO_TRAINED= (empty) runs the base model alone, in half the time.
#
# Then the LLM+P baseline on the first task: the planner solves what it writes, and the
# reference checker says whether it still means the task. scripts/demo-verifier.sh shows the
# verifier alone on bundled specs.
#
# DEMO_TASKS overrides the task list (PlanBench `set/instance` ids); DEMO_CONFIG the config;
# DEMO_TRAINED the trained checkpoint folder.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ONEBRAIN_BIN:-target/release/onebrain}
DATA=${ONEBRAIN_DATA:-../shared/data}
CONFIG=${DEMO_CONFIG:-configs/solve-combined.toml}
TRAINED=${DEMO_TRAINED-results/train-1.5b-sizes/checkpoints/update-000020}
# Three tasks of three domains: a 3-block BlocksWorld, and a Mystery BlocksWorld row (the same
# states with obfuscated names) and a one-package Logistics task of the 40-task held-out
# slice, which the arm never trained on, up to a renaming of objects.
TASKS=${DEMO_TASKS:-"blocksworld_3/2 mystery_blocksworld/52 logistics/2"}

step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

if [ ! -d "$DATA/planbench" ]; then
  echo "$DATA/planbench is absent: set ONEBRAIN_DATA to the benchmark data folder" >&2
  exit 2
fi

domain_of() {
  case "$1" in
    blocksworld*) echo blocksworld ;;
    mystery_blocksworld*) echo mystery-blocksworld ;;
    logistics*) echo logistics ;;
    *) echo "unknown PlanBench set in $1" >&2; exit 2 ;;
  esac
}

side_by_side=()
if [ -n "$TRAINED" ]; then
  side_by_side=(--side-by-side "$TRAINED")
fi
# Each task's output is kept too, to count the faithful answers at the end.
outputs=$(mktemp -d)
trap 'rm -rf "$outputs"' EXIT
n=0
for task in $TASKS; do
  n=$((n + 1))
  step "PlanBench $task: the combined method (4 answers verified and judged, one picked by its agreement with the text, at most 2 repairs, 6 verifier calls, grammar and guards)${TRAINED:+, base and trained}" \
    "$BIN" solve --config "$CONFIG" --domain "$(domain_of "$task")" --planbench "$task" --data "$DATA" "${side_by_side[@]}" \
    | tee "$outputs/$n"
done
# The tasks whose answer in column $1 (1: base, 2: trained) is faithful: the `faithful` row
# of each side-by-side table, or without one each episode's `faithful:` line.
faithful_of() {
  if [ -n "$TRAINED" ]; then
    awk -v k="$1" '/^faithful / && $(k + 1) == "yes" { c++ } END { print c + 0 }' "$outputs"/*
  else
    awk '/^ *faithful: yes/ { c++ } END { print c + 0 }' "$outputs"/*
  fi
}
printf '\n\033[1m== Faithful (solved, and the same task as the reference) on these %d tasks\033[0m\n' "$n"
printf 'base model: %d of %d\n' "$(faithful_of 1)" "$n"
if [ -n "$TRAINED" ]; then
  printf 'with the role parameters of %s: %d of %d\n' "$TRAINED" "$(faithful_of 2)" "$n"
fi

first=${TASKS%% *}
step "PlanBench $first with the LLM+P baseline (an in-context example, then the planner): solvable is not the same as faithful" \
  "$BIN" solve --config configs/solve-demo.toml --strategy llm+p --domain "$(domain_of "$first")" --planbench "$first" --data "$DATA"

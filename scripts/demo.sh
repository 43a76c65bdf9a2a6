#!/usr/bin/env bash
# The main job (`make demo`): the multi-role episode (Actor -> verifier -> Judge
# -> Editor) under grammar-constrained decoding, with the default model (Qwen2.5-Coder-0.5B) on a few PlanBench tasks read in
# place from ../shared/data, in `problem` mode (the domain plugin gives the domain). Each step
# is printed as it happens: the model's output, the verifier's verdict and diagnostics, the
# Judge's score, the Editor's repair, then the rewards, faithfulness, final PDDL and plan.
#
# Then the LLM+P baseline on the first task: the planner solves what it writes, and the
# reference checker says whether it still means the task. scripts/demo-verifier.sh shows the
# verifier alone on bundled specs.
#
# DEMO_TASKS overrides the task list (PlanBench `set/instance` ids); DEMO_CONFIG the config.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ONEBRAIN_BIN:-target/release/onebrain}
DATA=${ONEBRAIN_DATA:-../shared/data}
CONFIG=${DEMO_CONFIG:-configs/solve-demo.toml}
# Three small tasks of three domains: 3-block BlocksWorld, 3-object Mystery BlocksWorld
# (the same states with obfuscated names) and a one-package Logistics task.
TASKS=${DEMO_TASKS:-"blocksworld_3/2 mystery_blocksworld_3/4 logistics/2"}

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

for task in $TASKS; do
  step "PlanBench $task: Actor -> verifier -> Judge -> Editor, grammar-constrained (at most 5 repairs, 6 verifier calls)" \
    "$BIN" solve --config "$CONFIG" --domain "$(domain_of "$task")" --planbench "$task" --data "$DATA"
done

first=${TASKS%% *}
step "PlanBench $first with the LLM+P baseline (an in-context example, then the planner): solvable is not the same as faithful" \
  "$BIN" solve --config "$CONFIG" --strategy llm+p --domain "$(domain_of "$first")" --planbench "$first" --data "$DATA"

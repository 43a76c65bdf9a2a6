#!/usr/bin/env bash
# The verifier E(y) alone, on bundled specs and on PlanBench tasks read in place from
# ../shared/data (no model). `make demo` runs scripts/demo.sh, the combined method.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ONEBRAIN_BIN:-target/release/onebrain}
DATA=../shared/data/planbench

# `check` exits 1 for a spec it does not solve: a verdict the demo shows, not a failure.
step() {
  printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "${*:2}"
  local status=0
  "${@:2}" || status=$?
  if [ "$status" -eq 1 ]; then echo "(exit status 1: not solved)"; elif [ "$status" -ne 0 ]; then exit "$status"; fi
}

step "A bundled example: typed Gripper, three balls" \
  "$BIN" check --domain tests/fixtures/gripper-domain.pddl --problem tests/fixtures/gripper-problem.pddl
step "A malformed spec is rejected natively, with the line and column" \
  "$BIN" check --domain tests/fixtures/gripper-domain.pddl --problem tests/fixtures/gripper-problem-malformed.pddl
step "An ill-typed spec: object-type diagnostic" \
  "$BIN" check --domain tests/fixtures/gripper-domain.pddl --problem tests/fixtures/gripper-problem-illtyped.pddl
step "An unsolvable spec: Fast Downward proves it" \
  "$BIN" check --domain tests/fixtures/blocks-domain.pddl --problem tests/fixtures/blocks-problem-unsolvable.pddl
if [ -d "$DATA" ]; then
  step "PlanBench BlocksWorld instance 2" \
    "$BIN" check --domain "$DATA/blocksworld/domain.pddl" --problem "$DATA/blocksworld/instances/instance-2.pddl"
  step "PlanBench Logistics instance 1, as JSON" \
    "$BIN" check --json --domain "$DATA/logistics/domain.pddl" --problem "$DATA/logistics/instances/instance-1.pddl"
else
  echo "(../shared/data is absent: PlanBench steps skipped)"
fi

#!/usr/bin/env bash
# Runs every fuzzing campaign long and keeps each one's whole output as its log under
# results/fuzz/ (docs/reliability.md#fuzzing tables them):
#   scripts/fuzz-campaigns.sh [N] [TARGET...]
# N (default 20000) scales each campaign by what one input costs: the PDDL, manifest, resume
# and GGUF campaigns take N inputs, the grammar's domain walks N/10, its `full`, init-mutex
# and facts-shown walks N/100, manifest folders and checkpoints N/10 and N/4.
# ONEBRAIN_FUZZ_SEED picks the seed (default 35). TARGETs pick campaigns by log name (pddl,
# grammar-domains, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
shift || true
SEED=${ONEBRAIN_FUZZ_SEED:-35}
ONLY=("$@")
mkdir -p results/fuzz

# uncommitted "CARGO ARGS": " + uncommitted changes to FILES" when the sources of the campaign's
# package (its -p argument's folder under host/) or tests/fuzz differ from the commit.
uncommitted() {
  local package=${1#*-p onebrain-}
  local paths=("host/${package%% *}" tests/fuzz)
  if ! git diff --quiet HEAD -- "${paths[@]}"; then
    echo " + uncommitted changes to $(git diff --name-only HEAD -- "${paths[@]}" | tr '\n' ' ' | sed 's/ $//')"
  fi
}

# campaign LOG-NAME CASES "CARGO ARGS" ["TEST FILTERS"]
campaign() {
  local name=$1 cases=$2 args=$3 filters=${4:-}
  if [ ${#ONLY[@]} -gt 0 ] && [[ ! " ${ONLY[*]} " =~ " $name " ]]; then
    return
  fi
  local log="results/fuzz/$name-$cases-seed$SEED.log"
  echo "fuzz-campaigns: $name, $cases inputs, seed $SEED -> $log" >&2
  # Built first, so that the log holds the campaign, not the build (a build error still shows).
  # shellcheck disable=SC2086 # the argument strings are word lists
  cargo test --release --quiet --no-run $args
  {
    echo "# $name: ONEBRAIN_FUZZ_CASES=$cases ONEBRAIN_FUZZ_SEED=$SEED cargo test --release $args -- $filters --nocapture --test-threads 1"
    # A campaign run before its fix is committed says so, with what it ran beyond the commit.
    echo "# $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)$(uncommitted "$args"), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    local start=$SECONDS status=0
    # shellcheck disable=SC2086
    ONEBRAIN_FUZZ_CASES=$cases ONEBRAIN_FUZZ_SEED=$SEED cargo test --release --quiet $args -- $filters --nocapture --test-threads 1 2>&1 || status=$?
    echo "# exit $status, $((SECONDS - start)) s"
  } | tee "$log"
}

campaign pddl "$N" "-p onebrain-pddl --test fuzz"
campaign grammar-domains $((N / 10)) "-p onebrain-grammar --test fuzz" fuzz_domains
campaign grammar-full $((N / 100)) "-p onebrain-grammar --test fuzz" fuzz_full
campaign grammar-init-mutex $((N / 100)) "-p onebrain-grammar --test fuzz" fuzz_init_mutex
campaign grammar-facts $((N / 100)) "-p onebrain-grammar --test fuzz" walked_answers_parse_to_the_facts_their_text_shows
campaign manifest "$N" "-p onebrain-runtime --test fuzz_manifest" "fuzz_manifest_text fuzz_random"
campaign manifest-folders $((N / 10)) "-p onebrain-runtime --test fuzz_manifest" fuzz_manifest_folders
campaign resume "$N" "-p onebrain-cli --test fuzz_resume"
campaign gguf "$N" "-p onebrain-model --test fuzz_gguf"
campaign checkpoint $((N / 4)) "-p onebrain-train --test fuzz_checkpoint"
# Faults a run meets (docs/reliability.md#disks-signals-and-second-writers): signals during a
# training run's checkpoint writes, N/250 runs (each two child processes that load SmolLM2), and
# a full disk anywhere in an evaluation, N/800 fill levels (a tmpfs: needs root).
campaign signals $((N / 250)) "-p onebrain-cli --test fuzz_signals"
campaign disk-full $((N / 800)) "-p onebrain-eval --test faults" fuzz_a_full_disk

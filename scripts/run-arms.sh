#!/usr/bin/env bash
# Runs training arms one after another in the background of a session, each resumed where
# its run folder stands, and snapshots each into results/ when it stops (finished or not),
# so the machine keeps training while the session does other work.
#
#   scripts/run-arms.sh RUNS_DIR ARM [ARM...]     # e.g. /work/runs text-agreement solver-only
#
# ARM names configs/train-1.5b-ARM.toml; its run folder is RUNS_DIR/train-1.5b-ARM and its
# snapshot results/train-1.5b-ARM (scripts/snapshot-run.sh; commit it). An arm whose folder
# is gone but whose snapshot is committed is restored from the snapshot first. Run it from
# a clean checkout (a worktree of main) so edits elsewhere cannot change the binary mid-run:
#   ONEBRAIN=target/release/onebrain (default).
set -uo pipefail

runs=$1
shift
bin=${ONEBRAIN:-target/release/onebrain}
[[ -x "$bin" ]] || { echo "run-arms: $bin is not built (cargo build --release -p onebrain-cli)" >&2; exit 2; }
for arm in "$@"; do
  cfg=configs/train-1.5b-$arm.toml dir=$runs/train-1.5b-$arm results=results/train-1.5b-$arm
  [[ -f "$cfg" ]] || { echo "run-arms: no $cfg" >&2; exit 2; }
  if [[ ! -e "$dir" && -f "$results/checkpoints/LATEST" ]]; then
    scripts/snapshot-run.sh --restore "$results" "$dir" || exit 2
  fi
  # Always --resume: it starts a run in an empty folder, and continues one killed before its
  # first checkpoint (in its base held-out evaluation) where its trace stands.
  state=new
  [[ -e "$dir/episodes.jsonl" ]] && state=resumed
  echo "run-arms: $arm in $dir ($state) at $(date -u +%FT%TZ)"
  "$bin" train --config "$cfg" --out-dir "$dir" --resume -v >> "$dir.log" 2>&1
  status=$?
  echo "run-arms: $arm stopped with status $status at $(date -u +%FT%TZ)"
  # Keep the results folder's own README: the snapshot replaces only the run's files.
  [[ -f "$dir/checkpoints/LATEST" ]] && scripts/snapshot-run.sh "$dir" "$results"
  [[ $status -eq 0 ]] || exit "$status"
done

#!/usr/bin/env bash
# Copies the 1.5B arms' small files from their run folders into results/ for committing:
# config, metrics, curves, the episode log gzipped, held-out lines and each held-out
# evaluation's report and trace (gzipped, about 140 KB for 40 tasks: `onebrain compare` pairs
# the tasks of two evaluations by it), and the same of its post-hoc evaluations; then the
# sizes arm's other evaluations (scripts/sizes-arm-evals.sh), finished or not, since a
# machine that does not come back takes an unfinished one's trace with it.
# Rerun as the arms go; it copies only what exists.
#   scripts/arms-sync.sh            RUNS=/work/runs by default
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-/work/runs}
# One evaluation folder: its files (not the lock, which the OS holds), the trace gzipped
# (`-n`: the same trace gives the same bytes, so an unchanged one does not show as modified).
copy_eval() {
  mkdir -p "$2"
  find "$1" -maxdepth 1 -type f ! -name trace.jsonl ! -name lock -exec cp {} "$2"/ \;
  [ -f "$1/trace.jsonl" ] && gzip -n -c "$1/trace.jsonl" > "$2/trace.jsonl.gz"
  return 0
}
for run in "$RUNS"/train-1.5b-*/; do
  arm=$(basename "$run")
  out=results/$arm
  mkdir -p "$out"
  for f in config.json metrics.jsonl heldout.jsonl curves.svg skipped-twins.jsonl; do
    [ -f "$run/$f" ] && cp "$run/$f" "$out/$f"
  done
  # The episode log, gzipped (about 60 KB an update): scripts/train-stream.py reads it.
  # Each commit of it stores the whole log again: commit it once a session, not every update.
  [ -f "$run/episodes.jsonl" ] && gzip -n -c "$run/episodes.jsonl" > "$out/episodes.jsonl.gz"
  for eval in "$run"/heldout/update-*/; do
    [ -d "$eval" ] || continue
    copy_eval "$eval" "$out/heldout/$(basename "$eval")"
  done
  # Post-hoc evaluations (`onebrain posthoc`): each set's rows, and each evaluation's
  # report and trace, finished or not (scripts/sizes-arm-evals.sh resumes from them).
  for rows in "$run"/posthoc/*.jsonl; do
    [ -f "$rows" ] && mkdir -p "$out/posthoc" && cp "$rows" "$out/posthoc/"
  done
  for eval in "$run"/posthoc/*/update-*/; do
    [ -f "$eval/trace.jsonl" ] || continue
    set=$(basename "$(dirname "$eval")")
    copy_eval "$eval" "$out/posthoc/$set/$(basename "$eval")"
  done
  echo "arms-sync: $out"
done
# The sizes arm's evaluations, each RUNS/eval-*[/seed-N] folder with a trace, to
# results/train-1.5b-sizes/evals/ (scripts/sizes-arm-evals.sh resumes from there).
find "$RUNS" -maxdepth 3 -name trace.jsonl -path "$RUNS/eval-*" | sort | while read -r trace; do
  eval=$(dirname "$trace")
  copy_eval "$eval" "results/train-1.5b-sizes/evals/${eval#"$RUNS"/}"
  echo "arms-sync: results/train-1.5b-sizes/evals/${eval#"$RUNS"/}"
done

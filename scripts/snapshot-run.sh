#!/usr/bin/env bash
# Keeps a training run across sessions: a machine lost mid-run costs at most the updates
# since the last snapshot.
#
#   scripts/snapshot-run.sh RUN_DIR RESULTS_DIR            # run folder -> results (to commit)
#   scripts/snapshot-run.sh --restore RESULTS_DIR RUN_DIR  # results -> a run folder to --resume
#
# A snapshot holds the run's small files (config.json, metrics.jsonl, heldout.jsonl,
# curves.svg), its episode log and held-out traces gzipped, the held-out reports, and its
# newest checkpoint (role parameters and optimizer state, about 19 MB for the CPU configs), so
#   onebrain train --config configs/train-1.5b-ARM.toml --out-dir RUN_DIR --resume
# continues exactly where it stood. Safe while the run trains: the trainer writes a checkpoint
# whole before it names it in LATEST.
set -euo pipefail

if [[ "${1:-}" == "--restore" ]]; then
  src=$2 dst=$3
  [[ -e "$dst" ]] && { echo "snapshot-run: $dst exists; restore into a new folder" >&2; exit 2; }
  mkdir -p "$dst"
  cp -r "$src"/. "$dst"/
  find "$dst" -name '*.jsonl.gz' -exec gunzip {} +
  rm -f "$dst/README.md"
  echo "restored $src into $dst"
  exit 0
fi

run=$1 out=$2
[[ -f "$run/checkpoints/LATEST" ]] || { echo "snapshot-run: $run has no checkpoint yet" >&2; exit 2; }
latest=$(cat "$run/checkpoints/LATEST")
mkdir -p "$out"
rm -rf "$out/checkpoints" "$out/heldout"
for f in config.json metrics.jsonl heldout.jsonl curves.svg; do
  [[ -f "$run/$f" ]] && cp "$run/$f" "$out/"
done
gzip -c "$run/episodes.jsonl" > "$out/episodes.jsonl.gz"
for d in "$run"/heldout/update-*; do
  [[ -d "$d" ]] || continue
  mkdir -p "$out/heldout/$(basename "$d")"
  cp "$d"/report.md "$d"/report.json "$out/heldout/$(basename "$d")/" 2>/dev/null || true
  [[ -f "$d/trace.jsonl" ]] && gzip -c "$d/trace.jsonl" > "$out/heldout/$(basename "$d")/trace.jsonl.gz"
done
mkdir -p "$out/checkpoints/$latest"
cp "$run/checkpoints/$latest"/* "$out/checkpoints/$latest/"
echo "$latest" > "$out/checkpoints/LATEST"
echo "snapshot of $run at $latest in $out"

#!/usr/bin/env bash
# Issue 47's three 1.5B arms, one after the other, each resumable: rerun this script after a
# stop and every arm continues from its newest checkpoint (an empty out-dir starts it).
# ONEBRAIN_BIN: the binary (one for all three arms); RUNS: where the run folders go (outside the work tree).
set -u
cd "$(dirname "$0")/.."
BIN=${ONEBRAIN_BIN:-target/release/onebrain}
RUNS=${RUNS:-/work/runs}
for arm in text-agreement solver-only full; do
  echo "== $(date -u +%FT%TZ) arm $arm" >> $RUNS/arms.log
  RAYON_NUM_THREADS=2 "$BIN" train --config configs/train-cpu-$arm.toml \
    --out-dir $RUNS/train-1.5b-$arm --resume >> $RUNS/train-1.5b-$arm.log 2>&1
  rc=$?
  echo "== $(date -u +%FT%TZ) arm $arm exited $rc" >> $RUNS/arms.log
  [ $rc -eq 0 ] || exit $rc
done

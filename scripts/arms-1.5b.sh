#!/usr/bin/env bash
# The three 1.5B arms of the reward comparison (results/arms-1.5b), one after the other,
# each resumable: rerun this script after a stop and every arm continues from its newest
# checkpoint (an empty out-dir starts it).
# ONEBRAIN_BIN: the binary (one for all three arms); RUNS: where the run folders go (outside the work tree).
set -u
cd "$(dirname "$0")/.."
BIN=${ONEBRAIN_BIN:-target/release/onebrain}
RUNS=${RUNS:-/work/runs}
# With autogroup scheduling on, nice only orders jobs within one session: a `nice -n 19` job
# started elsewhere takes as much CPU as the arm (updates ran 17-29 min instead of ~8).
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
  echo "arms-1.5b: autogroup scheduling is on, so niced jobs beside the arms are not niced;" \
    "as root: echo 0 > /proc/sys/kernel/sched_autogroup_enabled" | tee -a $RUNS/arms.log >&2
fi
for arm in text-agreement solver-only full; do
  echo "== $(date -u +%FT%TZ) arm $arm" >> $RUNS/arms.log
  RAYON_NUM_THREADS=2 "$BIN" train --config configs/train-1.5b-$arm.toml \
    --out-dir $RUNS/train-1.5b-$arm --resume >> $RUNS/train-1.5b-$arm.log 2>&1
  rc=$?
  echo "== $(date -u +%FT%TZ) arm $arm exited $rc" >> $RUNS/arms.log
  [ $rc -eq 0 ] || exit $rc
done

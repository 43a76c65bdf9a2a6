#!/usr/bin/env python3
"""Two training runs' per-update metrics side by side, for the updates both have run.

    scripts/metrics-side-by-side.py RUN_A RUN_B [--updates N]

RUN is a run folder (its `metrics.jsonl`). Prints a markdown table: the training stream's
success and Actor reward, PPO's approx KL and clip fraction, and the update's wall time, of
each update in both runs, then the means over those updates. It set 4
epochs against 1 on the same tasks and seeds (their first update's rollouts are the same).
"""
import argparse
import json
import sys
from pathlib import Path

COLUMNS = [
    ("charts/success_b0", "b_0", "{:.2f}"),
    ("charts/reward_actor", "R_A", "{:.3f}"),
    ("losses/approx_kl", "approx KL", "{:.1e}"),
    ("losses/clipfrac", "clipfrac", "{:.3f}"),
    ("time/update_s", "update s", "{:.0f}"),
]


def rows(run: Path) -> dict:
    path = run / "metrics.jsonl"
    if not path.is_file():
        sys.exit(f"{path}: no metrics (not a run folder?)")
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out[r["update"]] = r
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs=2, type=Path)
    ap.add_argument("--updates", type=int, help="only the first N updates")
    args = ap.parse_args()
    a, b = (rows(r) for r in args.runs)
    shared = sorted(set(a) & set(b))
    if args.updates:
        shared = shared[: args.updates]
    if not shared:
        sys.exit("the two runs share no update")
    print(f"A: {args.runs[0]}, B: {args.runs[1]}\n")
    head = ["update"] + [f"{label} {side}" for _, label, _ in COLUMNS for side in "AB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))

    def cells(get):
        return [fmt.format(get(run, key)) for key, _, fmt in COLUMNS for run in (a, b)]

    for u in shared:
        print(f"| {u} | " + " | ".join(cells(lambda run, key: run[u][key])) + " |")
    mean = lambda run, key: sum(run[u][key] for u in shared) / len(shared)
    print(f"| mean of {len(shared)} | " + " | ".join(cells(mean)) + " |")


if __name__ == "__main__":
    main()

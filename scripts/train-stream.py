#!/usr/bin/env python3
"""What a training run's own episodes say about faithfulness, update by update.

    scripts/train-stream.py RUN/episodes.jsonl[.gz] [--window 5] [--by-domain]

Training sees only the solver, yet every episode it writes carries `fact_agreement`: its
answer against the generated task's reference problem under the renaming of objects that
shares the most facts (onebrain_faithful::fact_agreement). From it, per window of updates:

- solved: b0, the first answer solved;
- exact: the answer states the reference's objects, initial facts and goal, no more and no
  less, up to that renaming. In `problem` mode (the domain is the reference's) that is a
  faithful answer; the reference checker can also accept a few that are not exact;
- goal at init: the answer's goal already holds in its own `:init`;
- initial and goal facts: precision P and recall R, summed over the window's answers.

Each window's tasks are new (the stream never repeats a task), so windows differ by their
tasks as well as by the policy. Shares of episodes come with a 95 % Wilson interval; episodes
of one task share a group, so the intervals are somewhat too narrow. Updates are numbered as
`metrics.jsonl` numbers them, from 1; a running update's episodes count in the last row.
`--by-domain` adds a table of exact answers and solved ones per domain and window: a run can
learn to solve a domain's tasks while its exact answers there fall.
"""
import argparse
import gzip
import json
from collections import defaultdict


from intervals import wilson


def share(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]"


def ratio(num, den):
    return f"{num / den:.2f}" if den else "-"


def exact(fa):
    return all(fa[p]["candidate"] == fa[p]["reference"] == fa[p]["shared"] for p in ("objects", "init", "goal"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("episodes")
    ap.add_argument("--window", type=int, default=5, help="updates per row (default 5)")
    ap.add_argument("--by-domain", action="store_true", help="also exact / solved per domain")
    args = ap.parse_args()
    opener = gzip.open if args.episodes.endswith(".gz") else open
    rows = defaultdict(lambda: defaultdict(int))
    # (window, domain) -> counts, for --by-domain.
    domains = defaultdict(lambda: defaultdict(int))
    with opener(args.episodes, "rt") as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            r = e["record"]
            # An episode line's `update` counts the updates done before it: the 16 episodes
            # of line update 0 make `metrics.jsonl`'s update 1.
            update = e["update"] + 1
            w = rows[(update - 1) // args.window]
            w["n"] += 1
            w["solved"] += bool(r.get("b0"))
            w["last"] = max(w["last"], update)
            d = domains[((update - 1) // args.window, r["domain"])]
            d["n"] += 1
            d["solved"] += bool(r.get("b0"))
            fa = r.get("fact_agreement")
            d["exact"] += bool(fa) and exact(fa)
            if not fa:
                w["no_agreement"] += 1
                continue
            w["exact"] += exact(fa)
            w["goal_at_init"] += bool(fa.get("goal_holds_initially"))
            for part in ("init", "goal"):
                for k in ("candidate", "reference", "shared"):
                    w[f"{part}_{k}"] += fa[part][k]
    print(f"# The training stream of {args.episodes}, {args.window} updates a row\n")
    print("| updates | episodes | solved | exact | goal at init | init P / R | goal P / R |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for i in sorted(rows):
        w = rows[i]
        first = i * args.window + 1
        print(
            f"| {first}–{w['last']} | {w['n']} | {share(w['solved'], w['n'])} | {share(w['exact'], w['n'])} "
            f"| {share(w['goal_at_init'], w['n'])} "
            f"| {ratio(w['init_shared'], w['init_candidate'])} / {ratio(w['init_shared'], w['init_reference'])} "
            f"| {ratio(w['goal_shared'], w['goal_candidate'])} / {ratio(w['goal_shared'], w['goal_reference'])} |"
        )
    if args.by_domain:
        names = sorted({name for _, name in domains})
        print("\nExact answers / solved ones, of each domain's episodes in the window:\n")
        print("| updates | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        for i in sorted(rows):
            cells = []
            for name in names:
                d = domains[(i, name)]
                cells.append(f"{d['exact']} / {d['solved']} of {d['n']}" if d["n"] else "–")
            print(f"| {i * args.window + 1}–{rows[i]['last']} | " + " | ".join(cells) + " |")
    missing = sum(w["no_agreement"] for w in rows.values())
    if missing:
        print(f"\n{missing} episode(s) carry no fact agreement (no PDDL, or no reference) and count as not exact.")


if __name__ == "__main__":
    main()

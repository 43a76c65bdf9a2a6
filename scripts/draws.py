#!/usr/bin/env python3
"""Methods compared over independent draws: mean and range of each rate, and paired tests
only between answers of the same draw.

    scripts/draws.py base: runs/eval-large-base combined: runs/eval-large-combined/seed-* \
        [--against base]

`NAME:` starts a method and the folders after it are its draws (a shell glob expands to
them; `NAME=FOLDER[,FOLDER…]` works too): the evaluation folders of one method, each with
its `trace.jsonl` (or `.gz`), all over the same tasks. A greedy method has one draw; a sampled
method has one per `--seed`. For each method it prints, per draw, solved and Faithful with
their 95 % Wilson intervals and the answers whose goal already holds in their own initial
state (the goal copied into `:init`, also per domain), then the mean and the range over
draws (each rate of one draw with its Wilson interval), overall, per size bucket, and per
domain and size bucket (3–5, 6–9, 10+ objects in the reference problem, where the trace records
them). Against the `--against` method (default: the first), draw j is paired with its draw j
(or with its one draw when it is greedy): the difference of Faithful with its Newcombe
interval, and task by task the tasks gained and lost with the exact McNemar p, over all tasks
and per size bucket. Draws are never
pooled into one paired test: answers of one task across draws are not independent.
Episodes that stopped on an error (no answer) count as not faithful and are listed apart.
"""
import argparse
import statistics
import sys
from collections import defaultdict

from intervals import mcnemar_exact, newcombe, p_text, wilson
from traces import read_trace

BUCKETS = ("3-5", "6-9", "10+")


def bucket(objects):
    """The size bucket of a reference problem with `objects` objects (None: unknown)."""
    if objects is None:
        return None
    return "3-5" if objects <= 5 else "6-9" if objects <= 9 else "10+"


def outcomes(folder):
    """task id -> (solved, faithful, domain, bucket, error) of one draw."""
    out = {}
    for rec in read_trace(folder):
        faith = rec.get("faithfulness") or {}
        out[rec["task_id"]] = {
            "solved": bool(rec.get("solved")),
            "faithful": bool(faith.get("faithful")),
            "domain": rec.get("domain", "?"),
            "bucket": bucket(rec.get("reference_objects")),
            "error": bool(rec.get("error")) and rec.get("final_spec") is None,
            # The answer's goal holds in its own initial state (the goal copied into `:init`).
            "goal_at_init": bool((rec.get("fact_agreement") or {}).get("goal_holds_initially")),
        }
    return out


def pct(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / max(n, 1):.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def rate(counts, n):
    """Cell of a rate over draws: one draw k/n with its Wilson interval; several, the mean
    and range of the shares and each draw's count."""
    if len(counts) == 1:
        k = counts[0]
        lo, hi = wilson(k, n)
        return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]"
    shares = [k / max(n, 1) for k in counts]
    return (f"{100 * statistics.mean(shares):.0f} % ({100 * min(shares):.0f}–{100 * max(shares):.0f}; "
            + ", ".join(str(k) for k in counts) + f" of {n})")


def paired(b, d, tasks):
    """Faithful of draw `d` against draw `b` over `tasks`: difference, Newcombe interval,
    gained, lost, exact McNemar p."""
    n = len(tasks)
    k1 = sum(b[t]["faithful"] for t in tasks)
    k2 = sum(d[t]["faithful"] for t in tasks)
    gained = sum(d[t]["faithful"] and not b[t]["faithful"] for t in tasks)
    lost = sum(b[t]["faithful"] and not d[t]["faithful"] for t in tasks)
    lo, hi = newcombe(k1, n, k2, n)
    return (k2 - k1) / n, lo, hi, gained, lost, mcnemar_exact(gained, lost)


def spread(values):
    """Mean and range of a list of shares, in per cent."""
    if len(values) == 1:
        return f"{100 * values[0]:.1f} % (one draw)"
    return f"mean {100 * statistics.mean(values):.1f} %, range {100 * min(values):.1f}–{100 * max(values):.1f} %"


def parse_methods(args):
    """`NAME:` then its folders, or NAME=FOLDER[,FOLDER…]; a bare FOLDER joins the method
    before it."""
    methods = {}
    last = None
    for arg in args:
        if arg.endswith(":"):
            last, folders = arg[:-1], ""
        elif "=" in arg:
            last, folders = arg.split("=", 1)
        elif last is not None:
            folders = arg
        else:
            sys.exit(f"draws: `{arg}` comes before any `NAME:`")
        methods.setdefault(last, []).extend(f for f in folders.split(",") if f)
    return methods


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("methods", nargs="+", help="NAME: FOLDER… (or NAME=FOLDER[,FOLDER…])")
    ap.add_argument("--against", help="the method the others are paired with (default: the first)")
    a = ap.parse_args()
    methods = parse_methods(a.methods)
    draws = {name: [outcomes(f) for f in folders] for name, folders in methods.items()}
    names = list(draws)
    against = a.against or names[0]
    if against not in draws:
        sys.exit(f"draws: --against {against} names no method ({', '.join(names)})")
    tasks = set(draws[names[0]][0])
    for name, ds in draws.items():
        for j, d in enumerate(ds):
            if set(d) != tasks:
                sys.exit(f"draws: {name} draw {j} ({methods[name][j]}) has other tasks than {names[0]}'s first draw")

    print(f"# {len(tasks)} tasks; draws: " + ", ".join(f"{n} {len(ds)}" for n, ds in draws.items()) + "\n")
    print("| method | draw | solved | Faithful | goal holds at init | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ds in draws.items():
        for j, d in enumerate(ds):
            n = len(d)
            solved = sum(o["solved"] for o in d.values())
            faithful = sum(o["faithful"] for o in d.values())
            errors = sum(o["error"] for o in d.values())
            at_init = sum(o["goal_at_init"] for o in d.values())
            print(f"| {name} | {j} | {pct(solved, n)} | {pct(faithful, n)} | {at_init}/{n} | {errors} |")
    print("\n| method | solved over draws | Faithful over draws |")
    print("|---|---|---|")
    for name, ds in draws.items():
        n = len(tasks)
        s = [sum(o["solved"] for o in d.values()) / n for d in ds]
        f = [sum(o["faithful"] for o in d.values()) / n for d in ds]
        print(f"| {name} | {spread(s)} | {spread(f)} |")

    # Tasks by domain and size bucket, and by size bucket alone (as the first draw records them).
    groups, by_size = defaultdict(list), defaultdict(list)
    for t in sorted(tasks):
        o = draws[names[0]][0][t]
        groups[(o["domain"], o["bucket"] or "unknown")].append(t)
        by_size[o["bucket"] or "unknown"].append(t)
    order = BUCKETS + ("unknown",)
    sizes = sorted(by_size, key=order.index)
    for what in ("faithful", "solved"):
        print(f"\n| objects | n | " + " | ".join(f"{n} {what}" for n in names) + " |")
        print("|---|---:|" + "---:|" * len(names))
        for b in sizes:
            ts = by_size[b]
            cells = [rate([sum(d[t][what] for t in ts) for d in draws[name]], len(ts)) for name in names]
            print(f"| {b} | {len(ts)} | " + " | ".join(cells) + " |")

    print("\n| domain | objects | n | " + " | ".join(f"{n} Faithful" for n in names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    for (dom, b), ts in sorted(groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
        cells = [rate([sum(d[t]["faithful"] for t in ts) for d in draws[name]], len(ts)) for name in names]
        print(f"| {dom} | {b} | {len(ts)} | " + " | ".join(cells) + " |")

    domains = sorted({o["domain"] for o in draws[names[0]][0].values()})
    print("\n| domain | n | " + " | ".join(f"{n} goal holds at init" for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for dom in domains:
        ts = [t for t in tasks if draws[names[0]][0][t]["domain"] == dom]
        cells = []
        for name in names:
            counts = [sum(d[t]["goal_at_init"] for t in ts) for d in draws[name]]
            cells.append(f"{statistics.mean(counts):.1f}" + ("" if len(counts) == 1 else f" ({min(counts)}–{max(counts)})"))
        print(f"| {dom} | {len(ts)} | " + " | ".join(cells) + " |")

    base = draws[against]
    for name in names:
        if name == against:
            continue
        print(f"\n## {name} against {against}, draw by draw\n")
        print("| draw | Faithful difference, Newcombe 95 % | gained | lost | exact McNemar |")
        print("|---:|---|---:|---:|---|")
        diffs = []
        pairs = []
        for j, d in enumerate(draws[name]):
            b = base[j] if len(base) > 1 else base[0]
            if len(base) > 1 and j >= len(base):
                print(f"| {j} | no draw {j} of {against} to pair with | | | |")
                continue
            pairs.append((j, b, d))
            diff, lo, hi, gained, lost, p = paired(b, d, sorted(tasks))
            diffs.append(diff)
            print(f"| {j} | {100 * diff:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] | {gained} | {lost} | {p_text(p)} |")
        if len(diffs) > 1:
            print(f"\nOver the {len(diffs)} draws: difference mean {100 * statistics.mean(diffs):+.1f} points, "
                  f"range {100 * min(diffs):+.1f} to {100 * max(diffs):+.1f}.")
        print("\n| draw | objects | n | Faithful difference, Newcombe 95 % | gained | lost | exact McNemar |")
        print("|---:|---|---:|---|---:|---:|---|")
        for j, b, d in pairs:
            for size in sizes:
                diff, lo, hi, gained, lost, p = paired(b, d, by_size[size])
                print(f"| {j} | {size} | {len(by_size[size])} | {100 * diff:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] "
                      f"| {gained} | {lost} | {p_text(p)} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarise `onebrain eval` traces: success, faithfulness and the constraint's cost.

    scripts/trace-summary.py results/eval-constrained/trace.jsonl [more traces...]

Per strategy and domain: solved (b_T) and b_0 with Wilson 95 % intervals, Faithful among
all tasks and its parts (objects, goal, schema, drift), solved answers whose plan is empty (the goal already held: the spec was gamed),
steps that ran to the token cap, syntax failures, repeated repairs; then model seconds and
tokens per task, episodes per hour the model's time allows, and the decoding constraint's cost (mask time per token, its share of decode
time, grammar build time, forced tokens). Where the trace records each task's size (the
objects its reference problem declares, `reference_objects`), solved and Faithful per domain
and size bucket (3–5, 6–9, 10+ objects; fewer than 3 count as 3–5), as the report's "By
size" table has them. The report `onebrain eval` writes has the full tables; this is the few
lines the README quotes, with intervals.
"""
import json
import sys
from collections import defaultdict

from intervals import wilson


def pct(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / max(n, 1):.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def size_bucket(objects):
    """The report's size bucket of a task whose reference problem declares `objects` objects
    (`onebrain_eval::SizeBucket`); "unknown" where the trace does not say."""
    if objects is None:
        return "unknown"
    return "3–5" if objects <= 5 else "6–9" if objects <= 9 else "10+"


BUCKETS = ("3–5", "6–9", "10+", "unknown")


def stopped(r):
    """Whether the episode stopped on an error of its own before its answer (a model error),
    as `EpisodeRecord::stop_error` reads it: an error that is not a plugin's, whose parts
    follow the episode's own after their prefixes. The report counts those apart, in no rate."""
    error = r.get("error") or ""
    return bool(error) and not error.startswith(("reward plugin: ", "faithfulness checker: "))


def size_table(recs):
    """Solved and Faithful per domain and size bucket over the answered episodes, with Wilson
    95 % intervals; then every domain together, where there are several. Nothing where no
    record has its task's size (a trace written before it was recorded)."""
    if not any(r.get("reference_objects") is not None for r in recs):
        return []
    answered = [r for r in recs if not stopped(r)]
    cells = defaultdict(list)
    for r in answered:
        cells[(r["domain"], size_bucket(r.get("reference_objects")))].append(r)
    domains = sorted({d for d, _ in cells})
    keys = [(d, b) for d in domains for b in BUCKETS if (d, b) in cells]
    if len(domains) > 1:
        for r in answered:
            cells[("all", size_bucket(r.get("reference_objects")))].append(r)
        keys += [("all", b) for b in BUCKETS if ("all", b) in cells]
    lines = ["| domain | objects | n | solved (b_T) | Faithful |", "|---|---|---:|---|---|"]
    for d, b in keys:
        rs = cells[(d, b)]
        n = len(rs)
        solved = sum(r["solved"] for r in rs)
        faithful = sum(bool((r.get("faithfulness") or {}).get("faithful")) for r in rs)
        lines.append(f"| {d} | {b} | {n} | {pct(solved, n)} | {pct(faithful, n)} |")
    return lines


def main(paths):
    groups = defaultdict(list)
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line of a killed run
                constrained = any(s.get("sampling", {}).get("constraint") for s in r["steps"])
                key = (r["strategy"], r["mode"], "grammar" if constrained else "free")
                groups[key].append(r)
    for (strategy, mode, arm), recs in sorted(groups.items()):
        print(f"## {strategy}, {mode} mode, {arm} decoding: {len(recs)} episodes\n")
        print("| domain | solved (b_T) | b_0 | Faithful | solved with empty plan |")
        print("|---|---|---|---|---|")
        by_domain = defaultdict(list)
        for r in recs:
            by_domain[r["domain"]].append(r)
        for d, rs in sorted(by_domain.items()) + [("all", recs)]:
            n = len(rs)
            solved = sum(r["solved"] for r in rs)
            b0 = sum(r["b0"] for r in rs)
            faithful = sum(bool((r.get("faithfulness") or {}).get("faithful")) for r in rs)
            empty = sum(r["solved"] and not r["final_plan"] for r in rs)
            print(f"| {d} | {pct(solved, n)} | {pct(b0, n)} | {pct(faithful, n)} | {empty}/{max(solved, 1) if solved else 0} |")
        by_size = size_table(recs)
        if by_size:
            print("\nBy size (objects in the reference problem; episodes stopped by an error of their own left out):\n")
            print("\n".join(by_size))
        steps = [s for r in recs for s in r["steps"] if s.get("output_tokens")]
        cap = sum(s["stop_reason"] == "max-tokens" for s in steps)
        syntax = sum(
            any(d["category"] == "syntax" for d in (s.get("verdict") or {}).get("diagnostics", []))
            for s in steps
        )
        repeated = sum(r.get("repeated_repairs", 0) for r in recs)
        discarded = sum(r.get("discarded_repeats", 0) for r in recs)
        repairs = sum(r["repairs"] for r in recs)
        n = len(recs)
        gen = sum(r["timings"]["generation_ms"] for r in recs) / 1e3 / n
        judge = sum(r["timings"]["judge_ms"] for r in recs) / 1e3 / n
        toks = sum(len(s["output_tokens"]) for s in steps) / n
        decode = sum(s["timings"]["decode_ms"] for s in steps) / 1e3
        # Faithfulness's parts: finer than the verdict, so arms that are all unfaithful still
        # compare (how often the objects, the goal and the schema survived, and which drift).
        faith = [r.get("faithfulness") or {} for r in recs]
        drift = defaultdict(int)
        for f in faith:
            drift[f.get("drift") or "none"] += 1
        print()
        print(
            f"- faithfulness parts: objects preserved {sum(bool(f.get('objects_preserved')) for f in faith)}/{n}, "
            f"goal preserved {sum(bool(f.get('goal_preserved')) for f in faith)}/{n}, "
            f"schema consistent {sum(bool(f.get('schema_consistent')) for f in faith)}/{n}; drift: "
            + ", ".join(f"{k} {v}" for k, v in sorted(drift.items()))
        )
        print(f"- steps: {len(steps)}; at the token cap: {cap}; with a syntax failure: {syntax}")
        print(f"- repairs: {repairs}; kept repeats: {repeated}; thrown-away repeats: {discarded}")
        print(f"- per task: {gen:.1f} s generation, {judge:.1f} s Judge, {toks:.0f} tokens out, decode {sum(len(s['output_tokens']) for s in steps) / max(decode, 1e-9):.1f} tok/s")
        # The model is the bottleneck (the verifier overlaps it), so its seconds bound the rate.
        print(f"- episodes per hour, model-bound: {3600 / max(gen + judge, 1e-9):.0f}")
        stats = [s["constraint"] for s in steps if s.get("constraint")]
        if stats:
            masks = sum(c["masks"] for c in stats)
            mask_s = sum(c["mask_us"] for c in stats) / 1e6
            cdecode = sum(s["timings"]["decode_ms"] for s in steps if s.get("constraint")) / 1e3
            forced = sum(c["forced"] for c in stats)
            build = sum(c["build_ms"] for c in stats) / len(stats)
            print(
                f"- constraint: mask {1e6 * mask_s / max(masks, 1):.0f} µs/token, {100 * mask_s / max(cdecode, 1e-9):.1f} % of decode time; "
                f"grammar build {build:.1f} ms per generation (both stages); forced tokens {forced}; "
                f"guard refusals {sum(c['guard_refusals'] for c in stats)}, overrides {sum(c['guard_overrides'] for c in stats)}"
            )
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])

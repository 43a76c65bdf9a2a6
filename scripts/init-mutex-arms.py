#!/usr/bin/env python3
"""Compare `onebrain eval` arms on what their answers' initial states and goals say.

    scripts/init-mutex-arms.py results/eval-update0/trace.jsonl.gz results/eval-update0-mutex-guard/trace.jsonl.gz ...

Per trace (plain or gzipped): solved and Faithful; answers whose `:init` states two different
atoms of one instance of the domain's own mutex groups (a state the domain cannot be in); answers
whose goal already holds in their `:init`; and, summed over answers, init and goal precision and
recall against the reference under the renaming that shares the most facts (the trace's
`fact_agreement`). Each with n and a Wilson 95 % interval; facts cluster within an answer, so the
intervals on precision and recall are narrower than an answer-level resampling would give.

The groups are those `onebrain_faithful::mutex_groups` proves for the plugin domains (its tests in
host/faithful/src/lifted.rs pin them), written out here so that arms run without the rule, whose
traces do not carry them, are counted alike.
"""
import re
import sys

from intervals import wilson
from traces import read_jsonl

# Per domain, per group, its parts: (predicate, argument positions of the group's parameters).
GROUPS = {
    "blocksworld": [
        [("handempty", ()), ("holding", ())],
        [("holding", (0,)), ("on", (0,)), ("ontable", (0,))],
        [("clear", (0,)), ("holding", (0,)), ("on", (1,))],
    ],
    "mystery-blocksworld": [
        [("harmony", ()), ("pain", ())],
        [("craves", (0,)), ("pain", (0,)), ("planet", (0,))],
        [("craves", (1,)), ("pain", (0,)), ("province", (0,))],
    ],
    "logistics": [[("at", (0,)), ("in", (0,))]],
    "gripper": [
        [("at-robby", ())],
        [("carry", (1,)), ("free", (0,))],
        [("at", (0,)), ("carry", (0,))],
    ],
}
ARITY = {"handempty": 0, "harmony": 0, "holding": 1, "pain": 1, "ontable": 1, "planet": 1, "clear": 1, "province": 1,
         "on": 2, "craves": 2, "at": 2, "in": 2, "at-robby": 1, "carry": 2, "free": 1}


def pct(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def init_facts(problem):
    """The distinct `:init` atoms of a problem, lower-case word tuples."""
    text = re.sub(r";[^\n]*", "", problem.lower())
    start = text.find(":init")
    if start < 0:
        return []
    end = text.find(":goal", start)
    body = text[start + len(":init"): end if end >= 0 else len(text)]
    return sorted({tuple(m.group(1).split()) for m in re.finditer(r"\(([^()]*)\)", body) if m.group(1).split()})


def conflict(facts, groups):
    """Two different atoms in one group instance, or None."""
    seen = {}
    for f in facts:
        for gi, group in enumerate(groups):
            for pred, params in group:
                if f[0] == pred and len(f) - 1 == ARITY[pred]:
                    key = (gi, tuple(f[1 + p] for p in params))
                    if key in seen and seen[key] != f:
                        return (seen[key], f)
                    seen.setdefault(key, f)
    return None


def main(paths):
    for path in paths:
        rows = read_jsonl(path)
        n = len(rows)
        solved = sum(bool(r.get("solved")) for r in rows)
        faithful = sum(bool((r.get("faithfulness") or {}).get("faithful")) for r in rows)
        goal_init = sum(bool((r.get("fact_agreement") or {}).get("goal_holds_initially")) for r in rows)
        broken, per_domain, example = 0, {}, None
        sums = {k: [0, 0, 0] for k in ("init", "goal")}
        for r in rows:
            facts = init_facts((r.get("final_spec") or {}).get("problem") or "")
            c = conflict(facts, GROUPS[r["domain"]])
            d = per_domain.setdefault(r["domain"], [0, 0])
            d[1] += 1
            if c:
                broken += 1
                d[0] += 1
                example = example or (r["task_id"], c)
            agreement = r.get("fact_agreement") or {}
            for k, acc in sums.items():
                x = agreement.get(k) or {}
                acc[0] += x.get("shared", 0)
                acc[1] += x.get("candidate", 0)
                acc[2] += x.get("reference", 0)
        print(f"== {path}")
        print(f"  solved              {pct(solved, n)}")
        print(f"  faithful            {pct(faithful, n)}")
        print(f"  :init breaks a group {pct(broken, n)} ({', '.join(f'{d} {k}/{m}' for d, (k, m) in sorted(per_domain.items()))})")
        print(f"  goal holds at init  {pct(goal_init, n)}")
        for k, (shared, cand, ref) in sums.items():
            print(f"  {k:<5} precision     {pct(shared, cand)}; recall {pct(shared, ref)}")
        if example:
            print(f"  e.g. {example[0]}: {example[1][0]} with {example[1][1]}")


if __name__ == "__main__":
    main(sys.argv[1:])

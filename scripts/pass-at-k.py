#!/usr/bin/env python3
"""pass@k and best-of-k without gold over k sampling draws of one eval.

    scripts/pass-at-k.py RUN/seed-0/ RUN/seed-1/ ...      (what scripts/pass-at-k.sh runs)

Each folder holds the `trace.jsonl` (or `.gz`) of one draw: the same tasks, one multi-role
answer each, sampled with another `--seed`. Per task the k answers are pooled:

- pass@j, for j = 1, 2, 4, …, k: the chance that j answers drawn from the task's k hold at
  least one faithful one (the unbiased estimator 1 − C(k−c, j)/C(k, j), c faithful of k),
  averaged over tasks; pass@k itself is the share of tasks with a faithful answer among all k.
- best-of-k: the Faithful of the one answer a selector picks per task, with no reference:
  - `judge`: the highest Judge score s_J (the trace's `judge_score`);
  - `reward`: the highest Φ(y) = R_A − λ_J·s_J, the config's reward without its Judge term
    (for `text-agreement` Φ = b·A(y), the solver's verdict times the agreement with the text),
    ties to the higher s_J: the rule of the `best-of-k` strategy's default selector;
  - `solved first`: the first answer the planner solved (LLM+P's rule), else the first;
  - `first draw`: draw 0 alone, the one-sample baseline.
  Other ties go to the earlier draw. Each selector is set against the first draw: the
  difference with its Newcombe interval, and task by task the tasks gained and lost with the
  exact McNemar p.

Shares of tasks come with a 95 % Wilson interval over the tasks; episodes that stopped on an
error (no answer) are counted apart and never picked.
"""
import math
import sys
from collections import defaultdict

LAMBDA_JUDGE = 0.3  # λ_J of the eval config (the paper's; `[episode] lambda-judge`)


from intervals import mcnemar_exact, newcombe, p_text, wilson
from traces import read_trace


def share(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / max(n, 1):.1f} %, [{100 * lo:.1f}, {100 * hi:.1f}])"


def answer(rec):
    """What the selectors and the counts read from one episode, or None for an error."""
    if rec.get("error"):
        return None
    steps = rec.get("steps") or []
    judge = next((s["judge_score"] for s in steps if s.get("judge_score") is not None), None)
    rewards = rec.get("rewards") or {}
    phi = None
    if "actor" in rewards and judge is not None:
        phi = rewards["actor"] - LAMBDA_JUDGE * judge
    faith = rec.get("faithfulness") or {}
    return {
        "faithful": bool(faith.get("faithful")),
        "solved": bool(rec.get("b0")),
        "judge": judge,
        "phi": phi,
    }


def pass_at(c, n, j):
    if n - c < j:
        return 1.0
    return 1.0 - math.comb(n - c, j) / math.comb(n, j)


def pick(answers, key):
    best = None
    for i, a in enumerate(answers):
        if a is None or key(a) is None:
            continue
        if best is None or key(a) > key(answers[best]):
            best = i
    return best


def main(folders):
    draws = [read_trace(f) for f in folders]
    k = len(draws)
    tasks = defaultdict(lambda: [None] * k)
    domains = {}
    errors = 0
    for d, records in enumerate(draws):
        for rec in records:
            if rec.get("strategy", "multi-role") != "multi-role":
                continue
            tid = rec["task_id"]
            domains[tid] = rec.get("domain", "?")
            a = answer(rec)
            errors += a is None
            tasks[tid][d] = a
    n = len(tasks)
    incomplete = sum(1 for answers in tasks.values() if any(a is None for a in answers))
    # Φ must be 0 for an unsolved answer: a check that λ_J and the reward's shape are read right.
    off = [a["phi"] for answers in tasks.values() for a in answers if a and a["phi"] is not None and not a["solved"] and abs(a["phi"]) > 1e-3]
    if off:
        sys.exit(f"pass-at-k: Φ = R_A − {LAMBDA_JUDGE}·s_J is not 0 on {len(off)} unsolved answers (e.g. {off[0]:.4f}); is λ_J another?")

    print(f"# pass@k and best-of-k: {n} tasks × {k} draws ({', '.join(str(f) for f in folders)})\n")
    if errors:
        print(f"{errors} episode(s) stopped on an error (no answer); {incomplete} task(s) have fewer than {k} answers.\n")
    samples = [a for answers in tasks.values() for a in answers if a is not None]
    faithful_samples = sum(a["faithful"] for a in samples)
    print(f"- answers: {len(samples)}; faithful {share(faithful_samples, len(samples))} "
          "(answers cluster by task: this interval is too narrow)")
    print(f"- solved at the first answer: {share(sum(a['solved'] for a in samples), len(samples))}\n")

    print("| pass@j over the tasks | value |")
    print("|---|---:|")
    j = 1
    while j <= k:
        v = sum(pass_at(sum(a is not None and a["faithful"] for a in ans), sum(a is not None for a in ans), j)
                for ans in tasks.values() if any(a is not None for a in ans) and sum(a is not None for a in ans) >= j)
        print(f"| pass@{j} | {100 * v / n:.1f} % |")
        j *= 2
    any_faithful = sum(any(a is not None and a["faithful"] for a in ans) for ans in tasks.values())
    print(f"\npass@{k} (a faithful answer among all {k}): {share(any_faithful, n)}\n")

    per_domain = defaultdict(lambda: [0, 0])
    for tid, ans in tasks.items():
        per_domain[domains[tid]][1] += 1
        per_domain[domains[tid]][0] += any(a is not None and a["faithful"] for a in ans)
    print("| domain | tasks with a faithful answer among the k |")
    print("|---|---:|")
    for dom in sorted(per_domain):
        c, t = per_domain[dom]
        print(f"| {dom} | {c}/{t} |")

    selectors = {
        "judge (highest s_J)": lambda ans: pick(ans, lambda a: a["judge"]),
        "reward (highest Φ = R_A − λ_J·s_J, ties: higher s_J)": lambda ans: pick(
            ans, lambda a: None if a["phi"] is None else (a["phi"], a["judge"])),
        "solved first": lambda ans: next((i for i, a in enumerate(ans) if a and a["solved"]), pick(ans, lambda a: 0)),
        "first draw": lambda ans: 0 if ans[0] is not None else None,
    }
    print(f"\n| best-of-{k} selector (no reference) | Faithful of the picked answer | against the first draw: Newcombe 95 % of the difference; gained, lost, exact McNemar p |")
    print("|---|---:|---|")
    first = [a[0] is not None and a[0]["faithful"] for a in tasks.values()]
    for name, select in selectors.items():
        picked = []
        for ans in tasks.values():
            i = select(ans)
            picked.append(i is not None and ans[i]["faithful"])
        gained = sum(p and not f for p, f in zip(picked, first))
        lost = sum(f and not p for p, f in zip(picked, first))
        lo, hi = newcombe(sum(first), n, sum(picked), n)
        print(f"| {name} | {share(sum(picked), n)} | {100 * (sum(picked) - sum(first)) / n:+.1f} points "
              f"[{100 * lo:+.1f}, {100 * hi:+.1f}]; {gained}, {lost}, {p_text(mcnemar_exact(gained, lost))} |")
    print(f"| oracle (any faithful: pass@{k}) | {share(any_faithful, n)} | |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Whether evaluations wrote the same first answers: the batch-invariance check.

    scripts/same-answers.py RUN_A RUN_B [RUN_C ...]

Each RUN is an eval's out-dir (its trace.jsonl or trace.jsonl.gz). For every task in all
runs, the Actor's first answer (step 0) is compared with the first run's: its text, its
per-token log-probabilities (exactly, not within a tolerance) and the Judge's score. Prints
one line per run and one per task that differs; exits 1 if any differs, 2 if no task is
shared.
"""
import sys

from traces import read_trace


def first_answers(run):
    """Each task's first answer in the evaluation folder `run`: text, log-probabilities, s_J."""
    answers = {}
    for episode in read_trace(run):
        step = episode["steps"][0]
        answers[(episode["task_id"], episode["strategy"])] = (
            step["output"],
            step.get("output_logprobs"),
            step.get("judge_score"),
        )
    return answers


def main(runs):
    if len(runs) < 2:
        sys.exit(__doc__)
    reference = first_answers(runs[0])
    differs = False
    for run in runs[1:]:
        other = first_answers(run)
        shared = sorted(reference.keys() & other.keys())
        if not shared:
            print(f"{run}: no task shared with {runs[0]}")
            sys.exit(2)
        changed = []
        for key in shared:
            (text_a, logp_a, judge_a), (text_b, logp_b, judge_b) = reference[key], other[key]
            what = [name for name, a, b in (("text", text_a, text_b), ("log-probabilities", logp_a, logp_b),
                                            ("judge score", judge_a, judge_b)) if a != b]
            if what:
                changed.append((key[0], what))
        same_text = sum(1 for _, what in changed if "text" not in what) + len(shared) - len(changed)
        print(f"{run}: {len(shared) - len(changed)} of {len(shared)} first answers identical to "
              f"{runs[0]}'s ({same_text} the same text)")
        for task, what in changed:
            print(f"  {task}: {', '.join(what)} differ")
        differs |= bool(changed)
    sys.exit(1 if differs else 0)


if __name__ == "__main__":
    main(sys.argv[1:])

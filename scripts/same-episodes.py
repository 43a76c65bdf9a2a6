#!/usr/bin/env python3
"""Whether training runs wrote the same episodes, apart from how long things took.

    scripts/same-episodes.py RUN_A RUN_B [RUN_C ...]

Each RUN is a training out-dir holding episodes.jsonl or episodes.jsonl.gz. Episodes are
matched by (group, slot), since they are written in the order they finish. Every field is
compared exactly (tokens, log-probabilities, verdicts, rewards) except the ones that measure
time: keys ending in `_ms`, `_s` or `secs`, `timings`, tokens-per-second rates, the
constraint's `mask_us`, and the solver's stdout and stderr (which print their own clock).
Prints one line per run and each differing path; exits 1 if any episode differs.
"""
import gzip
import json
import os
import sys

TIMING = ("_ms", "_s", "secs", "timings", "elapsed", "tokens_per", "mask_us", "stdout", "stderr")


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def episodes(run):
    for name, opener in (("episodes.jsonl", open), ("episodes.jsonl.gz", gzip.open)):
        path = os.path.join(run, name)
        if os.path.exists(path):
            with opener(path, "rt") as f:
                return {(e["group"], e["slot"]): without_timing(e) for e in map(json.loads, f)}
    sys.exit(f"{run}: no episodes.jsonl(.gz)")


def differences(a, b, path=""):
    if type(a) is not type(b):
        yield path
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}/{k}"
            else:
                yield from differences(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            yield f"{path} (length {len(a)} against {len(b)})"
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield path


def main(runs):
    if len(runs) < 2:
        sys.exit(__doc__)
    first = episodes(runs[0])
    differ = False
    for run in runs[1:]:
        other = episodes(run)
        paths = [(key, p) for key in sorted(set(first) | set(other)) for p in differences(first.get(key), other.get(key))]
        same = len({key for key in first if not any(k == key for k, _ in paths)})
        print(f"{run}: {same} of {len(first)} episodes the same as {runs[0]}'s, apart from timing")
        for (group, slot), p in paths[:40]:
            print(f"  group {group} slot {slot}: {p}")
        differ |= bool(paths)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The JSONL reader the result scripts share (`from traces import read_jsonl, read_trace`: a
script's own folder is first on Python's path when it runs). The rules are the host's
(`onebrain_eval::read_jsonl`): blank lines are skipped, and a last line that does not parse
is a write a killed run tore, dropped; any other line that does not parse is an error."""
import gzip
import json
import os
import sys


def read_jsonl(path):
    """The records of a JSONL file, plain or gzipped (`.gz`)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        lines = [line for line in f if line.strip()]
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i + 1 < len(lines):
                raise ValueError(f"{path}, line {i + 1}: {e}") from e
    return records


def read_trace(folder):
    """The records of an evaluation folder's `trace.jsonl`, else its `trace.jsonl.gz`; exits
    naming the folder when it has neither."""
    for name in ("trace.jsonl", "trace.jsonl.gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return read_jsonl(path)
    sys.exit(f"no trace.jsonl or trace.jsonl.gz in {folder}")

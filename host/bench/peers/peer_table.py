"""Reads peer.sh's JSON lines on stdin and prints the README's table: onebrain / llama.cpp
per model and figure, with the ratio, plus onebrain's batch aggregates against its own batch 1.
Usage: host/bench/peers/peer.sh THREADS | tee run.jsonl | python3 host/bench/peers/peer_table.py
"""
import json
import os
import sys

ours, peer = {}, {}
# Long-prompt prefills (PEER_LONG=1), keyed by (model, prompt tokens).
ours_long, peer_long = {}, {}
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    name = os.path.basename(r.get("model", ""))
    is_peer = r.get("peer") == "llama.cpp"
    if "decode_tok_per_s" in r:
        (peer if is_peer else ours)[name] = r
    elif "prefill_secs" in r:
        (peer_long if is_peer else ours_long)[(name, r["prompt_tokens"])] = r

threads = next((r.get("threads") for r in [*peer.values(), *peer_long.values()] if r.get("threads")), "?")
if ours:
    print(f"| tok/s, {threads} thread(s) | onebrain | llama.cpp | ratio |")
    print("|---|---:|---:|---:|")
for name, o in ours.items():
    p = peer.get(name, {})
    short = name.split("-Instruct")[0].split("-instruct")[0]
    rows = [
        (f"{short} prefill, {o['prompt_tokens']} tokens", "prefill_tok_per_s"),
        (f"{short} decode", "decode_tok_per_s"),
        (f"{short} decode after {o['long_prompt_tokens']} tokens", "long_decode_tok_per_s"),
    ]
    for label, key in rows:
        a, b = o.get(key), p.get(key)
        ratio = f"{a / b:.2f}×" if a and b else "–"
        print(f"| {label} | {a:.1f} | {b:.1f} | {ratio} |" if b else f"| {label} | {a:.1f} | – | – |")
    for n in (4, 8):
        agg = o.get(f"batch{n}_decode_tok_per_s")
        if agg:
            print(f"| {short} batch-{n} aggregate decode (vs onebrain batch 1) | {agg:.1f} | | {agg / o['decode_tok_per_s']:.2f}× |")

if ours_long:
    if ours:
        print()
    print(f"| long prompt, {threads} thread(s) | onebrain tok/s | llama.cpp tok/s | ratio | onebrain peak | llama.cpp peak | onebrain estimate |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, n), o in ours_long.items():
        p = peer_long.get((name, n), {})
        short = name.split("-Instruct")[0].split("-instruct")[0]
        a, b = o["prefill_tok_per_s"], p.get("prefill_tok_per_s")
        mib = lambda v: f"{v:.0f} MiB" if v else "–"
        ratio = f"{a / b:.2f}×" if b else "–"
        print(f"| {short} prefill, {n} tokens | {a:.1f} | {b:.1f} | {ratio} | {mib(o.get('peak_rss_mib'))} | "
              f"{mib(p.get('peak_rss_mib'))} | {mib(o.get('estimated_mib'))} |" if b else
              f"| {short} prefill, {n} tokens | {a:.1f} | – | – | {mib(o.get('peak_rss_mib'))} | – | {mib(o.get('estimated_mib'))} |")

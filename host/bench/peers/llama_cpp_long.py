"""llama.cpp peer for `examples/bench_model long`: one cold prefill of a long prompt
per length, on the same GGUF with the same filler text and thread count, and the process's
peak resident memory during it (weights included), as onebrain's `LongPrefillBench`.

Needs llama-cpp-python as `llama_cpp_peer.py` says. Lengths past the model's training
context (SmolLM2's 8,192) are skipped, as onebrain's bench skips them.
Usage: python llama_cpp_long.py MODEL.gguf THREADS LENGTH [LENGTH...]
Prints one JSON line per length. llama-cpp-python turns flash attention off by default (the
llama.cpp CLI's default is `auto`); PEER_FLASH_ATTN=1 turns it on.
"""
import json
import os
import sys
import time

from llama_cpp import Llama

path = sys.argv[1]
threads = int(sys.argv[2])
flash_attn = os.environ.get("PEER_FLASH_ATTN") == "1"
lengths = [int(n) for n in sys.argv[3:]] or [4096, 16384]
unit = ("(:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y)) "
        ":effect (and (on ?x ?y) (not (holding ?x))))\n")


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024


for n in lengths:
    # A context just long enough, as a user running this prompt would set it; the library's
    # defaults otherwise (n_batch 512), as llama_cpp_peer.py uses.
    llm = Llama(model_path=path, n_ctx=n + 16, n_threads=threads, n_threads_batch=threads,
                n_batch=512, flash_attn=flash_attn, verbose=False)
    if n + 1 > llm._model.n_ctx_train():
        del llm
        continue
    ids = llm.tokenize((unit * (n // 30 + 10)).encode(), add_bos=False, special=True)[:n]
    # The peak from here on: the weights as mapped, the KV cache and the prefill's work.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t = time.perf_counter()
    llm.eval(ids)
    secs = time.perf_counter() - t
    print(json.dumps({"peer": "llama.cpp", "model": path, "threads": threads, "prompt_tokens": len(ids),
                      "prefill_tok_per_s": len(ids) / secs, "prefill_secs": secs,
                      "peak_rss_mib": peak_rss_mib(), "flash_attn": flash_attn}), flush=True)
    del llm

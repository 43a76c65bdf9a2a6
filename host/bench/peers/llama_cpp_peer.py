"""llama.cpp peer for `examples/bench_model`: same GGUF, same prompt length, same thread count.

Needs llama-cpp-python built from its PyPI sdist (it vendors llama.cpp) for this CPU, as
`pip install` does by default (GGML_NATIVE=ON: AVX-512 and VNNI where the CPU has them;
under 20 minutes on 2 cores beside a cargo build):
  python3 -m venv /tmp/llamavenv
  CMAKE_BUILD_PARALLEL_LEVEL=2 /tmp/llamavenv/bin/pip install llama-cpp-python==0.3.36 numpy
The README's runs before 2026-11-25's Q5_0 tiles used an AVX2-only build
(CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"), a weaker peer.
Usage: python llama_cpp_peer.py MODEL.gguf [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS] [LONG_PROMPT_TOKENS]
Prints one JSON line: prefill and decode tokens/s, and a few token ids for the tokenizer tests.
"""
import json
import sys
import time

import numpy as np

from llama_cpp import Llama

path = sys.argv[1]
n_prompt = int(sys.argv[2]) if len(sys.argv) > 2 else 512
n_decode = int(sys.argv[3]) if len(sys.argv) > 3 else 64
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
n_long = int(sys.argv[5]) if len(sys.argv) > 5 else 1500

llm = Llama(model_path=path, n_ctx=2048, n_threads=threads, n_threads_batch=threads,
            n_batch=512, verbose=False)
unit = ("(:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y)) "
        ":effect (and (on ?x ?y) (not (holding ?x))))\n")
ids = llm.tokenize((unit * 40).encode(), add_bos=False, special=True)[:n_prompt]

llm.reset()
t = time.perf_counter()
llm.eval(ids)
prefill = len(ids) / (time.perf_counter() - t)


def last_logits():
    # llama-cpp-python 0.3.x no longer copies logits into `llm.scores` unless
    # logits_all=True (which would slow its prefill): read the context's last row.
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))


def greedy_decode(n):
    """Tokens/s of n greedy steps after what is already evaluated."""
    t = time.perf_counter()
    for _ in range(n):
        llm.eval([int(last_logits().argmax())])
    return n / (time.perf_counter() - t)


short = llm.tokenize(b"<|im_start|>user\nWrite a blocksworld domain.<|im_end|>\n<|im_start|>assistant\n",
                     add_bos=False, special=True)
llm.reset()
llm.eval(short)
decode = greedy_decode(n_decode)

# Decode after a long prompt, as onebrain's `long_decode_tok_per_s` (LONG_PROMPT_TOKENS).
long_ids = llm.tokenize((unit * 120).encode(), add_bos=False, special=True)[:n_long]
llm.reset()
llm.eval(long_ids)
long_decode = greedy_decode(n_decode)

probe = {s: llm.tokenize(s.encode(), add_bos=False, special=True)
         for s in ["Hello world", "<|im_start|>user\n", "12345", "don't won't it's WE'LL", "  leading spaces\n\n"]}
print(json.dumps({"peer": "llama.cpp", "model": path, "threads": threads, "prompt_tokens": len(ids),
                  "prefill_tok_per_s": prefill, "decode_tokens": n_decode, "decode_tok_per_s": decode,
                  "long_prompt_tokens": len(long_ids), "long_decode_tok_per_s": long_decode,
                  "token_ids": probe}))

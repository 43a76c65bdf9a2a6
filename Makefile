# The two commands of the README. Each one does all set-up it needs first.
.PHONY: demo test setup bench build-cuda

CARGO ?= cargo

setup:
	scripts/setup.sh --models test

# The 1.1 GB model download is network time and the builds are CPU time, so on a fresh
# machine they run side by side; the Python environment the download uses comes first.
demo:
	scripts/setup.sh --models none --no-plugins
	scripts/beside.sh "scripts/setup.sh --models default --no-plugins" \
	  "scripts/build-plugins.sh && $(CARGO) build --release -p onebrain-cli"
	scripts/demo.sh

# The host's workspace, then the guests' own (plugins built as native libraries for their
# unit tests: the rewards, parsers and domains a plugin author changes), in the guests'
# `native-test` profile: the shipped components' LTO does nothing for a native test.
test:
	scripts/setup.sh --models test
	$(CARGO) test --workspace --release
	$(CARGO) test --manifest-path guests/Cargo.toml --workspace --profile native-test

bench:
	scripts/setup.sh --models all
	$(CARGO) run --release -p onebrain-cli -- bench

# `onebrain` with the CUDA backend, built without a GPU (nvcc and the CUDA libraries come
# from PyPI, scripts/setup-cuda.sh). CUDA_COMPUTE_CAP is the GPU generation the kernels
# are compiled for: 90 for H100/H200, 80 for A100. Run it with the libraries on the path:
#   LD_LIBRARY_PATH=.cache/cuda/lib target/cuda/release/onebrain ... (model.device = "cuda:0")
CUDA_COMPUTE_CAP ?= 90
build-cuda:
	scripts/setup.sh --models none --cuda
	PATH="$(CURDIR)/.cache/cuda/bin:$$PATH" CUDA_HOME="$(CURDIR)/.cache/cuda" \
	  CUDA_COMPUTE_CAP=$(CUDA_COMPUTE_CAP) \
	  $(CARGO) build --release -p onebrain-cli --features cuda --target-dir target/cuda

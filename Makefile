# The two commands of the README. Each one does all set-up it needs first.
.PHONY: demo test setup bench

CARGO ?= cargo

setup:
	scripts/setup.sh --models test

demo:
	scripts/setup.sh --models all
	$(CARGO) build --release -p onebrain-cli
	scripts/demo.sh

test:
	scripts/setup.sh --models test
	$(CARGO) test --workspace --release

bench:
	scripts/setup.sh --models all
	$(CARGO) run --release -p onebrain-cli -- bench

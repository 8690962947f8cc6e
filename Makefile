# One entry point for developer tasks; CI (.ci/run) calls `make install test`.
PY ?= python3
PIP := $(PY) -m pip
EXTRAS ?= train,gguf,cosine,dev,tensorboard,swanlab

.PHONY: help install build test test-rust test-py lint fmt bench bench-math demo clean

help:
	@echo "make install  - install grpo (editable, builds the Rust extension) with extras [$(EXTRAS)]"
	@echo "make test     - cargo tests of the reward core, then the pytest suite"
	@echo "make lint     - ruff, mypy (cli, py_rewards), structure check, rustfmt --check, clippy, stubtest"
	@echo "make bench    - reward-engine benchmark (bench/bench_rewards.py), outside the test run"
	@echo "make bench-math - math_equal vs Math-Verify (bench/bench_math.py; writes bench/math_verify.md)"
	@echo "make demo     - the whole chain on the CPU: prep -> sft -> grpo -> export -> chat"

install:
	$(PIP) install -e ".[$(EXTRAS)]"

build:
	$(PY) -m maturin develop --release

test: test-rust test-py

test-rust:
	cargo test --workspace --release

test-py:
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

lint:
	$(PY) -m ruff check cli py_rewards tests bench tools
	$(PY) -m mypy
	$(PY) tools/check_structure.py
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --workspace --all-targets --features python -- -D warnings
	$(PY) -m mypy.stubtest py_rewards._core --ignore-missing-stub

fmt:
	$(PY) -m ruff format cli py_rewards tests bench
	cargo fmt --all

bench:
	$(PY) bench/bench_rewards.py

bench-math:
	$(PY) bench/bench_math.py

demo:
	bash scripts/demo.sh

clean:
	rm -rf target runs build dist .pytest_cache

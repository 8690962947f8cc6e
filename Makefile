# One entry point for developer tasks; CI (.ci/run) calls `make install test`.
#
# Which Python: PY=... wins; else the active venv (or conda env); else ./.venv, which `make install` creates
# when it is missing (`bash scripts/demo.sh` makes the same one). Never the system Python: `make install test`
# typed with no venv active once installed ~3 GB into whatever python3 came first on PATH.
ifndef PY
  ifneq ($(VIRTUAL_ENV),)
    PY := $(VIRTUAL_ENV)/bin/python
  else ifneq ($(CONDA_PREFIX),)
    PY := $(CONDA_PREFIX)/bin/python
  else
    PY := .venv/bin/python
    VENV := .venv/bin/python
  endif
endif
PIP := $(PY) -m pip
EXTRAS ?= train,gguf,cosine,dev,tensorboard,swanlab,tools

.PHONY: help install has-py build test test-rust test-py test-fast lint docs fmt bench bench-math demo clean

help:
	@echo "make install  - install grpo (editable, builds the Rust extension) with extras [$(EXTRAS)] into $(PY)"
	@echo "make test     - cargo tests of the reward core, then the whole pytest suite (what CI runs)"
	@echo "make test-fast - pytest without the slow end-to-end runs and the differential test: the dev loop"
	@echo "make lint     - ruff, mypy, structure check, bench imports, docs/cli.md current, rustfmt, clippy, stubtest"
	@echo "make docs     - regenerate docs/cli.md from every command's --help"
	@echo "make bench    - reward-engine benchmark (bench/bench_rewards.py), outside the test run"
	@echo "make bench-math - math_equal vs Math-Verify (bench/bench_math.py; writes bench/math_verify.md)"
	@echo "make demo     - the whole chain on the CPU: prep -> sft -> grpo -> export -> chat"

install: $(VENV)
	@echo "make install: into $(PY)"
	$(PIP) install -e ".[$(EXTRAS)]"

# --upgrade-deps: the current pip (a fresh venv has the interpreter's own, older one).
.venv/bin/python:
	python3 -m venv --upgrade-deps .venv || { echo "make: python3 -m venv failed (Debian: apt-get install python3-venv), or activate a venv first"; exit 2; }

# The targets that run the installed package say how to get it when there is none.
has-py:
	@test -x "$(PY)" || command -v "$(PY)" >/dev/null || { echo "make: no $(PY): run 'make install' first (it creates .venv)"; exit 2; }

build: has-py
	$(PY) -m maturin develop --release

test: test-rust test-py

# The dev profile: overflow checks on, and 34 s here against 57 s for --release (its build is most of it).
test-rust:
	cargo test --workspace

# Release builds leave out the `_debug_panic` hook: a second build with the cargo feature
# `debug-hooks` (own target dir; the dev profile: 25 s here against 35 s with the release profile's fat LTO)
# lets tests/test_rewards.py check that a Rust panic is a Python exception.
DEBUG_CORE_DIR := target/debug-hooks

# pytest-xdist: JOBS worker processes (default: the cores, at most 4), whole test files handed out as workers
# come free (--dist loadfile: a module's fixtures are built once, in one worker). Most of a test's time is a
# `grpo` process importing the training stack on one core, so two workers keep a 2-core machine busy. The
# session's tiny model, prep and trained run are built once and shared (tests/conftest.py, built_once);
# long tests' progress lines reach the terminal as they happen (tests/terminal.py); tests/budget.py stretches
# every test's limit by the load it sees.
TEST_ENV = PY_REWARDS_DEBUG_CORE=$(abspath $(DEBUG_CORE_DIR))/debug/libreward_core.so HF_HUB_OFFLINE=1
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
XDIST = -n $(JOBS) --dist loadfile

test-py: has-py
	cargo build -p reward_core --features python,debug-hooks --target-dir $(DEBUG_CORE_DIR)
	$(TEST_ENV) $(PY) -m pytest -q $(XDIST) --durations=15 $(TESTS)

# The developer loop: no end-to-end run, and not the ~30 s differential test of math_equal against
# Math-Verify (make test runs both).
test-fast: has-py
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q $(XDIST) -m "not slow and not differential"

lint: has-py
	$(PY) -m ruff check cli py_rewards tests bench tools
	$(PY) -m ruff format --check cli py_rewards tests bench tools
	$(PY) -m mypy
	$(PY) tools/check_structure.py
	$(PY) tools/check_bench.py
	$(PY) tools/gen_cli_docs.py --check
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --workspace --all-targets --features python -- -D warnings
	$(PY) -m mypy.stubtest py_rewards._core --ignore-missing-stub --mypy-config-file pyproject.toml

# docs/cli.md from every command's --help (make lint fails when it is out of date).
docs: has-py
	$(PY) tools/gen_cli_docs.py

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

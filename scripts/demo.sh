#!/usr/bin/env bash
# The README's chain on the CPU, offline, on the embedded default (tiny random Qwen3, bundled DAPO sample
# + the bundled GSM8K worked solutions as the stage-1 warm-up set):
#   grpo prep dapo -> grpo sft -> grpo grpo --gens 4 -> grpo export --gguf q4_k_m -> grpo chat
# Usage: bash scripts/demo.sh            (installs grpo with the train+gguf extras first: nothing compiles
#                                         but the Rust reward core; llama.cpp comes prebuilt in xllamacpp)
#        Measured: see README "Two commands" (fresh 2-core machine, empty caches, a fresh venv).
#        SKIP_INSTALL=1 RUN=runs/x bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/demo}
export HF_HUB_OFFLINE=1
t0=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $* =="; }
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  if ! python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    # No venv active: make one here (the system Python stays untouched), and use it from now on.
    step "install: no venv active, creating .venv (afterwards: source .venv/bin/activate)"
    python3 -m venv .venv
    MADE_VENV=1
    # shellcheck disable=SC1091
    source .venv/bin/activate
  fi
  # uv downloads and unpacks the ~3 GB of wheels (torch's CUDA build is what PyPI has for Linux) in
  # parallel and builds the Rust reward core meanwhile (37 s measured); pip does it one step after another (2-4 min).
  step "install: uv (the installer, one small wheel)"
  python3 -m pip install --disable-pip-version-check --progress-bar on uv
  step "install: grpo[train,gguf] — torch, Unsloth, TRL, llama.cpp prebuilt (xllamacpp); cargo builds the reward core"
  python3 -m uv pip install --python "$(python3 -c 'import sys; print(sys.executable)')" -e ".[train,gguf]"
fi
rm -rf "$RUN"
start=$(date +%s)
step "grpo prep dapo"
grpo prep dapo --run "$RUN" --limit 200 --eval-size 8
step "grpo sft"
grpo sft --run "$RUN" --max-steps 12 --lr 1e-3
step "grpo grpo --gens 4"
grpo grpo --run "$RUN" --gens 4 --max-steps 4 --max-completion-length 64
step "grpo export --gguf q4_k_m"
grpo export --run "$RUN" --gguf q4_k_m --verify 4 --verify-tokens 32
step "grpo chat"
grpo chat --run "$RUN" --engine gguf --prompt "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?" --max-new-tokens 64
echo
echo "demo finished: chain $(( $(date +%s) - start )) s, all $(( $(date +%s) - t0 )) s; everything is in $RUN (plots: $RUN/logs/train.png)"
if [[ -n "${MADE_VENV:-}" ]]; then
  # The venv is this script's; the shell that ran it does not have it: said last, where it stays in view.
  echo "grpo is installed in .venv: run 'source .venv/bin/activate' to type the commands yourself (make install test uses it too)"
fi

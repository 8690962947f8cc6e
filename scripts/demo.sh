#!/usr/bin/env bash
# The README's chain on the CPU, offline, on the embedded default (tiny random Qwen3, bundled DAPO sample
# + the bundled GSM8K worked solutions as the stage-1 warm-up set):
#   grpo prep dapo -> grpo sft -> grpo grpo --gens 4 -> grpo export --gguf q4_k_m -> grpo chat
# Usage: bash scripts/demo.sh            (installs grpo with the train+gguf extras first: nothing compiles
#                                         but the Rust reward core; llama.cpp comes prebuilt in xllamacpp)
#        SKIP_INSTALL=1 RUN=runs/x bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/demo}
export HF_HUB_OFFLINE=1
t0=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $* =="; }
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  step "install 1/2: Python packages (torch, Unsloth, TRL, xllamacpp: ~3 GB of wheels, nothing compiled)"
  # Progress bars on (no -q): the download and install of torch's CUDA wheels take a minute or two.
  python3 -m pip install --progress-bar on "maturin>=1.7,<2" -r <(python3 scripts/requirements.py train gguf)
  step "install 2/2: grpo itself (cargo builds the Rust reward core, ~1 min; its compiler lines below)"
  python3 -m pip install --no-deps --no-build-isolation -v -e . 2>&1 | grep -E --line-buffered "Compiling|Finished|Built|Successfully|error" || true
  python3 -c "import py_rewards, cli" || { echo "error: grpo did not install (run: pip install -v -e .)"; exit 1; }
fi
rm -rf "$RUN"
start=$(date +%s)
step "grpo prep dapo"
grpo prep dapo --run "$RUN" --limit 200 --eval-size 8
step "grpo sft"
grpo sft --run "$RUN" --max-steps 20 --lr 1e-3
step "grpo grpo --gens 4"
grpo grpo --run "$RUN" --gens 4 --max-steps 4 --max-completion-length 64
step "grpo export --gguf q4_k_m"
grpo export --run "$RUN" --gguf q4_k_m --verify 4 --verify-tokens 32
step "grpo chat"
grpo chat --run "$RUN" --source gguf --prompt "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?" --max-new-tokens 64
echo
echo "demo finished: chain $(( $(date +%s) - start )) s, all $(( $(date +%s) - t0 )) s; everything is in $RUN (plots: $RUN/logs/train.png)"

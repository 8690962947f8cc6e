#!/usr/bin/env bash
# The whole chain on the CPU, offline, on the embedded default (tiny random Qwen3 + bundled GSM8K sample):
#   prep -> sft -> grpo -> export (LoRA + GGUF q4_k_m, verified) -> chat one-shot.
# Usage: bash scripts/demo.sh            (installs grpo with the train+gguf extras first)
#        SKIP_INSTALL=1 RUN=runs/x bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/demo}
export HF_HUB_OFFLINE=1
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  python3 -m pip install -q -e ".[train,gguf]"
fi
rm -rf "$RUN"
start=$(date +%s)
grpo prep gsm8k --run "$RUN" --model tiny --limit 200 --eval-size 8
grpo sft --run "$RUN" --max-steps 20 --lr 1e-3
grpo grpo --run "$RUN" --gens 4 --max-steps 4 --max-completion-length 64
grpo export --run "$RUN" --lora --gguf q4_k_m --verify 4 --verify-tokens 32
grpo chat --run "$RUN" --source gguf --prompt "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?" --max-new-tokens 64
echo "demo finished in $(( $(date +%s) - start )) s; everything is in $RUN"

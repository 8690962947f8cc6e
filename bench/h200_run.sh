#!/usr/bin/env bash
# One device call: plain Unsloth+TRL GRPO vs `grpo grpo`, same settings, same machine, same call.
# Qwen3-4B-shaped random weights, LoRA r=16 rsLoRA, G=8, 1024 completion tokens, one prompt per step.
# Needs: .gpu (shared/tools/gpu-bundle.sh) and py_rewards/_core.abi3.so built here (maturin, abi3).
# Usage (on the GPU machine, repo root): bash bench/h200_run.sh OUTDIR [STEPS]
set -uo pipefail
out=${1:?usage: h200_run.sh OUTDIR [STEPS]}; steps=${2:-5}
mkdir -p "$out"
export PYTHONPATH=$PWD/.gpu/unsloth:$PWD/.gpu/base:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers, trl, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__)" | tee -a "$out/gpu.txt"
t0=$(date +%s)
python3 bench/make_random_model.py --out /tmp/q4b 2>&1 | tail -3
echo "model written in $(( $(date +%s) - t0 )) s"
python3 bench/h200_grpo_plain.py --model /tmp/q4b --steps "$steps" --gens 8 --completion-len 1024 \
  --out /tmp/plain 2>&1 | tee "$out/plain.log" | grep -E '^\{' | tail -n 30
python3 -m cli prep gsm8k --run /tmp/runs/bench --model /tmp/q4b --limit 400 --eval-size 8 2>&1 | tail -5
python3 -m cli grpo --run /tmp/runs/bench --gens 8 --max-completion-length 1024 --max-steps "$steps" \
  --save-steps 0 2>&1 | tee "$out/grpo.log" | tail -n 25
cp /tmp/runs/bench/logs/metrics.jsonl "$out/grpo_metrics.jsonl" 2>/dev/null
cp /tmp/runs/bench/data/stats.json "$out/prep_stats.json" 2>/dev/null
true

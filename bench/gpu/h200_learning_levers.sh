#!/usr/bin/env bash
# Learning on a real model, second round: the levers for groups that carry no signal.
# Gemma-3-270M, GSM8K: prep (full train split) → SFT (as in round 1) → offline pass-rate filter
# (`grpo filter`: 8 samples per prompt from the SFT adapter, keep prompts solved sometimes but not
# always) → GRPO with G=16, lr 5e-6, vLLM rollouts, for at most GRPO_SECONDS (SIGINT then) → grpo eval of SFT
# and GRPO on the whole GSM8K test split in one call (paired) through vLLM.
# Usage (GPU machine, repo root): DATA=/tmp/data [GRPO_SECONDS=600] [FILTER_LIMIT=4000] [GRPO_LR=5e-6] \
#   [DEADLINE_FILE=F] bash bench/gpu/h200_learning_levers.sh RUN OUTDIR
# DEADLINE_FILE: a file holding an epoch second; GRPO gets SIGINT when the clock passes it (read every 5 s,
# so the stop can be moved while the stage runs). Without it, GRPO_SECONDS bounds the stage.
set -uo pipefail
run=${1:?usage: h200_learning_levers.sh RUN OUTDIR}; out=${2:?usage: h200_learning_levers.sh RUN OUTDIR}
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
  gens: 16
  batch_size: 128           # 8 prompts x 16 completions per step
  max_steps: 1000
  learning_rate: LR
  warmup_ratio: 0.02
  temperature: 1.0
  max_completion_length: 256
  save_steps: 50
  logging_steps: 1
YAML
sed -i "s/learning_rate: LR/learning_rate: ${GRPO_LR:-5.0e-6}/" "$run.yaml"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
stamp prep
python3 -m cli prep gsm8k --run "$run" --source "$data/train.jsonl" --model gemma3-270m --eval-size 50 \
  --config "$run.yaml" > "$out/prep.log" 2>&1 || { tail -5 "$out/prep.log"; exit 1; }
tail -2 "$out/prep.log"
stamp sft
python3 -m cli sft --run "$run" --config "$run.yaml" --backend hf > "$out/sft.log" 2>&1 || { tail -5 "$out/sft.log"; exit 1; }
grep -E '^sft done' "$out/sft.log"
stamp filter
# WAIT_FOR=FILE: the GPU machine's vLLM may still be arriving (prep and SFT do not need it).
while [ -n "${WAIT_FOR:-}" ] && [ ! -e "$WAIT_FOR" ]; do sleep 5; done
python3 -m cli filter --run "$run" --samples 8 --limit "${FILTER_LIMIT:-4000}" --engine vllm > "$out/filter.log" 2>&1 \
  || { tail -5 "$out/filter.log"; echo "filter failed: GRPO on the unfiltered prompts"; }
tail -1 "$out/filter.log"
stamp grpo
if [ -n "${DEADLINE_FILE:-}" ]; then
  python3 -m cli grpo --run "$run" --config "$run.yaml" --vllm on > "$out/grpo.log" 2>&1 & gpid=$!
  while kill -0 "$gpid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$(cat "$DEADLINE_FILE" 2>/dev/null || echo 0)" ]; then kill -INT "$gpid"; break; fi
    sleep 5
  done
  for _ in $(seq 90); do kill -0 "$gpid" 2>/dev/null || break; sleep 1; done  # Ctrl-C saves the adapter first
  kill -KILL "$gpid" 2>/dev/null
  wait "$gpid"
else
  timeout -s INT "${GRPO_SECONDS:-600}" python3 -m cli grpo --run "$run" --config "$run.yaml" --vllm on \
    > "$out/grpo.log" 2>&1
fi
stamp "grpo exit $?"; grep -E '^(grpo (done|: vLLM)|error)' "$out/grpo.log" | tail -3
if [ ! -d "$run/grpo/adapter" ]; then  # stopped before the stage wrote its adapter: take the last checkpoint
  last=$(ls -d "$run"/grpo/checkpoints/attempt-*/checkpoint-* 2>/dev/null | sort -t- -k3 -n | tail -1)
  [ -n "$last" ] && mkdir -p "$run/grpo/adapter" && cp "$last"/adapter_* "$run/grpo/adapter/" && echo "adapter from $last"
fi
stamp eval
timeout 420 python3 -m cli eval --run "$run" --source "$data/test.jsonl" --models sft,grpo --max-new-tokens 256 \
  --engine vllm > "$out/eval.log" 2>&1; stamp "eval exit $?"
tail -12 "$out/eval.log"
cp "$run/logs/metrics.jsonl" "$out/metrics.jsonl"; cp "$run/eval/report.json" "$out/eval_report.json"
cp "$run/manifest.json" "$out/manifest.json"; cp "$run.yaml" "$out/overrides.yaml"
cp "$run/data/passrate.json" "$out/passrate.json" 2>/dev/null
gzip -c "$run/eval/samples.jsonl" > "$out/eval_samples.jsonl.gz"
stamp done

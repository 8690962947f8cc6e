#!/usr/bin/env bash
# The learning issue's item 3 on a GPU: a tokenizer with pad = eos trains under both backends, vLLM rollouts
# included. bench/gpu/pad_eos_model.py writes a random 2-layer Qwen2 whose tokenizer is laid out as transformers
# builds Qwen2.5's from a GGUF (pad = eos = <|endoftext|>, <|fim_pad|> in the vocabulary but not added: the
# tokenizer Unsloth's GPU loader refused); then, for each backend, `grpo sft` (5 steps) and `grpo grpo --vllm on`
# (3 steps) from one prep. Prints the pad each run chose, what its manifest kept and how each stage ended.
#
#   bash bench/gpu/h200_qwen_coder.sh unpack PARTS     # first: the Unsloth/TRL and vLLM bundles into $W
#   bash bench/gpu/h200_pad_eos.sh OUT                 # ~3 min warm; Unsloth's first GRPO step compiles
# PAD_ENV: variables for the Unsloth runs, e.g. PAD_ENV=UNSLOTH_BLOCK_COMPILE=0; PAD_TIMEOUT: seconds a stage
# may take (420).
set -uo pipefail
out=${1:?usage: h200_pad_eos.sh OUT}
W=${W:-/tmp/qc}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=/tmp/site:$W/bundle/unsloth:$W/bundle/base:$W/wheels:$REPO
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 TOKENIZERS_PARALLELISM=false
cd "$REPO"
mkdir -p "$out"; rm -rf "$W/pad-eos"; mkdir -p "$W/pad-eos"
python3 bench/gpu/pad_eos_model.py --out "$W/pad-eos/model" > "$out/model.log" 2>&1 || { cat "$out/model.log"; exit 1; }
cat > "$W/pad-eos/small.yaml" <<'YAML'
max_seq_length: 2048       # the tiny BPE takes ~4x the tokens of a real one
sft:
  batch_size: 8
  max_steps: 5
  max_example_tokens: 1024
grpo:
  gens: 4
  batch_size: 16
  max_steps: 3
  max_completion_length: 64
  logging_steps: 1
YAML
python3 -m cli prep gsm8k --run "$W/pad-eos/prepped" --model "$W/pad-eos/model" --limit 64 \
  --source "$W/data/gsm8k/train.jsonl" --config "$W/pad-eos/small.yaml" > "$out/prep.log" 2>&1 \
  || { tail -5 "$out/prep.log"; exit 1; }
for backend in hf unsloth; do
  run=$W/pad-eos/$backend; cp -r "$W/pad-eos/prepped" "$run"
  envs=(); [ "$backend" = unsloth ] && envs=(${PAD_ENV:-})
  for stage in sft grpo; do
    args=(); [ "$stage" = grpo ] && args=(--vllm "${VLLM:-on}")  # VLLM=off: a CPU check of this script
    timeout "${PAD_TIMEOUT:-420}" env "${envs[@]}" python3 -m cli "$stage" --run "$run" --backend "$backend" "${args[@]}" \
      > "$out/${backend}_$stage.log" 2>&1
    echo "$backend $stage: exit $? — $(grep -E '^(sft done|grpo done|error)' "$out/${backend}_$stage.log" | tail -1)"
  done
  grep -h "pad token:" "$out/${backend}_sft.log" | head -1
  python3 -c 'import json, sys; print(sys.argv[2], json.load(open(sys.argv[1]))["tokenizer"])' \
    "$run/manifest.json" "$backend" 2>&1
done | tee "$out/summary.txt"

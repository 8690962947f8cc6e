#!/usr/bin/env bash
# One device call on one H200: the sharded launch modes of `grpo grpo` against a plain one-process run,
# all continuing the same SFT adapter: plain, --deepspeed zero2, --deepspeed zero3, --fsdp (each a one-GPU
# accelerate launch: what a user with one GPU gets from these flags, and every code path of the sharded
# save). Qwen3-0.6B-shaped random weights, hf backend, G=8 completions of 128 tokens, 4 steps each.
# Needs: .gpu/base (bench/gpu/bundle.sh), py_rewards/_core.abi3.so built here, and DeepSpeed's wheel
# with the wheels it needs that the image lacks in .carry/ds (see bench/gpu/scale.md).
# Usage (on the GPU machine, repo root): [ORDER='plain ds2 ds3 fsdp'] [GPUS=2] bash bench/gpu/h200_deepspeed_run.sh OUTDIR
# GPUS=N adds --gpus N to the sharded modes; ORDER may also hold 'ddp' (plain data parallel on GPUS, default 2).
# SAVE_STEPS=N checkpoints every N steps; RESUME=K then continues every run but plain K more steps with
# --resume under the same launch flags. nvidia-smi samples every GPU's memory during each run (<name>_smi.csv).
set -uo pipefail
out=${1:?usage: h200_deepspeed_run.sh OUTDIR}; steps=${STEPS:-4}
mkdir -p "$out"
ds_site=${DS_SITE:-/tmp/ds_site}
[ -d "$ds_site/deepspeed" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target "$ds_site" .carry/ds/*.whl || exit 1
export PYTHONPATH=$PWD/.gpu/base:$ds_site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers, trl, peft, accelerate, deepspeed; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__, 'accelerate', accelerate.__version__, 'deepspeed', deepspeed.__version__)" 2>&1 | tail -1 | tee -a "$out/gpu.txt"
t0=$(date +%s)
python3 bench/gpu/make_random_model.py --out /tmp/q06 --hidden 1024 --intermediate 3072 --layers 28 \
  --heads 16 --kv-heads 8 --head-dim 128 2>&1 | tail -1
rm -rf /tmp/runs
python3 -m cli prep gsm8k --run /tmp/runs/plain --model /tmp/q06 --limit 400 --eval-size 8 2>&1 | tail -1
# A format warm-up strong enough that sampled completions differ in reward (a random model scores the
# same on every completion, and GRPO then has nothing to learn from).
python3 -m cli sft --run /tmp/runs/plain --backend hf --max-steps "${SFT_STEPS:-60}" --lr 1e-3 \
  > "$out/sft.log" 2>&1
echo "sft: exit $? after $(( $(date +%s) - t0 )) s"; grep -E '^sft (done|[0-9])' "$out/sft.log" | tail -n 2
for n in ddp ds2 ds3 fsdp; do cp -r /tmp/runs/plain /tmp/runs/$n; done
common=(--backend hf --gens 8 --max-completion-length 128 --save-steps "${SAVE_STEPS:-0}" --lr 1e-4)
run() {  # label, run name, then grpo flags
  local label=$1 name=$2; shift 2
  local s=$(date +%s)
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 > "$out/${label}_smi.csv" &
  local smi=$!
  timeout "${TMO:-150}" python3 -m cli grpo --run /tmp/runs/"$name" "${common[@]}" "$@" > "$out/$label.log" 2>&1
  echo "$label: exit $? in $(( $(date +%s) - s )) s"
  kill $smi 2>/dev/null
  grep -E '^(grpo (done|[0-9])|error)' "$out/$label.log" | tail -n 3
  cp /tmp/runs/"$name"/logs/metrics.jsonl "$out/${label}_metrics.jsonl" 2>/dev/null
}
flags() {  # the launch flags of a mode
  case $1 in
    plain) ;;
    ddp) echo --gpus "${GPUS:-2}" ;;
    ds2) echo --deepspeed zero2 ${GPUS:+--gpus "$GPUS"} ;;
    ds3) echo --deepspeed zero3 ${GPUS:+--gpus "$GPUS"} ;;
    fsdp) echo --fsdp ${GPUS:+--gpus "$GPUS"} ;;
  esac
}
for name in ${ORDER:-plain ds2 ds3 fsdp}; do
  if [ "$name" = plain ]; then
    CUDA_VISIBLE_DEVICES=0 run plain plain --max-steps "$steps"
  else
    run "$name" "$name" --max-steps "$steps" $(flags "$name")
  fi
done
python3 bench/gpu/adapter_compare.py /tmp/runs ${ORDER:-plain ds2 ds3 fsdp} --json "$out/adapters.json" \
  | tee "$out/adapters.md"
python3 bench/gpu/deepspeed_report.py "$out" "" ${ORDER:-plain ds2 ds3 fsdp} | tee -a "$out/adapters.md"
if [ -n "${RESUME:-}" ]; then
  for name in ${ORDER:-plain ds2 ds3 fsdp}; do
    [ "$name" = plain ] && continue
    run "${name}_resume" "$name" --resume --max-steps $(( steps + RESUME )) $(flags "$name")
    ls /tmp/runs/"$name"/grpo/checkpoints 2>/dev/null | tr '\n' ' '; echo "← $name checkpoints"
  done
fi
if [ -n "${RESUME:-}" ]; then
  python3 - "$out" ${ORDER:-plain ds2 ds3 fsdp} <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in sys.argv[2:]:
    f = out / f"{name}_resume_metrics.jsonl"
    if not f.exists():
        continue
    rows = [json.loads(x) for x in f.read_text().splitlines()]
    steps = [r["step"] for r in rows if r.get("stage") == "grpo"]
    runs = [(r["from"], r["global_step"], r["distributed_type"]) for r in rows if r.get("stage") == "grpo_summary"]
    print(f"{name}: steps logged {steps}; runs (from, global_step, distributed_type) {runs}")
PY
fi
true

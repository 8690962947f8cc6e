#!/usr/bin/env bash
# One device call on one H200: the sharded launch modes of `grpo grpo` against a plain one-process run,
# all continuing the same SFT adapter: plain, --deepspeed zero2, --deepspeed zero3, --fsdp (each a one-GPU
# accelerate launch: what a user with one GPU gets from these flags, and every code path of the sharded
# save). Qwen3-0.6B-shaped random weights, hf backend, G=8 completions of 128 tokens, 4 steps each.
# Needs: .gpu/base (shared/tools/gpu-bundle.sh), py_rewards/_core.abi3.so built here, and DeepSpeed's wheel
# with the wheels it needs that the image lacks in .carry/ds (see bench/scale.md).
# Usage (on the GPU machine, repo root): [ORDER='plain ds2 ds3 fsdp'] [GPUS=2] bash bench/h200_deepspeed_run.sh OUTDIR
# GPUS=N adds --gpus N to the sharded modes; ORDER may also hold 'ddp' (plain data parallel on GPUS, default 2).
set -uo pipefail
out=${1:?usage: h200_deepspeed_run.sh OUTDIR}; steps=${STEPS:-4}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/ds/*.whl || exit 1
export PYTHONPATH=$PWD/.gpu/base:/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers, trl, peft, accelerate, deepspeed; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__, 'accelerate', accelerate.__version__, 'deepspeed', deepspeed.__version__)" 2>&1 | tail -1 | tee -a "$out/gpu.txt"
t0=$(date +%s)
python3 bench/make_random_model.py --out /tmp/q06 --hidden 1024 --intermediate 3072 --layers 28 \
  --heads 16 --kv-heads 8 --head-dim 128 2>&1 | tail -1
rm -rf /tmp/runs
python3 -m cli prep gsm8k --run /tmp/runs/plain --model /tmp/q06 --limit 400 --eval-size 8 2>&1 | tail -1
# A format warm-up strong enough that sampled completions differ in reward (a random model scores the
# same on every completion, and GRPO then has nothing to learn from).
python3 -m cli sft --run /tmp/runs/plain --backend hf --max-steps "${SFT_STEPS:-60}" --lr 1e-3 \
  > "$out/sft.log" 2>&1
echo "sft: exit $? after $(( $(date +%s) - t0 )) s"; grep -E '^sft (done|[0-9])' "$out/sft.log" | tail -n 2
for n in ddp ds2 ds3 fsdp; do cp -r /tmp/runs/plain /tmp/runs/$n; done
common=(--backend hf --gens 8 --max-completion-length 128 --max-steps "$steps" --save-steps 0 --lr 1e-4)
run() {  # name, then grpo flags
  local name=$1; shift
  local s=$(date +%s)
  timeout "${TMO:-150}" python3 -m cli grpo --run /tmp/runs/"$name" "${common[@]}" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - s )) s"
  grep -E '^(grpo (done|[0-9])|error)' "$out/$name.log" | tail -n 3
  cp /tmp/runs/"$name"/logs/metrics.jsonl "$out/${name}_metrics.jsonl" 2>/dev/null
}
for name in ${ORDER:-plain ds2 ds3 fsdp}; do
  case $name in
    plain) CUDA_VISIBLE_DEVICES=0 run plain ;;
    ddp) run ddp --gpus "${GPUS:-2}" ;;
    ds2) run ds2 --deepspeed zero2 ${GPUS:+--gpus "$GPUS"} ;;
    ds3) run ds3 --deepspeed zero3 ${GPUS:+--gpus "$GPUS"} ;;
    fsdp) run fsdp --fsdp ${GPUS:+--gpus "$GPUS"} ;;
  esac
done
python3 bench/adapter_compare.py /tmp/runs ${ORDER:-plain ds2 ds3 fsdp} --json "$out/adapters.json" \
  | tee "$out/adapters.md"
python3 bench/deepspeed_report.py "$out" "" ${ORDER:-plain ds2 ds3 fsdp} | tee -a "$out/adapters.md"
true

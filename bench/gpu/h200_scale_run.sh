#!/usr/bin/env bash
# One device call on nvidia-h200-x2: `grpo grpo` on 1 GPU, then the same on 2 GPUs (--gpus 2, DDP through
# accelerate launch), then 2 GPUs with --fsdp. Qwen3-0.6B-shaped random weights, hf backend, LoRA r=16,
# G=8 completions of 512 tokens per GPU per step (one prompt per GPU per step).
# Needs: .gpu (bench/gpu/bundle.sh) and py_rewards/_core.abi3.so built here (maturin, abi3).
# Usage (on the GPU machine, repo root): [ORDER='g1 g2 fsdp'] bash bench/gpu/h200_scale_run.sh OUTDIR [STEPS]
set -uo pipefail
out=${1:?usage: h200_scale_run.sh OUTDIR [STEPS]}; steps=${2:-6}
mkdir -p "$out"
export PYTHONPATH=$PWD/.gpu/unsloth:$PWD/.gpu/base:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# The x2 machines keep NVLink multicast off (KINDS.md): keep it so in every child process too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
nvidia-smi topo -m >> "$out/gpu.txt" 2>&1
python3 -c "import torch, transformers, trl, peft, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__, 'accelerate', accelerate.__version__, 'gpus', torch.cuda.device_count())" | tee -a "$out/gpu.txt"
t0=$(date +%s)
python3 bench/gpu/make_random_model.py --out /tmp/q06 --hidden 1024 --intermediate 3072 --layers 28 \
  --heads 16 --kv-heads 8 --head-dim 128 2>&1 | tail -2
echo "model written in $(( $(date +%s) - t0 )) s"
rm -rf /tmp/runs  # a warm machine keeps /tmp from the previous call
python3 -m cli prep gsm8k --run /tmp/runs/g1 --model /tmp/q06 --limit 400 --eval-size 8 2>&1 | tail -2
cp -r /tmp/runs/g1 /tmp/runs/g2; cp -r /tmp/runs/g1 /tmp/runs/fsdp
common=(--backend hf --gens 8 --max-completion-length 512 --max-steps "$steps" --save-steps 0)
run() {  # name, then grpo flags
  local name=$1; shift
  local s=$(date +%s)
  timeout "${TMO:-240}" python3 -m cli grpo --run /tmp/runs/"$name" "${common[@]}" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - s )) s"
  grep -E '^grpo (done|[0-9])' "$out/$name.log" | tail -n 3
  cp /tmp/runs/"$name"/logs/metrics.jsonl "$out/${name}_metrics.jsonl" 2>/dev/null
  cp /tmp/runs/"$name"/grpo/accelerate.yaml "$out/${name}_accelerate.yaml" 2>/dev/null
}
order=${ORDER:-g1 g2 fsdp}
for name in $order; do
  case $name in
    g1) CUDA_VISIBLE_DEVICES=0 run g1 ;;
    g2) run g2 --gpus 2 ;;
    fsdp) run fsdp --gpus 2 --fsdp ${FSDP_FLAGS:-}; grep -E '^error' "$out/fsdp.log" | head -3 ;;
  esac
done
true

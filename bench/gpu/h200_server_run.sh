#!/usr/bin/env bash
# Two GPUs, one call: TRL's vLLM server mode end to end. `grpo serve` on GPU 0 (vLLM), `grpo grpo
# --vllm-server` on GPU 1 (hf backend), Qwen3-4B-shaped random weights, G=8 x 1024 tokens, one prompt per
# step. bench/gpu/server_probe.py asks the server for greedy completions before and after training: the
# weights pushed after each step must change them.
# Needs vLLM and TRL importable, py_rewards built. Usage: [STEPS=5] bash bench/gpu/h200_server_run.sh OUTDIR
set -uo pipefail
out=${1:?usage: h200_server_run.sh OUTDIR}; steps=${STEPS:-5}; port=${PORT:-8011}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d /tmp/q4b ] || python3 bench/gpu/make_random_model.py --out /tmp/q4b 2>&1 | tail -1
rm -rf /tmp/sruns
python3 -m cli prep gsm8k --run /tmp/sruns/s --model /tmp/q4b --limit 400 --eval-size 8 2>&1 | tail -1
s=$(date +%s)
CUDA_VISIBLE_DEVICES=0 setsid python3 -m cli serve --run /tmp/sruns/s --port "$port" --gpu-memory-utilization "${SERVE_UTIL:-0.3}" > "$out/serve.log" 2>&1 &
spid=$!
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $spid 2>/dev/null || { echo "server died"; tail -20 "$out/serve.log"; exit 1; }
  sleep 2
done
echo "server up after $(( $(date +%s) - s )) s"
python3 bench/gpu/server_probe.py "127.0.0.1:$port" "$out/probe_before.json" || tail -5 "$out/serve.log"
s=$(date +%s)
CUDA_VISIBLE_DEVICES=1 timeout 400 python3 -m cli grpo --run /tmp/sruns/s --backend hf \
  --vllm-server "127.0.0.1:$port" --gens 8 --max-completion-length 1024 --max-steps "$steps" --save-steps 0 \
  --lr 1e-4 > "$out/grpo.log" 2>&1
echo "grpo: exit $? in $(( $(date +%s) - s )) s"; grep -E '^(grpo (done|[0-9])|error)' "$out/grpo.log" | tail -4
cp /tmp/sruns/s/logs/metrics.jsonl "$out/server_metrics.jsonl" 2>/dev/null
python3 bench/gpu/server_probe.py "127.0.0.1:$port" "$out/probe_after.json" --against "$out/probe_before.json"
kill -TERM -- -$spid 2>/dev/null; sleep 3; kill -KILL -- -$spid 2>/dev/null
true

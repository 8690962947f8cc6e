#!/usr/bin/env bash
# One GPU, one call: GRPO step time and memory with and without vLLM rollouts, and against a plain
# Unsloth + TRL + vLLM script with the same settings. Qwen3-4B-shaped random weights, LoRA r=16 rsLoRA,
# G=8 completions of 1024 tokens for one prompt per step (the random model never samples EOS).
#   off    grpo grpo --vllm off                      (HF generate)
#   auto   grpo grpo --vllm on                       (gpu_memory_utilization: auto, the default)
#   u06    grpo grpo --vllm on, gpu_memory_utilization 0.6
#   plain  bench/gpu/h200_grpo_plain.py, vLLM at auto's share (the same engine settings as `auto`)
#   plainfree  plain without --force-length (no min_tokens: the rollouts stop as ours do; the random model
#          never samples EOS, so both still run 1024 tokens)
#   plaingsm   plainfree on ours' own prompts (grpo grpo's own dataset of the prepped run, within prep's cut)
#   warm   auto for WARM_STEPS (2) steps: a fresh machine's compile (Unsloth, Triton, vLLM), not measured
# nvidia-smi samples the GPU's memory during each run (<name>_smi.csv): what the card really held.
# Needs vLLM importable (bench/gpu/vllm_bundle.sh), Unsloth/TRL on PYTHONPATH, py_rewards built.
#   eval   grpo eval --engine vllm of base and the first auto run's adapter (64 prompts)
# Usage (GPU machine, repo root): [ORDER='off auto u06 plain'] [STEPS=5] bash bench/gpu/h200_vllm_run.sh OUTDIR
# STACKS=SECONDS: each Python process writes its threads' stacks to OUTDIR/stacks/<pid>.txt every SECONDS.
# Same-call overhead: ORDER='warm plaingsm auto plaingsm auto' STEPS=6: like with like (plain's --force-length
# sets vLLM's min_tokens, which also turns off Unsloth's kept-set scoring; ours sets neither). (SMI_GPU: the nvidia-smi index to sample; nvidia-smi ignores CUDA_VISIBLE_DEVICES)
set -uo pipefail
out=${1:?usage: h200_vllm_run.sh OUTDIR}; steps=${STEPS:-5}
# A cold first run (Unsloth and Triton compiles, vLLM's start) took over 300 s on 2026-12-01 while the host's CPUs
# were busy; each run gets RUN_TIMEOUT seconds.
limit=${RUN_TIMEOUT:-480}
# warm: the cold first step took 329 s on 2026-12-03 and its second step was still running at 480 s
warm_limit=${WARM_TIMEOUT:-720}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
if [ -n "${STACKS:-}" ]; then  # every process's Python stacks every STACKS s (bench/gpu/stacks/sitecustomize.py)
  export PYTHONPATH=$(cd "$(dirname "$0")" && pwd)/stacks:${PYTHONPATH:-} GRPO_STACKS_DIR=$out/stacks GRPO_STACKS_EVERY=$STACKS
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers, trl, peft, vllm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__, 'vllm', vllm.__version__)" 2>&1 | tail -1 | tee -a "$out/gpu.txt"
[ -d /tmp/q4b ] || python3 bench/gpu/make_random_model.py --out /tmp/q4b 2>&1 | tail -1
rm -rf /tmp/vruns
python3 -m cli prep gsm8k --run /tmp/vruns/base --model /tmp/q4b --limit 400 --eval-size 8 2>&1 | tail -1
printf 'grpo:\n  gpu_memory_utilization: 0.6\n' > /tmp/vruns/u06.yaml
common=(--gens 8 --max-completion-length 1024 --max-steps "$steps" --save-steps 0)
sample() { nvidia-smi -i "${SMI_GPU:-0}" --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 250 > "$out/$1_smi.csv" & echo $!; }
declare -A seen=()
# A name may repeat (ORDER='plain auto plain auto': interleaved repeats); the k-th run of NAME is NAME<k>
# from its second run on, each in a fresh copy of the prepped run.
for name in ${ORDER:-off auto u06 plain}; do
  seen[$name]=$(( ${seen[$name]:-0} + 1 )); tag=$name; [ "${seen[$name]}" -gt 1 ] && tag=$name${seen[$name]}
  rm -rf "/tmp/vruns/$tag"; cp -r /tmp/vruns/base "/tmp/vruns/$tag"
  s=$(date +%s); smi=$(sample "$tag")
  case $name in
    off) timeout "$limit" python3 -m cli grpo --run "/tmp/vruns/$tag" "${common[@]}" --vllm off > "$out/$tag.log" 2>&1 ;;
    warm) timeout "$warm_limit" python3 -m cli grpo --run "/tmp/vruns/$tag" "${common[@]}" --max-steps "${WARM_STEPS:-2}" \
           --vllm on > "$out/$tag.log" 2>&1 ;;
    auto) timeout "$limit" python3 -m cli grpo --run "/tmp/vruns/$tag" "${common[@]}" --vllm on > "$out/$tag.log" 2>&1 ;;
    u06) timeout "$limit" python3 -m cli grpo --run "/tmp/vruns/$tag" "${common[@]}" --vllm on --config /tmp/vruns/u06.yaml \
           > "$out/$tag.log" 2>&1 ;;
    plain|plainfree|plaingsm)
      util=$(python3 -c "import json, sys
for run in ('auto', 'warm'):
    try: rows = [json.loads(l) for l in open(f'/tmp/vruns/{run}/logs/metrics.jsonl') if 'grpo_summary' in l]
    except OSError: continue
    if rows: print(rows[-1]['vllm_gpu_memory_utilization']); sys.exit()
sys.exit(1)" 2>/dev/null || echo "${PLAIN_UTIL:-0.0894}")
      extra=(); [ "$name" != plain ] && extra+=(--no-force-length)
      [ "$name" = plaingsm ] && extra+=(--prompts-from /tmp/vruns/base)
      UNSLOTH_VLLM_STANDBY=1 UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE=1 timeout "$limit" python3 bench/gpu/h200_grpo_plain.py \
        --model /tmp/q4b --steps "$steps" --gens 8 --completion-len 1024 --gpu-memory-utilization "$util" \
        "${extra[@]}" --out /tmp/plain > "$out/$tag.log" 2>&1 ;;
    eval)  # grpo eval through vLLM on the Qwen3-shaped model: base and the GRPO adapter of the first auto run
      timeout "$limit" python3 -m cli eval --run /tmp/vruns/auto --models base,grpo --limit 64 --max-new-tokens 128 \
        --engine vllm > "$out/$tag.log" 2>&1 ;;
  esac
  rc=$?; kill "$smi" 2>/dev/null
  peak=$(sort -t, -k2 -n "$out/${tag}_smi.csv" | tail -1 | cut -d, -f2)
  echo "$tag: exit $rc in $(( $(date +%s) - s )) s, nvidia-smi peak ${peak:-?} MiB"
  grep -E '^(grpo (done|[0-9]|: vLLM)|error|\{"s_per_step|.*engine)' "$out/$tag.log" | tail -n 3 | cut -c1-400
  [ "$name" != eval ] && [ -f "/tmp/vruns/$tag/logs/metrics.jsonl" ] && cp "/tmp/vruns/$tag/logs/metrics.jsonl" "$out/${tag}_metrics.jsonl"
  # ours keeps what the libraries printed (Unsloth's and vLLM's engine lines) in the run's log, plain on stdout
  [ -f "/tmp/vruns/$tag/logs/grpo.log" ] && cp "/tmp/vruns/$tag/logs/grpo.log" "$out/${tag}_grpo.log"
  # What each trainer ran with (both sides write it), for the pair's diff
  for f in "/tmp/vruns/$tag/grpo/checkpoints/attempt-1/trainer_args.json" /tmp/plain/trainer_args.json; do
    [ -f "$f" ] && cp "$f" "$out/${tag}_trainer_args.json"
  done
  case $name in plain*) rm -f /tmp/plain/trainer_args.json ;; esac
done
true

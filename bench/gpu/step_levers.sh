#!/usr/bin/env bash
# The GPU step's levers, each off and on, in one lease (issue 43; runbook: bench/gpu/README.md "Step levers").
#
# Qwen2.5-Coder-1.5B-Instruct (the GGUF of bench/gpu/assemble_qwen_coder.sh) through prep and SFT as in
# bench/gpu/h200_qwen_coder.sh, then `grpo grpo` (hf backend, TRL's colocated vLLM, 128 completions of <= 384
# tokens, G = 16, lr 1e-5, step 5 under grpo.profile_step) once per lever: the same seed and settings, STEPS
# steps (default 20), one lever changed against `base`. After each run bench/gpu/step_levers_report.py writes
# $W/levers/summary.json (step time against the 0.68 s floor, each phase, IS ratio, loss per step, reward).
#
#   bash bench/gpu/step_levers.sh check              # HERE, before the lease: every path and setting it uses
#   bash bench/gpu/step_levers.sh unpack PARTS_DIR   # (background) = bench/gpu/h200_qwen_coder.sh unpack
#   bash bench/gpu/step_levers.sh all PARTS_DIR      # (background) waits for unpack and PARTS_DIR/gguf.done,
#                                                    #   then prep + SFT, then `levers`; touches $W/levers.done
#   bash bench/gpu/step_levers.sh levers             # (background) the lever runs alone (prep done before)
#   bash bench/gpu/step_levers.sh wait FILE [SECONDS] | status | collect OUT
#
# LEVERS: the runs, in order (default "base packed all async fp8": `all` against `packed` is the hand-off's
# own effect, so `sync` alone is left out to save a run); each is `base` plus:
#   packed  grpo.padding_free: true          sync  grpo.vllm_sync: lora
#   all     both of those                    async grpo.vllm_async_scheduling: on
#   fp8     grpo.vllm_quantization: fp8 (last: the likeliest to fail, and the first a short lease drops)
#   graphs  grpo.vllm_cudagraph: $CUDAGRAPH (default full_decode_only; not in the default list)
# STEPS (20), RUN_SECONDS (a run's wall limit, default 240: SIGINT, then the product saves and stops),
# W (/tmp/qc, shared with bench/gpu/h200_qwen_coder.sh), PYTHON (python3).
set -uo pipefail
W=${W:-/tmp/qc}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${STEPS:-20}
RUN_SECONDS=${RUN_SECONDS:-240}
LEVERS=${LEVERS:-base packed all async fp8}
CUDAGRAPH=${CUDAGRAPH:-full_decode_only}
PY=${PYTHON:-python3}
L=$W/levers
cd "$REPO"
t0=$(date +%s)
stamp() { echo "[$(date +%T) +$(( $(date +%s) - t0 ))s] $*"; }

lever_yaml() {  # NAME: the run's config (the issue's workload, as bench/gpu/h200_qwen_coder.sh's qc.yaml)
  cat <<YAML
max_seq_length: 1024
grpo:
  gens: 16
  batch_size: 128
  learning_rate: 1.0e-5
  warmup_ratio: 0.02
  temperature: 1.0
  max_completion_length: 384
  max_steps: $STEPS
  save_steps: 0
  logging_steps: 1
  profile_step: 5
YAML
  case "$1" in
    base) ;;
    packed) echo "  padding_free: true" ;;
    sync) echo "  vllm_sync: lora" ;;
    all) printf '  padding_free: true\n  vllm_sync: lora\n' ;;
    async) echo "  vllm_async_scheduling: \"on\"" ;;
    fp8) echo "  vllm_quantization: fp8" ;;
    graphs) echo "  vllm_cudagraph: $CUDAGRAPH" ;;
    *) echo "unknown lever $1" >&2; return 1 ;;
  esac
}

until_deadline() {  # NAME SECONDS CMD...: CMD (a program) in its own session, SIGINT at the deadline (the
  # product saves and stops), KILL to its whole group 120 s later; then until the GPU's memory is back (a
  # leftover engine process would shrink the next run's vLLM cache)
  local name=$1 secs=$2; shift 2
  setsid "$@" > "$L/$name.log" 2>&1 & local pid=$!
  local end=$(( $(date +%s) + secs ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then kill -INT "$pid"; break; fi
    sleep 3
  done
  for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$pid" 2>/dev/null; wait "$pid"; local rc=$?
  kill -KILL -- "-$pid" 2>/dev/null
  for _ in $(seq 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
    [ -z "$used" ] || [ "$used" -lt 2048 ] && break; sleep 1
  done
  echo "$name exit $rc (GPU after: ${used:-?} MiB)" >> "$L/phases.log"; return "$rc"
}

report() { "$PY" bench/gpu/step_levers_report.py "$L" --out "$L/summary.json" > "$L/report.txt" 2>&1; }

case "${1:-}" in
  check)  # here, no GPU: the script parses, every path exists, every lever's config resolves, the report runs
    bash -n "$0" && bash -n bench/gpu/h200_qwen_coder.sh || exit 1
    for f in bench/gpu/h200_qwen_coder.sh bench/gpu/gpu_payload.sh bench/gpu/assemble_qwen_coder.sh \
      bench/gpu/step_levers_report.py cli/train/packing.py cli/train/vllm_levers.py; do
      [ -e "$f" ] || { echo "check: $f is missing"; exit 1; }
    done
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    for name in base packed sync all async fp8 graphs; do
      lever_yaml "$name" > "$tmp/$name.yaml" || exit 1
      "$PY" -c 'import sys; from cli.config.schema import resolve
cfg = resolve(config_file=sys.argv[1]); g = cfg.grpo
print(f"{sys.argv[2]:>7}: steps {g.max_steps}, batch {g.batch_size}, G {g.gens}, padding_free {g.padding_free}, "
      f"vllm_sync {g.vllm_sync}, quantization {g.vllm_quantization}, cudagraph {g.vllm_cudagraph}, "
      f"async_scheduling {g.vllm_async_scheduling}")' \
        "$tmp/$name.yaml" "$name" || { echo "check: the $name config does not resolve"; exit 1; }
    done
    # the flags each run passes, through the real command line (its config and flags checked, no model loads)
    "$PY" -m cli grpo --run "$tmp/run" --config "$tmp/all.yaml" --backend hf --vllm on --dry-run > "$tmp/dry.txt" 2>&1 \
      || { echo "check: grpo grpo --dry-run failed:"; tail -5 "$tmp/dry.txt"; exit 1; }
    grep -q "padding_free: true" "$tmp/dry.txt" || { echo "check: the dry run does not show padding_free"; exit 1; }
    mkdir -p "$tmp/rep"
    for name in base packed; do
      printf '{"stage": "grpo", "step": %d, "step_seconds": 3.5, "loss": 0.01, "reward": 7.0, "completions/mean_length": 100, "sampling/importance_sampling_ratio/mean": 1.0, "sampling/sampling_logp_difference/mean": 0.009, "phase_generate_s": 1.5}\n' 1 2 3 > "$tmp/rep/${name}_metrics.jsonl"
    done
    "$PY" bench/gpu/step_levers_report.py "$tmp/rep" > /dev/null || { echo "check: the report failed"; exit 1; }
    "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["vs_base"]["packed"]["step_ratio"] == 1.0' \
      "$tmp/rep/summary.json" || { echo "check: the report's summary is wrong"; exit 1; }
    echo "check: ok (LEVERS='$LEVERS', STEPS=$STEPS, RUN_SECONDS=$RUN_SECONDS, W=$W)"
    ;;
  unpack)
    bash bench/gpu/h200_qwen_coder.sh unpack "${2:?parts dir}"
    ;;
  all)
    parts=${2:?parts dir}
    for _ in $(seq 900); do [ -e "$W/unpack.done" ] && [ -e "$parts/gguf.done" ] && break; sleep 2; done
    [ -e "$W/unpack.done" ] || { stamp "unpack not done after 30 min (see /tmp/unpack.log)"; exit 1; }
    [ -e "$parts/gguf.done" ] || { stamp "no $parts/gguf.done after 30 min: the last GGUF part's call touches it"; exit 1; }
    bash bench/gpu/h200_qwen_coder.sh prep "$parts" > "$W/prep_phase.log" 2>&1 || { stamp "prep failed"; tail -5 "$W/prep_phase.log"; exit 1; }
    stamp "prep + sft done"
    bash "$0" levers
    ;;
  levers)
    [ -d "$W/runs/sft/sft/adapter" ] || { stamp "no SFT run in $W/runs/sft: run \`all\` (or h200_qwen_coder.sh prep) first"; exit 1; }
    export PYTHONPATH=/tmp/site:$W/bundle/unsloth:$W/bundle/base:$W/wheels:$REPO
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 TOKENIZERS_PARALLELISM=false
    mkdir -p "$L"; rm -f "$W/levers.done"
    for name in $LEVERS; do
      lever_yaml "$name" > "$L/$name.yaml" || continue
      rm -rf "$W/runs/L_$name"; cp -r "$W/runs/sft" "$W/runs/L_$name"
      stamp "$name start"
      until_deadline "$name" "$RUN_SECONDS" "$PY" -m cli grpo --run "$W/runs/L_$name" --config "$L/$name.yaml" \
        --backend hf --vllm on
      cp "$W/runs/L_$name/logs/metrics.jsonl" "$L/${name}_metrics.jsonl" 2>/dev/null
      cp "$W/runs/L_$name/logs/grpo.log" "$L/${name}_grpo.log" 2>/dev/null  # the libraries' output
      cp "$W/runs/L_$name/logs/profile/step-5.txt" "$L/${name}_profile_step5.txt" 2>/dev/null
      cp "$W/runs/L_$name/logs/profile/step-5.json" "$L/${name}_profile_step5.json" 2>/dev/null
      report
      stamp "$name done: $(grep -E '^(grpo done|interrupted|error)' "$L/$name.log" | tail -1 | cut -c1-200)"
      rm -rf "$W/runs/L_$name/grpo/checkpoints"  # disk
    done
    stamp "levers done"; cat "$L/report.txt" 2>/dev/null; touch "$W/levers.done"
    ;;
  wait)  # FILE [SECONDS]: until $W/FILE exists (at most SECONDS), then the status
    for _ in $(seq $(( ${3:-540} / 10 ))); do [ -e "$W/${2:?file}" ] && break; sleep 10; done
    bash "$0" status
    ;;
  status)
    for f in /tmp/unpack.log /tmp/all.log "$W/phases.log" "$W/prep_phase.log" "$L/phases.log" "$L/report.txt"; do
      [ -f "$f" ] && { echo "== $f"; grep -vE '^\s*$' "$f" | tail -n 8 | cut -c1-300; }
    done
    for name in $LEVERS; do
      [ -f "$L/$name.log" ] && { echo "== $name"; grep -E '^grpo [0-9]+/|^(grpo done|interrupted|error)' "$L/$name.log" | tail -n 2 | cut -c1-300; }
    done
    ls "$W"/*.done 2>/dev/null; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2>/dev/null
    ;;
  collect)  # OUT: the summary and the metrics as files, the logs in one tar (at most 8 files come back)
    out=${2:?out dir}; mkdir -p "$out"
    [ -d "$L" ] && report
    cp "$L/summary.json" "$out/" 2>/dev/null
    tar -czf "$out/levers.tgz" -C "$W" --ignore-failed-read levers prep_phase.log prep.log sft.log phases.log \
      runs/sft/logs/metrics.jsonl 2>/dev/null
    ls -la "$out"
    ;;
  *) sed -n 2,24p "$0"; exit 2 ;;
esac

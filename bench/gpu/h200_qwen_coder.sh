#!/usr/bin/env bash
# Learning on a real 1.5B model on one H200, in one lease: Qwen2.5-Coder-1.5B-Instruct (a llama.cpp GGUF,
# bench/gpu/assemble_qwen_coder.sh) through the product's chain, GSM8K.
#
#   grpo prep gsm8k --model FILE.gguf (GGUF import) → grpo sft (hf) → in parallel on the one GPU:
#     A  grpo grpo, hf backend + TRL colocate vLLM, the trainer scoring the rollouts' own distribution,
#        IS token_truncate [0.5, 2] (this release's defaults)                      ≤ GRPO_SECONDS
#     B  the same run with TRL 1.15's defaults (full-vocabulary fp32 scoring, sequence_mask, cap 3)  ≤ GRPO_SECONDS
#     C  grpo grpo under Unsloth + fast_inference (its own kept-set scoring), C_STEPS steps
#     F  bench/gpu/is_floor.py: the same vLLM samples scored every way (the floor of the mismatch)
#   → eval: `grpo eval --engine vllm` of base, SFT and A on the whole GSM8K test split (one call), and
#     bench/gpu/eval_checkpoints.py: A and B at the same step (before/after, same seed), SFT and A on MATH500.
#
# Phases are separate calls (each device call is at most 10 minutes); state lives in $W on the machine.
# The payload travels in parts (bench/gpu/gpu_payload.sh makes them): the small one (Unsloth/TRL and vLLM
# bundles, wheels, data), then the GGUF.
#   bash bench/gpu/h200_qwen_coder.sh unpack PARTS_DIR   # (background) check, unpack, install the small payload
#   bash bench/gpu/h200_qwen_coder.sh overhead           # (background) same-call overhead vs plain Unsloth+TRL+vLLM
#   bash bench/gpu/h200_qwen_coder.sh prep PARTS_DIR     # (background) the GGUF: check, import, prep, SFT
#   bash bench/gpu/h200_qwen_coder.sh train              # (background) A, B, C, F as above
#   bash bench/gpu/h200_qwen_coder.sh eval               # (background) the evaluations
#   bash bench/gpu/h200_qwen_coder.sh chain PARTS_DIR    # (background) prep, then train, then eval
#   bash bench/gpu/h200_qwen_coder.sh solo               # (background) A alone on the GPU for GRPO_SECONDS, then
#                                                    #   its evaluations (GSM8K base/SFT/GRPO in one call, MATH500)
#   bash bench/gpu/h200_qwen_coder.sh unsloth            # (background) C alone on the GPU: C_STEPS steps, its IS ratio
#   bash bench/gpu/h200_qwen_coder.sh hf                 # (background) A alone for GRPO_SECONDS, no evaluations
#   bash bench/gpu/h200_qwen_coder.sh tools PARTS_DIR    # (background) T: the tool run (issue 39 item 7): prep
#                                                    #   --tools python, SFT, GRPO for GRPO_SECONDS, GSM8K with
#                                                    #   and without the tool, MATH500; needs the small payload
#                                                    #   made with EXTRA="pydantic-monty==1.4.0
#                                                    #   pydantic-monty-client==1.4.0 pydantic-monty-runtime==1.4.0"
#   bash bench/gpu/h200_qwen_coder.sh dynamic            # (background) D = A + grpo.dynamic_sampling, alone, for
#                                                    #   GRPO_SECONDS, then GSM8K SFT/GRPO in one call
#   [PAD=0] bash bench/gpu/h200_qwen_coder.sh backends PARTS_DIR # (background) what the learning issue lacks, in one
#                                                    #   lease: h200_pad_eos.sh (both backends) beside the GGUF
#                                                    #   import, prep's SFT after it, then `unsloth`, then `hf`
#                                                    #   (GRPO_SECONDS=HF_SECONDS, default 180; 0: none)
#   bash bench/gpu/h200_qwen_coder.sh gemma              # (background) Gemma-3-270M, round 3's settings again (no GGUF
#                                                    #   parts needed: its GGUF comes in the small payload's EXTRA)
#   bash bench/gpu/h200_qwen_coder.sh server           # (background) S: TRL server mode, server on GPU 0, trainer on GPU 1
#                                                    #   (needs two GPUs; waits for `backends`; SERVER_AFTER files)
#   bash bench/gpu/h200_qwen_coder.sh wait FILE [SECONDS] | status | collect OUT
# STACKS=SECONDS: every Python process writes its threads' stacks to $W/stacks/<pid>.txt every SECONDS.
# C_ENV: variables for C alone, e.g. C_ENV=UNSLOTH_BLOCK_COMPILE=0 (Unsloth 2026.10's per-decoder-block
# torch.compile off: its first step on a fresh machine ran past 7 minutes on this model, 2026-12-04).
# PREP_CPUS (e.g. 12-15) pins the GGUF import and prep to those cores, so they can run beside `overhead`
# (whose runs then keep OVERHEAD_CPUS, e.g. 0-11: both sides of the pair alike); WAIT_OVERHEAD=1 holds
# the SFT (GPU) until `overhead` is done.
set -uo pipefail
W=${W:-/tmp/qc}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
GRPO_SECONDS=${GRPO_SECONDS:-600}
C_STEPS=${C_STEPS:-25}
export PYTHONPATH=/tmp/site:$W/bundle/unsloth:$W/bundle/base:$W/wheels:$REPO
if [ -n "${STACKS:-}" ]; then  # every process's Python stacks every STACKS s (bench/gpu/stacks/sitecustomize.py)
  export PYTHONPATH=$REPO/bench/gpu/stacks:$PYTHONPATH GRPO_STACKS_DIR=$W/stacks GRPO_STACKS_EVERY=$STACKS
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 TOKENIZERS_PARALLELISM=false
cd "$REPO"
t0=$(date +%s)
stamp() { echo "[$(date +%T) +$(( $(date +%s) - t0 ))s] $*"; }
grpo() { python3 -m cli "$@"; }
GGUF_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
model_path() {  # RUN: the HF folder the run trains (the GGUF's import)
  python3 -c 'import sys; from cli.run.rundir import RunDir, run_config; from cli.models.resolve import resolve_model
rd = RunDir(sys.argv[1]); print(resolve_model(run_config(rd), rd))' "$1"
}

config() {  # the run's overrides (the issue's settings; lr 1e-5; step 5 under torch.profiler)
  cat > "$W/qc.yaml" <<'YAML'
max_seq_length: 1024
sft:
  batch_size: 16
  grad_accum: 1
  max_steps: 120
  num_examples: 2000
  max_example_tokens: 400
  learning_rate: 1.0e-4
  warmup_steps: 10
  packing: false
grpo:
  gens: 16
  batch_size: 128
  learning_rate: 1.0e-5
  warmup_ratio: 0.02
  temperature: 1.0
  max_completion_length: 384
  max_steps: 1000
  save_steps: 20
  logging_steps: 1
  profile_step: 5
YAML
  # B: TRL 1.15's vLLM correction as it comes (what the previous runs had)
  { cat "$W/qc.yaml"; printf '  vllm_is_mode: sequence_mask\n  vllm_is_min: 0.0\n  vllm_is_max: 3.0\n  score_rollout_support: false\n'; } > "$W/before.yaml"
  sed "s/max_steps: 1000/max_steps: $C_STEPS/" "$W/qc.yaml" > "$W/unsloth.yaml"
  # D: A with DAPO's online dynamic sampling (zero-spread groups refilled within the step)
  { cat "$W/qc.yaml"; printf '  dynamic_sampling: true\n'; } > "$W/dynamic.yaml"
}

until_deadline() {  # NAME SECONDS CMD...: run CMD, SIGINT at the deadline (the product saves on SIGINT).
  # CMD must be a program, not a shell function: the signal goes to the pid it starts (a function would
  # run in a subshell, which takes the SIGINT while python trains on; seen on the H200, 2026-12-01).
  local name=$1 secs=$2; shift 2
  "$@" > "$W/$name.log" 2>&1 & local pid=$!
  local end=$(( $(date +%s) + secs ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then kill -INT "$pid"; break; fi
    sleep 3
  done
  for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$pid" 2>/dev/null; wait "$pid"; echo "$name exit $?" >> "$W/phases.log"
}

started() {  # NAME: wait until the run's first step line (vLLM is up), at most 240 s
  for _ in $(seq 240); do grep -qE '^grpo 1/' "$W/$1.log" 2>/dev/null && return 0; sleep 1; done; return 1
}

case "${1:-}" in
  unpack)
    parts=${2:?parts dir}; mkdir -p "$W"
    ( cd "$parts" && sha256sum -c --quiet --ignore-missing SHA256SUMS ) || { stamp "a part is damaged"; exit 1; }
    cat "$parts"/small.part_* | tar -x -C "$W" && stamp "unpacked: $(ls "$W" | tr '\n' ' ')"
    TARGET=/tmp/site bash "$W"/vllm/parts/install_remote.sh "$W"/vllm/parts > "$W/vllm-install.log" 2>&1 \
      && stamp "vllm installed" || { tail -5 "$W/vllm-install.log"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --target "$W/wheels" "$W"/extra/*.whl && stamp "wheels installed"
    touch "$W/unpack.done"
    ;;
  overhead)  # bench/gpu/h200_vllm_run.sh's interleaved pairs on the Qwen3-4B-shaped model, like with like
    # (warm = the machine's cold compile, not measured; plaingsm = plain on ours' prompts, no min_tokens)
    while [ ! -e "$W/unpack.done" ]; do sleep 2; done
    opin=(); [ -n "${OVERHEAD_CPUS:-}" ] && opin=(taskset -c "$OVERHEAD_CPUS")
    ORDER=${ORDER:-warm plaingsm auto plaingsm auto} STEPS=${STEPS:-6} "${opin[@]}" bash bench/gpu/h200_vllm_run.sh "$W/overhead" \
      > "$W/overhead.log" 2>&1
    stamp "overhead exit $?"; touch "$W/overhead.done"
    ;;
  prep)
    parts=${2:?parts dir}
    ( cd "$parts" && sha256sum -c --quiet --ignore-missing SHA256SUMS ) || { stamp "a part is damaged"; exit 1; }
    cat "$parts"/gguf.part_* > "$W/qwen2.5-coder-1.5b-instruct.gguf"
    echo "$GGUF_SHA  $W/qwen2.5-coder-1.5b-instruct.gguf" | sha256sum -c --quiet || { stamp "gguf sha256 differs"; exit 1; }
    while [ ! -e "$W/unpack.done" ]; do sleep 2; done
    config; rm -rf "$W/runs"; mkdir -p "$W/runs"
    stamp prep
    pin=(); [ -n "${PREP_CPUS:-}" ] && pin=(taskset -c "$PREP_CPUS")
    "${pin[@]}" python3 -m cli prep gsm8k --run "$W/runs/sft" --model "$W/qwen2.5-coder-1.5b-instruct.gguf" \
      --source "$W/data/gsm8k/train.jsonl" --eval-size 50 --config "$W/qc.yaml" > "$W/prep.log" 2>&1 \
      || { stamp "prep failed"; tail -5 "$W/prep.log"; exit 1; }
    stamp "prep done: $(tail -1 "$W/prep.log")"
    while [ -n "${WAIT_OVERHEAD:-}" ] && [ ! -e "$W/overhead.done" ]; do sleep 2; done  # its timings alone
    # WAIT_SFT=FILE [WAIT_SFT_MAX s, default 360]: the SFT waits for $W/FILE, so no vLLM start elsewhere on the
    # GPU sizes its cache while the SFT's memory grows
    for _ in $(seq $(( ${WAIT_SFT_MAX:-360} / 2 ))); do
      { [ -z "${WAIT_SFT:-}" ] || [ -e "$W/$WAIT_SFT" ]; } && break; sleep 2
    done
    grpo sft --run "$W/runs/sft" --config "$W/qc.yaml" --backend hf > "$W/sft.log" 2>&1 \
      || { stamp "sft failed"; tail -5 "$W/sft.log"; exit 1; }
    stamp "$(grep -E '^sft done' "$W/sft.log")"
    touch "$W/prep.done"
    ;;
  train)
    config
    for r in A B C; do rm -rf "$W/runs/$r"; cp -r "$W/runs/sft" "$W/runs/$r"; done
    stamp "A start"
    until_deadline A "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/A" --config "$W/qc.yaml" --backend hf --vllm on &
    started A; stamp "B start"
    until_deadline B "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/B" --config "$W/before.yaml" --backend hf --vllm on &
    started B; stamp "C start"
    until_deadline C "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/C" --config "$W/unsloth.yaml" --backend unsloth --vllm on &
    started C; stamp "F start"
    python3 bench/gpu/is_floor.py --model "$(model_path "$W/runs/sft")" \
      --adapter "$W/runs/sft/sft/adapter" --data "$W/data/gsm8k/test.jsonl" --fp32-head --out "$W/is_floor.json" \
      > "$W/F.log" 2>&1; stamp "F exit $?"
    wait; stamp "train done"; touch "$W/train.done"
    ;;
  eval)
    stamp eval
    ( grpo eval --run "$W/runs/A" --source "$W/data/gsm8k/test.jsonl" --models base,sft,grpo --engine vllm \
        --max-new-tokens 384 > "$W/evalA.log" 2>&1 \
      || { stamp "evalA failed: again without the base rows"; grpo eval --run "$W/runs/A" \
           --source "$W/data/gsm8k/test.jsonl" --models sft,grpo --engine vllm --max-new-tokens 384 \
           >> "$W/evalA.log" 2>&1; } ) & a=$!
    sleep 60  # one engine at a time through vLLM's memory profiling
    python3 bench/gpu/eval_checkpoints.py --a "$W/runs/A" --b "$W/runs/B" --gsm8k "$W/data/gsm8k/test.jsonl" \
      --math "$W/data/math/test.jsonl" --out "$W/eval_checkpoints.json" > "$W/evalX.log" 2>&1; stamp "evalX exit $?"
    wait "$a"; stamp "evalA exit $?"; touch "$W/eval.done"
    ;;
  solo)  # A alone: the GPU to itself (side by side with B, A's median step was 7.8 s against 3.3-4.5 s alone),
    # then, side by side (their timings are not the measurement): GSM8K base/SFT/GRPO in one call and MATH500
    # of SFT and A; then, once they are done (its vLLM start failed beside them in round 5), C alone (Unsloth +
    # fast_inference, C_STEPS steps or C_SECONDS) for its IS ratio, as far as the lease goes
    config; rm -rf "$W/runs/A" "$W/runs/C"; cp -r "$W/runs/sft" "$W/runs/A"; cp -r "$W/runs/sft" "$W/runs/C"
    stamp "A (solo) start"
    until_deadline A "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/A" --config "$W/qc.yaml" --backend hf --vllm on
    stamp "A done: $(grep -E '^(grpo done|interrupted)' "$W/A.log" | tail -1)"
    ( grpo eval --run "$W/runs/A" --source "$W/data/gsm8k/test.jsonl" --models base,sft,grpo --engine vllm \
        --max-new-tokens 384 > "$W/evalA.log" 2>&1; stamp "evalA exit $?" ) & a=$!
    sleep 60  # one engine at a time through vLLM's memory profiling
    ( python3 bench/gpu/eval_checkpoints.py --a "$W/runs/A" --gsm8k "$W/data/gsm8k/test.jsonl" \
        --math "$W/data/math/test.jsonl" --out "$W/eval_checkpoints.json" > "$W/evalX.log" 2>&1
      stamp "evalX exit $?" ) & x=$!
    wait "$a" "$x"; stamp "evaluations done"; touch "$W/solo_eval.done"
    until_deadline C "${C_SECONDS:-420}" env ${C_ENV:-} python3 -m cli grpo --run "$W/runs/C" \
      --config "$W/unsloth.yaml" --backend unsloth --vllm on
    stamp "C done: $(grep -E '^(grpo done|interrupted|error)' "$W/C.log" | tail -1)"
    touch "$W/solo.done"
    ;;
  unsloth)  # C alone: the Unsloth backend + fast_inference on A's settings, for its IS ratio and step time
    config; rm -rf "$W/runs/C" "$W/unsloth.done"; cp -r "$W/runs/sft" "$W/runs/C"  # a stale .done misleads a wait
    stamp "C (alone) start"
    until_deadline C "${C_SECONDS:-480}" env ${C_ENV:-} python3 -m cli grpo --run "$W/runs/C" \
      --config "$W/unsloth.yaml" --backend unsloth --vllm on
    stamp "C done: $(grep -E '^(grpo done|interrupted|error)' "$W/C.log" | tail -1)"; touch "$W/unsloth.done"
    ;;
  hf)  # A alone for GRPO_SECONDS (e.g. 180), no evaluations: its step time and step-5 profile against round 11's
    config; rm -rf "$W/runs/A" "$W/hf.done"; cp -r "$W/runs/sft" "$W/runs/A"
    stamp "A (hf, timing only) start"
    until_deadline A "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/A" --config "$W/qc.yaml" --backend hf --vllm on
    stamp "A done: $(grep -E '^(grpo done|interrupted)' "$W/A.log" | tail -1)"; touch "$W/hf.done"
    ;;
  tools)  # T: tool-integrated reasoning on round 11's settings. prep gsm8k --tools python (GSM8K's calculator
    # annotations as sandbox-checked python calls) → SFT with round 11's budget → GRPO with the sandboxed tool
    # for GRPO_SECONDS (hf + TRL colocated vLLM) → GSM8K (SFT and GRPO, with the tool, then the GRPO checkpoint
    # without it) and MATH500. Paired against round 11's stored completions afterwards, here:
    # bench/paired_runs.py bench/results/learning-qwen-coder/gsm8k_samples.jsonl.gz:grpo OUT/T_gsm8k.jsonl.gz:grpo
    parts=${2:?parts dir}
    ( cd "$parts" && sha256sum -c --quiet --ignore-missing SHA256SUMS ) || { stamp "a part is damaged"; exit 1; }
    [ -e "$W/qwen2.5-coder-1.5b-instruct.gguf" ] || cat "$parts"/gguf.part_* > "$W/qwen2.5-coder-1.5b-instruct.gguf"
    echo "$GGUF_SHA  $W/qwen2.5-coder-1.5b-instruct.gguf" | sha256sum -c --quiet || { stamp "gguf sha256 differs"; exit 1; }
    while [ ! -e "$W/unpack.done" ]; do sleep 2; done
    config; rm -rf "$W/runs/T" "$W/tools.done"; mkdir -p "$W/runs"
    stamp "T prep"
    python3 -m cli prep gsm8k --run "$W/runs/T" --model "$W/qwen2.5-coder-1.5b-instruct.gguf" --tools python \
      --source "$W/data/gsm8k/train.jsonl" --eval-size 50 --config "$W/qc.yaml" > "$W/Tprep.log" 2>&1 \
      || { stamp "T prep failed"; tail -5 "$W/Tprep.log"; exit 1; }
    stamp "T prep done: $(tail -1 "$W/Tprep.log")"
    grpo sft --run "$W/runs/T" --config "$W/qc.yaml" --backend hf > "$W/Tsft.log" 2>&1 \
      || { stamp "T sft failed"; tail -5 "$W/Tsft.log"; exit 1; }
    stamp "$(grep -E '^sft done' "$W/Tsft.log")"
    until_deadline T "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/T" --config "$W/qc.yaml" --backend hf --vllm on
    stamp "T done: $(grep -E '^(grpo done|interrupted|error)' "$W/T.log" | tail -1)"
    grpo eval --run "$W/runs/T" --source "$W/data/gsm8k/test.jsonl" --models sft,grpo --engine vllm \
      --max-new-tokens 384 > "$W/evalT.log" 2>&1; stamp "evalT exit $?"
    cp "$W/runs/T/eval/report.json" "$W/T_gsm8k_report.json"; gzip -c "$W/runs/T/eval/samples.jsonl" > "$W/T_gsm8k.jsonl.gz"
    grpo eval --run "$W/runs/T" --source "$W/data/gsm8k/test.jsonl" --models grpo --engine vllm --tools off \
      --max-new-tokens 384 > "$W/evalTnotool.log" 2>&1; stamp "evalT (tool off) exit $?"
    cp "$W/runs/T/eval/report.json" "$W/T_gsm8k_notool_report.json"
    gzip -c "$W/runs/T/eval/samples.jsonl" > "$W/T_gsm8k_notool.jsonl.gz"
    grpo eval --run "$W/runs/T" --source "$W/data/math/test.jsonl" --models sft,grpo --engine vllm \
      --max-new-tokens 512 > "$W/evalTmath.log" 2>&1; stamp "evalT math exit $?"
    cp "$W/runs/T/eval/report.json" "$W/T_math_report.json"; gzip -c "$W/runs/T/eval/samples.jsonl" > "$W/T_math.jsonl.gz"
    touch "$W/tools.done"
    ;;
  dynamic)  # D alone for GRPO_SECONDS, then GSM8K (SFT and D in one call)
    config; rm -rf "$W/runs/D"; cp -r "$W/runs/sft" "$W/runs/D"
    stamp "D (dynamic sampling) start"
    until_deadline D "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/D" --config "$W/dynamic.yaml" --backend hf --vllm on
    stamp "D done: $(grep -E '^(grpo done|interrupted)' "$W/D.log" | tail -1)"
    grpo eval --run "$W/runs/D" --source "$W/data/gsm8k/test.jsonl" --models sft,grpo --engine vllm \
      --max-new-tokens 384 > "$W/evalD.log" 2>&1; stamp "evalD exit $?"; touch "$W/dynamic.done"
    ;;
  backends)  # pad = eos on both backends (tiny model) while the GGUF arrives and imports; then C alone (the
    # Unsloth path's IS ratio and step time, C_ENV), then A alone for HF_SECONDS (the hf step after the LoRA
    # input fix). The last part's call touches PARTS_DIR/gguf.done.
    parts=${2:?parts dir}
    while [ ! -e "$W/unpack.done" ]; do sleep 2; done
    if [ "${PAD:-1}" = 0 ]; then touch "$W/padeos.done"  # PAD=0: no h200_pad_eos.sh (measured in round 13)
    else ( bash bench/gpu/h200_pad_eos.sh "$W/padeos" > "$W/padeos.log" 2>&1; stamp "pad_eos exit $?" >> "$W/phases.log"
      touch "$W/padeos.done" ) &
    fi
    while [ ! -e "$parts/gguf.done" ]; do sleep 2; done
    WAIT_SFT=padeos.done bash "$0" prep "$parts" || exit 1
    wait
    for f in ${C_AFTER:-}; do while [ ! -e "$W/$f" ]; do sleep 2; done; done  # e.g. gemma.done: C's GPU alone
    bash "$0" unsloth
    [ "${HF_SECONDS:-180}" -gt 0 ] && GRPO_SECONDS=${HF_SECONDS:-180} bash "$0" hf  # HF_SECONDS=0: no A
    stamp "backends done"; touch "$W/backends.done"
    ;;
  gemma)  # the learning issue's Gemma re-run: round 3's settings (whole-pool filter, G = 16, lr 1e-5, GRPO stopped
    # at 466 s as round 3's deadline landed), with this release's on-policy scoring; needs the small payload made
    # with the Gemma GGUF wheels (gpu_payload.sh's EXTRA) and unpacked; results in $W/gemma-out
    while [ ! -e "$W/unpack.done" ]; do sleep 2; done
    rm -rf "$W/gemma" "$W/gemma.yaml" "$W/gemma.done"
    DATA=$W/data/gsm8k FILTER_LIMIT=7000 GRPO_LR=1e-5 GRPO_SECONDS=${GEMMA_GRPO_SECONDS:-466} \
      bash bench/gpu/h200_learning_levers.sh "$W/gemma" "$W/gemma-out" > "$W/gemma.log" 2>&1
    stamp "gemma exit $?"; touch "$W/gemma.done"
    ;;
  server)  # S: TRL's server mode on two GPUs. `grpo serve` of the SFT run's model on SERVE_GPU (0) once
    # $W/backends.done (that GPU is free), then `grpo grpo --vllm-server` (hf backend, A's settings) on TRAIN_GPU (1)
    # once every file in SERVER_AFTER exists (e.g. gemma.done), for S_SECONDS; server_probe.py before and after.
    # SRV_WHEELS: the HTTP server's wheels (uvicorn and friends), which the vLLM bundle's minimal tier leaves out.
    while [ ! -e "$W/backends.done" ]; do sleep 2; done
    [ -n "${SRV_WHEELS:-}" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site "$SRV_WHEELS"/*.whl
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    config; rm -rf "$W/runs/S" "$W/server.done"; cp -r "$W/runs/sft" "$W/runs/S"
    port=${PORT:-8011}
    CUDA_VISIBLE_DEVICES=${SERVE_GPU:-0} setsid python3 -m cli serve --run "$W/runs/S" --port "$port" \
      --gpu-memory-utilization "${SERVE_UTIL:-0.5}" > "$W/serve.log" 2>&1 & spid=$!
    up=""
    for _ in $(seq 300); do
      python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "http://127.0.0.1:$port/health" 2>/dev/null && { up=1; break; }
      kill -0 $spid 2>/dev/null || break; sleep 1
    done
    [ -n "$up" ] || { stamp "server did not come up"; tail -5 "$W/serve.log"; touch "$W/server.done"; exit 1; }
    stamp "server up"
    python3 bench/gpu/server_probe.py "127.0.0.1:$port" "$W/probe_before.json" > "$W/probe.log" 2>&1
    for f in ${SERVER_AFTER:-}; do while [ ! -e "$W/$f" ]; do sleep 2; done; done
    stamp "S start"
    until_deadline S "${S_SECONDS:-240}" env CUDA_VISIBLE_DEVICES="${TRAIN_GPU:-1}" python3 -m cli grpo \
      --run "$W/runs/S" --config "$W/qc.yaml" --backend hf --vllm-server "127.0.0.1:$port"
    stamp "S done: $(grep -E '^(grpo done|interrupted|error)' "$W/S.log" | tail -1)"
    python3 bench/gpu/server_probe.py "127.0.0.1:$port" "$W/probe_after.json" --against "$W/probe_before.json" \
      >> "$W/probe.log" 2>&1
    kill -TERM -- -$spid 2>/dev/null; sleep 3; kill -KILL -- -$spid 2>/dev/null
    touch "$W/server.done"
    ;;
  chain)
    bash "$0" prep "${2:?parts dir}" && bash "$0" train && bash "$0" eval; stamp "chain exit $?"; touch "$W/chain.done"
    ;;
  wait)  # FILE [SECONDS]: until $W/FILE exists (at most SECONDS), then the status
    for _ in $(seq $(( ${3:-540} / 10 ))); do [ -e "$W/${2:?file}" ] && break; sleep 10; done
    bash "$0" status
    ;;
  status)
    for f in phases.log padeos.log gemma.log serve.log S.log probe.log overhead.log prep.log sft.log A.log B.log C.log D.log F.log evalA.log evalX.log evalD.log Tprep.log Tsft.log T.log evalT.log evalTnotool.log evalTmath.log; do
      [ -f "$W/$f" ] && { echo "== $f"; grep -vE '^\s*$' "$W/$f" | tail -n 3 | cut -c1-300; }
    done; ls "$W"/*.done 2>/dev/null; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
    ;;
  collect)
    out=${2:?out dir}; mkdir -p "$out"
    for r in A B C D S; do cp "$W/runs/$r/logs/metrics.jsonl" "$out/${r}_metrics.jsonl" 2>/dev/null; done
    cp "$W/is_floor.json" "$W/eval_checkpoints.json" "$W/eval_checkpoints.samples.jsonl.gz" "$out/" 2>/dev/null
    cp "$W/runs/A/eval/report.json" "$out/evalA_report.json" 2>/dev/null
    cp "$W/runs/D/eval/report.json" "$out/evalD_report.json" 2>/dev/null
    cp "$W"/T_*.json "$W"/T_*.jsonl.gz "$out/" 2>/dev/null
    tar -czf "$out/logs.tgz" -C "$W" --ignore-failed-read prep.log sft.log A.log B.log C.log D.log F.log \
      evalA.log evalX.log evalD.log Tprep.log Tsft.log T.log evalT.log evalTnotool.log evalTmath.log phases.log overhead.log overhead serve.log S.log probe.log probe_before.json \
      probe_after.json runs/S/logs/train.png runs/A/manifest.json runs/A/eval/samples.jsonl \
      runs/D/manifest.json runs/D/eval/samples.jsonl runs/A/logs/train.png runs/B/logs/train.png \
      runs/C/logs/train.png runs/D/logs/train.png runs/sft/logs/metrics.jsonl runs/C/logs/grpo.log \
      runs/C/grpo/checkpoints/attempt-1/trainer_args.json runs/{A,C,D,S}/logs/profile/step-5.txt \
      padeos gemma-out stacks 2>/dev/null
    ls -la "$out"
    ;;
  *) sed -n 2,20p "$0"; exit 2 ;;
esac

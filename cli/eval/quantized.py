"""`grpo eval --models grpo,grpo@q4_k_m,grpo@q8_0`: the score after quantization.

A ``CHECKPOINT@TYPE`` row is the GGUF that `grpo export --adapter CHECKPOINT --gguf TYPE` wrote
(``<run>/export/gguf-TYPE/*.gguf``, its source named in the ``format_contract.json`` beside it), decoded
greedily by llama.cpp on the very prompt ids the HF rows decode (same template, same budget) and scored by
the same rules, so each quantization's cost is a paired difference against its source checkpoint
(:mod:`cli.eval.verdict`). llama.cpp runs in a child process (:func:`cli.export.gguf.generate`, which the
command hands in: eval sits below export), so torch and llama.cpp never share one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.infer.generation import Generation
from cli.run.rundir import RunDir


def split(name: str) -> tuple[str, str] | None:
    """``("grpo", "q4_k_m")`` for ``grpo@q4_k_m``; None for a plain checkpoint name."""
    source, at, qtype = name.partition("@")
    return (source, qtype.lower()) if at else None


def canonical(name: str) -> str:
    """``grpo@Q4_K_M`` → ``grpo@q4_k_m`` (the export's folder names are lower case)."""
    parts = split(name)
    return f"{parts[0]}@{parts[1]}" if parts else name


def label(name: str, labels: dict[str, str]) -> str:
    parts = split(name)
    if parts is None:
        return labels.get(name, name)
    return f"{labels.get(parts[0], parts[0])}, GGUF {parts[1]}"


def find(rd: RunDir, name: str) -> Path:
    """The GGUF file behind ``name`` (``grpo@q4_k_m``), or one line saying which export to run."""
    parts = split(name)
    assert parts is not None
    source, qtype = parts
    folder = rd.export_dir / f"gguf-{qtype}"
    run_it = f"run `grpo export --run {rd.path} --adapter {source} --gguf {qtype}` first"
    files = sorted(folder.glob("*.gguf")) if folder.is_dir() else []
    if not files:
        raise GrpoError(f"--models {name}: no {qtype} GGUF in {rd.export_dir}: {run_it}")
    try:
        made_from = json.loads((folder / "format_contract.json").read_text(encoding="utf-8")).get("source")
    except (OSError, ValueError, AttributeError):
        made_from = None
    if made_from != source:
        raise GrpoError(
            f"--models {name}: the {qtype} GGUF in {folder} was exported from "
            f"{f'the {made_from} adapter' if made_from else 'an unknown source'}, not {source}: {run_it}"
        )
    return files[0]


def decode_all(job: Any, tokenizer: Any) -> dict[str, list[Generation]]:
    """Greedy completions of each GGUF row of ``job`` (an EvalJob) by llama.cpp, on the HF prompt ids."""
    runner: Callable[..., dict[str, Any]] | None = job.gguf_runner
    if not job.ggufs:
        return {}
    assert runner is not None
    from cli.common import err_console

    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in job.prompts]
    out: dict[str, list[Generation]] = {}
    seconds = job.engine_info.setdefault("stage_seconds", {})
    for name, path in job.ggufs.items():
        err_console.print(f"eval: {name}: {len(ids)} prompts through llama.cpp ({path.name}), greedy")
        t0 = time.time()
        res = runner(path, job.prompts, ids, job.max_new_tokens)
        out[name] = [
            Generation(p, text, list(toks))
            for p, text, toks in zip(job.prompts, res["texts"], res["ids"], strict=True)
        ]
        seconds[name] = round(time.time() - t0, 2)
        matched = res.get("tokenization_match") or []
        job.engine_info.setdefault("gguf", {})[name] = {
            "file": str(path),
            "prompt_tokenization_match": round(sum(matched) / len(matched), 4) if matched else None,
        }
    return out

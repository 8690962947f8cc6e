"""The README's chain, exactly as written, offline on the bundled data (docs/history.md "First runs"):

    grpo prep dapo → grpo sft → grpo grpo --gens 4 → grpo export --gguf q4_k_m → grpo chat

Each command runs as a user runs it (a fresh interpreter, real Unsloth/TRL trainers on the tiny random
Qwen3, real llama.cpp for the GGUF), with only the step counts made small for a 2-core CPU. Along the way:
attempts (a second `grpo grpo` starts attempt 2; `--resume` continues it), quiet output (library noise in
<run>/logs/grpo.log, not on the terminal) and train.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import grpo_cli, metrics, needs_gguf
from helpers import ok as _ok
from terminal import progress

# What the libraries printed on every heavy command before the first runs (docs/history.md).
NOISE = (
    "_pytree",  # torch deprecation lines
    "gemm_4bit_forward",  # bitsandbytes on the CPU
    "Unsloth 20",  # the Unsloth banner ("Unsloth 2026.10.9: no GPU found, …")
    "predefined maximum length",  # transformers' generation warning
    "it/s]",  # tqdm bars (datasets, converters)
)


def ok(proc) -> str:
    """helpers.ok, and one line on the terminal per command: the chain takes minutes on a busy machine."""
    out = _ok(proc)
    progress(f"README chain: `grpo {proc.args[3]}` done")
    return out


def quiet(out: str) -> str:
    found = [n for n in NOISE if n in out]
    assert not found, f"library noise on the terminal: {found}\n{out[-3000:]}"
    return out


@pytest.mark.slow
@needs_gguf
def test_readme_chain_offline(tiny_run: Path) -> None:
    run = str(tiny_run)
    # 1. prep dapo: offline, the bundled DAPO sample, and (DAPO has no worked solutions) the warm-up set.
    out = quiet(ok(grpo_cli("prep", "dapo", "--run", run, "--limit", "60", "--eval-size", "4")))
    assert "bundled sample dapo_math.parquet" in out and "for the warm-up set" in out
    assert "model" in out and "tiny (" in out  # prep says which model it chose
    import pandas as pd

    train = pd.read_parquet(tiny_run / "data" / "train.parquet")
    warm = pd.read_parquet(tiny_run / "data" / "sft.parquet")
    assert train["solution"].isna().all() and len(warm) > 0 and warm["solution"].notna().all()
    assert pd.to_numeric(warm["answer"], errors="coerce").notna().all()  # seed 000: numeric answers only

    # 2. sft trains on the warm-up set.
    out = quiet(ok(grpo_cli("sft", "--run", run, "--max-steps", "2")))
    assert "from sft.parquet" in out and "sft done: 2 steps" in out

    # 3. grpo --gens 4: attempt 1, checkpoints apart, train.png next to metrics.jsonl.
    args = ("--max-completion-length", "16", "--save-steps", "1")
    out = quiet(ok(grpo_cli("grpo", "--run", run, "--gens", "4", "--max-steps", "2", *args)))
    assert "grpo done: 2 steps (attempt 1)" in out
    ckpts = tiny_run / "grpo" / "checkpoints"
    assert (ckpts / "attempt-1" / "checkpoint-2" / "adapter_model.safetensors").is_file()
    png = tiny_run / "logs" / "train.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = (tiny_run / "logs" / "grpo.log").read_text()
    assert "== " in log and "grpo grpo" in log and "Unsloth" in log  # the noise is kept, in the log

    # A second `grpo grpo` is attempt 2 (attempt 1's checkpoints stay); --resume continues attempt 2.
    out = quiet(ok(grpo_cli("grpo", "--run", run, "--gens", "4", "--max-steps", "1", *args)))
    assert "new attempt 2" in out and "grpo done: 1 step (attempt 2)" in out
    assert (ckpts / "attempt-1" / "checkpoint-2").is_dir() and (ckpts / "attempt-2" / "checkpoint-1").is_dir()
    out = quiet(ok(grpo_cli("grpo", "--run", run, "--resume", "--max-steps", "2", *args[:2])))
    assert f"resuming attempt 2 from {ckpts / 'attempt-2' / 'checkpoint-1'}" in out
    rows = [r for r in metrics(tiny_run) if r["stage"] == "grpo"]
    assert [(r["attempt"], r["step"]) for r in rows] == [(1, 1), (1, 2), (2, 1), (2, 2)]

    # 4. export --gguf q4_k_m: converted, quantized with llama.cpp's kernels, loaded and run in llama.cpp.
    verify = ("--verify", "2", "--verify-tokens", "8")
    out = quiet(ok(grpo_cli("export", "--run", run, "--gguf", "q4_k_m", *verify)))
    assert "answer reward" in out and "accuracy HF" not in out
    report = json.loads((tiny_run / "export" / "verify.json").read_text())
    (art,) = report["artifacts"]
    assert art["name"] == "gguf-q4_k_m" and art["reloaded"] and art["agreement"]["token_match"] >= 0.9

    # 5. chat, one-shot, from the GGUF: the answer and nothing else on stdout.
    out = quiet(ok(grpo_cli("chat", "--run", run, "--engine", "gguf", "--prompt", "What is 2+3?",
                            "--max-new-tokens", "8")))  # fmt: skip
    assert out.strip() and "Traceback" not in out

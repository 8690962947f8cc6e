"""cli/commands/chat.py: `grpo chat` — one-shot on each source, the REPL commands, bad inputs.

Uses the run built by tests/helpers.py's make_run (tiny Qwen3 + real peft adapters trained to answer
in the format), shared through the session's temp folder. `grpo eval` is in tests/test_eval.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HAS_GGUF, REPO, TARGET, copy_run, invoke, needs_gguf, one_error_line

from py_rewards.spec import get_spec


@pytest.fixture(scope="module")
def exported_run(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the run with a merged 16-bit export (and a q8_0 GGUF when the extra is installed)."""
    run = copy_run(run_dir, tmp_path_factory.mktemp("exported") / "run")
    args = ["export", "--run", run, "--merged", "16bit", "--verify", "0"]
    if HAS_GGUF:
        args += ["--gguf", "q8_0"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return run


def test_chat_help():
    result = invoke("chat", "--help")
    assert result.exit_code == 0 and "--prompt" in result.output and "/compare" in result.output


@pytest.mark.parametrize("adapter", ["grpo", "sft"])
def test_chat_one_shot_lora(run_dir, adapter):
    result = invoke(
        "chat",
        "--run",
        run_dir,
        "--adapter",
        adapter,
        "--prompt",
        "What is 2+3?",
        "--max-new-tokens",
        "24",
        "--answer-only",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "18"


def test_chat_one_shot_full_completion(run_dir):
    result = invoke("chat", "--run", run_dir, "--prompt", "What is 2+3?", "--max-new-tokens", "24")
    assert result.exit_code == 0, result.output
    # Not a terminal: the raw completion, starting at the generation prompt's reasoning tag.
    assert "<start_working_out>" in result.stdout and "<SOLUTION>18</SOLUTION>" in result.stdout


def _greedy(model_dir: Path, question: str, tokens: int) -> str:
    """The base model's greedy continuation of the chat prompt, by hand: argmax of the logits, one token at a
    time, up to an EOS (what `grpo chat --engine base` must print, reached without its code)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_rewards.spec import get_spec

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    text = tok.apply_chat_template(get_spec().messages(question), add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids
    stop = {tok.eos_token_id, *([model.generation_config.eos_token_id] if model.generation_config else [])}
    new: list[int] = []
    with torch.no_grad():
        for _ in range(tokens):
            nxt = int(model(ids).logits[0, -1].argmax())
            if nxt in stop:
                break
            new.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return tok.decode(new, skip_special_tokens=False)


def test_chat_one_shot_base(run_dir):
    result = invoke("chat", "--run", run_dir, "--engine", "base", "--prompt", "Hi", "--max-new-tokens", "4")
    assert result.exit_code == 0, result.output
    assert "loading the base model tiny" in result.output, result.output
    # Not a terminal: the reasoning tag, then the base model's own 4 greedy tokens (not the adapter's answer).
    expected = _greedy(run_dir / "base" / "tiny", "Hi", 4)
    assert result.stdout == get_spec().reasoning_start + expected + "\n", (result.stdout, expected)
    assert not expected.startswith(TARGET[:4])
    # The old spelling works for one more release, and says so.
    old = invoke("chat", "--run", run_dir, "--source", "base", "--prompt", "Hi", "--max-new-tokens", "4")
    assert old.exit_code == 0 and "--source is now --engine" in old.output, old.output


@pytest.mark.slow
def test_chat_one_shot_merged(exported_run):
    result = invoke(
        "chat",
        "--run",
        exported_run,
        "--engine",
        "merged",
        "--prompt",
        "What is 2+3?",
        "--max-new-tokens",
        "24",
        "--answer-only",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "18"


@pytest.mark.slow
@needs_gguf
def test_chat_one_shot_gguf(exported_run):
    # A separate interpreter, as users run it: `grpo chat --engine gguf` never imports torch (llama.cpp's
    # OpenMP and torch's in one process crashed now and then here).
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "chat",
            "--run",
            str(exported_run),
            "--engine",
            "gguf",
            "--prompt",
            "What is 2+3?",
            "--max-new-tokens",
            "24",
            "--answer-only",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "18"
    assert "torch" not in proc.stderr


def test_chat_repl_compare_reset_exit(run_dir):
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(
        app,
        ["chat", "--run", str(run_dir), "--max-new-tokens", "16"],
        input="What is 2+3?\n/compare\n/reset\n/bogus\n/exit\n",
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "solution" in out and "18" in out  # the tuned answer's solution panel
    assert "/compare" in out and "base tiny" in out and "grpo adapter" in out  # side by side
    assert "conversation cleared" in out
    assert "unknown command /bogus" in out


def test_chat_nothing_trained_yet(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    shutil.rmtree(run / "grpo")
    shutil.rmtree(run / "sft")
    line = one_error_line(invoke("chat", "--run", run, "--prompt", "hi"))
    assert "nothing trained yet" in line and "grpo sft" in line


def test_chat_bad_inputs(run_dir, tmp_path):
    assert "no run directory" in one_error_line(invoke("chat", "--run", tmp_path / "x", "--prompt", "hi"))
    assert "unknown --engine" in one_error_line(
        invoke("chat", "--run", run_dir, "--engine", "onnx", "-p", "hi")
    )
    assert "grpo export --merged" in one_error_line(
        invoke("chat", "--run", run_dir, "--engine", "merged", "-p", "hi")
    )
    run = copy_run(run_dir, tmp_path / "run")
    (run / "grpo" / "adapter" / "adapter_model.safetensors").write_bytes(b"\x00" * 10)
    assert "corrupt" in one_error_line(invoke("chat", "--run", run, "--adapter", "grpo", "-p", "hi"))

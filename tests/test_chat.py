"""`grpo chat` (one-shot on each source, the REPL commands) and `grpo eval` on a tiny slice.

Uses the run built by tests/helpers.py's make_run (tiny Qwen3 + real peft adapters trained to answer
in the format), shared through the session's temp folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HAS_GGUF, REPO, copy_run, invoke, needs_gguf, one_error_line


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


# ---- chat ---------------------------------------------------------------------------------------
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


def test_chat_one_shot_base(run_dir):
    result = invoke("chat", "--run", run_dir, "--source", "base", "--prompt", "Hi", "--max-new-tokens", "4")
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_chat_one_shot_merged(exported_run):
    result = invoke(
        "chat",
        "--run",
        exported_run,
        "--source",
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
    # A separate interpreter, as users run it: `grpo chat --source gguf` never imports torch (llama.cpp's
    # OpenMP and torch's in one process crashed now and then here).
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "chat",
            "--run",
            str(exported_run),
            "--source",
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
    assert "unknown --source" in one_error_line(
        invoke("chat", "--run", run_dir, "--source", "onnx", "-p", "hi")
    )
    assert "grpo export --merged" in one_error_line(
        invoke("chat", "--run", run_dir, "--source", "merged", "-p", "hi")
    )
    run = copy_run(run_dir, tmp_path / "run")
    (run / "grpo" / "adapter" / "adapter_model.safetensors").write_bytes(b"\x00" * 10)
    assert "corrupt" in one_error_line(invoke("chat", "--run", run, "--adapter", "grpo", "-p", "hi"))


# ---- eval ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_eval_tiny_slice(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    result = invoke("eval", "--run", run, "--limit", "4", "--max-new-tokens", "24", "--batch-size", "3")
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    rows = {r["checkpoint"]: r for r in report["results"]}
    assert list(rows) == ["base", "sft", "grpo"]
    assert report["n"] == 4 and report["data"] == "data/eval.parquet"
    # The random base never writes the format; the trained adapters always do, answering 18:
    # right for GSM8K test #1 (Janet's ducks), wrong for the next three.
    assert rows["base"]["format_compliance"] == 0.0 and rows["base"]["accuracy"] == 0.0
    for stage in ("sft", "grpo"):
        assert rows[stage]["format_compliance"] == 1.0
        assert rows[stage]["accuracy"] == 0.25
        assert 0 < rows[stage]["mean_completion_tokens"] < 24
    # 95 % intervals: Wilson for the rates (1 of 4 correct), normal for the mean reward; the paired
    # differences are over the same four prompts.
    assert rows["grpo"]["accuracy_ci95"] == [0.0456, 0.6994]
    assert (
        rows["base"]["format_compliance_ci95"][0] == 0.0 and rows["base"]["format_compliance_ci95"][1] > 0.4
    )
    samples = [json.loads(x) for x in (run / "eval" / "samples.jsonl").read_text().splitlines()]
    grpo_rewards = [s["reward"] for s in samples if s["checkpoint"] == "grpo"]
    assert rows["grpo"]["mean_reward"] == round(sum(grpo_rewards) / 4, 4)
    pairs = {(p["a"], p["b"]): p for p in report["paired"]}
    assert set(pairs) == {("base", "sft"), ("sft", "grpo")}
    base_rewards = [s["reward"] for s in samples if s["checkpoint"] == "base"]
    diff = pairs[("base", "sft")]
    assert diff["mean_reward_diff"] == round(
        (sum(r for s in samples if s["checkpoint"] == "sft" for r in [s["reward"]]) - sum(base_rewards)) / 4,
        4,
    )
    assert diff["ci95"][0] <= diff["mean_reward_diff"] <= diff["ci95"][1]
    assert report["engine"] == "hf"
    md = (run / "eval" / "report.md").read_text()
    assert "| After GRPO | 100.0% [51.0, 100.0] | 25.0% [4.6, 69.9] |" in md and "Format Compliance (%)" in md
    if importlib.util.find_spec("matplotlib") is not None:
        assert (run / "eval" / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((run / "eval" / "samples.jsonl").read_text().splitlines()) == 12
    assert "eval" in json.loads((run / "manifest.json").read_text())["stages"]


def test_eval_bundled_and_local_data(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    result = invoke(
        "eval", "--run", run, "--data", "gsm8k", "--limit", "2", "--max-new-tokens", "4", "--models", "grpo"
    )
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["n"] == 2 and "gsm8k" in report["data"]
    assert [r["checkpoint"] for r in report["results"]] == ["grpo"]

    src = tmp_path / "mine.jsonl"
    src.write_text(json.dumps({"question": "What is 2+3?", "answer": "18"}) + "\n")
    result = invoke("eval", "--run", run, "--source", src, "--max-new-tokens", "24", "--models", "sft")
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["results"][0]["accuracy"] == 1.0


def test_eval_bad_inputs(run_dir, tmp_path):
    assert "no run directory" in one_error_line(invoke("eval", "--run", tmp_path / "none"))
    assert "--models" in one_error_line(invoke("eval", "--run", run_dir, "--models", "dpo"))
    assert "gsm8k or math" in one_error_line(invoke("eval", "--run", run_dir, "--data", "imagenet"))
    assert "not found" in one_error_line(
        invoke("eval", "--run", run_dir, "--source", tmp_path / "nope.jsonl")
    )
    run = copy_run(run_dir, tmp_path / "run")
    (run / "data" / "eval.parquet").unlink()
    assert "grpo prep" in one_error_line(invoke("eval", "--run", run))
    assert not (run / "eval").exists()
    run = copy_run(run_dir, tmp_path / "run-no-sft")
    shutil.rmtree(run / "sft" / "adapter")
    # Issue #12: this once ended in UnboundLocalError ('rewards_source') after loading the base model.
    assert "grpo sft" in one_error_line(invoke("eval", "--run", run, "--models", "sft"))
    assert not (run / "eval").exists()
    run = copy_run(run_dir, tmp_path / "run2")
    weights = run / "sft" / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert "corrupt" in one_error_line(invoke("eval", "--run", run, "--limit", "1"))
    assert not (run / "eval").exists()


def test_eval_png_shows_zero_values_and_wraps_labels(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from cli.eval_report import plot_png
    from cli.evaluation import LABELS
    from cli.plots import wrap_label

    results = [
        {"label": LABELS[k], "format_compliance": f, "accuracy": 0.0, "mean_completion_tokens": n}
        for k, f, n in (("base", 0.0, 16), ("sft", 0.5, 40), ("grpo", 1.0, 31))
    ]
    png = plot_png(results, "test")
    assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n"
    # Every bar carries its value: a zero is a visible "0%", not a missing bar.
    from cli.eval_report import eval_figure

    fig = eval_figure(results, "test")
    shown = [t.get_text() for t in fig.axes[0].texts]
    assert shown.count("0%") == 4 and "50%" in shown and "100%" in shown  # format 0, accuracy 0 ×3
    assert [t.get_text() for t in fig.axes[1].texts] == ["16", "40", "31"]
    # Long labels are wrapped at word boundaries so neighbours do not overlap.
    assert wrap_label(LABELS["sft"]) == "After SFT\n(format\nwarm-up)"

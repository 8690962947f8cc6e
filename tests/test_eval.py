"""cli/commands/eval.py, cli/eval/evaluation.py: `grpo eval` on a tiny slice: report, data, engine, bad input.

Uses the run built by tests/helpers.py's make_run (tiny Qwen3 + real peft adapters trained to answer
in the format), shared through the session's temp folder. The report's figure is tested in
tests/test_eval_report.py, the scoring in tests/test_scoring.py, the intervals in tests/test_stats.py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from helpers import copy_run, invoke, one_error_line


@pytest.mark.slow
def test_eval_tiny_slice(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    result = invoke("eval", "--run", run, "--limit", "4", "--max-new-tokens", "24", "--decode-batch", "3")
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
        assert rows[stage]["accuracy_lenient"] == 0.25  # the last number is the solution's
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
    # seed rule, math_equal, last number
    assert "| 25.0% [4.6, 69.9] | 25.0% | 25.0% [4.6, 69.9] |" in md and "Accuracy, last number (%)" in md
    if importlib.util.find_spec("matplotlib") is not None:
        assert (run / "eval" / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((run / "eval" / "samples.jsonl").read_text().splitlines()) == 12
    assert "eval" in json.loads((run / "manifest.json").read_text())["stages"]


# The base model's own template (not the contract's): each message, then its EOS; the reply follows "A:".
OWN_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{{ eos_token }}{% endfor %}"
OWN_TEMPLATE += "{% if add_generation_prompt %}A:{% endif %}"


@pytest.mark.slow
def test_eval_base_in_its_own_chat_template(run_dir, tmp_path):
    """With a base tokenizer that has its own template, the base row gets a second row asked that way, the
    question alone, scored by the last number only."""
    run = copy_run(run_dir, tmp_path / "run")
    (run / "base" / "tiny" / "chat_template.jinja").write_text(OWN_TEMPLATE)
    # The row comes with base wherever the tokenizer has a template of its own (issue 40 item 7)
    result = invoke("eval", "--run", run, "--limit", "3", "--max-new-tokens", "8", "--models", "base,sft")
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    assert [r["checkpoint"] for r in report["results"]] == ["base", "base-chat", "sft"]
    models = "base,base-chat,sft"
    result = invoke("eval", "--run", run, "--limit", "3", "--max-new-tokens", "8", "--models", models)
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    rows = {r["checkpoint"]: r for r in report["results"]}
    assert list(rows) == ["base", "base-chat", "sft"]
    own = rows["base-chat"]
    assert own["label"] == "Base, own chat template" and own["n"] == 3
    assert own["format_compliance"] is None and own["accuracy"] is None and own["mean_reward"] is None
    assert 0.0 <= own["accuracy_lenient"] <= 1.0 and own["accuracy_lenient_ci95"][1] > 0
    assert [p["a"] for p in report["paired"]] == ["base"]  # base-chat takes part in no paired difference
    samples = [json.loads(x) for x in (run / "eval" / "samples.jsonl").read_text().splitlines()]
    mine = [s for s in samples if s["checkpoint"] == "base-chat"]
    assert len(mine) == 3 and all(s["format_ok"] is None and s["reward"] is None for s in mine)
    assert all(isinstance(s["correct_lenient"], bool) for s in mine)
    md = (run / "eval" / "report.md").read_text()
    assert "| Base, own chat template | — | — |" in md
    assert "Base, own chat template" in result.output  # the printed table


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
    # This once ended in UnboundLocalError ('rewards_source') after loading the base model.
    assert "grpo sft" in one_error_line(invoke("eval", "--run", run, "--models", "sft"))
    assert not (run / "eval").exists()
    run = copy_run(run_dir, tmp_path / "run2")
    weights = run / "sft" / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert "corrupt" in one_error_line(invoke("eval", "--run", run, "--limit", "1"))
    assert not (run / "eval").exists()


def test_eval_engine_vllm_without_vllm_or_gpu(run_dir) -> None:
    if importlib.util.find_spec("vllm") is not None:
        import torch

        if torch.cuda.is_available():
            pytest.skip("vLLM and a GPU are both here")
    line = one_error_line(invoke("eval", "--run", run_dir, "--engine", "vllm", "--limit", "1"))
    assert "--engine vllm:" in line and "--engine hf" in line
    assert "unknown --engine" in one_error_line(invoke("eval", "--run", run_dir, "--engine", "tgi"))

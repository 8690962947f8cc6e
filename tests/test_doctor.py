"""cli/commands/doctor.py: `grpo doctor` on a tiny run — its checks, a failing reward, a format mismatch."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import SAMPLES

from cli.main import app


def test_doctor_on_a_tiny_run(runner, tiny_run):
    pytest.importorskip("py_rewards._core")
    result = runner.invoke(app, ["doctor", "--run", str(tiny_run), "--model", "tiny"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "transformers" in out and ("CPU only" in out or "GiB" in out)
    assert "<start_working_out>" in out  # the rendered generation prompt is shown
    assert "perfect completion scores highest" in out and "all checks passed" in out
    assert not (tiny_run / "config.yaml").exists(), "doctor writes nothing"
    if importlib.util.find_spec("vllm") is None:  # a missing package reads so (it read "vllm None")
        assert any("vllm" in ln and "not installed" in ln for ln in out.splitlines()), out


def test_doctor_fails_when_a_reward_cannot_run(runner, tiny_run, tmp_path):
    # A reward that raises is a failed check (exit 1), reported in the table, never a traceback.
    pytest.importorskip("py_rewards._core")
    config = tmp_path / "r.yaml"
    config.write_text("grpo: {rewards: [match_format_exactly, no_such_module.reward]}\n")
    result = runner.invoke(app, ["doctor", "--run", str(tiny_run), "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "FAIL" in result.output


def test_doctor_flags_a_run_made_with_another_format(runner, tiny_run, tmp_path):
    pytest.importorskip("py_rewards._core")
    src = SAMPLES / "gsm8k_test.jsonl"
    assert (
        runner.invoke(
            app,
            [
                "prep",
                "gsm8k",
                "--source",
                str(src),
                "--limit",
                "60",
                "--model",
                "tiny",
                "--run",
                str(tiny_run),
            ],
        ).exit_code
        == 0
    )
    result = runner.invoke(app, ["doctor", "--run", str(tiny_run)])
    assert result.exit_code == 0, result.output
    assert "run format contract" in result.output
    config = tmp_path / "fmt.yaml"
    config.write_text("format: seed001\n")  # other tags than the ones the data was prepped with
    result = runner.invoke(app, ["doctor", "--run", str(tiny_run), "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert "check(s) failed: run format contract" in result.output

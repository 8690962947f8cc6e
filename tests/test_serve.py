"""cli/commands/serve.py: `grpo serve --dry-run` prints the TRL vllm-serve command it would run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import fails_fast

from cli.main import app


def test_serve(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--run", str(tmp_path / "r"), "--port", "8123", "--dry-run"])
    assert result.exit_code == 0, result.output
    cmd = yaml.safe_load(result.output)["serve"]["command"]
    assert cmd[cmd.index("vllm-serve") + 1 : cmd.index("vllm-serve") + 3] == ["--model", "tiny"]
    assert cmd[cmd.index("--port") + 1] == "8123" and cmd[cmd.index("--max_model_len") + 1] == "2048"
    # This interpreter's TRL, through a module that runs: `python -m trl.cli` has no __main__ in TRL 1.15
    # (the server never started on the H200 that way).
    assert cmd[:3] == [sys.executable, "-m", "trl.cli.main"]
    head = subprocess.run([*cmd[:3], "vllm-serve", "--help"], capture_output=True, text=True, timeout=120)
    assert head.returncode == 0 and "--gpu_memory_utilization" in head.stdout, head.stderr[-2000:]
    if importlib.util.find_spec("vllm") is None:
        assert "vLLM is not installed" in fails_fast(["serve", "--run", str(tmp_path / "r")])


def test_the_server_s_messages_pass_through_and_a_missing_module_is_named(capfd) -> None:
    """`grpo serve` relays the server's stderr as it comes, and when the server dies of a missing module (a
    partial vLLM install: its HTTP server imports uvicorn and more, which its offline engine does not; seen on
    the H200), the last line names that module instead of only an exit code."""
    from cli.commands.serve import run_server

    dies = "import sys; print('loading', file=sys.stderr); import grpo_no_such_server.launcher"
    code, missing = run_server([sys.executable, "-c", dies])
    assert (code, missing) == (1, "grpo_no_such_server")
    err = capfd.readouterr().err
    assert "loading" in err and "No module named 'grpo_no_such_server'" in err
    assert run_server([sys.executable, "-c", "raise SystemExit(3)"]) == (3, None)
    assert run_server([sys.executable, "-c", "print('No module named x')"]) == (0, None)

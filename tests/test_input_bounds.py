"""No input hangs (issue 40, item 5) and chat's input rows of its audit (item 6).

Each test fails when its bound is removed: the command would block or walk for minutes, and the
``within`` limit (or the per-test timeout) catches it.

- a FIFO where a data file belongs: refused from its ``stat`` (cli/run/validate.py ``regular_file``), before
  anything opens it (an open blocks until a writer comes, Ctrl-C and SIGTERM ignored);
- a YAML alias bomb ("billion laughs") as ``--config`` and in the run's own config.yaml: the composed node
  graph is counted with each node once (cli/config/schema.py ``_check_size``), before anything walks it;
- chat: a prompt longer than the model's context is refused in seconds (one-shot: one line; the REPL: a
  note, then the next question); stdin closed, or not UTF-8: a note in our words, not a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from helpers import REPO, cli_env, copy_run, fresh_copy, invoke, one_error_line, said

# Nine levels of ten aliases: 10^9 values once expanded (the audit's "billion laughs").
BOMB = "lol0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


def refused_within(args: list[str], seconds: float, **popen) -> tuple[str, float]:
    """``grpo ARGS`` in a fresh interpreter fails with one line within ``seconds`` (a hang is killed and
    fails the test); returns the line and the time it took."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "cli", *map(str, args)], cwd=REPO, env=cli_env(),
                              capture_output=True, text=True, timeout=seconds, **popen)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"grpo {' '.join(map(str, args[:3]))}… still running after {seconds} s")
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out
    lines = [ln for ln in said(out) if ln.startswith("error:")]
    assert len(lines) == 1, out
    return lines[0], took


def test_a_fifo_where_the_training_data_belongs_is_refused_unopened(prepped, tmp_path) -> None:
    run = fresh_copy(prepped, tmp_path)
    train = run / "data" / "train.parquet"
    train.unlink()
    os.mkfifo(train)
    line, _ = refused_within(["grpo", "--run", run, "--max-steps", "1"], 90)
    assert f"{train} is a FIFO (named pipe), not a regular file" in line, line


def test_a_yaml_alias_bomb_is_refused_from_config_and_from_the_run(prepped, tmp_path) -> None:
    from cli.common import GrpoError
    from cli.config.schema import load_yaml

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    t0 = time.monotonic()
    with pytest.raises(GrpoError, match="expands to more than 100,000 values"):
        load_yaml(bomb)
    assert time.monotonic() - t0 < 5
    line, _ = refused_within(["grpo", "--run", prepped, "--config", bomb, "--max-steps", "1"], 90)
    assert "bomb.yaml expands to more than 100,000 values" in line
    run = fresh_copy(prepped, tmp_path)
    (run / "config.yaml").write_text((run / "config.yaml").read_text() + BOMB)
    line = one_error_line(invoke("eval", "--run", run, "--limit", "1"))
    assert "config.yaml expands to more than 100,000 values" in line


def test_chat_refuses_a_prompt_longer_than_the_context(run_dir, tmp_path) -> None:
    t0 = time.monotonic()
    line = one_error_line(invoke("chat", "--run", run_dir, "--prompt", "seven " * 200_000))
    assert "does not fit" in line and "context of 4,096 tokens" in line and "bytes" in line
    line = one_error_line(invoke("chat", "--run", run_dir, "--prompt", "7 " * 6000))
    assert "does not fit" in line and "tokens;" in line
    assert time.monotonic() - t0 < 120
    from typer.testing import CliRunner

    from cli.main import app

    typed = "x" * 1_000_000 + "\nWhat is 2+3?\n/exit\n"  # the audit's 1 MB line, then a question
    result = CliRunner().invoke(app, ["chat", "--run", str(run_dir), "--max-new-tokens", "4"], input=typed)
    assert (
        result.exit_code == 0 and "does not fit" in result.output and "<start_working_out>" in result.output
    )


@pytest.mark.parametrize("stdin", ["closed", "latin-1"])
def test_chat_with_stdin_closed_or_not_utf8_says_so(run_dir, tmp_path, stdin) -> None:
    run = copy_run(run_dir, tmp_path / "run")
    cmd = [sys.executable, "-m", "cli", "chat", "--run", str(run), "--max-new-tokens", "4"]
    if stdin == "closed":
        proc = subprocess.run(cmd, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300,
                              stdin=None, preexec_fn=lambda: os.close(0))  # fmt: skip
        assert proc.returncode == 0 and "stdin is closed" in proc.stderr, proc.stdout + proc.stderr
    else:
        env = {**cli_env(), "PYTHONUTF8": "0", "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=300,
                              input="caf\u00e9 2+3?\n/exit\n".encode("latin-1"))  # fmt: skip
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        assert proc.returncode == 0 and "not UTF-8 text" in out, out
    assert "Traceback" not in str(proc.stderr)

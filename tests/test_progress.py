"""Never a silent minute: each command says what it does before it loads a model, and while it works.

On a loaded 2-core machine `grpo export` was silent for 51 s before its table, `grpo chat` for 36 s before its
header, and eval's bar moved only when a whole batch ended. Here each command's first line must come before
``transformers`` is imported (nothing can load a model before that), and :mod:`cli.run.heartbeat` speaks up
in any silence.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import budget
import pytest
from helpers import REPO, cli_env, copy_run, fresh_copy

MARK = "<<transformers is being imported>>"
# `grpo ARGS` that stops (exit 17) the moment anything imports transformers, after writing MARK to the same
# output as the command's own lines: what came before MARK was said before any model could load.
_STOP_AT_TRANSFORMERS = f"""
import os, sys

class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == "transformers":
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(1, b"\\n{MARK}\\n")
            os._exit(17)
        return None

sys.meta_path.insert(0, Stop())
sys.argv = ["grpo", *sys.argv[1:]]
from cli.main import main
main()
"""


def _said_before_transformers(*args: str) -> list[str]:
    cmd = [sys.executable, "-c", _STOP_AT_TRANSFORMERS, *map(str, args)]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    budget.started(proc, ["grpo", *map(str, args)], 120)
    with proc:
        out, _ = proc.communicate()
    assert proc.returncode == 17 and MARK in out, out[-3000:]  # it did get to transformers
    # The heartbeat's lines ("  … sft: loading (0:06)") are left out: importing torch alone takes that
    # long on a loaded machine.
    return [ln for ln in out.split(MARK)[0].splitlines() if ln.strip() and not ln.lstrip().startswith("…")]


def test_training_says_what_it_loads_first(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    said, *_ = _said_before_transformers("sft", "--run", run, "--backend", "hf", "--max-steps", "1")
    assert said.startswith("sft: loading hf, tiny")


def test_prep_says_it_is_offline_once_before_the_tokenizer(tiny_run: Path) -> None:
    said = _said_before_transformers("prep", "gsm8k", "--run", tiny_run, "--limit", "20")
    # Offline (the tests' HF_HUB_OFFLINE=1): the bundled sample, said once, before the tokenizer loads (prep
    # says nothing else up front, so that bad input stays one error line; its table follows in seconds).
    assert len(said) == 1 and said[0].startswith("note: cannot load openai/gsm8k"), said
    assert "using the bundled sample gsm8k_train.jsonl (20 rows)" in said[0]


def test_eval_export_and_chat_say_what_they_load_first(run_dir: Path, tmp_path: Path) -> None:
    run = copy_run(run_dir, tmp_path / "run")
    said, *_ = _said_before_transformers("eval", "--run", run, "--limit", "2", "--models", "sft")
    assert said.startswith("eval: loading tiny (hf) for sft: 2 prompts")
    said, *_ = _said_before_transformers("export", "--run", run, "--lora", "--verify", "1")
    assert said.startswith("export: lora from the grpo adapter over tiny")
    said, *_ = _said_before_transformers("chat", "--run", run, "--prompt", "What is 2+3?", "--answer-only")
    assert said == "chat: loading tiny + the grpo adapter…"


# ---- the heartbeat ------------------------------------------------------------------------------------
def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_a_silence_gets_a_line_naming_what_is_under_way(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.run import heartbeat

    with heartbeat.working("demo: loading", every=0.2):
        seen: list[str] = []
        while not any("demo: loading" in ln for ln in seen):  # a hang is the test's time limit
            time.sleep(0.1)
            seen += _err_lines(capsys)
        heartbeat.doing(lambda: "demo: 7 tokens decoded")  # a status of the moment
        while not any("demo: 7 tokens decoded" in ln for ln in seen):
            time.sleep(0.1)
            seen += _err_lines(capsys)
    assert seen[0].startswith("  … demo: loading (0:0"), seen
    time.sleep(0.5)
    assert not _err_lines(capsys)  # and nothing once the work is done


def test_a_command_that_talks_gets_no_extra_line(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.common import err_console
    from cli.run import heartbeat

    with heartbeat.working("demo: training", every=5.0):
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            err_console.print("step")
            time.sleep(0.05)
    lines = _err_lines(capsys)
    assert lines and set(lines) == {"step"}, lines

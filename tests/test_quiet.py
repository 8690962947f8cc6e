"""cli/run/quiet.py: library noise goes to the run's log unless verbose; our own output stays on screen."""

from __future__ import annotations

from pathlib import Path

import pytest


# The test raises a library's FutureWarning on purpose: it must reach cli/run/quiet.py's log, not the
# suite's "warnings are errors" filter.
@pytest.mark.filterwarnings("default::FutureWarning")
def test_library_noise_goes_to_the_run_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import logging
    import sys
    import warnings

    from cli.common import console
    from cli.run import quiet

    run = tmp_path / "run"
    undo = quiet.install(run, "sft")
    try:
        # What torch, bitsandbytes, Unsloth and transformers do while a command runs (docs/history.md).
        warnings.warn("torch.utils._pytree._register_pytree_node is deprecated", FutureWarning, stacklevel=1)
        assert not run.exists()  # the log never makes the run directory: the command does, under its lock
        run.mkdir()  # (`grpo prep` makes a new one); what was said before waits, then lands in the log
        logging.getLogger("bitsandbytes.backends.cpu.ops").warning("Failed to load CPU gemm_4bit_forward")
        print("🦥 Unsloth: Will patch your computer to enable 2x faster free finetuning.")
        print("a stray line", file=sys.stderr)
        console.print("sft 5/60 │ loss 1.2")  # our own output stays on the terminal
    finally:
        undo()
    out, err = capsys.readouterr()
    assert out.strip() == "sft 5/60 │ loss 1.2" and err == ""
    log = (run / "logs" / "grpo.log").read_text()
    for line in ("grpo sft ==", "_pytree", "gemm_4bit_forward", "Unsloth: Will patch", "a stray line"):
        assert line in log, line
    assert "sft 5/60" not in log
    print("after", file=sys.stderr)  # undone: the terminal again
    assert capsys.readouterr().err == "after\n"


def test_verbose_keeps_library_output_on_the_terminal(tmp_path: Path, monkeypatch, capsys) -> None:
    from cli.run import quiet

    monkeypatch.setenv(quiet.VERBOSE_ENV, "1")
    undo = quiet.install(tmp_path / "run", "prep")
    print("banner")
    undo()
    assert capsys.readouterr().out == "banner\n" and not (tmp_path / "run").exists()


def test_a_command_that_never_makes_its_run_leaves_no_log(tmp_path: Path, capsys) -> None:
    """A command refused before its run directory exists (a bad flag on a first prep) creates nothing."""
    import sys

    from cli.run import quiet

    undo = quiet.install(tmp_path / "run", "prep")
    try:
        print("a library's banner", file=sys.stderr)
    finally:
        undo()
    assert capsys.readouterr().err == "" and not (tmp_path / "run").exists()

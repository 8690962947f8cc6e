"""Fault injection: SIGKILL at random moments never leaves a run that cannot go on (docs/history.md, hardening
round 1).

`grpo grpo --save-steps 1` is killed 20 times at random moments after training starts (loading, steps,
saves) and resumed each time: every `checkpoint-N` left on disk is whole, each resume starts from the last
whole checkpoint, and the run finishes. `grpo sft` and `grpo export` killed mid-way leave the previous
adapter / export as they were, and a rerun succeeds.

Each `grpo` command is its own process, killed with SIGKILL, but forked from one interpreter that imported
the training stack once (tests/zygote.py): the ~30 starts no longer pay ~30 imports of torch and TRL.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import budget
import pytest
from helpers import REPO, assert_adapter, cli_env, fresh_copy
from terminal import progress
from zygote import Zygote

from cli.train.checkpoints import latest_checkpoint

# Twenty kills at random points (loading, steps, saves), as the hardening round asked: each start is a whole
# `grpo` process, ~3 s to its first step on 2 idle cores once forked from the zygote.
KILLS = 20


# A `grpo` process that is killed within seconds of its first line: the allowance it adds to the test's
# limit (idle-machine seconds, tests/budget.py) covers its model load, the slow part on a loaded machine.
KILLED_ALLOWANCE = 120
ZYGOTE: list[Zygote] = []


@pytest.fixture(scope="module", autouse=True)
def zygote():
    """The module's warm interpreter; its own start (the imports) counts against the first test's limit."""
    warm = Zygote(cli_env(), REPO)
    ZYGOTE.append(warm)
    yield warm
    ZYGOTE.remove(warm)
    warm.close()


def _start(*args: str, allowance: float = KILLED_ALLOWANCE):
    """``grpo ARGS`` forked from the zygote: a process of its own, output on ``.stdout`` (stderr merged)."""
    child = ZYGOTE[-1].start(list(args))
    return budget.started(child, child.args, allowance)  # type: ignore[arg-type]


def _run(*args: str, allowance: float = 300) -> subprocess.CompletedProcess[str]:
    """``grpo ARGS`` forked from the zygote, run to its end."""
    with _start(*args, allowance=allowance) as child:
        out, _ = child.communicate()
    return subprocess.CompletedProcess(child.args, child.returncode, out, "")


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def _kill_after(proc, marker: tuple[str, str], delay: float, count: int = 1) -> str:
    """Read output until the ``count``-th line that starts with ``marker[0]`` and holds ``marker[1]`` (the
    command's own line said just before training or writing, or a logged step), wait ``delay`` s, SIGKILL;
    returns the output seen."""
    seen = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith(marker[0]) and marker[1] in line:
                count -= 1
                if count == 0:
                    break
        time.sleep(delay)
    finally:  # also when the per-test timeout interrupts the wait: no trainer is left running
        proc.send_signal(signal.SIGKILL)  # no effect if it has already ended
    rest, _ = proc.communicate(timeout=60)
    return "".join(seen) + (rest or "")


def _export_files(run: Path) -> dict[Path, bytes]:
    """The export's files, but a killed export's staging folder (cli/export/staging.py: the next export
    removes it once its process is gone)."""
    return {
        p.relative_to(run): p.read_bytes()
        for p in (run / "export").rglob("*")
        if p.is_file() and not _staging(p.relative_to(run))
    }


def _staging(path: Path) -> bool:
    return any(part.startswith(".export.") and part.endswith(".tmp") for part in path.parts)


def _checkpoints(run: Path) -> list[Path]:
    return sorted((run / "grpo" / "checkpoints").glob("attempt-*/checkpoint-*"))


def _whole(ckpt: Path) -> None:
    """A checkpoint on disk under its final name is complete: adapter, config and trainer state."""
    step = int(ckpt.name.rpartition("-")[2])
    assert json.loads((ckpt / "trainer_state.json").read_text())["global_step"] == step, ckpt
    assert json.loads((ckpt / "adapter_config.json").read_text())["r"] > 0, ckpt
    assert (ckpt / "adapter_model.safetensors").stat().st_size > 0, ckpt


@pytest.mark.slow
@pytest.mark.timeout(600)  # + each started process's allowance
def test_grpo_killed_twenty_times_resumes_and_finishes(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    steps = 120  # each attempt adds at most ~5 steps: the last resume always has steps left to run
    base = [
        "grpo",
        "--run",
        str(run),
        "--backend",
        "hf",
        "--gens",
        "2",
        "--max-steps",
        str(steps),
        "--save-steps",
        "1",
        "--max-completion-length",
        "8",
    ]
    rng = random.Random(7)
    resumed_from: list[str] = []
    for kill in range(KILLS):
        last = None
        for attempt in sorted(
            (run / "grpo" / "checkpoints").glob("attempt-*"), key=lambda p: int(p.name[8:])
        ):
            last = latest_checkpoint(attempt) or last
        args = [*base, "--resume"] if last is not None else base
        if kill > 0 and rng.random() < 0.25:
            # Anywhere from loading on: how far it got depends on the machine's speed, and nothing below
            # counts on it.
            out = _kill_after(_start(*args), ("grpo:", "start:"), rng.uniform(0.0, 2.0))
        else:
            # Within a second of the attempt's 2nd to 4th logged step: in the save that follows the log
            # line, or in the next step. A step is logged after the previous step's checkpoint was saved,
            # so this attempt leaves at least one new whole checkpoint, however fast the machine is.
            marker = ("grpo ", f"/{steps} ")
            out = _kill_after(_start(*args), marker, rng.uniform(0.0, 1.0), count=rng.randint(2, 4))
        progress(f"kill {kill + 1}/{KILLS}: " + (f"resumed from {last.name}" if last else "fresh attempt"))
        if last is not None:
            banner = next((ln for ln in out.splitlines() if ln.startswith("grpo:") and "start:" in ln), "")
            assert f"start: checkpoint {last.name}" in banner, out[-3000:]
            resumed_from.append(last.name)
        for ckpt in _checkpoints(run):
            _whole(ckpt)
        assert "Traceback" not in out, out[-3000:]
    # The last resume runs to the end: a few steps past the last checkpoint (a longer tail, with a save
    # every step, proved nothing more).
    last_attempt = max((run / "grpo" / "checkpoints").glob("attempt-*"), key=lambda p: int(p.name[8:]))
    start = int(latest_checkpoint(last_attempt).name.rpartition("-")[2])
    assert start < steps, start  # the kills always left steps to run
    steps = start + 3
    base[base.index("--max-steps") + 1] = str(steps)
    proc = _run(*base, "--resume", allowance=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"start: checkpoint checkpoint-{start}" in proc.stdout, proc.stdout[-3000:]
    assert_adapter(run / "grpo" / "adapter")
    assert len(resumed_from) == KILLS - 1  # the first attempt always saves: every later one resumes
    assert len(set(resumed_from)) > 5  # the kills fell at many different steps
    assert latest_checkpoint(last_attempt).name == f"checkpoint-{steps}"  # not one step more
    assert "Traceback" not in proc.stdout


@pytest.mark.slow
def test_sft_and_export_killed_keep_the_previous_result(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    _ok(_run("sft", "--run", str(run), "--backend", "hf", "--max-steps", "2"))
    adapter = run / "sft" / "adapter"
    before = (adapter / "adapter_model.safetensors").read_bytes()
    rng = random.Random(3)
    for _ in range(2):
        _kill_after(
            _start("sft", "--run", str(run), "--backend", "hf", "--max-steps", "30"),
            ("sft:", "format examples"),
            rng.uniform(0.0, 4.0),
        )
        assert (adapter / "adapter_model.safetensors").read_bytes() == before  # untouched or whole
        assert_adapter(adapter)
    export = ["export", "--run", str(run), "--adapter", "sft", "--lora"]
    export += ["--verify", "1", "--verify-tokens", "4"]
    _ok(_run(*export))
    exported = _export_files(run)
    for kill in range(2):
        _kill_after(_start(*export), ("", ""), rng.uniform(0.0, 3.0))
        progress(f"export killed {kill + 1}/2")
        now = _export_files(run)
        # Killed or not, the export is whole: the previous one, or (the kill came after its last write) a new
        # one of the same adapter, whose artifacts are the same bytes and whose verify.json lists them.
        report = Path("export/verify.json")
        assert {k: v for k, v in now.items() if k != report} == {
            k: v for k, v in exported.items() if k != report
        }
        for artifact in json.loads(now[report])["artifacts"]:
            assert Path(artifact["path"]).exists()
    # The next export removes what a killed one left, and writes the same artifacts.
    _ok(_run(*export))
    assert not [p for p in (run / "export").iterdir() if _staging(Path(p.name))]
    assert {k: v for k, v in _export_files(run).items() if k != report} == {
        k: v for k, v in exported.items() if k != report
    }
    _ok(_run("sft", "--run", str(run), "--backend", "hf", "--max-steps", "2"))
    assert_adapter(adapter)

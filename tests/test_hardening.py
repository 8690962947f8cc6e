"""Hardening, round 2 (docs/history.md): one test per row of its table, on the tiny model.

Each refusal is asserted as the user sees it: one ``error:`` line (its words), the exit code, the run
directory byte for byte as it was (the command's own section of logs/grpo.log aside), and a time bound a
loaded machine cannot break (a refusal comes in seconds; the bound is 60 s). Refusals run in a fresh
interpreter that reports what it imported: none may load the training stack (`fails_fast`'s rule). The
training rows (resume past damaged checkpoints, SIGTERM, a full disk at a checkpoint) run the real trainer
and are ``slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import REPO, SAMPLES, TRAINING_STACK, cli_env, fresh_copy, grpo_cli, manifest, train_adapter

from cli.run.lock import release_locks
from cli.run.rundir import RunDir

TINY_GRPO = ["--backend", "hf", "--gens", "2", "--max-completion-length", "8"]
REFUSAL_SECONDS = 60  # a refusal comes within seconds; this bound is for a loaded machine


# ---- helpers -----------------------------------------------------------------------------------
def snapshot(run: Path) -> dict[str, bytes]:
    """Every file and folder under ``run`` (symlinks as their target's name), bytes included; the log and
    its folder are left out (each command appends its own section: what the libraries said is kept)."""
    if not run.exists() and not run.is_symlink():
        return {}
    out: dict[str, bytes] = {}
    for p in sorted(run.rglob("*")):
        rel = str(p.relative_to(run))
        if p.is_symlink():
            out[rel + "@"] = os.readlink(p).encode()
        elif p.is_dir():
            if rel != "logs":
                out[rel + "/"] = b""
        elif p.name != "grpo.log":
            out[rel] = p.read_bytes()
    return out


_RUN_AND_REPORT = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
sys.argv = ["grpo", *args]
try:
    from cli.main import main
    main()
finally:
    with open(report, "w") as f:
        json.dump(sorted({m.partition(".")[0] for m, v in sys.modules.items() if v is not None}), f)
"""


def refused(args: list[str], code: int = 2) -> tuple[str, list[str]]:
    """``grpo ARGS`` in a fresh interpreter: exits ``code`` within REFUSAL_SECONDS, with exactly one
    ``error:`` line, no traceback, and without having imported the training stack. Returns (the error
    line, the other lines: notes)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "modules.json"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _RUN_AND_REPORT, str(report), *map(str, args)],
            cwd=REPO,
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=REFUSAL_SECONDS * 2,
        )
        seconds = time.perf_counter() - start
        output = proc.stdout + proc.stderr
        assert proc.returncode == code, output
        assert "Traceback" not in output, output
        assert seconds < REFUSAL_SECONDS, f"refused only after {seconds:.0f} s: {output}"
        lines = [ln for ln in output.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        assert len(errors) == 1, output
        loaded = TRAINING_STACK.intersection(json.loads(report.read_text()))
        assert not loaded, f"refused only after importing {sorted(loaded)}: {errors[0]}"
    return errors[0], [ln for ln in lines if ln is not errors[0]]


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _holder(run: Path, command: str, create: bool = False) -> subprocess.Popen[str]:
    """Another process holding ``run`` as a running command does (and making it, with ``create``)."""
    code = (
        "import sys, time; from cli.run.rundir import RunDir; "
        f"RunDir(sys.argv[1]).hold({command!r}, create={create}); print('held', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(run)], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture(scope="module")
def sft_adapter(prepped: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real peft LoRA of the tiny model (as `grpo sft` leaves it), made once per module."""
    dest = tmp_path_factory.mktemp("sft") / "adapter"
    train_adapter(str(prepped / "base" / "tiny"), dest, steps=0, init_only=True)
    return dest


@pytest.fixture
def trained(prepped: Path, sft_adapter: Path, tmp_path: Path) -> Path:
    """A fresh copy of the prepped run with its SFT adapter."""
    run = fresh_copy(prepped, tmp_path)
    shutil.copytree(sft_adapter, run / "sft" / "adapter")
    return run


# ---- row 1: one writer from the first command ----------------------------------------------------
def test_row01_a_new_run_being_made_is_refused_to_a_second_prep(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The lock skipped a folder that did not exist yet: two preps into a new path both exited 0."""
    run = tmp_path / "runs" / "new"
    holder = _holder(run, "grpo prep", create=True)  # made it, holds it, as a prep that is loading does
    try:
        before = snapshot(run)
        line, _ = refused(["prep", "gsm8k", "--model", tiny_model_dir, "--run", run])
        assert line.startswith(f"error: {run} is in use by `grpo prep` (pid {holder.pid}, since "), line
        assert snapshot(run) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()  # and its pipe closed


@pytest.mark.slow
def test_row01_two_preps_at_once_into_a_new_run_one_wins(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = tmp_path / "runs" / "new"
    procs = {
        name: _start("prep", name, "--model", str(tiny_model_dir), "--run", str(run))
        for name in ("dapo", "gsm8k")
    }
    outs = {name: p.communicate(timeout=300)[0] for name, p in procs.items()}
    codes = {name: p.returncode for name, p in procs.items()}
    assert sorted(codes.values()) == [0, 2], outs
    winner = next(n for n, c in codes.items() if c == 0)
    loser = next(n for n, c in codes.items() if c == 2)
    errors = [ln for ln in outs[loser].splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and f"{run} is in use by `grpo prep`" in errors[0], outs[loser]
    # The run holds the winner's rows and says so, the loser wrote nothing.
    assert json.loads((run / "data" / "stats.json").read_text())["dataset"] == winner
    assert manifest(run)["stages"]["prep"]["dataset"] == winner
    assert not (run / ".grpo.lock").exists()


# ---- row 2 and row 12: manifest.json ---------------------------------------------------------------
GARBAGE = {"text": b"garbage{", "list": b"[1, 2]", "empty": b"", "stages": b'{"stages": [1]}'}


@pytest.mark.parametrize(
    ("command", "garbage"),
    [(["grpo", *TINY_GRPO], g) for g in GARBAGE] + [([c], "text") for c in ("sft", "eval", "filter")]
    + [(["prep", "gsm8k"], "text")],
)  # fmt: skip
def test_row02_a_corrupt_manifest_is_refused_before_any_work(trained: Path, command, garbage: str) -> None:
    """`grpo grpo` trained every step, wrote the adapter, a checkpoint, config.yaml and metrics, *then* said
    the manifest was corrupt."""
    (trained / "manifest.json").write_bytes(GARBAGE[garbage])
    before = snapshot(trained)
    line, _ = refused([*command, "--run", trained])
    assert line.startswith(f"error: {trained / 'manifest.json'} is corrupt ("), line
    assert line.endswith(
        "delete it (the next stage to finish rebuilds it from the run's files) or restore a copy"
    )
    assert snapshot(trained) == before


def test_row12_a_deleted_manifest_is_rebuilt_and_said(trained: Path) -> None:
    """A deleted manifest was rebuilt silently with only the stage that recorded next."""
    (trained / "manifest.json").unlink()
    proc = grpo_cli("prep", "gsm8k", "--source", str(SAMPLES / "gsm8k_train.jsonl"), "--limit", "64",
                    "--run", str(trained))  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    notes = [ln for ln in proc.stdout.splitlines() if "was missing" in ln]
    assert notes == [
        f"note: {trained / 'manifest.json'} was missing: rebuilt from the run's files (sft marked rebuilt: "
        "their versions and timings are unknown)"
    ], proc.stdout
    stages = manifest(trained)["stages"]
    assert stages["sft"]["rebuilt"] is True and stages["sft"]["adapter"] == str(trained / "sft" / "adapter")
    assert "rebuilt" not in stages["prep"] and stages["prep"]["dataset"] == "gsm8k"  # recorded whole


# ---- rows 3 and 4: checkpoints ---------------------------------------------------------------------
def _checkpoint(run: Path, step: int, adapter: Path) -> Path:
    ckpt = run / "grpo" / "checkpoints" / "attempt-1" / f"checkpoint-{step}"
    shutil.copytree(adapter, ckpt)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return ckpt


def test_row03_04_resume_with_no_whole_checkpoint_names_each_and_changes_nothing(
    trained: Path, sft_adapter: Path
) -> None:
    """checkpoint-9 with 0-byte trainer_state.json and adapter_config.json was taken (the step came from the
    folder's name); a truncated trainer_state.json rewrote config.yaml and failed with a bare
    "Expecting value: line 2 column 1 (char 17)", on every later resume too."""
    nine = _checkpoint(trained, 9, sft_adapter)
    (nine / "trainer_state.json").write_bytes(b"")
    (nine / "adapter_config.json").write_bytes(b"")
    four = _checkpoint(trained, 4, sft_adapter)
    (four / "trainer_state.json").write_text('{\n  "best_global')  # cut after 17 bytes
    before = snapshot(trained)
    line, notes = refused(["grpo", "--run", trained, *TINY_GRPO, "--max-steps", "12", "--resume"])
    assert notes == [
        f"note: skipping {nine}: trainer_state.json is corrupt (empty: a write cut short) — no earlier "
        "checkpoint is whole (delete it to silence this note)",
        f"note: skipping {four}: trainer_state.json is corrupt (not JSON: Unterminated string starting at, "
        "line 2) — no earlier checkpoint is whole (delete it to silence this note)",
    ]
    assert line == (
        f"error: --resume: the most recent attempt (1, {nine.parent}) has no whole checkpoint (see the notes "
        "above); start a new attempt with `grpo grpo`"
    )
    assert snapshot(trained) == before  # config.yaml keeps its flags: --max-steps 12 is not remembered


@pytest.mark.slow
def test_row03_04_06_resume_skips_damaged_checkpoints_and_files_follow_the_umask(
    prepped: Path, tmp_path: Path
) -> None:
    """The real trainer: three checkpoints, the newest with 0-byte trainer state and adapter config (row 3),
    the next with a truncated trainer state (row 4): --resume goes to checkpoint-1, names both, trains on.
    Every file the run holds then reads 0644 under umask 022, safetensors included (row 6: 0600)."""
    run = fresh_copy(prepped, tmp_path)
    args = ["grpo", "--run", str(run), *TINY_GRPO, "--save-steps", "1"]
    old = os.umask(0o022)
    try:
        assert grpo_cli(*args, "--max-steps", "3").returncode == 0
        ckpts = run / "grpo" / "checkpoints" / "attempt-1"
        (ckpts / "checkpoint-3" / "trainer_state.json").write_bytes(b"")
        (ckpts / "checkpoint-3" / "adapter_config.json").write_bytes(b"")
        state = ckpts / "checkpoint-2" / "trainer_state.json"
        state.write_bytes(state.read_bytes()[:17])
        proc = grpo_cli(*args, "--max-steps", "4", "--resume")
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = proc.stdout
    assert f"note: skipping {ckpts / 'checkpoint-3'}: trainer_state.json is corrupt (empty" in out
    assert f"note: skipping {ckpts / 'checkpoint-2'}: trainer_state.json is corrupt (not JSON" in out
    assert "start: checkpoint checkpoint-1" in out and "grpo done: 3 steps" in out, out[-3000:]
    assert manifest(run)["stages"]["grpo"]["global_step"] == 4
    assert json.loads((ckpts / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3
    modes = {
        str(p.relative_to(run)): stat.S_IMODE(p.stat().st_mode)
        for p in run.rglob("*")
        if not p.is_symlink() and (p.is_dir() or p.suffix in (".safetensors", ".json", ".pt", ".pth"))
    }
    wrong = {k: oct(m) for k, m in modes.items() if m != (0o755 if (run / k).is_dir() else 0o644)}
    assert not wrong, wrong
    assert any(k.endswith("checkpoint-4/adapter_model.safetensors") for k in modes)


# ---- rows 5 and 11: reward weights, a YAML alias -----------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "shown"),
    [("nan", "'nan'"), ("inf", "'inf'"), ("-inf", "'-inf'"), ("abc", "'abc'"), ("", None)],
    ids=["nan", "inf", "-inf", "text", "yaml-nan"],
)
def test_row05_11_a_reward_weight_that_is_no_finite_number_is_refused(
    trained: Path, tmp_path: Path, flag: str, shown: str | None
) -> None:
    """nan/inf trained with weight nan and were saved into config.yaml; "abc" said "could not convert string
    to float: 'abc'", naming neither the flag nor the reward."""
    if flag:
        extra = ["--rewards", f"match_format_exactly=1,check_answer_accuracy={flag}"]
    else:
        cfg = tmp_path / "nan.yaml"
        cfg.write_text("grpo:\n  rewards:\n  - name: check_answer_accuracy\n    weight: .nan\n")
        extra, shown = ["--config", str(cfg)], "nan"
    before = snapshot(trained)
    line, _ = refused(["grpo", "--run", trained, *TINY_GRPO, *extra])
    assert line == (
        "error: config 'grpo.rewards' (--rewards): the weight of reward 'check_answer_accuracy' must be a "
        f"finite number, not {shown}"
    )
    assert snapshot(trained) == before


def test_row11_a_yaml_alias_inside_its_own_anchor_names_the_key(trained: Path, tmp_path: Path) -> None:
    """It said "list indices must be integers or slices, not str"."""
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("grpo:\n  rewards: &r\n  - *r\n")
    line, _ = refused(["grpo", "--run", trained, "--config", cfg])
    assert line == (
        f"error: malformed YAML in {cfg}: the value of 'grpo.rewards' contains itself (an alias inside its "
        "anchor)"
    )
    # The run's own config.yaml: the message names it and what to do.
    (trained / "config.yaml").write_text((trained / "config.yaml").read_text() + "lora: &l\n  x: *l\n")
    before = snapshot(trained)
    line, _ = refused(["grpo", "--run", trained])
    assert line == (
        f"error: malformed YAML in {trained / 'config.yaml'}: the value of 'lora' contains itself (an alias "
        "inside its anchor): fix it, or delete it and give the run's settings again as flags (--model …)"
    )
    assert snapshot(trained) == before


def test_row11_a_bad_key_in_the_runs_config_names_the_file(trained: Path) -> None:
    (trained / "config.yaml").write_text(
        (trained / "config.yaml").read_text().replace("gens: 4", "gens: many")
    )
    before = snapshot(trained)
    line, _ = refused(["grpo", "--run", trained])
    assert line == (
        f"error: {trained / 'config.yaml'}: config 'grpo.gens': expected a whole number, got 'many': fix it, "
        "or delete it and give the run's settings again as flags (--model …)"
    )
    assert snapshot(trained) == before


# ---- row 7: a damaged adapter ------------------------------------------------------------------------
DAMAGE = {
    "truncated": lambda a: (a / "adapter_model.safetensors").write_bytes(
        (a / "adapter_model.safetensors").read_bytes()[:-100]
    ),
    "garbage": lambda a: (a / "adapter_model.safetensors").write_bytes(os.urandom(4096)),
    "empty-config": lambda a: (a / "adapter_config.json").write_bytes(b""),
}


@pytest.mark.parametrize(
    ("command", "damage"),
    [(["grpo", *TINY_GRPO], d) for d in DAMAGE]
    + [(c, "truncated") for c in (["eval", "--models", "sft"], ["filter"], ["export"], ["chat", "-p", "hi"])],
)  # fmt: skip
def test_row07_a_damaged_sft_adapter_is_named_before_any_model_loads(
    trained: Path, command, damage: str
) -> None:
    """After 253 s: "SafetensorError: Error while deserializing header: invalid header length", no file
    named."""
    adapter = trained / "sft" / "adapter"
    DAMAGE[damage](adapter)
    before = snapshot(trained)
    line, _ = refused([*command, "--run", trained])
    name = "adapter_config.json" if damage == "empty-config" else "adapter_model.safetensors"
    assert line.startswith(f"error: {adapter / name} is corrupt ("), line
    assert line.endswith(f"re-create it with `grpo sft --run {trained}`"), line
    assert snapshot(trained) == before


def test_row07_a_damaged_gguf_is_named(trained: Path) -> None:
    gguf = trained / "export" / "gguf-q4_k_m" / "run-sft-q4_k_m.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGML" + b"\0" * 60)
    line, _ = refused(["chat", "--run", trained, "--engine", "gguf", "-p", "hi"])
    assert line == (
        f"error: {gguf} is corrupt or truncated (no GGUF header): re-create it with `grpo export --gguf "
        f"q4_k_m --run {trained}`"
    )


def test_row07_a_damaged_parquet_is_named(trained: Path) -> None:
    train = trained / "data" / "train.parquet"
    train.write_bytes(train.read_bytes()[:-200])
    before = snapshot(trained)
    line, _ = refused(["grpo", "--run", trained, *TINY_GRPO])
    assert line.startswith(f"error: {train} is corrupt or truncated (not parquet: "), line
    assert line.endswith(f"re-create it with `grpo prep NAME --run {trained}`")
    assert snapshot(trained) == before


# ---- row 8: a full disk ---------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path):
    """A 4 MiB tmpfs (needs root: `mount -t tmpfs`); skipped with the reason where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (root needed): {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave: int) -> None:
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * max(free - leave, 0))


def test_row08_a_full_disk_in_each_librarys_words_is_said_in_ours(small_disk: Path) -> None:
    """torch: "[enforce fail at inline_container.cc:672] . unexpected pos 101312 vs 101204"; safetensors:
    "I/O error: No space left on device (os error 28)"; pyarrow: OSError 28."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from safetensors.torch import save_file

    from cli.errors import in_our_words

    _fill(small_disk, 16 * 1024)
    writes = {
        "torch": lambda: torch.save({"w": torch.zeros(100_000)}, small_disk / "optimizer.pt"),
        "safetensors": lambda: save_file(
            {"w": torch.zeros(100_000)}, str(small_disk / "adapter.safetensors")
        ),
        "pyarrow": lambda: pq.write_table(pa.table({"a": np.zeros(100_000)}), small_disk / "train.parquet"),
    }
    for name, write in writes.items():
        with pytest.raises(Exception) as caught:  # noqa: PT011 - each library raises its own type
            write()
        words = in_our_words(caught.value, small_disk)
        assert words is not None, f"{name}: {caught.value!r}"
        assert words.startswith(f"disk full: no room to write in {small_disk} ("), words
        assert "free on its disk); free some space (or use --run on another disk)" in words
    assert in_our_words(RuntimeError("[enforce fail at inline_container.cc:1] . other"), None) is None


@pytest.mark.slow
def test_row08_a_full_disk_at_a_checkpoint_is_one_line_and_leaves_the_run(
    prepped: Path, small_disk: Path
) -> None:
    run = small_disk / "run"
    shutil.copytree(prepped, run, symlinks=True)  # base/tiny stays a link to the session's model
    _fill(small_disk, 150 * 1024)  # room for the metrics, not for a checkpoint (~450 KB)
    before = snapshot(run)
    proc = grpo_cli("grpo", "--run", str(run), *TINY_GRPO, "--max-steps", "3", "--save-steps", "1")
    assert proc.returncode == 2, proc.stdout[-3000:]
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: disk full: no room to write in {run} ("), (
        proc.stdout
    )
    assert "Traceback" not in proc.stdout
    assert snapshot(run) == before  # no attempt folder, no metrics rows, config.yaml as it was, no lock


# ---- row 9: symlinks ----------------------------------------------------------------------------
def test_row09_a_symlink_loop_or_a_dangling_link_as_run_is_named(tmp_path: Path) -> None:
    """After 2.5 min: "FileExistsError: [Errno 17] File exists"."""
    loop, dangling = tmp_path / "loop", tmp_path / "dangling"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    dangling.symlink_to(tmp_path / "nowhere")
    before = snapshot(tmp_path)
    line, _ = refused(["prep", "gsm8k", "--run", loop])
    assert line == (
        f"error: run directory {loop} is a symlink loop (its links point at each other): remove the link or "
        "pass another --run"
    )
    line, _ = refused(["prep", "gsm8k", "--run", dangling])
    assert line == (
        f"error: run directory {dangling} is a symlink to {tmp_path / 'nowhere'}, which does not exist: "
        "create the target folder or pass another --run"
    )
    line, _ = refused(["grpo", "--run", loop / "sub"])
    assert "is a symlink loop" in line
    assert snapshot(tmp_path) == before


# ---- row 10: SIGTERM ---------------------------------------------------------------------------------
def test_row10_sigterm_asks_once_then_stops_at_once(capsys) -> None:
    """The training loop's handler: a first SIGTERM asks to stop after the step (as Ctrl-C), a second
    raises at once; both are real signals to this process, and the previous handlers come back."""
    from cli.run import signals
    from cli.train.live import Interrupt

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    interrupt = Interrupt()
    with signals.terminate_raises(), interrupt.installed():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs between bytecodes
        assert interrupt.requested and interrupt.signum == signal.SIGTERM
        assert capsys.readouterr().err.strip() == (
            "SIGTERM: saving a checkpoint after this step, then stopping (SIGTERM again to stop now, without "
            "saving this step)"
        )
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        assert signals.exit_code() == 143
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def _signal_after(proc: subprocess.Popen[str], marker: str, has: str, sig: int) -> tuple[str, float]:
    seen = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith(marker) and has in line:
                break
        time.sleep(0.5)
        proc.send_signal(sig)
        start = time.perf_counter()
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return "".join(seen) + rest, time.perf_counter() - start


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_row10_a_stop_signal_during_the_imports_waits_for_their_end(sig: int) -> None:
    """While torch and the trainers are first imported, a stop signal is held and delivered after: raised
    inside torch's import (C++ calling Python) it aborted the process (exit -6, seen in CI). Real signals to
    this process: the block runs to its end, then the command's own handler raises as it would have."""
    from cli.run import signals

    # Python's Ctrl-C handler, as a command run from a terminal has it (a background job of a script, as
    # in CI, starts with SIGINT ignored, and then the held signal is ignored too, as it would have been)
    ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        finished = []
        with signals.terminate_raises(), pytest.raises(KeyboardInterrupt) as stopped:
            with signals.deferred():
                os.kill(os.getpid(), sig)
                time.sleep(0.2)  # the handler runs between bytecodes: here it only notes the signal
                finished.append(True)
        assert finished == [True]
        assert isinstance(stopped.value, signals.Terminated) == (sig == signal.SIGTERM)
        assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    finally:
        signal.signal(signal.SIGINT, ctrl_c)


# A real stop signal at the start of the command's first `import torch` (where the abort was seen). Held, the
# import runs to its end (torch is in sys.modules at exit), then the command stops; not held, the handler
# raises inside the import (torch is missing at exit), and now and then the process aborts.
_STOP_AT_TORCH_IMPORT = (
    """
import os, signal, sys
sig = int(sys.argv.pop(1))
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal (CI's background job: ignored)
sent = []

def stop_once(event, args):
    if event == "import" and args[0] == "torch" and not sent:
        sent.append(sig)
        os.kill(os.getpid(), sig)

sys.addaudithook(stop_once)
"""
    + _RUN_AND_REPORT
)

FIRST_IMPORTS = {  # each command as far as its first heavy import, where the signal stops it
    "eval": ["eval", "--limit", "1", "--models", "base"],
    "filter": ["filter", "--limit", "2"],
    "export": ["export"],
    "chat": ["chat", "--prompt", "What is 7*6?"],
    "prep": ["prep", "gsm8k", "--source", str(SAMPLES / "gsm8k_train.jsonl"), "--limit", "64"],
    "doctor": ["doctor"],
    "sft-hf": ["sft", "--backend", "hf", "--max-steps", "1"],  # with a model other than tiny (below)
}


@pytest.mark.parametrize(
    ("command", "sig"),
    [*((c, signal.SIGTERM) for c in FIRST_IMPORTS), ("eval", signal.SIGINT)],
    ids=[*FIRST_IMPORTS, "eval-Ctrl-C"],
)
def test_row10_a_stop_signal_in_a_commands_first_import_waits_for_its_end(
    trained: Path, command: str, sig: int
) -> None:
    """eval, filter, export, chat, prep, doctor, and sft on hf with a model other than tiny, hold a stop
    signal through their first heavy import: 143 (130 for Ctrl-C) with the one line, no traceback, no abort,
    the run as it was."""
    args = [*FIRST_IMPORTS[command], *(["--run", str(trained)] if command != "doctor" else [])]
    if command == "sft-hf":  # the tiny model by its path: with `tiny`, torch came first in the hold already
        shutil.rmtree(trained / "sft")  # a run's adapters refuse another model
        args += ["--model", str((trained / "base" / "tiny").resolve())]
    before = snapshot(trained)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "modules.json"
        proc = subprocess.run(
            [sys.executable, "-c", _STOP_AT_TORCH_IMPORT, str(int(sig)), str(report), *args],
            cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=REFUSAL_SECONDS * 2,
        )  # fmt: skip
        out = proc.stdout + proc.stderr
        said = "terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted"
        assert proc.returncode == 128 + sig and out.splitlines()[-1] == said, out
        assert "Traceback" not in out
        assert "torch" in json.loads(report.read_text()), out  # its import ended: the signal waited for it
    assert snapshot(trained) == before


def test_row10_sigterm_while_loading_stops_with_one_line_and_releases_the_run(trained: Path) -> None:
    """Exit 143 with no line, and `.grpo.lock` left behind."""
    before = snapshot(trained)
    proc = _start("grpo", "--run", str(trained), *TINY_GRPO, "--max-steps", "2")
    out, seconds = _signal_after(proc, "grpo: loading", "", signal.SIGTERM)
    assert proc.returncode == 143, out
    assert out.splitlines()[-1] == "terminated (SIGTERM)", out
    assert "Traceback" not in out and seconds < REFUSAL_SECONDS
    assert snapshot(trained) == before  # no .grpo.lock, no attempt folder, config.yaml as it was


@pytest.mark.slow
def test_row10_sigterm_between_steps_saves_and_exits_143(prepped: Path, tmp_path: Path) -> None:
    """What `kill`, systemd, Slurm and Kubernetes send: it saves at the step's end as Ctrl-C does."""
    run = fresh_copy(prepped, tmp_path)
    proc = _start(
        "grpo", "--run", str(run), *TINY_GRPO, "--rewards", "_bad_rewards.slow", "--max-steps", "50"
    )
    out, seconds = _signal_after(proc, "grpo 2/", "", signal.SIGTERM)
    assert proc.returncode == 143, out[-3000:]
    assert seconds < REFUSAL_SECONDS, out[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith("interrupted at step")]
    assert len(lines) == 1 and "continue with `grpo grpo --resume" in lines[0], out[-3000:]
    entry = manifest(run)["stages"]["grpo"]
    step = entry["interrupted_at_step"]
    assert step >= 2 and (run / "grpo" / "checkpoints" / "attempt-1" / f"checkpoint-{step}").is_dir()
    assert (run / "grpo" / "adapter" / "adapter_model.safetensors").is_file()
    assert not (run / ".grpo.lock").exists()
    assert "Traceback" not in out


# ---- row 12: the rest ------------------------------------------------------------------------------
def test_row12_eval_is_refused_by_the_lock_in_seconds(trained: Path) -> None:
    """Refused after 69 s of loading."""
    holder = _holder(trained, "grpo grpo")
    try:
        before = snapshot(trained)
        line, _ = refused(["eval", "--run", trained, "--limit", "1"])
        assert f"is in use by `grpo grpo` (pid {holder.pid}" in line, line
        assert {k: v for k, v in snapshot(trained).items() if k != ".grpo.lock"} == {
            k: v for k, v in before.items() if k != ".grpo.lock"
        }
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()  # and its pipe closed


@pytest.mark.parametrize("command", ["grpo", "sft"])
def test_row12_a_model_path_that_is_not_there_is_refused_in_seconds(
    trained: Path, tmp_path: Path, command
) -> None:
    """After 175 s of loading. (A run with adapters refuses another model outright, so a run without.)"""
    shutil.rmtree(trained / "sft")
    before = snapshot(trained)
    line, _ = refused([command, "--run", trained, "--model", "./no-such-model", "--backend", "hf"])
    assert line == "error: model path ./no-such-model does not exist"
    assert snapshot(trained) == before


def test_row12_a_failed_first_prep_leaves_no_run_directory(tmp_path: Path, tiny_model_dir: Path) -> None:
    """ "nothing written", yet base/tiny and logs/ were left."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is x?", "answer": "a letter"}\n')
    run = tmp_path / "runs" / "first"
    proc = grpo_cli("prep", "gsm8k", "--source", str(bad), "--model", str(tiny_model_dir), "--run", str(run))
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "nothing written" in errors[0], proc.stdout
    assert not (tmp_path / "runs").exists()  # neither the run nor the folder made for it


def test_a_prep_that_fails_half_way_leaves_the_data_as_it_was(trained: Path) -> None:
    """A failed command changes nothing: here the warm-up set cannot be written (a folder is in its way)
    after the new train.parquet was, and data/ must come back whole."""
    (trained / "data" / "sft.parquet").mkdir()
    before = snapshot(trained)
    proc = grpo_cli("prep", "dapo", "--run", str(trained))
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stdout
    assert errors[0].startswith("error: Is a directory:") or "sft.parquet" in errors[0], errors[0]
    assert snapshot(trained) == before


@pytest.mark.slow
def test_row12_a_failed_first_prep_of_the_tiny_model_leaves_nothing(tmp_path: Path) -> None:
    """`--model tiny` builds base/tiny inside the new run before the rows are filtered."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is x?", "answer": "a letter"}\n')
    proc = grpo_cli("prep", "gsm8k", "--source", str(bad), "--model", "tiny", "--run", str(tmp_path / "run"))
    assert proc.returncode == 2 and "nothing written" in proc.stdout, proc.stdout
    assert not (tmp_path / "run").exists()


def test_lock_made_run_is_removed_only_when_the_command_fails(tmp_path: Path) -> None:
    """In-process: hold(create=True) makes the folder; a failed command removes it (and the empty parent
    made for it), a successful one keeps it; a folder that existed is never removed."""
    made = tmp_path / "a" / "run"
    RunDir(made).hold("grpo prep", create=True)
    assert made.is_dir()
    (made / "data").mkdir()
    release_locks(failed=True)
    assert not (tmp_path / "a").exists()
    RunDir(made).hold("grpo prep", create=True)
    release_locks()
    assert made.is_dir() and not (made / ".grpo.lock").exists()
    RunDir(made).hold("grpo prep", create=True)
    release_locks(failed=True)
    assert made.is_dir()  # it existed before this command

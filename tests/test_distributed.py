"""cli/train/distributed.py: `grpo grpo --gpus N`, the relaunch under `accelerate launch`, for real, on CPU.

Two gloo processes train the tiny model for 2 steps (hf backend), each rank dumping the batches it
scored (``GRPO_REWARD_LOG``); the scores are then recomputed in this one process and must be
identical. The 2-process checkpoint is resumed by a single process. The launcher's errors (GPUs,
batch vs world size, DeepSpeed, the vLLM server) are checked in-process: one line, no model loaded.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from helpers import (
    REPO,
    assert_adapter,
    checkpoint_files,
    cli_env,
    fails_fast,
    fresh_copy,
    grpo_cli,
    manifest,
    metrics,
    ok,
)

from cli.run.rundir import RunDir
from cli.train import distributed
from cli.train.distributed import Plan


def grpo_cli_env(*args: str, env: dict[str, str], timeout: int = 420) -> subprocess.CompletedProcess[str]:
    return grpo_cli(*args, env=env, timeout=timeout)  # timeout: its allowance (tests/budget.py)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---- the real thing: 2 gloo processes, then resume in 1 ----------------------------------------
@pytest.mark.slow
def test_two_cpu_processes_then_resume_in_one(prepped: Path, tmp_path: Path) -> None:
    sft_run = fresh_copy(prepped, tmp_path / "sft")
    ok(grpo_cli_env("sft", "--run", str(sft_run), "--backend", "hf", "--max-steps", "2", env=cli_env()))
    run = fresh_copy(sft_run, tmp_path)  # GRPO continues this SFT adapter
    dumps = tmp_path / "scored"
    env = cli_env()
    env["GRPO_REWARD_LOG"] = str(dumps)
    args = ["--backend", "hf", "--gpus", "2", "--cpu", "--gens", "4", "--max-steps", "2"]
    args += ["--save-steps", "1", "--max-completion-length", "24"]
    out = ok(grpo_cli_env("grpo", "--run", str(run), *args, env=env))
    assert "2 processes (cpu-gloo" in out and "grpo done: 2 steps" in out
    # Only rank 0 talks: the banner and the summary once, not once per rank.
    assert out.count("grpo done:") == 1 and out.count("global batch 8") == 1

    # The generated accelerate config is in the run dir and is one accelerate itself accepts.
    from accelerate.commands.config.config_args import load_config_from_file

    acc_path = run / "grpo" / "accelerate.yaml"
    acc = load_config_from_file(str(acc_path))
    assert acc.num_processes == 2 and acc.use_cpu is True and acc.num_machines == 1

    # Rank-0-only writes: one metrics row per step, one manifest entry, one adapter.
    assert [r["step"] for r in metrics(run) if r["stage"] == "grpo"] == [1, 2]
    stage = manifest(run)["stages"]["grpo"]
    assert stage["distributed"]["world_size"] == 2 and stage["distributed"]["mode"] == "cpu-gloo"
    assert stage["world_size"] == 2 and stage["global_batch"] == 8
    assert_adapter(run / "grpo" / "adapter")
    ckpt = run / "grpo" / "checkpoints" / "attempt-1" / "checkpoint-2"
    assert (ckpt / "rng_state_0.pth").is_file() and (ckpt / "rng_state_1.pth").is_file()  # two ranks trained

    # Each rank scored its own share on its own CPU; one process scoring the same batches agrees exactly.
    from py_rewards import make_reward_funcs
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    rows = {r: [json.loads(x) for x in (dumps / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    assert len(rows[0]) == len(rows[1]) == 2 * 4  # 2 steps × 4 rewards per rank
    assert {json.dumps(x["prompts"]) for x in rows[0]}.isdisjoint({json.dumps(x["prompts"]) for x in rows[1]})
    for name in (
        "match_format_exactly",
        "match_format_approximately",
        "check_answer_accuracy",
        "check_numeric_extraction",
    ):
        batches = [x for r in (0, 1) for x in rows[r] if x["reward"] == name]
        fn = make_reward_funcs(spec, [name])[0][0]
        joined = fn(
            prompts=[p for b in batches for p in b["prompts"]],
            completions=[c for b in batches for c in b["completions"]],
            answer=[a for b in batches for a in b["answer"]],
        )
        ranked = [s for b in batches for s in b["scores"]]
        assert len(joined) == len(ranked) == 2 * 2 * 4
        assert all(_same(a, b) for a, b in zip(joined, ranked, strict=True)), name

    # Two real gloo ranks (not a silent single process), and they trained: the adapter moved.
    from safetensors.torch import load_file

    assert stage["distributed_type"] == "MULTI_CPU"
    trained = load_file(str(ckpt / "adapter_model.safetensors"))
    sft_w = load_file(str(run / "sft" / "adapter" / "adapter_model.safetensors"))
    assert sorted(trained) == sorted(sft_w)
    assert max(float((trained[k] - sft_w[k]).abs().max()) for k in trained) > 0

    # The 2-process checkpoint resumes in a single process.
    out = ok(grpo_cli_env("grpo", "--run", str(run), "--resume", "--max-steps", "3", env=cli_env()))
    assert "start: checkpoint checkpoint-2" in out and "processes" not in out.split("grpo done")[0]
    ckpt = run / "grpo" / "checkpoints" / "attempt-1" / "checkpoint-3"
    assert (ckpt / "adapter_model.safetensors").is_file()
    summary = [r for r in metrics(run) if r["stage"] == "grpo_summary"][-1]
    assert summary["world_size"] == 1 and summary["global_step"] == 3 and summary["from"] == "checkpoint"


@pytest.mark.slow
def test_two_nodes_sharing_a_run_dir(prepped: Path, tmp_path: Path) -> None:
    """`--num-nodes 2`: two launchers (one per "node", both on this host, like two machines on a shared
    filesystem) meet at --main-address and train as one 2-rank job; each node launches from its own
    config file, and only global rank 0 writes the run directory."""
    run = fresh_copy(prepped, tmp_path)
    port = _free_port()
    procs = []
    for node in (0, 1):
        args = ["grpo", "--run", str(run), "--backend", "hf", "--cpu", "--gpus", "1", "--num-nodes", "2"]
        args += ["--node-rank", str(node), "--main-address", f"127.0.0.1:{port}"]
        args += ["--gens", "4", "--max-steps", "2", "--max-completion-length", "16", "--save-steps", "2"]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "cli", *args],
                cwd=REPO,
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        outs = [p.communicate()[0] for p in procs]
    finally:  # also when the per-test timeout interrupts a hang (a node waiting for the other forever)
        for p in procs:
            p.kill()  # no-op once it has exited
    assert [p.returncode for p in procs] == [0, 0], outs
    from accelerate.commands.config.config_args import load_config_from_file

    for node in (0, 1):
        acc = load_config_from_file(str(run / "grpo" / f"accelerate.node{node}.yaml"))
        assert (acc.machine_rank, acc.num_machines, acc.num_processes) == (node, 2, 2)
        assert (acc.main_process_ip, acc.main_process_port) == ("127.0.0.1", port)
    assert "grpo done: 2 steps" in outs[0] and "global batch 8" in outs[0]
    assert "grpo 1/2" not in outs[1] and "grpo done" not in outs[1]  # node 1's rank is quiet
    assert [r["step"] for r in metrics(run) if r["stage"] == "grpo"] == [1, 2]
    stage = manifest(run)["stages"]["grpo"]
    assert stage["distributed"]["num_nodes"] == 2 and stage["distributed_type"] == "MULTI_CPU"
    assert stage["world_size"] == 2
    ckpt = run / "grpo" / "checkpoints" / "attempt-1" / "checkpoint-2"
    assert (ckpt / "rng_state_0.pth").is_file() and (ckpt / "rng_state_1.pth").is_file()
    assert_adapter(run / "grpo" / "adapter")


# ---- launcher errors: one line, before anything loads ------------------------------------------
def test_gpus_without_a_gpu_says_so(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--backend", "hf", "--gpus", "2"])
    assert "no CUDA GPU" in line and "--cpu" in line


def test_world_size_must_hold_whole_groups(tmp_path: Path) -> None:
    args = ["grpo", "--run", str(tmp_path / "r"), "--backend", "hf", "--cpu", "--gens", "4"]
    line = fails_fast([*args, "--gpus", "3", "--batch-size", "2"])
    assert "world size 3 × --batch-size 2 = 6" in line and "use --batch-size 4" in line
    # 2 processes × 2 completions = one group of 4 across the ranks: allowed (fails later, on the data).
    line = fails_fast([*args, "--gpus", "2", "--batch-size", "2"])
    assert "grpo prep" in line


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--deepspeed", "zero4"], "choose zero2 or zero3"),
        (["--cpu", "--fsdp"], "need GPUs"),
        (["--cpu", "--deepspeed", "zero2"], "need GPUs"),
        (["--deepspeed", "zero2", "--fsdp"], "choose one"),
        (["--cpu", "--num-nodes", "2"], "--main-address"),
        (
            ["--cpu", "--num-nodes", "2", "--node-rank", "2", "--main-address", "10.0.0.1:29500"],
            "--node-rank 2",
        ),
        (["--cpu", "--num-nodes", "2", "--main-address", "10.0.0.1:http"], "not a number"),
    ],
)
def test_bad_launch_flags(tmp_path: Path, extra: list[str], expect: str) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--backend", "hf", "--gpus", "2", *extra])
    assert expect in line


def test_deepspeed_missing(tmp_path: Path) -> None:
    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed")
    line = fails_fast(
        ["grpo", "--run", str(tmp_path / "r"), "--backend", "hf", "--gpus", "2", "--deepspeed", "zero3"],
    )
    assert "DeepSpeed is not installed" in line


def _checkpoint(run: Path, step: int, *, deepspeed: bool) -> Path:
    """A checkpoint folder as transformers lays it out (DeepSpeed adds global_step<N>/)."""
    ckpt = checkpoint_files(run / "grpo" / "checkpoints" / f"checkpoint-{step}", step)
    (ckpt / ("global_step2" if deepspeed else "optimizer.pt")).mkdir()
    return ckpt


def test_deepspeed_cannot_resume_a_plain_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "r"
    _checkpoint(run, 2, deepspeed=False)
    args = ["grpo", "--run", str(run), "--backend", "hf", "--resume", "--deepspeed", "zero2"]
    line = fails_fast(args)
    assert "checkpoint-2 was not written under DeepSpeed" in line and "without --deepspeed" in line


def test_resuming_a_deepspeed_checkpoint_without_it_says_what_stays_behind(tmp_path: Path, capsys) -> None:
    ckpt = _checkpoint(tmp_path, 2, deepspeed=True)
    distributed.check_resume(ckpt, Plan())
    assert "optimizer state stays behind" in capsys.readouterr().err
    distributed.check_resume(ckpt, Plan(deepspeed="zero2"))  # the same mode: nothing to say
    assert capsys.readouterr().err == ""


def test_unsloth_is_one_gpu(tmp_path: Path) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--backend", "unsloth", "--gpus", "2", "--cpu"])
    assert "--backend hf" in line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_vllm_server_unreachable(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there any more
    line = fails_fast(
        ["grpo", "--run", str(tmp_path / "r"), "--backend", "hf", "--vllm-server", f"127.0.0.1:{port}"],
    )
    assert f"vLLM server http://127.0.0.1:{port} is not reachable" in line and "grpo serve" in line
    assert "expected HOST:PORT" in fails_fast(["grpo", "--run", str(tmp_path / "r"), "--vllm-server", ":80"])


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(self.status if self.path.rstrip("/") == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_vllm_server_reachable_but_vllm_missing(tmp_path: Path, health_server: str) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed")
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--vllm-server", health_server])
    assert "vLLM is not installed" in line and "grpo[vllm]" in line


def test_vllm_server_answering_an_error(tmp_path: Path, health_server: str, monkeypatch) -> None:
    monkeypatch.setattr(_Health, "status", 503)
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--vllm-server", health_server])
    assert "HTTP 503" in line


# ---- the pieces --------------------------------------------------------------------------------
def test_one_process_trains_on_one_gpu(monkeypatch) -> None:
    """A single process that sees several GPUs keeps the first (Trainer would wrap the model in
    nn.DataParallel, which TRL refuses: `grpo sft` failed so on a 2-GPU H200 machine)."""
    from cli.train import distributed

    monkeypatch.delenv(distributed.LAUNCHED_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    note = distributed.one_gpu_per_process()
    assert note is not None and "2 GPUs visible" in note and "GPU 2" in note
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    assert distributed.one_gpu_per_process() is None  # one left: nothing to do
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert distributed.one_gpu_per_process() is None  # none visible (CPU)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv(distributed.LAUNCHED_ENV, "1")  # a rank under accelerate launch: leave it
    assert distributed.one_gpu_per_process() is None and os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_accelerate_configs_load_in_accelerate(tmp_path: Path) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    cases = {
        "ddp": Plan(gpus=2),
        "zero2": Plan(gpus=4, deepspeed="zero2"),
        "zero3": Plan(gpus=2, deepspeed="zero3"),
        "fsdp": Plan(gpus=8, fsdp=True),
        "nodes": Plan(gpus=8, num_nodes=2, node_rank=1, main_address="10.1.2.3:29400"),
        "cpu": Plan(gpus=2, cpu=True),
    }
    for name, plan in cases.items():
        path = distributed.write_config(tmp_path / f"{name}.yaml", plan, "bf16")
        cfg = load_config_from_file(str(path))
        assert cfg.num_processes == plan.world, name
        assert cfg.num_machines == plan.num_nodes and cfg.machine_rank == plan.node_rank
    raw = {n: yaml.safe_load((tmp_path / f"{n}.yaml").read_text()) for n in cases}
    assert raw["ddp"]["distributed_type"] == "MULTI_GPU" and raw["ddp"]["mixed_precision"] == "bf16"
    assert raw["zero2"]["deepspeed_config"]["zero_stage"] == 2
    assert raw["zero3"]["deepspeed_config"]["zero3_init_flag"] is True
    assert raw["zero3"]["deepspeed_config"]["zero3_save_16bit_model"] is True
    assert raw["fsdp"]["fsdp_config"]["fsdp_version"] == 2
    assert raw["nodes"]["main_process_ip"] == "10.1.2.3" and raw["nodes"]["main_process_port"] == 29400
    assert raw["cpu"]["use_cpu"] is True and raw["cpu"]["mixed_precision"] == "no"


def test_suggested_batch_always_holds_whole_groups() -> None:
    for gens in range(2, 17):
        for world in range(1, 9):
            b = distributed.suggest_batch(gens, world)
            distributed.check_batch(b, gens, world)  # does not raise
            assert b <= gens


def test_child_env_splits_the_cores(monkeypatch) -> None:
    monkeypatch.delenv("PY_REWARDS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = distributed.child_env(Plan(gpus=2, cpu=True))
    assert env[distributed.LAUNCHED_ENV] == "1"
    assert int(env["PY_REWARDS_NUM_THREADS"]) == max(1, (os.cpu_count() or 1) // 2)
    assert env["OMP_NUM_THREADS"] == env["PY_REWARDS_NUM_THREADS"]


def test_only_rank_zero_writes_the_run_dir(tmp_path: Path, monkeypatch) -> None:
    from cli.config.schema import Config

    monkeypatch.setenv("RANK", "1")
    rd = RunDir(tmp_path / "r")
    rd.save_config(Config())
    rd.log_metrics({"stage": "grpo", "step": 1})
    rd.record_stage("grpo", {"steps": 1})
    assert not (tmp_path / "r" / "config.yaml").exists()
    assert not rd.metrics_path.exists() and not rd.manifest_path.exists()
    monkeypatch.setenv("RANK", "0")
    rd.log_metrics({"stage": "grpo", "step": 1})
    assert rd.metrics_path.exists()


@pytest.mark.slow
def test_ctrl_c_saves_one_checkpoint_across_ranks(prepped: Path, tmp_path: Path) -> None:
    """Ctrl-C at the terminal reaches the parent's process group: the ranks stop after the same step,
    rank 0 writes one checkpoint and says so, nobody prints a traceback, and the exit code is 130."""
    import signal

    run = fresh_copy(prepped, tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "grpo",
            "--run",
            str(run),
            "--backend",
            "hf",
            "--gpus",
            "2",
            "--cpu",
            "--max-steps",
            "200",
            "--max-completion-length",
            "16",
            "--save-steps",
            "0",
        ],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("grpo 2/200"):
                os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
                break
        seen.append(proc.stdout.read())
        returncode = proc.wait()
    finally:  # also when the per-test timeout interrupts a hang: no rank is left running
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()  # an open pipe is a ResourceWarning, an error under filterwarnings = error
    assert returncode == 130
    out = "".join(seen)
    assert "Traceback" not in out and "ChildFailedError" not in out and "error:" not in out
    assert out.count("interrupted at step") == 1
    saved = sorted((run / "grpo" / "checkpoints" / "attempt-1").glob("checkpoint-*"))
    assert len(saved) == 1 and (saved[0] / "adapter_model.safetensors").is_file()
    assert f"--resume --run {run}" in out


@pytest.mark.slow
def test_no_rank_outlives_a_killed_parent(prepped: Path, tmp_path: Path) -> None:
    """SIGKILL (an OOM kill, `kill -9`) gives the parent no chance to stop the launcher, which runs in
    its own session: the kernel's parent-death signal must still take every rank down."""
    import psutil

    run = fresh_copy(prepped, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "grpo", "--run", str(run), "--backend", "hf", "--gpus", "2", "--cpu"]
        + ["--max-steps", "100000", "--max-completion-length", "16", "--save-steps", "0"],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("grpo 1/100000"):
            break
    # Keep reading so that no rank blocks on a full pipe (it would then look alive, or hang, for that).
    reader = threading.Thread(target=proc.stdout.read, daemon=True)
    reader.start()
    family = psutil.Process(proc.pid).children(recursive=True)
    assert len(family) >= 3  # the launcher (torchrun's agent) and its two ranks
    proc.kill()
    proc.wait(timeout=30)
    gone, alive = psutil.wait_procs(family, timeout=45)
    for p in alive:  # do not leave them running if the check fails
        p.kill()
    reader.join(timeout=30)  # every writer is gone: the read ends, and the pipe can be closed
    if not reader.is_alive():
        proc.stdout.close()
    assert not alive, f"{len(alive)} process(es) outlived the killed parent"

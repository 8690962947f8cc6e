"""Scale-out: `grpo grpo --gpus N` relaunches itself under `accelerate launch`.

No home-made distribution: the parent process resolves and checks everything cheap (flags, rewards,
data, GPUs, DeepSpeed, the vLLM server), writes ``<run>/grpo/accelerate.yaml`` (``accelerate.node<R>.yaml``
with several nodes, which may share the run directory) — the same shapes as TRL's ``accelerate_configs``
(multi_gpu, zero2, zero3, fsdp2) — and runs

    python -m accelerate.commands.launch --config_file <run>/grpo/accelerate.yaml -m cli grpo <same args>

with ``GRPO_LAUNCHED=1`` so the children train instead of relaunching. Each rank generates and scores
its own share of the completions on its own CPU (the Rust reward core: per-completion scores, so the
split changes nothing); TRL gathers the rewards to compute group advantages. Only rank 0 writes to
the run directory (config, manifest, metrics, adapters); the trainer's checkpoints are written by
transformers, rank-aware.

``--cpu`` runs the N processes on the CPU over gloo (accelerate starts them through torchrun from a
MULTI_GPU config, and the trainer's ``use_cpu`` makes them gloo ranks): the data-parallel path tested on
machines without GPUs. FSDP and DeepSpeed need GPUs (on CPU ranks accelerate falls back to DDP).

Long because: the plan, its checks, the accelerate config and the launcher are one path from
``--gpus N`` to the ranks; split, the checks would sit away from the config they check.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.config.command_options import LaunchOptions
from cli.run import signals
from cli.run.ranks import LAUNCHED_ENV, launched

DEEPSPEED_STAGES = ("zero2", "zero3")
DEFAULT_PORT = 29500


def _gpus_on_machine() -> list[str]:
    """GPU indices the NVIDIA driver lists (no CUDA call: it would freeze CUDA_VISIBLE_DEVICES)."""
    root = Path("/proc/driver/nvidia/gpus")
    try:
        return [str(i) for i in range(len(list(root.iterdir())))]
    except OSError:
        return []


def one_gpu_per_process() -> str | None:
    """A stage running as one process where several GPUs are visible trains on the first of them.

    transformers' Trainer would otherwise wrap the model in ``nn.DataParallel`` (which TRL's trainers
    refuse: seen on a 2-GPU H200 machine, `grpo sft` failed). Several GPUs are used through
    ``grpo grpo --gpus N``. Must run before the first CUDA call. Returns the note to print, if any.
    """
    if launched():
        return None
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d.strip() for d in raw.split(",") if d.strip()] if raw is not None else _gpus_on_machine()
    if len(devices) <= 1:
        return None
    os.environ["CUDA_VISIBLE_DEVICES"] = devices[0]
    return (
        f"{len(devices)} GPUs visible: this stage trains on GPU {devices[0]} "
        "(grpo grpo --gpus N spreads GRPO over several; CUDA_VISIBLE_DEVICES picks one)"
    )


class Plan(LaunchOptions):
    """How `grpo grpo` spreads over processes: the launcher flags (declared in :class:`LaunchOptions`)
    and what they mean."""

    @property
    def world(self) -> int:
        return self.gpus * self.num_nodes

    @property
    def wanted(self) -> bool:
        """Does this plan need `accelerate launch` at all?"""
        return self.world > 1 or bool(self.deepspeed) or self.fsdp

    @property
    def flag(self) -> str:
        """The flag that asked for several processes, for messages."""
        if self.world > 1:
            return f"--gpus {self.gpus}" if self.num_nodes == 1 else f"--num-nodes {self.num_nodes}"
        return f"--deepspeed {self.deepspeed}" if self.deepspeed else "--fsdp"

    @property
    def mode(self) -> str:
        if self.deepspeed:
            return self.deepspeed
        if self.fsdp:
            return "fsdp"
        return "cpu-gloo" if self.cpu else "ddp"

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "world_size": self.world,
            "processes_per_node": self.gpus,
            "num_nodes": self.num_nodes,
            "node_rank": self.node_rank,
        }


def parse_host_port(text: str, flag: str, default_port: int | None = None) -> tuple[str, int]:
    """``HOST:PORT`` (or ``http://HOST:PORT``) → (host, port), with a clear error otherwise."""
    raw = text.strip()
    for prefix in ("http://", "https://"):
        if raw.startswith(prefix):
            raw = raw[len(prefix) :]
    raw = raw.rstrip("/")
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        host, port_text = raw, ""
    if not host:
        raise GrpoError(f"{flag} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    if not port_text:
        if default_port is None:
            raise GrpoError(f"{flag} {text!r}: expected HOST:PORT, e.g. {host}:8000")
        return host, default_port
    try:
        port = int(port_text)
    except ValueError:
        raise GrpoError(f"{flag} {text!r}: the port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise GrpoError(f"{flag} {text!r}: port {port} is out of range (1-65535)")
    return host, port


def server_url(text: str) -> str:
    host, port = parse_host_port(text, "--vllm-server")
    return f"http://{host}:{port}"


def check_vllm_server(url: str, timeout: float = 5.0) -> None:
    """The TRL vLLM server answers ``GET /health`` with 200 once its engine is up."""
    import urllib.error  # here, not at the top: urllib.request costs every `grpo` start ~20 ms
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:  # noqa: S310 - http(s) only
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GrpoError(
            f"vLLM server {url} is not reachable ({reason}): start it with `grpo serve` "
            "(or `trl vllm-serve --model ...`) and wait for 'Application startup complete'"
        ) from None
    if status != 200:
        raise GrpoError(
            f"vLLM server {url} answered /health with HTTP {status}: is it a `trl vllm-serve` server, "
            "and has it finished loading?"
        )


def require_vllm(flag: str) -> None:
    if importlib.util.find_spec("vllm") is None:
        raise GrpoError(
            f"{flag}: vLLM is not installed here (TRL's client syncs the weights to the server through "
            "vLLM's NCCL group, so the trainer needs it too): pip install 'grpo[vllm]'"
        )


def suggest_batch(gens: int, world: int) -> int:
    """The smallest per-device batch whose global batch (× world) holds whole groups of ``gens``."""
    return gens // math.gcd(gens, world)


def check_batch(batch: int, gens: int, world: int, rollout_steps: int = 1) -> None:
    """TRL scores whole groups: the completions of one generation round (per-device batch × world ×
    steps_per_generation, which defaults to gradient accumulation) must be a multiple of the group size."""
    total = batch * world * rollout_steps
    if total % gens:
        if world == 1:
            raise GrpoError(
                f"--batch-size {batch} is not a multiple of --gens {gens}: TRL scores whole groups per "
                f"device batch; use --batch-size {gens * max(1, batch // gens)} or leave it unset (= --gens)"
            )
        good = suggest_batch(gens, world)
        raise GrpoError(
            f"world size {world} × --batch-size {batch}"
            f"{f' × {rollout_steps} steps per generation' if rollout_steps > 1 else ''}"
            f" = {total} completions per rollout "
            f"is not a multiple of --gens {gens}: TRL needs whole groups across the {world} processes; "
            f"use --batch-size {good} (or a multiple of it)"
        )


def check_plan(plan: Plan) -> None:
    """Everything about the launcher flags that can be checked before any process starts."""
    if plan.deepspeed and plan.deepspeed not in DEEPSPEED_STAGES:
        raise GrpoError(f"--deepspeed {plan.deepspeed!r}: choose zero2 or zero3")
    if plan.cpu and (plan.deepspeed or plan.fsdp):
        # Seen with accelerate 1.15: the trainer's CPU ranks run plain gloo DDP whatever the config says,
        # while transformers still believes ZeRO-3 is on — a test of nothing, or a crash.
        raise GrpoError(
            "--deepspeed/--fsdp need GPUs: on the CPU accelerate runs plain data parallel (use --cpu alone)"
        )
    if plan.deepspeed and plan.fsdp:
        raise GrpoError("--deepspeed and --fsdp both shard the model: choose one")
    if plan.num_nodes < 1 or plan.gpus < 1:
        raise GrpoError("--gpus and --num-nodes must be at least 1")
    if not 0 <= plan.node_rank < plan.num_nodes:
        raise GrpoError(f"--node-rank {plan.node_rank} is outside 0..{plan.num_nodes - 1} (--num-nodes)")
    if plan.num_nodes > 1 and not plan.main_address:
        raise GrpoError(
            f"--num-nodes {plan.num_nodes} needs --main-address HOST:PORT (node 0's address, the same on "
            "every node) and --node-rank on each node"
        )
    if plan.main_address:
        parse_host_port(plan.main_address, "--main-address", DEFAULT_PORT)
    if plan.deepspeed and importlib.util.find_spec("deepspeed") is None:
        raise GrpoError(
            f"--deepspeed {plan.deepspeed}: DeepSpeed is not installed: pip install 'grpo[deepspeed]'"
        )
    if importlib.util.find_spec("accelerate") is None:
        raise GrpoError("--gpus needs accelerate: pip install accelerate")
    if not plan.cpu:
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if have == 0:
            raise GrpoError(
                f"--gpus {plan.gpus}: no CUDA GPU is visible here (add --cpu to run {plan.gpus} CPU "
                "processes over gloo, e.g. to try the distributed path)"
            )
        if have < plan.gpus:
            raise GrpoError(
                f"--gpus {plan.gpus}: only {have} CUDA GPU(s) visible here (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
            )


def check_resume(checkpoint: Path, plan: Plan) -> None:
    """A checkpoint resumes on any number of processes, but DeepSpeed keeps the optimizer its own way.

    DeepSpeed writes its (partitioned) optimizer state under ``global_step*/`` and can only resume from
    such a folder; a run without DeepSpeed reads ``optimizer.pt`` and cannot use DeepSpeed's.
    """
    from cli.common import err_console

    by_deepspeed = any(checkpoint.glob("global_step*"))
    if plan.deepspeed and not by_deepspeed:
        raise GrpoError(
            f"--resume --deepspeed {plan.deepspeed}: {checkpoint.name} was not written under DeepSpeed "
            "(no global_step* folder): resume it without --deepspeed"
        )
    if by_deepspeed and not plan.deepspeed:
        err_console.print(
            f"[yellow]note:[/] {checkpoint.name} was written under DeepSpeed: without --deepspeed its "
            "optimizer state stays behind (the adapter, step and schedule carry on; AdamW starts afresh)"
        )


def accelerate_config(plan: Plan, mixed_precision: str = "bf16") -> dict[str, Any]:
    """An accelerate config of the same shape as TRL's examples (multi_gpu / zero2 / zero3 / fsdp2)."""
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        # --cpu: accelerate only starts several local processes (through torchrun) from a MULTI_GPU
        # config; use_cpu here and in the trainer turns them into gloo CPU ranks.
        "distributed_type": "MULTI_GPU",
        "downcast_bf16": "no",
        "machine_rank": plan.node_rank,
        "main_training_function": "main",
        "mixed_precision": "no" if plan.cpu else mixed_precision,
        "num_machines": plan.num_nodes,
        "num_processes": plan.world,
        "rdzv_backend": "static",
        "same_network": True,
        "tpu_env": [],
        "tpu_use_cluster": False,
        "tpu_use_sudo": False,
        "use_cpu": plan.cpu,
    }
    if not plan.cpu:
        cfg["gpu_ids"] = "all"
    if plan.num_nodes > 1 and plan.main_address:
        host, port = parse_host_port(plan.main_address, "--main-address", DEFAULT_PORT)
        cfg["main_process_ip"] = host
        cfg["main_process_port"] = port
    if plan.deepspeed:
        stage = int(plan.deepspeed[-1])
        cfg["distributed_type"] = "DEEPSPEED"
        cfg["deepspeed_config"] = {
            "deepspeed_multinode_launcher": "standard",
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": stage == 3,
            "zero_stage": stage,
            **({"zero3_save_16bit_model": True} if stage == 3 else {}),
        }
        cfg.pop("gpu_ids", None)
    elif plan.fsdp:
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {
            "fsdp_activation_checkpointing": False,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": False,
            "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            "fsdp_version": 2,
        }
        cfg.pop("gpu_ids", None)
    return cfg


def write_config(path: Path, plan: Plan, mixed_precision: str) -> Path:
    import yaml

    from cli.run.atomic import atomic_write_text

    header = (
        "# Written by `grpo grpo` for this launch (accelerate launch --config_file <this file>).\n"
        f"# mode: {plan.mode}, {plan.world} process(es) on {plan.num_nodes} node(s)\n"
    )
    atomic_write_text(path, header + yaml.safe_dump(accelerate_config(plan, mixed_precision), sort_keys=True))
    return path


def child_env(plan: Plan) -> dict[str, str]:
    """The children's environment: marked as launched, CPU threads shared out between local ranks."""
    env = dict(os.environ)
    env[LAUNCHED_ENV] = "1"
    cores = os.cpu_count() or 1
    per_rank = str(max(1, cores // plan.gpus))
    # Each rank scores its own completions with the Rust core: split the cores instead of letting
    # every rank's pool take all of them.
    env.setdefault("PY_REWARDS_NUM_THREADS", per_rank)
    if plan.cpu:
        env.setdefault("OMP_NUM_THREADS", per_rank)
        env["ACCELERATE_USE_CPU"] = "true"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def launch_command(config_path: Path, argv: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(config_path),
        "-m",
        "cli",
        *argv,
    ]


def command_argv() -> list[str]:
    """This command's own arguments (``grpo ...``), to hand to the launched processes unchanged."""
    args = sys.argv[1:]
    if not args or args[0] != "grpo":
        raise GrpoError("cannot relaunch: run `grpo grpo ...` (or `python -m cli grpo ...`) from a shell")
    return args


INTERRUPTED = 130  # exit code of a run stopped with Ctrl-C (checkpoint saved)
STOPPED = signals.EXIT_CODES  # ... with Ctrl-C or SIGTERM (128 + the signal's number: 130, 143)


def launch(config_path: Path, plan: Plan, argv: list[str]) -> int:
    """Run the training under `accelerate launch`; return its exit code (130 after a Ctrl-C, 143 after
    SIGTERM).

    The launcher runs in its own session, so a Ctrl-C at the terminal reaches only this process; it is
    passed on to the training ranks alone, and so is SIGTERM (what `kill`, systemd, Slurm and Kubernetes
    send). torchrun's agent, if signalled itself, would kill the ranks and print a traceback; this way
    every rank saves the checkpoint after the current step and exits, and the user sees one line.
    """
    cmd = launch_command(config_path, argv)
    proc = subprocess.Popen(cmd, env=child_env(plan), start_new_session=True, preexec_fn=_die_with_parent())
    stops: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        stops.append(signum)
        _signal_ranks(proc.pid, signum)

    def terminate(signum: int, frame: Any) -> None:
        # Its own session means the launcher would outlive us: take the whole group down with us.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, terminate)
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # pragma: no cover - only if wait() itself failed
            proc.kill()
    return 128 + stops[-1] if stops and code in (0, *STOPPED) else code


def _die_with_parent() -> Any:
    """A ``preexec_fn`` that has the kernel SIGTERM the launcher when this process dies (Linux).

    The launcher runs in its own session (see ``launch``), so nothing else would take it down if this
    process were SIGKILLed (an OOM kill, a scheduler's hard kill, `kill -9`): the ranks would train on,
    orphaned, holding the GPUs. torchrun's agent turns SIGTERM into stopping its ranks.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:  # between fork and exec: keep it to system calls
        prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _signal_ranks(launcher_pid: int, sig: int) -> None:
    """Send ``sig`` to the training processes under the launcher (not to the launcher itself)."""
    import psutil

    try:
        ranks = psutil.Process(launcher_pid).children(recursive=True)
    except psutil.Error:
        return
    for child in ranks:
        with contextlib.suppress(psutil.Error):
            child.send_signal(sig)

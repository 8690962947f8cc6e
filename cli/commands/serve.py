"""Serve the run's base model with TRL's vLLM server, for `grpo grpo --vllm-server HOST:PORT`.

Runs `trl vllm-serve` on the GPUs this process sees (--tensor-parallel / --data-parallel); the trainer
pushes its LoRA-merged weights to the server after every optimizer step, so serving the base model is
right even when the run has an SFT adapter. Give the server and the trainer different GPUs:

  CUDA_VISIBLE_DEVICES=0 grpo serve --port 8000
  CUDA_VISIBLE_DEVICES=1,2 grpo grpo --gpus 2 --vllm-server 127.0.0.1:8000

Example: grpo serve --run runs/qwen --port 8000
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import Annotated

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    ModelOpt,
    RunOpt,
    err_console,
)
from cli.errors import handle_errors
from cli.rundir import RunDir, dry_run_exit, resolve_config

SERVE = "Server"


def serve_command(
    model_path: str,
    *,
    host: str,
    port: int,
    tensor_parallel: int,
    data_parallel: int,
    gpu_memory_utilization: float,
    max_model_len: int,
) -> list[str]:
    # This interpreter's TRL (a `trl` script on PATH may belong to another environment). `trl.cli` is a
    # package without __main__ in TRL 1.15: `python -m trl.cli` fails (seen on the H200).
    return [
        sys.executable,
        "-m",
        "trl.cli.main",
        "vllm-serve",
        "--model",
        model_path,
        "--host",
        host,
        "--port",
        str(port),
        "--tensor_parallel_size",
        str(tensor_parallel),
        "--data_parallel_size",
        str(data_parallel),
        "--gpu_memory_utilization",
        f"{gpu_memory_utilization:g}",
        "--max_model_len",
        str(max_model_len),
    ]


@handle_errors
def serve(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    model: ModelOpt = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on.", rich_help_panel=SERVE)
    ] = "0.0.0.0",  # noqa: S104 - a server for trainers on other hosts
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="HTTP port.", rich_help_panel=SERVE)
    ] = 8000,
    tensor_parallel: Annotated[
        int,
        typer.Option("--tensor-parallel", min=1, help="GPUs per model replica.", rich_help_panel=SERVE),
    ] = 1,
    data_parallel: Annotated[
        int, typer.Option("--data-parallel", min=1, help="Model replicas.", rich_help_panel=SERVE)
    ] = 1,
    gpu_memory_utilization: Annotated[
        float,
        typer.Option(
            "--gpu-memory-utilization",
            min=0.05,
            max=0.99,
            help="Share of each GPU vLLM may take.",
            rich_help_panel=SERVE,
        ),
    ] = 0.9,
) -> None:
    rd = RunDir(run)
    cfg = resolve_config(rd, config_file=config, overrides={"model": model}, dry_run=False)
    from cli.models import resolve_model

    if dry_run:
        # The resolved config and the exact server command, with the model as the run names it
        # (nothing is built or started).
        shown_cmd = serve_command(
            str(cfg.model),
            host=host,
            port=port,
            tensor_parallel=tensor_parallel,
            data_parallel=data_parallel,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=cfg.max_seq_length,
        )
        dry_run_exit(rd, config, "serve", {"command": shown_cmd})
    if importlib.util.find_spec("vllm") is None:
        raise GrpoError("grpo serve: vLLM is not installed: pip install 'grpo[vllm]' (Linux + CUDA)")
    if importlib.util.find_spec("trl") is None:
        raise GrpoError("grpo serve: TRL is not installed: pip install 'grpo[train]'")
    cmd = serve_command(
        resolve_model(cfg, rd),
        host=host,
        port=port,
        tensor_parallel=tensor_parallel,
        data_parallel=data_parallel,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=cfg.max_seq_length,
    )
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104
    err_console.print(
        f"serving {cfg.model} for `grpo grpo --vllm-server {shown}:{port}` — {' '.join(cmd)}", soft_wrap=True
    )
    try:
        code = subprocess.call(cmd)
    except KeyboardInterrupt:
        code = 130
    if code not in (0, 130):
        raise GrpoError(f"trl vllm-serve exited with code {code} (its messages are above)", code=code)
    raise typer.Exit(code)

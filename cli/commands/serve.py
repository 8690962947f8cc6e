"""Serve the run's base model with TRL's vLLM server, for `grpo grpo --vllm-server HOST:PORT`.

Runs `trl vllm-serve` on the GPUs this process sees (--tensor-parallel / --data-parallel); the trainer
pushes its LoRA-merged weights to the server after every optimizer step, so serving the base model is
right even when the run has an SFT adapter. Give the server and the trainer different GPUs:

  CUDA_VISIBLE_DEVICES=0 grpo serve --port 8000
  CUDA_VISIBLE_DEVICES=1,2 grpo grpo --gpus 2 --vllm-server 127.0.0.1:8000

Example: grpo serve --run runs/qwen --port 8000
"""

from __future__ import annotations

import collections
import importlib.util
import re
import subprocess
import sys
import threading

import typer

from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, RunOpt, err_console
from cli.config.command_options import ServeOptions
from cli.config.options import ModelOpt, typed_options
from cli.errors import handle_errors
from cli.run import signals
from cli.run.rundir import RunDir, dry_run_exit, resolve_config


def serve_command(model_path: str, opts: ServeOptions, *, max_model_len: int) -> list[str]:
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
        opts.host,
        "--port",
        str(opts.port),
        "--tensor_parallel_size",
        str(opts.tensor_parallel),
        "--data_parallel_size",
        str(opts.data_parallel),
        "--gpu_memory_utilization",
        f"{opts.gpu_memory_utilization:g}",
        "--max_model_len",
        str(max_model_len),
    ]


@handle_errors
@typed_options(ServeOptions)
def serve(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    model: ModelOpt = None,
    *,
    opts: ServeOptions,
) -> None:
    rd = RunDir(run)
    cfg = resolve_config(rd, config_file=config, overrides={"model": model}, dry_run=False)
    from cli.models.resolve import resolve_model

    if dry_run:
        # The resolved config and the exact server command, with the model as the run names it
        # (nothing is built or started).
        shown_cmd = serve_command(str(cfg.model), opts, max_model_len=cfg.max_seq_length)
        dry_run_exit(rd, config, "serve", {"command": shown_cmd})
    if importlib.util.find_spec("vllm") is None:
        raise GrpoError("grpo serve: vLLM is not installed: pip install 'grpo[vllm]' (Linux + CUDA)")
    if importlib.util.find_spec("trl") is None:
        raise GrpoError("grpo serve: TRL is not installed: pip install 'grpo[train]'")
    cmd = serve_command(resolve_model(cfg, rd), opts, max_model_len=cfg.max_seq_length)
    shown = "127.0.0.1" if opts.host in ("0.0.0.0", "::") else opts.host  # noqa: S104
    err_console.print(
        f"serving {cfg.model} for `grpo grpo --vllm-server {shown}:{opts.port}` — {' '.join(cmd)}",
        soft_wrap=True,
    )
    code, missing = run_server(cmd)
    if code not in (0, *signals.EXIT_CODES):
        if missing:  # a partial vLLM install: its HTTP server imports more than its offline engine does
            raise GrpoError(
                f"trl vllm-serve exited with code {code}: Python module {missing!r} is missing (vLLM's HTTP "
                "server imports it; a partial vLLM install?): pip install 'grpo[vllm]' installs all it needs",
                code=code,
            )
        raise GrpoError(f"trl vllm-serve exited with code {code} (its messages are above)", code=code)
    raise typer.Exit(code)


_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def run_server(cmd: list[str]) -> tuple[int, str | None]:
    """Run the server, its stderr passed through line by line as it comes. Returns its exit code and, when it
    failed with a missing module among its last 50 lines, the last such module's name. Ctrl-C reaches the
    server too (one terminal); SIGTERM is passed on."""
    tail: collections.deque[str] = collections.deque(maxlen=50)
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1) as proc:
        stream = proc.stderr  # a pipe (never None here)

        def relay() -> None:
            for line in stream or ():
                sys.stderr.write(line)
                sys.stderr.flush()
                tail.append(line)

        reader = threading.Thread(target=relay, name="grpo-serve-stderr", daemon=True)
        reader.start()
        try:
            code = proc.wait()
        except KeyboardInterrupt as stop:
            if isinstance(stop, signals.Terminated):
                proc.terminate()
            proc.wait()
            code = signals.exit_code()
        reader.join(timeout=5)
    if code == 0:
        return code, None
    return code, next((m.group(1) for line in reversed(tail) if (m := _MISSING.search(line))), None)

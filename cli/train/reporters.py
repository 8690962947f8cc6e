"""Where `grpo grpo` also logs its rows (``grpo.report_to``): TensorBoard, SwanLab (seed 003), W&B.

The reporter's package is checked with the other cheap checks, before the run saves or loads anything:
a missing one is one line naming the package and the extra that installs it (docs/history.md "Hardening,
round 1": the trainer failed
on it after the model had loaded). Their files go inside the run directory: TensorBoard's event files to
``<run>/logs/tensorboard``, SwanLab's to ``<run>/logs/swanlog``. SwanLab runs in its local mode unless it
is given a key or a mode (``SWANLAB_API_KEY``, ``SWANLAB_MODE=online``): its cloud mode without a login
would stop the run to ask for one.
"""

from __future__ import annotations

import importlib.util
import os

from cli.common import GrpoError
from cli.run.rundir import RunDir

# report_to -> (module to import, how to install it)
PACKAGES: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "pip install 'grpo[tensorboard]'"),
    "swanlab": ("swanlab", "pip install 'grpo[swanlab]'"),
    "wandb": ("wandb", "pip install wandb"),
}


def check_reporter(report_to: str) -> None:
    """One line naming the missing package, before anything is saved or loaded."""
    if report_to not in PACKAGES:
        return
    module, install = PACKAGES[report_to]
    found = importlib.util.find_spec(module) is not None
    if not found and report_to == "tensorboard":  # transformers also writes through tensorboardX
        found = importlib.util.find_spec("tensorboardX") is not None
    if not found:
        raise GrpoError(
            f"grpo.report_to is {report_to!r} but the {module!r} package is not installed: {install}"
        )


def reporter_env(report_to: str, run: RunDir) -> str | None:
    """Point the reporter at the run directory (a variable the user set wins); returns a note to print."""
    if report_to == "tensorboard":
        folder = os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(run.logs_dir / "tensorboard"))
        return f"TensorBoard event files → {folder} (tensorboard --logdir {folder})"
    if report_to == "swanlab":
        folder = os.environ.setdefault("SWANLAB_LOG_DIR", str(run.logs_dir / "swanlog"))
        if not os.environ.get("SWANLAB_MODE") and not os.environ.get("SWANLAB_API_KEY"):
            os.environ["SWANLAB_MODE"] = "local"
        mode = os.environ.get("SWANLAB_MODE") or "online"
        _start_swanlab(run)
        return f"SwanLab ({mode}) → {folder}" + (
            " (swanlab watch to view; SWANLAB_API_KEY or SWANLAB_MODE=online syncs to the cloud)"
            if mode == "local" else ""
        )  # fmt: skip
    return None


def _start_swanlab(run: RunDir) -> None:
    """Start the SwanLab run here (rank 0): transformers' callback asks ``swanlab.get_run()`` whether one is
    running, which swanlab 0.10 answers by raising instead of returning None (seen with transformers 5.17:
    "No active Run. Call swanlab.init() first"). Project: ``SWANLAB_PROJECT``, else grpo; the run's name."""
    from cli.run.ranks import is_main

    if not is_main():
        return
    import swanlab

    try:
        running = swanlab.get_run()
    except RuntimeError:
        running = None
    if running is None:
        swanlab.init(project=os.environ.get("SWANLAB_PROJECT") or "grpo", experiment_name=run.path.name)

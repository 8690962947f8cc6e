"""Everything `grpo grpo` decides before a model loads: backend, vLLM, DoRA, attempt, resume point.

Cheap checks first, so a bad flag fails in a second: the batch against the group size and the world,
the rewards (resolved and bound to the format), the launcher plan, the vLLM server, DoRA against vLLM.
The command (cli/commands/grpo.py) parses and reports; :func:`cli.train.stages.run_grpo` trains
with the :class:`GrpoSetup` decided here, so nothing is decided twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cli.common import GrpoError, err_console
from cli.config.schema import Config
from cli.run import ranks
from cli.run.data import FILTERED
from cli.run.rundir import RunDir
from cli.train import distributed
from cli.train.distributed import Plan
from cli.train.rewards import Reward


@dataclass
class GrpoSetup:
    """What the GRPO stage runs with (decided once, before any model loads)."""

    backend: str  # unsloth | hf
    rewards: list[Reward]
    use_vllm: bool
    uses_dora: bool
    adapter: Path | None  # the run's SFT adapter, when there is one
    attempt: int
    checkpoints: Path  # this attempt's checkpoint folder
    resume: Path | None  # the checkpoint to resume from


def sft_adapter(rd: RunDir) -> Path | None:
    adapter = rd.sft_dir / "adapter"
    return adapter if (adapter / "adapter_config.json").exists() else None


def uses_dora(cfg: Config, adapter: Path | None) -> bool:
    """DoRA when the adapter GRPO continues has it, or (fresh adapter) when the config asks for it."""
    from cli.train import backends

    return bool(backends.adapter_settings(adapter)["dora"]) if adapter else cfg.lora.dora


def prepare(rd: RunDir, cfg: Config, plan: Plan, *, resume: bool, allow_dora_merge: bool) -> GrpoSetup:
    from cli.models.resolve import check_model
    from cli.run.preflight import check_run
    from cli.train import backends
    from cli.train.checkpoints import plan_attempt
    from cli.train.reporters import check_reporter
    from cli.train.rewards import resolve_rewards

    g, child = cfg.grpo, ranks.launched()
    # What it will read, before any work: a damaged file or a model path that is not there is one line now.
    check_run(rd, data=("train.parquet", FILTERED), adapters=[a for a in (sft_adapter(rd),) if a])
    check_model(cfg, rd)
    distributed.check_batch(
        g.per_device_batch, g.gens, ranks.world_size() if child else plan.world, g.rollout_steps
    )
    check_reporter(g.report_to)
    reward_list = resolve_rewards(g.rewards, cfg.format_spec())
    adapter = sft_adapter(rd)
    dora = uses_dora(cfg, adapter)
    url = distributed.server_url(g.vllm_server) if g.vllm_server else None
    attempt, attempt_dir, checkpoint = plan_attempt(rd.grpo_dir / "checkpoints", resume)
    if checkpoint is not None and not child:
        distributed.check_resume(checkpoint, plan)
    if plan.wanted and not child:
        distributed.check_plan(plan)
    if url:
        if not child:  # the parent checked it a moment ago
            distributed.check_vllm_server(url)
        distributed.require_vllm("--vllm-server")
    chosen = backends.choose_backend(cfg.backend)
    if plan.wanted or url:
        chosen = _scale_out_backend(cfg.backend, chosen, plan)
    if dora and (g.vllm_server or (g.vllm != "off" and (g.vllm == "on" or backends.decide_vllm("auto")))):
        chosen = _dora_with_vllm(chosen, allow_dora_merge)
    use_vllm = bool(g.vllm_server) or backends.decide_vllm(g.vllm)
    rd.require(rd.data_dir / "train.parquet", "data", "prepped data")
    if adapter is None and checkpoint is None:
        err_console.print(
            "[yellow]note:[/] no SFT adapter in this run: GRPO starts from the base model "
            "(`grpo sft` first teaches the format, so rewards vary from the first steps)"
        )
    return GrpoSetup(chosen, reward_list, use_vllm, dora, adapter, attempt, attempt_dir, checkpoint)


def _dora_with_vllm(chosen: str, allow_dora_merge: bool) -> str:
    if not allow_dora_merge:
        raise GrpoError(
            "DoRA adapters cannot be served by vLLM: use --no-dora (on a fresh run), --vllm off "
            "(HF generate, slower) or --allow-dora-merge (merge into the weights before each rollout "
            "sync)"
        )
    if chosen == "unsloth":
        err_console.print(
            "[yellow]note:[/] --allow-dora-merge: using the hf backend (TRL colocate vLLM merges "
            "the adapter before each weight sync); Unsloth's vLLM path serves LoRA only"
        )
    return "hf"


def _scale_out_backend(requested: str, chosen: str, plan: Plan) -> str:
    """Several processes and TRL's vLLM server run under the hf backend (Unsloth trains on one GPU)."""
    what = plan.flag if plan.wanted else "--vllm-server"
    if chosen == "hf":
        return chosen
    if requested == "unsloth":
        raise GrpoError(f"{what}: the unsloth backend trains on one GPU; use --backend hf (accelerate + TRL)")
    if not ranks.launched():
        err_console.print(
            f"[yellow]note:[/] {what}: using the hf backend (accelerate + TRL; Unsloth trains on one GPU)"
        )
    return "hf"


def announce_attempt(rd: RunDir, setup: GrpoSetup) -> None:
    """Say which attempt this is: resumed, or new beside earlier attempts' checkpoints."""
    from cli.train.checkpoints import attempts, latest_checkpoint

    earlier = {
        n: f
        for n, f in attempts(rd.grpo_dir / "checkpoints").items()
        if n != setup.attempt and latest_checkpoint(f) is not None
    }
    if setup.resume is not None:
        err_console.print(f"grpo: resuming attempt {setup.attempt} from {setup.resume}", soft_wrap=True)
    elif earlier:
        err_console.print(
            f"[yellow]note:[/] new attempt {setup.attempt} (checkpoints → {setup.checkpoints}); "
            f"the checkpoints of attempt{'s' if len(earlier) > 1 else ''} {', '.join(map(str, earlier))} "
            "stay where they are — `grpo grpo --resume` continues the most recent attempt",
            soft_wrap=True,
        )


@contextlib.contextmanager
def undone_unless_saved(rd: RunDir, setup: GrpoSetup, *, enabled: bool = True) -> Iterator[None]:
    """A `grpo grpo` that fails (or is stopped) before its attempt saved a checkpoint leaves the run as it
    was: its config.yaml as before (the failed flags are not remembered) and no empty attempt folder, so
    the next run is the same attempt again (issue 11: "the run directory exactly as it was")."""
    from cli.train.checkpoints import latest_checkpoint

    config = rd.config_path.read_bytes() if enabled and rd.config_path.is_file() else None
    metrics = rd.metrics_path.stat().st_size if rd.metrics_path.is_file() else None  # rows before this one
    created = setup.checkpoints  # the outermost folder of it that this command creates (grpo/ on a new run)
    while not created.parent.exists():
        created = created.parent
    fresh = not created.exists()
    try:
        yield
    except BaseException:
        if enabled and latest_checkpoint(setup.checkpoints) is None:
            if fresh:
                shutil.rmtree(created, ignore_errors=True)
            _forget_rows(rd, metrics)  # the next run is this attempt again: its rows must not mix in
            with contextlib.suppress(OSError):
                if config is not None:
                    from cli.run.atomic import atomic_write_bytes

                    atomic_write_bytes(rd.config_path, config)
                else:
                    rd.config_path.unlink(missing_ok=True)
        raise


def _forget_rows(rd: RunDir, size: int | None) -> None:
    """metrics.jsonl back to ``size`` bytes (gone when it did not exist): an attempt that saved nothing
    leaves no rows under the attempt number that the next run takes again."""
    with contextlib.suppress(OSError):
        if size is None:
            rd.metrics_path.unlink(missing_ok=True)
        else:
            os.truncate(rd.metrics_path, size)

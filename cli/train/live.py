"""Live view of a training stage: one compact line per logging step, the same row in metrics.jsonl.

For GRPO a row carries the mean of each reward (TRL's ``rewards/<name>/mean``), the reward std, the
share of groups whose rewards are all equal (``frac_reward_zero_std``: no learning signal there), the
format hit rate, the completion length, the step time and an ETA, the time spent in reward functions
and the peak GPU memory. Plain-language hints explain the two things that worry people first.

Ctrl-C or SIGTERM (:class:`Interrupt`): the first one asks the trainer to save a checkpoint after the current
step and stop; the stage then saves its adapter and records where it stopped. One during a GRPO rollout
(generation, a stuck reward) does not wait for the step: the rollout is dropped at once, and since no
weight has changed since the last optimizer step, that step's checkpoint and adapter are saved. A second
one outside a rollout stops at once and saves nothing from the step under way.

Long because: the live line gathers every signal a step logs (rewards, IS ratio, memory, the audit, the
tool columns) in one callback.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import finite as _num
from cli.run import heartbeat, signals
from cli.run.console import console, err_console
from cli.run.ranks import any_rank
from cli.run.rundir import RunDir
from cli.train import tool_use
from cli.train.canary import GAP_KEY, RATIO_KEY

if TYPE_CHECKING:
    from cli.train.trainer import Observers

HINT_ZERO_STD = (
    "reward std is 0 in every group: no learning signal — run `grpo sft` first or raise --gens/temperature"
)
# The same, for a run that already starts from the SFT adapter (or a checkpoint): `grpo sft` is done.
HINT_ZERO_STD_AFTER_SFT = (
    "reward std is 0 in every group: no learning signal — every completion scores the same; raise --gens or "
    "--temperature, or train the format longer (`grpo sft --max-steps N`)"
)
HINT_LOSS_ZERO = (
    "loss near 0 is normal in GRPO: advantages are centred within each group; watch the rewards instead"
)


def _fmt_s(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


class StepAbandoned(BaseException):  # noqa: N818 - reads as what happened
    """Ctrl-C during a rollout: the step under way is dropped (the weights are the last completed step's)."""


class Interrupt:
    """SIGINT or SIGTERM → a flag the callback turns into save-and-stop at the step's end; a second one
    raises KeyboardInterrupt. With ``abandon_rollouts`` (one process: the ranks of --gpus N must stop
    together, at a step's end), a signal during a rollout raises :class:`StepAbandoned` at once instead.
    SIGTERM is what `kill`, systemd, Slurm and Kubernetes send to stop a job: it saves as Ctrl-C does
    (the exit code tells them apart: :func:`cli.run.signals.exit_code`)."""

    def __init__(self, *, abandon_rollouts: bool = False) -> None:
        self.requested = False
        self.abandon_rollouts = abandon_rollouts
        self.in_rollout = 0
        self.signum: int | None = None  # the signal that asked to stop

    def _handler(self, signum: int, frame: Any) -> None:
        signals.received(signum)
        if self.in_rollout and self.abandon_rollouts:
            self.requested = True
            self.signum = self.signum or signum
            raise StepAbandoned
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        name = signals.label(signum)
        err_console.print(
            f"\n[yellow]{name}:[/] saving a checkpoint after this step, then stopping "
            f"({name} again to stop now, without saving this step)"
        )

    def before_rollout(self) -> None:
        """Called by the trainer as a rollout starts: Ctrl-C came between steps, so start none."""
        if self.requested and self.abandon_rollouts:
            raise StepAbandoned

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupt]:
        previous: dict[int, Any] = {}
        try:
            for sig in signals.STOP_SIGNALS:
                previous[sig] = signal.signal(sig, self._handler)
        except ValueError:  # not the main thread: leave Python's default KeyboardInterrupt
            yield self
            return
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def make_callback(run: RunDir, stage: str, spec: LiveSpec, observers: Observers | None = None) -> Any:
    """A ``transformers.TrainerCallback`` showing :class:`LiveView`; the class is built here so that the
    module imports without transformers."""
    from transformers import TrainerCallback

    class LiveViewCallback(LiveView, TrainerCallback):
        pass

    return LiveViewCallback(run, stage, spec, observers)


@dataclass(frozen=True)
class LiveSpec:
    """What the live view of a stage shows: its length, its attempt, the rewards, vLLM's share."""

    max_steps: int
    attempt: int | None = None
    control: str | None = None  # a placebo attempt (cli/train/control.py): its rows and lines say so
    reward_names: list[str] | None = None
    from_sft: bool = False  # the hint for groups with no signal then says so
    vllm_gib: float | None = None
    quiet: bool = False
    # What the heartbeat adds while the process's first step runs (Unsloth compiles its kernels there:
    # 4.9 min on a fresh H200, about 1 min once its caches are warm; bench/learning-gpu.md@ea4c471, round 8).
    first_step_note: str = ""


class LiveView:
    """The live view of one stage: step timing, one row per log (metrics.jsonl and a console line),
    the hints, and Ctrl-C turned into save-and-stop. :func:`make_callback` makes it a TrainerCallback."""

    def __init__(self, run: RunDir, stage: str, spec: LiveSpec, observers: Observers | None = None) -> None:
        from cli.train.trainer import Observers

        self.run, self.stage, self.spec = run, stage, spec
        self.max_steps, self.attempt = spec.max_steps, spec.attempt
        self.reward_names, self.quiet, self.from_sft = spec.reward_names, spec.quiet, spec.from_sft
        self.obs = observers or Observers()
        self.interrupt = self.obs.interrupt
        self.step_times: list[float] = []
        self.last = time.perf_counter()
        self.started = self.last
        self.window_start = self.last
        self.hinted_loss = False
        self.zero_std_streak = 0
        self.first_step = None
        self.rows: list[dict[str, Any]] = []
        self.ema: float | None = None  # smoothed seconds per step (the first step left out)
        self.eta: tuple[float, float] | None = None  # (last ETA shown, when)
        self.folded = 0  # step times already in the average
        self.step_eta: tuple[int, float | None] | None = None  # (step, its ETA)

    # -- timing --
    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.last = self.started = self.window_start = time.perf_counter()
        self.first_step = state.global_step
        heartbeat.doing(self.step_status(state))

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        heartbeat.doing(f"{self.stage}: saving the adapter")

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        now = time.perf_counter()
        self.step_times.append(now - self.last)
        self.last = now
        self.step_done(state, control)
        if self.obs.memory is not None:
            self.obs.memory.step_end()
        # Ctrl-C reaches the ranks at slightly different steps: stop together.
        if any_rank(self.interrupt is not None and self.interrupt.requested):
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        """A checkpoint just saved follows the umask (the safetensors library writes its files 0600)."""
        from cli.run.atomic import follow_umask

        if state.is_world_process_zero:
            follow_umask(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    def step_done(self, state: Any, control: Any) -> None:
        """Every optimizer step says so, from the first: its time and the ETA (a logging step's full line,
        :meth:`print_row`, follows instead). On the CPU a step of a real model takes seconds to minutes, and
        the first logged one came ~15 minutes into a run."""
        step = int(state.global_step)
        total = self.max_steps or int(getattr(state, "max_steps", 0) or 0)
        self.step_eta = (step, self.smoothed_eta(total - step) if total else None)
        heartbeat.doing(self.step_status(state, step + 1))
        if self.quiet or getattr(control, "should_log", False) or not state.is_world_process_zero:
            return
        seconds = self.step_times[-1] if self.step_times else None
        parts = [f"[bold]{self.stage}[/] {step}/{total or '?'}"]
        if seconds is not None:
            parts.append(f"{seconds:.2f} s/step")
        parts.append(f"ETA {_fmt_s(self.step_eta[1])}")
        console.print(" │ ".join(parts), soft_wrap=True)

    def step_status(self, state: Any, step: int | None = None) -> str:
        """What the heartbeat says while a step runs (a CPU step can outlast its silence)."""
        total = self.max_steps or int(getattr(state, "max_steps", 0) or 0)
        step = int(state.global_step) + 1 if step is None else step
        note = self.spec.first_step_note if step == (self.first_step or 0) + 1 else ""
        return f"{self.stage}: step {step}/{total or '?'}" + (f", {note}" if note else "")

    def smoothed_eta(self, remaining: int) -> float | None:
        """ETA from an exponential average of step times, each new ETA within ½–2× of the last one
        counted down: GRPO steps vary with completion length (a 100-step CPU run's ETA jumped 2h09 →
        7m → 47m from raw step times). After the first step alone a rough one (that step's time
        for each step left): it may carry compilation, so it does not hold the later ones back."""
        if len(self.step_times) == 1:
            return self.step_times[0] * max(remaining, 0)
        if len(self.step_times) < 2:
            return None
        for t in self.step_times[max(1, self.folded) :]:
            self.ema = t if self.ema is None else 0.7 * self.ema + 0.3 * t
        self.folded = len(self.step_times)
        if self.ema is None:
            return None
        eta = self.ema * max(remaining, 0)
        now = time.perf_counter()
        if self.eta is not None and remaining > 0:
            expected = max(self.eta[0] - (now - self.eta[1]), 0.0)
            if expected > 0:
                eta = min(max(eta, expected / 2), expected * 2)
        self.eta = (eta, now)
        return eta

    def typical_step(self) -> float | None:
        # The first step carries compilation/warm-up: leave it out once there are others.
        times = self.step_times[1:] if len(self.step_times) > 1 else self.step_times
        return sum(times) / len(times) if times else None

    # -- logging --
    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not logs or not state.is_world_process_zero:
            return
        if "train_runtime" in logs:  # the trainer's final summary: reported by the stage itself
            return
        now = time.perf_counter()
        window = now - self.window_start
        self.window_start = now
        row = self.timing_row(state, logs)
        self.measure(row, window)
        self.rows.append(row)
        self.run.log_metrics(row)
        if not self.quiet:
            self.print_row(row)

    def timing_row(self, state: Any, logs: dict[str, Any]) -> dict[str, Any]:
        """The trainer's logs with the step, the step times and the ETA."""
        step = int(state.global_step)
        typical = self.typical_step()
        total = self.max_steps or state.max_steps
        row: dict[str, Any] = {
            "stage": self.stage,
            **({"attempt": self.attempt} if self.attempt is not None else {}),
            **({"control": self.spec.control} if self.spec.control else {}),
            "step": step,
            "max_steps": total,
            "time": round(time.time(), 3),
        }
        for key, value in logs.items():
            v = _num(value)
            row[key] = v if v is not None else value
        row["step_seconds"] = round(self.step_times[-1], 4) if self.step_times else None
        row["mean_step_seconds"] = round(typical, 4) if typical else None
        if self.step_eta is not None and self.step_eta[0] == step:  # worked out when the step ended
            eta = self.step_eta[1]
        else:
            eta = self.smoothed_eta(total - step) if total else None
        row["eta_seconds"] = round(eta, 1) if eta is not None else None
        return row

    def measure(self, row: dict[str, Any], window: float) -> None:
        """The time in reward functions and in each phase over the last ``window`` seconds, the memory
        figures, and what the rollout canary saw."""
        from cli.train.backends import peak_gpu_gib

        obs = self.obs
        if obs.tracker is not None:
            taken = obs.tracker.take()
            row.update(taken)
            spent = taken["reward_seconds"] or 0.0
            row["reward_share"] = round(spent / window, 4) if window > 0 else None
        row["peak_gpu_gib"] = peak_gpu_gib()
        if obs.phases is not None:
            phases = obs.phases.take()
            gen = phases.get("phase_rollout_s", 0.0)
            row["generation_seconds"] = round(gen, 4)
            row["generation_share"] = round(gen / window, 4) if window > 0 else None
            row.update(phases)
        if obs.memory is not None:
            row.update(obs.memory.take_row())
        if self.spec.vllm_gib is not None:
            row["vllm_gib"] = self.spec.vllm_gib
        if obs.device_peak is not None:
            row["gpu_peak_gib"] = obs.device_peak.peak_gib
        if obs.refill is not None:
            row.update(obs.refill.take_row())
        if obs.tools is not None:
            row.update(obs.tools.take(window))
        if obs.canary is not None:
            obs.canary.check(row)

    def print_row(self, row: dict[str, Any]) -> None:
        step, total = row["step"], row["max_steps"]
        parts = [f"[bold]{self.stage}[/] {step}/{total}"]
        if self.spec.control:
            parts[0] += f" [magenta]CONTROL ({self.spec.control})[/]"
        if "loss" in row and _num(row["loss"]) is not None:
            parts.append(f"loss {row['loss']:.4g}")
        if self.stage == "grpo":
            parts += self.grpo_parts(row)
        elif _num(row.get("learning_rate")) is not None:
            parts.append(f"lr {row['learning_rate']:.2e}")
        parts += _cost_parts(row)
        console.print(" │ ".join(parts), soft_wrap=True)
        if self.stage == "grpo":
            self.hints(row)

    def grpo_parts(self, row: dict[str, Any]) -> list[str]:
        parts = []
        if _num(row.get("reward")) is not None:
            parts.append(f"reward {row['reward']:.3g} ± {row.get('reward_std') or 0:.3g}")
        for name in self.reward_names or []:
            v = _num(row.get(f"rewards/{name}/mean"))
            if v is not None:
                parts.append(f"{name} {v:.3g}")
        if row.get("format_hit_rate") is not None:
            parts.append(f"format {row['format_hit_rate']:.0%}")
        if _num(row.get("audit_agreement")) is not None:
            parts.append(f"audit {row['audit_agreement']:.0%}")
        tools = tool_use.console_part(row)
        if tools:
            parts.append(tools)
        if _num(row.get("frac_reward_zero_std")) is not None:
            parts.append(f"zero-std {row['frac_reward_zero_std']:.0%}")
        if _num(row.get("completions/mean_length")) is not None:
            parts.append(f"len {row['completions/mean_length']:.0f}")
        ratio, gap = _num(row.get(RATIO_KEY)), _num(row.get(GAP_KEY))
        if ratio is not None:  # vLLM rollouts: the weight of each completion, and why (see cli/train/canary)
            parts.append(f"IS {ratio:.3g}" + (f" (Δ {gap:.2g}/tok)" if gap is not None else ""))
        return parts

    def hints(self, row: dict[str, Any]) -> None:
        zero = _num(row.get("frac_reward_zero_std"))
        if zero is not None and zero >= 1.0:
            # Say it on the first such step, then every 10th in a row (not on every line).
            if self.zero_std_streak % 10 == 0:
                hint = HINT_ZERO_STD_AFTER_SFT if self.from_sft else HINT_ZERO_STD
                console.print(f"  [yellow]hint:[/] {hint}")
            self.zero_std_streak += 1
        else:
            self.zero_std_streak = 0
        loss = _num(row.get("loss"))
        if loss is not None and abs(loss) < 1e-3 and not self.hinted_loss:
            self.hinted_loss = True
            console.print(f"  [dim]hint: {HINT_LOSS_ZERO}[/]")


def _cost_parts(row: dict[str, Any]) -> list[str]:
    """Step time, time in rewards, memory and ETA of a console line."""
    parts = []
    if row.get("step_seconds") is not None:
        parts.append(f"{row['step_seconds']:.2f} s/step")
    if row.get("reward_share") is not None:
        parts.append(f"rewards {row['reward_share']:.1%} of time")
    if row.get("train_extra_gib") is not None:
        mem = f"mem: train +{row['train_extra_gib']:.1f}"
        if row.get("vllm_gib") is not None:
            mem += f", vLLM {row['vllm_gib']:.1f}"
        if row.get("gpu_peak_gib") is not None:
            mem += f", GPU {row['gpu_peak_gib']:.1f}"
        parts.append(mem + " GiB")
    elif row.get("peak_gpu_gib") is not None:
        parts.append(f"peak {row['peak_gpu_gib']:.1f} GiB")
    parts.append(f"ETA {_fmt_s(row.get('eta_seconds'))}")
    return parts


def quiet_trainer(trainer: Any) -> None:
    """Drop the trainer's own progress bar / dict printer: the live view replaces them."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        with contextlib.suppress(ValueError):
            trainer.remove_callback(cb)

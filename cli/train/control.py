"""`grpo grpo --control KIND`: a placebo attempt, trained exactly as the GRPO one but on a reward that carries
no information about correctness, so that `grpo eval` can say what GRPO added beyond running the same
number of steps (formatting drift, length drift, the LoRA moving at all).

- ``shuffled-answers``: each prompt is scored against another prompt's gold answer, a fixed derangement of
  the prompts (Sattolo's algorithm, seeded by the run's seed: no prompt keeps its own). The format rewards
  still pay for the format, as in the real run; the answer rewards pay only by coincidence.
- ``random-reward``: every reward function's scores are replaced by draws from that same batch's real scores
  (with replacement, seeded): the same mean and spread, independent of which completion earned them.

The attempt is matched: same data, steps, seed and settings (the run's saved config; a flag that changes
one is refused). It is an attempt like any other (``grpo/checkpoints/attempt-N``, marked by
``control.json`` there), its metrics rows carry ``"control": KIND``, its live view says CONTROL, its curves
go to ``logs/train-control.png``, and its adapter to ``grpo/control/adapter`` (the GRPO adapter stays).
"""

from __future__ import annotations

import functools
import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from cli.common import GrpoError
from cli.config.schema import Config, to_yaml
from cli.run.atomic import atomic_write_json
from cli.run.rundir import RunDir
from cli.train.rewards import Reward

CONTROLS = ("shuffled-answers", "random-reward")
MARK = "control.json"  # in the attempt's checkpoint folder and in grpo/control/


def check_kind(kind: str | None) -> str | None:
    if kind is None:
        return None
    if kind not in CONTROLS:
        raise GrpoError(f"unknown --control {kind!r}: choose {' or '.join(CONTROLS)}")
    return kind


def adapter_dir(rd: RunDir) -> Path:
    """Where a control attempt saves its adapter (`grpo eval` scores it as ``control``)."""
    return rd.grpo_dir / "control" / "adapter"


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix.rstrip("."): data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def unmatched(saved: Config, cfg: Config) -> list[str]:
    """The settings in which ``cfg`` differs from the run's saved config (none: a matched control)."""
    a, b = _flat(yaml.safe_load(to_yaml(saved)) or {}), _flat(yaml.safe_load(to_yaml(cfg)) or {})
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k != "grpo.control")


def check_matched(rd: RunDir, cfg: Config) -> None:
    """A control trains with the run's saved settings; a flag or file that changes one is refused."""
    from cli.run.rundir import resolve_config

    if not rd.config_path.exists():
        return
    diff = unmatched(resolve_config(rd), cfg)
    if diff:
        shown = ", ".join(diff[:5]) + (f" and {len(diff) - 5} more" if len(diff) > 5 else "")
        raise GrpoError(
            f"--control trains a placebo matched to this run's GRPO settings, but these differ from its "
            f"config.yaml: {shown}; drop those flags (or train the GRPO attempt with them first)"
        )


def attempt_kind(attempt_dir: Path) -> str | None:
    """The control an attempt was trained as (None: a real GRPO attempt)."""
    try:
        return str(json.loads((attempt_dir / MARK).read_text(encoding="utf-8"))["control"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_resume(kind: str | None, attempt: int, attempt_dir: Path) -> None:
    """``--resume`` continues an attempt as what it was: a control with its own --control, GRPO without."""
    was = attempt_kind(attempt_dir)
    if was == kind:
        return
    if was is None:
        raise GrpoError(
            f"attempt {attempt} is a GRPO attempt: --resume continues it without --control "
            "(a control starts its own attempt: drop --resume)"
        )
    raise GrpoError(
        f"attempt {attempt} is a placebo control ({was}): resume it with --control {was}, "
        "or start a new GRPO attempt without --resume"
    )


def derangement(n: int, seed: int) -> list[int]:
    """A random permutation with no fixed point (Sattolo's algorithm: one cycle through all n), seeded."""
    order = list(range(n))
    rng = random.Random(seed)
    for i in range(n - 1, 0, -1):
        j = rng.randrange(i)  # j < i: never leaves i in place
        order[i], order[j] = order[j], order[i]
    return order


def shuffle_answers(dataset: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """The dataset with each prompt's ``answer`` taken from another prompt (a fixed derangement)."""
    answers = [str(a) for a in dataset["answer"]]
    if len(answers) < 2:
        raise GrpoError(
            "--control shuffled-answers needs at least 2 prompts (one to take the other's answer)"
        )
    perm = derangement(len(answers), seed)
    shuffled = [answers[perm[i]] for i in range(len(answers))]
    same = sum(1 for a, b in zip(answers, shuffled, strict=True) if a.strip() == b.strip())
    dataset = dataset.remove_columns("answer").add_column("answer", shuffled)
    return dataset, {"control": "shuffled-answers", "prompts_whose_borrowed_gold_equals_their_own": same}


def _drawn(func: Callable[..., Any], rng: random.Random) -> Callable[..., Any]:
    """``func`` whose scores are replaced by draws (with replacement) from the same call's real scores."""

    @functools.wraps(func)
    def draw(*args: Any, **kwargs: Any) -> list[float | None]:
        real = list(func(*args, **kwargs))
        pool = [float(x) for x in real if x is not None and math.isfinite(float(x))]
        if not pool:
            return real
        return [rng.choice(pool) if x is not None else None for x in real]

    return draw


def random_rewards(rewards: Sequence[Reward], seed: int) -> tuple[Reward, ...]:
    """Each reward with its scores drawn from its own batch's real scores (seeded per reward)."""
    return tuple(
        Reward(r.name, _drawn(r.func, random.Random(seed * 1009 + i)), r.weight, custom=r.custom)
        for i, r in enumerate(rewards)
    )


def rewards_for(kind: str | None, rewards: Sequence[Reward], seed: int) -> tuple[Reward, ...]:
    return random_rewards(rewards, seed) if kind == "random-reward" else tuple(rewards)


def record(rd: RunDir, kind: str, attempt_dir: Path, info: dict[str, Any]) -> None:
    """Mark the attempt and its adapter as a control (`grpo eval` reads ``grpo/control/control.json``)."""
    row = {"control": kind, **info}
    attempt_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(attempt_dir / MARK, row)
    atomic_write_json(adapter_dir(rd).parent / MARK, row)

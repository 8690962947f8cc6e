"""Reward functions for GRPO: by registry name (``py_rewards``) or by dotted path, weighted and timed.

Config ``grpo.rewards`` is a list of ``{name, weight}``; the weights become TRL's
``GRPOConfig.reward_weights``. Each function keeps the TRL signature
``f(prompts, completions, answer, **kw) -> list[float]`` and is wrapped to measure the time spent
scoring (the reward share of a step), to count format hits for the live view, to keep failures to the
completions they hit, and to give each call of a custom reward at most ``grpo.reward_timeout`` seconds.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run.console import err_console

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

# Rewards whose positive score means "the completion has the exact format" (seed 000 / seed 001).
FORMAT_REWARDS = ("match_format_exactly", "strict_format_reward_func")


@dataclass
class RewardTracker:
    """Accumulates, between two log steps, the time spent in rewards and the format hits."""

    seconds: float = 0.0
    format_hits: int = 0
    format_total: int = 0
    warned: set[Any] = field(default_factory=set)
    # reward name -> kind (raised, none, nan, inf) -> scores lost since the last log step
    problems: dict[str, dict[str, int]] = field(default_factory=dict)
    # finite scores each reward gave in the batch being scored (all zero: no reward works)
    batch_finite: list[int] = field(default_factory=list)
    audit: Any = None  # the verifier audit (cli/train/audit.py, grpo.audit_every): its figures join each row

    def problem(self, name: str, kind: str, count: int, detail: str = "") -> None:
        if count <= 0:
            return
        kinds = self.problems.setdefault(name, {})
        kinds[kind] = kinds.get(kind, 0) + count
        if (name, kind) not in self.warned:
            self.warned.add((name, kind))  # type: ignore[arg-type]
            what = {
                "raised": f"raised {detail}",
                "none": "returned None",
                "nan": "returned NaN",
                "inf": "returned an infinite score",
            }[kind]
            err_console.print(
                f"[yellow]warning:[/] reward {name!r} {what} for {count} completion(s); those scores are "
                "left out of the advantage (counted per log step as reward_problems/" + name + ")"
            )

    def count_format(self, scores: Sequence[float | None]) -> None:
        self.format_hits += sum(1 for s in scores if s is not None and s > 0)
        self.format_total += len(scores)

    def take(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {
            "reward_seconds": round(self.seconds, 4),
            "format_hit_rate": (self.format_hits / self.format_total) if self.format_total else None,
        }
        for name, kinds in self.problems.items():
            out[f"reward_problems/{name}"] = sum(kinds.values())
        if self.audit is not None:
            out.update(self.audit.take())
        self.seconds = 0.0
        self.format_hits = self.format_total = 0
        self.problems = {}
        return out


@dataclass
class Reward:
    name: str
    func: Callable[..., Any]
    weight: float
    custom: bool = False  # loaded by dotted path: user code, run under grpo.reward_timeout


def _is_custom(name: str) -> bool:
    return "." in name or ":" in name


def resolve_rewards(specs: Sequence[Any], spec: FormatSpec | None = None) -> list[Reward]:
    """``grpo.rewards`` entries ({name, weight}) → callables bound to the run's format, checked before any
    model is loaded. Registry names come from ``py_rewards.make_reward_funcs`` (one scorer shared by the
    batch); dotted paths are custom rewards."""
    if not specs:
        raise GrpoError(
            "grpo.rewards is empty: name at least one reward (e.g. --rewards match_format_exactly)"
        )
    names = [str(item.name).strip() for item in specs]
    weights = [float(item.weight) for item in specs]
    shorts = [n.replace(":", ".").rpartition(".")[2] for n in names]
    for n in names:
        if not n:
            raise GrpoError("empty reward name in grpo.rewards")
    dup = next((s for i, s in enumerate(shorts) if s in shorts[:i]), None)
    if dup:
        raise GrpoError(f"reward {dup!r} is listed twice in grpo.rewards")
    if any("." in n or ":" in n or "cosine" in n for n in names):
        from cli.run import lean

        lean.release()  # a custom reward, or the cosine one, may need what cli.run.lean kept out
    try:  # the one resolver of reward names and dotted paths: py_rewards.get_reward (through this)
        from py_rewards import make_reward_funcs
    except ImportError as exc:
        raise GrpoError(
            f"the reward registry py_rewards is not importable ({exc}): build it with `pip install -e .`"
        ) from None
    try:
        funcs, _ = make_reward_funcs(spec, names, weights)
    except GrpoError:
        raise
    except SystemExit as exc:  # a reward module that calls sys.exit() at import ended grpo with no word
        custom = ", ".join(repr(n) for n in names if _is_custom(n)) or "a reward"
        raise GrpoError(
            f"importing the reward module of {custom} called sys.exit({exc.code!r}): a reward module must "
            "not exit; remove the sys.exit (or the script code it runs at import)"
        ) from None
    except (KeyError, ValueError, LookupError, ImportError, AttributeError, TypeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # KeyError quotes its text
        text = str(msg).strip().splitlines()
        raise GrpoError(text[0] if text else f"bad grpo.rewards: {type(exc).__name__}") from None
    for name, func in zip(names, funcs, strict=True):
        if not callable(func):
            raise GrpoError(f"reward {name!r} is not callable")
    named = zip(shorts, names, funcs, weights, strict=True)
    return [Reward(s, f, w, custom=_is_custom(n)) for s, n, f, w in named]


def wrap_rewards(
    rewards: Sequence[Reward], tracker: RewardTracker, spec: FormatSpec | None = None, *, timeout: float = 0
) -> list[Callable[..., list[float | None]]]:
    """TRL-ready callables that time every call; ``__name__`` names the ``rewards/<name>`` log column.

    A custom reward's call that runs past ``timeout`` seconds (> 0) stops the run with one line naming it.

    The format hit rate comes from the configured exact-format reward; when none is configured, the
    registry's ``match_format_exactly`` (bound to the run's format) watches the first reward's batch.
    """
    format_name = next((r.name for r in rewards if r.name in FORMAT_REWARDS), None)
    watcher = None
    if format_name is None:
        try:
            from py_rewards import make_reward_funcs

            watcher = make_reward_funcs(spec, ["match_format_exactly"])[0][0]
        except Exception:  # noqa: BLE001 - the hit rate is a nicety: without it the column is null
            watcher = None
    return [
        _timed(
            r,
            tracker,
            r.name == format_name,
            watcher if i == 0 else None,
            last=i == len(rewards) - 1,
            timeout=timeout if r.custom else 0,
        )
        for i, r in enumerate(rewards)
    ]


def _batch_dumper() -> Callable[[str, Any, Any, list[float | None]], None] | None:
    """``GRPO_REWARD_LOG=DIR``: append every scored batch (prompts, completions, answers, scores) to
    ``DIR/rank<R>.jsonl`` — to audit a reward, or to check that each rank's scores equal a
    single-process scoring of the same completions."""
    folder = os.environ.get("GRPO_REWARD_LOG")
    if not folder:
        return None
    from cli.run.ranks import rank

    path = Path(folder) / f"rank{rank()}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)

    def dump(name: str, args: Any, kwargs: Any, scores: list[float | None]) -> None:
        batch = dict(kwargs)
        for key, value in zip(("prompts", "completions"), args, strict=False):
            batch[key] = value
        row = {"reward": name, "scores": scores}
        for key in ("prompts", "completions", "answer"):
            if key in batch:
                row[key] = batch[key]
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, default=str) + "\n")

    return dump


SCORE_RULE = (
    "a reward returns a list with one number per completion (int or float; a bool counts as 0/1; None or NaN "
    "skips one)"
)


def _score(reward: str, v: Any, i: int) -> float | None:
    """One completion's score: a real number (bools are 0/1), None for "no score"; anything else is refused.
    Text used to be parsed ("0.5" → 0.5) and a dict's keys taken as scores, so a bug passed silently."""
    if v is None:
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, numbers.Real):  # int, float, numpy's scalars
        return float(v)
    if hasattr(v, "dtype") and tuple(getattr(v, "shape", (1,))) == () and not isinstance(v, (str, bytes)):
        return float(v)  # a 0-d tensor or array
    shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
    raise GrpoError(
        f"reward {reward!r} returned {shown} ({type(v).__name__}) for completion {i}: {SCORE_RULE}"
    )


def _clean(reward: str, raw: Any, n: int, tracker: RewardTracker) -> list[float | None]:
    """Scores as floats; None, NaN and ±inf become None (TRL leaves those out) and are counted."""
    if isinstance(raw, (str, bytes, dict)) or not hasattr(raw, "__len__") or not hasattr(raw, "__iter__"):
        shown = repr(raw) if len(repr(raw)) <= 60 else repr(raw)[:57] + "..."
        raise GrpoError(
            f"reward {reward!r} returned {shown} ({type(raw).__name__}), not a list: {SCORE_RULE}"
        )
    values = list(raw)
    if n and len(values) != n:
        raise GrpoError(f"reward {reward!r} returned {len(values)} scores for {n} completions: {SCORE_RULE}")
    out: list[float | None] = []
    counts = {"none": 0, "nan": 0, "inf": 0}
    for i, v in enumerate(values):
        f = _score(reward, v, i)
        if f is None:
            counts["none"] += 1
            out.append(None)
        elif math.isnan(f):
            counts["nan"] += 1
            out.append(None)
        elif math.isinf(f):
            counts["inf"] += 1
            out.append(None)
        else:
            out.append(f)
    for kind, count in counts.items():
        tracker.problem(reward, kind, count)
    return out


def _batch_size(args: Any, kwargs: Any) -> int:
    completions = kwargs.get("completions")
    if completions is None and len(args) > 1:
        completions = args[1]
    try:
        return len(completions) if completions is not None else 0
    except TypeError:
        return 0


def _timed(
    reward: Reward,
    tracker: RewardTracker,
    counts_format: bool,
    watcher: Callable[..., Any] | None = None,
    *,
    last: bool = False,
    timeout: float = 0,
) -> Callable[..., list[float | None]]:
    from cli.train.deadline import DeadlineExceeded, call_with_deadline

    fn = reward.func
    dump = _batch_dumper()

    @functools.wraps(fn)
    def scored(*args: Any, **kwargs: Any) -> list[float | None]:
        start = time.perf_counter()
        n = _batch_size(args, kwargs)
        raised = False
        try:
            raw = call_with_deadline(fn, timeout, *args, **kwargs)
        except SystemExit as exc:
            raise GrpoError(
                f"reward {reward.name!r} called sys.exit({exc.code!r}): a reward returns its scores, it must "
                "not exit; remove the sys.exit"
            ) from None
        except DeadlineExceeded:
            raise GrpoError(
                f"reward {reward.name!r} did not return within {timeout:g} s (grpo.reward_timeout) on a "
                f"batch of {n} completions: fix the reward, or raise grpo.reward_timeout (0: no limit)"
            ) from None
        except Exception as exc:  # noqa: BLE001 - a custom reward's bug must not kill the run
            first = str(exc).strip().splitlines()
            tracker.problem(reward.name, "raised", n, f"{type(exc).__name__}: {first[0] if first else ''}")
            raised = True
        finally:
            tracker.seconds += time.perf_counter() - start
        scores: list[float | None] = [None] * n if raised else _clean(reward.name, raw, n, tracker)
        tracker.batch_finite.append(sum(1 for s in scores if s is not None))
        if last:
            finite, tracker.batch_finite = tracker.batch_finite, []
            if n and not any(finite):
                raise GrpoError(
                    "no reward gave a score on this batch ("
                    + ", ".join(f"{r}: {sum(k.values())} lost" for r, k in tracker.problems.items())
                    + "): fix the reward functions; the run stopped before saving anything"
                )
        if dump is not None:
            dump(reward.name, args, kwargs, scores)
        if counts_format:
            tracker.count_format(scores)
        elif watcher is not None:
            try:
                tracker.count_format(list(watcher(*args, **kwargs)))
            except Exception:  # noqa: BLE001 - never let the watcher disturb training
                pass
        return scores

    scored.__name__ = reward.name
    scored.__qualname__ = reward.name
    return scored

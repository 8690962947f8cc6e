"""One declaration per setting: type and default (the dataclass field), help, flag, bounds, choices, panel.

A config field is declared with :func:`setting`; from that one declaration come

- the command-line option (:func:`cli.config.options.config_options`: flag, help, ``min``/``max``, panel),
- the override map (flag value → dotted config key),
- the check of the value, whatever layer it came from (defaults, preset, YAML, flags):
  :func:`check_fields`, called by :func:`cli.config.schema.validate`.

Modelled on TRL's ``GRPOConfig`` (every option once, typed, with its help in the field's metadata).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from cli.common import GrpoError

META = "grpo"  # the key of our entry in a field's metadata


@dataclasses.dataclass(frozen=True)
class Setting:
    """What the command line and the checks need to know about one config field."""

    help: str
    flag: str | None = None  # "--gens", or "--dora/--no-dora" for a switch; None: YAML/--config only
    panel: str | None = None  # rich_help_panel of the flag
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()
    want: str | None = None  # how the rule reads in a message, when the bounds say it badly
    path: bool = False  # the flag takes a file path, stored absolute (later commands may run elsewhere)
    short: str | None = None  # a one-letter alias of the flag ("-p"); command options only
    renamed: str | None = None  # the flag's old spelling: still accepted (hidden, with a note) for a release

    def rule(self) -> str:
        """The allowed values in words: "at least 1", "positive", "in [0, 1)", "auto, on or off"."""
        if self.want:
            return self.want
        if self.choices:
            return _one_of(self.choices)
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if low is not None and high is not None:
            left = "[" if self.ge is not None else "("
            right = "]" if self.le is not None else ")"
            return f"in {left}{_num(low)}, {_num(high)}{right}"
        if self.gt == 0:
            return "positive"
        if self.ge == 0:
            return "0 or more"
        if self.ge is not None:
            return f"at least {_num(self.ge)}"
        if self.gt is not None:
            return f"more than {_num(self.gt)}"
        if self.le is not None:
            return f"at most {_num(self.le)}"
        if self.lt is not None:
            return f"less than {_num(self.lt)}"
        return ""

    def ok(self, value: Any) -> bool:
        if value is None:
            return True  # None means "not set" (the field's type says whether it may be)
        if self.choices:
            if isinstance(value, list):  # a list setting (config `tools`): every item one of the choices
                return all(v in self.choices for v in value)
            return value in self.choices
        if isinstance(value, str):
            return True  # e.g. gpu_memory_utilization "auto": checked by its own parser
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,  # noqa: A002 - the word typer and click use
    default_factory: Callable[[], Any] | None = None,
    **kw: Any,
) -> Any:
    """A dataclass field with its :class:`Setting` in the metadata."""
    meta = {META: Setting(help=help, **kw)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def setting_of(f: dataclasses.Field[Any]) -> Setting | None:
    value = f.metadata.get(META)
    return value if isinstance(value, Setting) else None


def check_fields(obj: Any, prefix: str = "") -> None:
    """Every field of dataclass ``obj`` (and of the dataclasses in it) within its declared rule."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_fields(value, f"{key}.")
            continue
        s = setting_of(f)
        if s is not None and not s.ok(value):
            raise GrpoError(f"config {key!r} must be {s.rule()}, not {value!r}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _one_of(choices: Sequence[str]) -> str:
    return ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]

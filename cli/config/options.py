"""Command-line options generated from the config's declarations (:mod:`cli.config.settings`).

A command names the config keys it exposes; :func:`config_options` adds one typer option per key
(flag, help, bounds, panel: all from the field) and hands the command the values given as
``overrides={"grpo.gens": 8, ...}`` — the map :func:`cli.config.schema.resolve` layers over the YAML. Unset
flags are not in the map, so the run's saved config, the preset and ``--config`` keep their say.

    @handle_errors
    @config_options("model", "grpo.gens", "grpo.max_steps")
    def grpo(run: RunOpt = DEFAULT_RUN, *, overrides: dict[str, Any]) -> None: ...
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from cli.common import GrpoError
from cli.config.schema import Config
from cli.config.settings import Setting, setting_of

F = TypeVar("F", bound=Callable[..., Any])

# The order of the help panels in every command's --help (panels not listed come last).
PANELS = ("Run", "Model", "Data", "Sampling", "Training", "Checkpoints and logging", "Several GPUs")


def _panel_rank(p: inspect.Parameter) -> int:
    """Where a parameter's help panel comes in :data:`PANELS` (no panel: first, with --help)."""
    infos = [a for a in getattr(p.annotation, "__metadata__", ()) if hasattr(a, "rich_help_panel")]
    panel = infos[0].rich_help_panel if infos else None
    if panel is None:
        return -1
    return PANELS.index(panel) if panel in PANELS else len(PANELS)


def field_of(key: str) -> tuple[dataclasses.Field[Any], Any]:
    """The dataclass field behind a dotted config key, and its type."""
    cls: Any = Config
    *sections, name = key.split(".")
    for section in sections:
        cls = typing.get_type_hints(cls)[section]
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f, typing.get_type_hints(cls)[name]
    raise KeyError(key)


def declared(key: str) -> Setting:
    f, _ = field_of(key)
    s = setting_of(f)
    if s is None or s.flag is None:
        raise KeyError(f"config key {key!r} declares no flag")
    return s


def _cli_type(hint: Any, s: Setting) -> Any:
    """The flag's value type: the field's own, or text where the config parses it (lists, "auto")."""
    if s.path:
        return Path
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        hint = args[0] if len(args) == 1 else str
    if typing.get_origin(hint) is list or hint not in (int, float, bool, str):
        return str
    return hint


def _param(key: str) -> tuple[str, inspect.Parameter]:
    f, hint = field_of(key)
    s = declared(key)
    assert s.flag is not None
    decls = s.flag.split("/") if "/" in s.flag else [s.flag]
    ident = decls[0].lstrip("-").replace("-", "_")
    kind = _cli_type(hint, s)
    extra: dict[str, Any] = {}
    low = s.ge if s.ge is not None else s.gt
    high = s.le if s.le is not None else s.lt
    if kind in (int, float):
        if low is not None:
            extra["min"] = kind(low)
        if high is not None:
            extra["max"] = kind(high)
    if kind is bool:
        extra["show_default"] = False
    option = typer.Option(
        "/".join(decls) if len(decls) > 1 else decls[0], help=s.help, rich_help_panel=s.panel, **extra
    )
    annotation = Annotated[Optional[kind], option]  # type: ignore[valid-type]  # noqa: UP045 - built at run time
    return ident, inspect.Parameter(
        ident, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )


def config_options(*keys: str) -> Callable[[F], F]:
    """Add a typer option for each config key; the command receives ``overrides`` (dotted key → value)."""
    generated = dict(_param(k) for k in keys)
    key_of = dict(zip(generated, keys, strict=True))

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in sig.parameters.values()
            if p.name != "overrides"
        ]
        clash = {p.name for p in own} & set(generated)
        if clash:
            raise TypeError(f"{fn.__name__}: parameters {sorted(clash)} clash with config options")

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            overrides = {}
            for ident in generated:
                value = kwargs.pop(ident, None)
                if value is not None:
                    s = declared(key_of[ident])
                    overrides[key_of[ident]] = str(Path(value).expanduser().absolute()) if s.path else value
            return fn(*args, overrides=overrides, **kwargs)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + list(generated.values())
        params.sort(key=_panel_rank)  # stable: a command's own options first within a panel
        return _with_parameters(command, sig, params)

    return decorate


def _with_parameters(command: Any, sig: inspect.Signature, params: list[inspect.Parameter]) -> Any:
    """``command`` as typer will read it: these parameters (and their annotations), no return type."""
    command.__signature__ = sig.replace(parameters=params, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def typed_options(cls: type) -> Callable[[F], F]:
    """Add a typer option per field of dataclass ``cls`` (see :mod:`cli.config.command_options`); the command
    receives them as ``opts``, a ``cls``.

    Unlike :func:`config_options` these are not config keys: the field's default is the flag's default
    (shown in --help), and its type is the flag's type. Bounds become the option's ``min``/``max``, so a
    value out of range is a usage error (exit 2) before the command starts."""
    hints = typing.get_type_hints(cls)
    generated = {f.name: _typed_param(f, hints[f.name]) for f in dataclasses.fields(cls)}
    renamed = {f.name: s for f in dataclasses.fields(cls) if (s := setting_of(f)) is not None and s.renamed}
    old = {f"{name}{OLD}": _old_param(name, s, hints[name]) for name, s in renamed.items()}

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        fn_hints = typing.get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=fn_hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY)
            for p in sig.parameters.values()
            if p.name != "opts"
        ]
        clash = {p.name for p in own} & set(generated)
        if clash:
            raise TypeError(f"{fn.__name__}: parameters {sorted(clash)} clash with {cls.__name__}")

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in generated if name in kwargs}
            for name, s in renamed.items():
                given = kwargs.pop(f"{name}{OLD}", None)
                if given is not None:
                    _renamed_note(s)
                    if values.get(name) == generated[name].default:  # the new spelling was not given
                        values[name] = given
            return fn(*args, opts=cls(**values), **kwargs)

        # the command's own options first, then the fields', then the hidden old spellings
        params = own + list(generated.values()) + list(old.values())
        return _with_parameters(command, sig, params)

    return decorate


def _typed_param(f: dataclasses.Field[Any], hint: Any) -> inspect.Parameter:
    s = setting_of(f)
    if s is None or s.flag is None:
        raise TypeError(f"option field {f.name!r} declares no flag")
    kind = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    extra: dict[str, Any] = {}
    if kind in (int, float):
        for key, bound, is_open in (("min", s.ge, False), ("min", s.gt, True),
                                    ("max", s.le, False), ("max", s.lt, True)):  # fmt: skip
            if bound is not None:
                extra[key] = kind(bound)
                if is_open:
                    extra[f"{key}_open"] = True
    decls = [s.flag, s.short] if s.short else [s.flag]
    option = typer.Option(*decls, help=s.help, rich_help_panel=s.panel, **extra)
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=Annotated[hint, option]
    )


OLD = "__renamed"  # the parameter name of a flag's old spelling: <field>__renamed


def _old_param(name: str, s: Any, hint: Any) -> inspect.Parameter:
    """The old spelling of a renamed flag: hidden from --help, None unless given."""
    kind = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    option = typer.Option(s.renamed, hidden=True)
    annotation = Annotated[Optional[kind], option]  # type: ignore[valid-type]  # noqa: UP045 - a runtime type
    return inspect.Parameter(
        f"{name}{OLD}", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )


def _renamed_note(s: Any) -> None:
    from cli.common import err_console

    err_console.print(
        f"[yellow]note:[/] {s.renamed} is now {s.flag} (the old spelling is accepted until the next release)"
    )


def check_choices(opts: Any) -> None:
    """Each field of ``opts`` with declared choices holds one of them (any case), or is unset:
    ``unknown --merged '8bit': choose 16bit or 4bit``."""
    for f in dataclasses.fields(opts):
        s, value = setting_of(f), getattr(opts, f.name)
        if s is not None and s.choices and value is not None and str(value).lower() not in s.choices:
            raise GrpoError(f"unknown {s.flag} {value!r}: choose {s.rule()}")


def _model_option() -> Any:
    """``--model`` for the commands that take it outside the config's flags (doctor, serve): the config's
    own declaration (help, panel), so it is written once."""
    field = next(f for f in dataclasses.fields(Config) if f.name == "model")
    s = setting_of(field)
    assert s is not None and s.flag is not None
    return Annotated[str | None, typer.Option(s.flag, help=s.help, rich_help_panel=s.panel)]


ModelOpt = _model_option()

"""Every library internal grpo relies on, in one place.

grpo uses the libraries' public APIs, with the exceptions below: a private name, a module constant set at
run time, or a calling convention that no documentation promises. Each row names the internal, where grpo
relies on it, and the test that fails if a release of the library changes it underneath us (a renamed
method, a convention dropped): an upgrade then fails the suite instead of silently losing a feature.

===========================  =========================================  =====================================
internal                     relied on in                               checked by
===========================  =========================================  =====================================
typer ``TyperOption.         :func:`typer_help` (a flag shows no        tests/test_compat.py
display_type_rich``          ``<bool>`` type in --help)                 ``test_typer_*``
typer ``rich_utils.Table``,  :func:`typer_help` (--help's flag columns  tests/test_compat.py
``TyperCommand/TyperGroup.   are never cut at 80 columns)               ``test_typer_*``, ``test_help_at_80*``
format_help``
Rich ``Console._file``       cli/run/quiet.py, cli/run/heartbeat.py     tests/test_compat.py
                             (a console's output sent to the run's log  ``test_rich_console_file``
                             while a library prints)
``huggingface_hub.constants  cli/prep/load.py (offline for one load of  tests/test_compat.py
.HF_HUB_OFFLINE``,           a data set: the libraries read the         ``test_hub_offline_constants``
``datasets.config.           constant, not the environment, after
HF_HUB_OFFLINE``             import)
TRL ``GRPOTrainer`` /        cli/train/trainer.py (our subclasses:      tests/test_trainer.py
``SFTTrainer`` methods       ``GRPO_NAMES``, ``SFT_NAMES``)             ``test_the_installed_trl_has_*``
TRL's LM-head convention     cli/train/lm_head.py (our head answers     tests/test_compat.py
``model(..., labels=...,     that call; if TRL stopped making it, the   ``test_the_trainer_ran_our_lm_head``
fused_lm_head=True)``        head would drop out silently)              (one real GRPO step)
PEFT LoRA layers'            cli/train/lora_inputs.py (the adapters'    tests/test_lora_inputs.py
``cast_input_dtype_enabled`` inputs cast to their dtype only outside
``lora_A``, ``base_layer``   autocast)
llama.cpp's                  cli/export/gguf.py (run in-process with    tests/test_compat.py
``convert_hf_to_gguf.main``  ``sys.argv`` set, as its script does)      ``test_llama_cpp_converter_entry``
===========================  =========================================  =====================================

Only :func:`typer_help` patches anything here: the other modules keep their code next to what it serves,
and this table points at them.
"""

from __future__ import annotations

from typing import Any


def typer_help() -> None:
    """--help as a terminal shows it (typer 0.29 + Rich):

    - a flag shows no type: typer printed ``<bool>`` after every flag (``--help -h <bool>``), as if it took
      a value (docs/history.md "First runs");
    - the flag columns are never cut: at 80 columns Rich shared the width out evenly and printed
      ``--max-completion-leng…``; the flag names now keep their width, the type and help columns wrap, and
      a word too long for its column folds onto the next line instead of ending in ``…``.

    Other typer releases (no such names): nothing is changed, and tests/test_compat.py fails. typer imports
    its Rich formatting (``typer.rich_utils``, with rich.table) only to print help; the table is swapped
    then, so a command that prints no help does not pay for that import."""
    from typer.core import TyperCommand, TyperGroup, TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is not None and not getattr(shown, "_grpo", False):

        def display_type_rich(self: TyperOption, ctx: object) -> str | None:
            if getattr(self, "is_flag", False) and not getattr(self, "count", False):
                return None
            return shown(self, ctx)  # type: ignore[arg-type]

        display_type_rich._grpo = True  # type: ignore[attr-defined]
        TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]

    for cls in (TyperCommand, TyperGroup):
        original = cls.format_help
        if getattr(original, "_grpo", False):
            continue

        def format_help(self: Any, ctx: Any, formatter: Any, _original: Any = original) -> Any:
            _narrow_table()
            return _original(self, ctx, formatter)

        format_help._grpo = True  # type: ignore[attr-defined]
        cls.format_help = format_help  # type: ignore[method-assign]


def _narrow_table() -> None:
    """typer's options table class, subclassed (once) so that narrow terminals cut no flag name."""
    from typer import rich_utils

    table = getattr(rich_utils, "Table", None)
    if table is not None and not getattr(table, "_grpo", False):
        rich_utils.Table = _options_table(table)  # type: ignore[misc, assignment]


def _options_table(base: type) -> type:
    from rich.measure import Measurement

    class OptionsTable(base):  # type: ignore[misc, valid-type]
        """typer's options table (every column but the last two, type and help, holds flag names). Where the
        help text keeps :data:`HELP_WIDTH` columns it is left as it was; where it would not, the flags keep
        their width, the type wraps at its words, and the help text takes what is left."""

        _grpo = True

        def __rich_console__(self, console: Any, options: Any) -> Any:
            if len(self.columns) >= 3:
                *flags, kind, text = self.columns
                widest = [self._width(console, options, c, lambda m: m.maximum) for c in (*flags, kind)]
                if sum(widest) + 2 * len(widest) + HELP_WIDTH > options.max_width:
                    for column in flags:
                        column.no_wrap = True
                    kind.max_width = max(TYPE_WIDTH, self._width(console, options, kind, lambda m: m.minimum))
                    text.ratio = 1
            return super().__rich_console__(console, options)

        @staticmethod
        def _width(console: Any, options: Any, column: Any, pick: Any) -> int:
            return max((pick(Measurement.get(console, options, cell)) for cell in column.cells), default=0)

    return OptionsTable


# Below this many columns for the help text, --help's options table is laid out for a narrow terminal.
HELP_WIDTH = 30
# A narrow table's type column: "<float range>" on one line, its range ("[x>=0.0]") on the next.
TYPE_WIDTH = 13

"""`grpo` — entry point. This module only wires the commands; each lives in cli/commands/<name>.py.

Heavy frameworks (torch, trl, unsloth, vllm, xllamacpp) are imported inside command bodies, so
`grpo --help` stays instant.
"""

from __future__ import annotations

from typing import Annotated

import typer

import cli
from cli import compat
from cli.commands import chat, doctor, export, grpo, prep, serve, sft
from cli.commands import eval as eval_cmd
from cli.commands import filter as filter_cmd

compat.typer_help()  # --help: no <bool> after a flag, no flag name cut at 80 columns

app = typer.Typer(
    name="grpo",
    help="Teach small LLMs to reason: prep → sft → (filter →) grpo → export → chat, one run directory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _verbose(value: bool) -> None:
    if value:
        import os

        from cli.run.quiet import VERBOSE_ENV

        os.environ[VERBOSE_ENV] = "1"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"grpo {cli.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            callback=_verbose,
            help="Show the libraries' warnings, logs and progress bars (by default they go to "
            "<run>/logs/grpo.log).",
        ),
    ] = False,
) -> None:
    """Two-stage reasoning recipe (SFT format warm-up, then GRPO) on Unsloth + TRL."""


app.command("prep", help=prep.__doc__)(prep.prep)
app.command("sft", help=sft.__doc__)(sft.sft)
app.command("filter", help=filter_cmd.__doc__)(filter_cmd.filter_)
app.command("grpo", help=grpo.__doc__)(grpo.grpo)
app.command("export", help=export.__doc__)(export.export)
app.command("chat", help=chat.__doc__)(chat.chat)
app.command("eval", help=eval_cmd.__doc__)(eval_cmd.eval_)
app.command("serve", help=serve.__doc__)(serve.serve)
app.command("doctor", help=doctor.__doc__)(doctor.doctor)


def main() -> None:
    from cli.run import cpu, lean

    cpu.configure()
    lean.hide()
    app()


if __name__ == "__main__":
    main()

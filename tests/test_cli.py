"""cli/main.py: the command line — help, version, start-up imports, `--config`/`--dry-run` on every stage.

Also here for now, because tests/test_config.py, test_prep.py and test_rundir.py are being edited on
another branch: config resolution and the seed presets (cli/config/schema.py), the remembered `--model`, and
the one-line errors on bad input (config, prep, rundir). They move to those files once that lands.
The doctor checks are in tests/test_doctor.py, the library-noise routing in tests/test_quiet.py.

Run: pytest tests/test_cli.py -q   (in-process through typer's CliRunner)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import dry_run

from cli.main import app

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ["prep", "sft", "filter", "grpo", "export", "chat", "eval", "serve", "doctor"]


# ---- help, version, start-up -------------------------------------------------------------------


@pytest.mark.parametrize("args", [[], *[[c] for c in COMMANDS]], ids=["app", *COMMANDS])
def test_help(runner, args):
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_version(runner):
    from cli import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"grpo {__version__}"


def test_help_imports_no_heavy_framework():
    # `grpo --help` must not pull in the training stack (the reason it can be instant).
    code = (
        "import sys, cli.main; "
        "print(','.join(m for m in ('torch', 'transformers', 'trl', 'unsloth', 'vllm', 'datasets', "
        "'peft', 'pandas', 'pyarrow', 'xllamacpp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# The third-party packages a script has imported when it exits (stdlib left out; a None entry is a module
# marked absent, cli/run/lean.py, not one imported).
_IMPORTED = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: print(json.dumps(sorted({m.partition('.')[0] for m, v in sys.modules.items()"
    " if v is not None} - set(sys.stdlib_module_names))), file=sys.stderr))\n"
)
# The floor: a two-command typer app printing its help, i.e. what typer's own help machinery imports.
_TYPER_HELP = """
from typing import Annotated
import typer
app = typer.Typer(rich_markup_mode="rich")
@app.command()
def one(x: Annotated[int, typer.Option(help="x")] = 1) -> None: ...
@app.command()
def two() -> None: ...
app()
"""


def _imported(code: str, *args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTED + code, *args], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    ("args", "typer_args"),
    [(["--help"], ["--help"]), (["grpo", "--help"], ["one", "--help"])],
    ids=["app", "command"],
)
def test_help_imports_nothing_beyond_typer(args, typer_args):
    # `grpo --help` is as quick as typer's help can be (0.36 s measured on an idle 2-core machine) because
    # it imports nothing typer's own help does not: compared module by module, not by a clock.
    floor = _imported(_TYPER_HELP, *typer_args)
    grpo = _imported("from cli.main import main; main()", *args)
    assert grpo - floor <= {"cli", "__main__"}, sorted(grpo - floor)


def test_no_flag_shows_a_bool_type_in_help(runner) -> None:
    from cli.main import app

    for command in ([], ["prep"], ["sft"], ["filter"], ["grpo"], ["export"], ["chat"], ["eval"], ["doctor"]):
        result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "160"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output, command


# ---- config resolution -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sft", "filter", "grpo", "export", "chat", "eval", "serve"])
def test_every_stage_takes_config_and_dry_run(runner, tmp_path, command):
    # --config applies to every command and --dry-run prints the resolved config without touching the run.
    config = tmp_path / "c.yaml"
    config.write_text("lora: {r: 8}\ngrpo: {gens: 6}\n")
    run = tmp_path / "run"
    cfg = dry_run(runner, command, "--config", str(config), "--run", str(run))
    assert cfg["lora"]["r"] == 8 and cfg["grpo"]["gens"] == 6
    assert not run.exists(), "--dry-run must not create the run directory"


# ---- bad input: one line, non-zero exit, no traceback ----------------------------------------

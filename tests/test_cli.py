"""cli/main.py: the command line — help, version, start-up imports, `--config`/`--dry-run` on every stage.

Also here for now, because tests/test_config.py, test_prep.py and test_rundir.py are being edited on
another branch: config resolution and the seed presets (cli/config.py), the remembered `--model`, and
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
import yaml
from helpers import SAMPLES

from cli.main import app

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ["prep", "sft", "grpo", "export", "chat", "eval", "serve", "doctor"]


def one_line_error(result) -> str:
    """Assert a failed command printed exactly one clear line and no traceback; return it."""
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


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


# The third-party packages a script has imported when it exits (stdlib left out).
_IMPORTED = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: print(json.dumps(sorted({m.partition('.')[0] for m in sys.modules}"
    " - set(sys.stdlib_module_names))), file=sys.stderr))\n"
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
    proc = subprocess.run([sys.executable, "-c", _IMPORTED + code, *args], cwd=REPO, capture_output=True,
                          text=True)
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

    for command in ([], ["prep"], ["sft"], ["grpo"], ["export"], ["chat"], ["eval"], ["doctor"]):
        result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "160"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output, command


# ---- config resolution -------------------------------------------------------------------------

# Seed values: 000 (Qwen3-4B: rsLoRA+DoRA r=16, alpha=16), 001 (Llama-3.2-3B: r=64, alpha=128,
# DoRA), 003 (Qwen3-8B: r=32, alpha=2r, no DoRA); G=4 and GRPO lr 5e-6 in all three.
SEED_VALUES = {
    "qwen3-4b": {"r": 16, "alpha": 16, "dora": True, "gens": 4, "lr": 5e-6, "model": "unsloth/Qwen3-4B-Base"},
    "llama3.2-3b": {"r": 64, "alpha": 128, "dora": True, "gens": 4, "lr": 5e-6,
                    "model": "unsloth/Llama-3.2-3B-Instruct"},
    "qwen3-8b": {"r": 32, "alpha": 64, "dora": False, "gens": 4, "lr": 5e-6, "model": "Qwen/Qwen3-8B"},
}


def dry_run(runner, *args) -> dict:
    result = runner.invoke(app, [*args, "--dry-run"])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


@pytest.mark.parametrize("preset", sorted(SEED_VALUES))
def test_preset_dry_run_prints_seed_values(runner, tmp_path, preset):
    cfg = dry_run(runner, "prep", "--preset", preset, "--run", str(tmp_path / "run"))
    want = SEED_VALUES[preset]
    assert cfg["preset"] == preset
    assert cfg["model"] == want["model"]
    lora = cfg["lora"]
    assert (lora["r"], lora["alpha"], lora["dora"]) == (want["r"], want["alpha"], want["dora"])
    assert cfg["grpo"]["gens"] == want["gens"]
    assert cfg["grpo"]["learning_rate"] == pytest.approx(want["lr"])
    assert not (tmp_path / "run").exists(), "--dry-run must not create the run directory"


def test_flags_override_yaml_and_yaml_overrides_preset(runner, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("lora: {r: 8}\nprep: {eval_size: 10, prompt_quantile: 0.8}\ngrpo: {gens: 6}\n")
    run = str(tmp_path / "run")
    cfg = dry_run(runner, "prep", "--preset", "qwen3-4b", "--config", str(config), "--eval-size", "7",
                  "--run", run)
    assert cfg["prep"]["eval_size"] == 7  # flag > YAML
    assert cfg["prep"]["prompt_quantile"] == 0.8  # YAML > default
    assert cfg["lora"]["r"] == 8 and cfg["grpo"]["gens"] == 6  # YAML > preset
    assert cfg["lora"]["alpha"] == 16 and cfg["lora"]["dora"] is True  # preset > default
    # A preset named inside the YAML applies too; the file still wins over it.
    config.write_text("preset: llama3.2-3b\nlora: {alpha: 32}\n")
    cfg = dry_run(runner, "doctor", "--config", str(config))
    assert (cfg["lora"]["r"], cfg["lora"]["alpha"], cfg["format"]) == (64, 32, "seed001")


@pytest.mark.parametrize("command", ["sft", "grpo", "export", "chat", "eval", "serve"])
def test_every_stage_takes_config_and_dry_run(runner, tmp_path, command):
    # --config applies to every command and --dry-run prints the resolved config without touching the run.
    config = tmp_path / "c.yaml"
    config.write_text("lora: {r: 8}\ngrpo: {gens: 6}\n")
    run = tmp_path / "run"
    cfg = dry_run(runner, command, "--config", str(config), "--run", str(run))
    assert cfg["lora"]["r"] == 8 and cfg["grpo"]["gens"] == 6
    assert not run.exists(), "--dry-run must not create the run directory"


def test_model_flag_is_remembered(runner, tiny_run):
    src = SAMPLES / "gsm8k_test.jsonl"
    result = runner.invoke(app, ["prep", "gsm8k", "--source", str(src), "--limit", "60", "--model", "tiny",
                                 "--run", str(tiny_run)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((tiny_run / "config.yaml").read_text())["model"] == "tiny"
    assert dry_run(runner, "doctor", "--run", str(tiny_run))["model"] == "tiny"


# ---- bad input: one line, non-zero exit, no traceback ----------------------------------------

def test_missing_dataset_file(runner, tmp_path):
    line = one_line_error(runner.invoke(app, ["prep", "gsm8k", "--source", str(tmp_path / "nope.jsonl"),
                                              "--run", str(tmp_path / "run")]))
    assert "not found" in line and "nope.jsonl" in line


def test_unknown_preset(runner, tmp_path):
    line = one_line_error(runner.invoke(app, ["prep", "--preset", "gpt5", "--dry-run"]))
    assert "unknown preset 'gpt5'" in line and "qwen3-4b" in line


def test_malformed_yaml(runner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("lora:\n  r: [16\n")
    line = one_line_error(runner.invoke(app, ["prep", "--config", str(bad), "--dry-run"]))
    assert "malformed YAML" in line


def test_unknown_config_key(runner, tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text("lora: {rank: 8}\n")
    line = one_line_error(runner.invoke(app, ["doctor", "--config", str(bad), "--dry-run"]))
    assert "unknown config key" in line and "lora.rank" in line


def test_unknown_reward_name(tmp_path):
    py_rewards = pytest.importorskip("py_rewards")
    from cli.config import resolve

    config = tmp_path / "r.yaml"
    config.write_text("grpo: {rewards: [match_format_exactly, check_answr]}\n")
    cfg = resolve(config_file=config)
    names = [r.name for r in cfg.grpo.rewards]
    assert names == ["match_format_exactly", "check_answr"]
    with pytest.raises(ValueError, match="unknown reward 'check_answr'"):
        for name in names:
            py_rewards.get_reward(name)


def test_no_run_directory(runner, tmp_path):
    from cli.common import GrpoError
    from cli.rundir import RunDir

    line = one_line_error(runner.invoke(app, ["doctor", "--run", str(tmp_path / "nonexistent")]))
    assert "no run directory" in line and "grpo prep" in line
    # A run without the stage's input names the command that makes it.
    run = RunDir(tmp_path / "run")
    run.ensure()
    with pytest.raises(GrpoError, match=r"run `grpo prep NAME --run .*` first"):
        run.require(run.data_dir / "train.parquet", "data", "prepped data")

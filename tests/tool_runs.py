"""A tool run built in-process for the eval, export and chat tests of the python tool (docs/tools.md).

``make_tool_run`` is tests/helpers.py's ``make_run`` with ``tools: [python]``: the tiny Qwen3 whose chat
template is the tool contract's (with a short system prompt), taught in place (50 AdamW steps, every weight)
to answer every question with one call and, after its result, the answer; the held-out split; real peft
LoRA adapters trained a few more steps on the same conversations:

    Add them. <tool_call>{"name": "python", "arguments": {"code": "9+9"}}</tool_call>[EOS]
    <tool_response>18</tool_response>  (the sandbox's, masked out of the loss)  So 18.<end_working_out>...

so the tool loop under test meets a model that deterministically calls the tool.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLES

TOOL_CODE = "9+9"
TURN1 = "Add them. "  # then the call
TURN2 = "So 18.<end_working_out><SOLUTION>18</SOLUTION>"
QUESTIONS = (
    "What is 2+3?",
    "Tom has 5 apples and eats 2. How many are left?",
    "How many legs do 3 cats have?",
)


def tool_sequences(tok, spec, questions=QUESTIONS) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) of each conversation: prompt and tool result masked (-100), as TRL masks them."""
    call = spec.render_tool_call(TOOL_CODE)
    out = []
    for q in questions:
        prompt = tok.apply_chat_template(spec.messages(q), add_generation_prompt=True, tokenize=False)
        parts = [
            (tok(prompt, add_special_tokens=False).input_ids, False),
            (tok(TURN1 + call + tok.eos_token, add_special_tokens=False).input_ids, True),
            (tok(spec.render_tool_result("18"), add_special_tokens=False).input_ids, False),
            (tok(TURN2 + tok.eos_token, add_special_tokens=False).input_ids, True),
        ]
        ids = [t for p, _ in parts for t in p]
        labels = [t if learn else -100 for p, learn in parts for t in p]
        out.append((ids, labels))
    return out


# A short contract keeps the tiny model's sequences short (seconds of training on two loaded cores).
FORMAT = {"system_prompt_template": "Solve it.", "tool_prompt_template": " Python: {tool_call_start}."}


def _batch(tok, seqs):
    import torch

    width = max(len(ids) for ids, _ in seqs)
    pad = tok.pad_token_id
    ids = torch.tensor([a + [pad] * (width - len(a)) for a, _ in seqs])
    mask = torch.tensor([[1] * len(a) + [0] * (width - len(a)) for a, _ in seqs])
    labels = torch.tensor([b + [-100] * (width - len(b)) for _, b in seqs])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _fit(model, batch, *, steps: int, lr: float) -> None:
    import torch

    torch.manual_seed(0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(steps):
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad()


def teach_tool(base: str, spec, questions=QUESTIONS, *, steps: int = 50) -> None:
    """Fine-tune the tiny model in place (every weight: a LoRA on a random 2-layer model learns too slowly) to
    call the tool, then answer after the result."""
    from transformers import AutoModelForCausalLM

    from cli.models.loading import load_tokenizer

    tok = load_tokenizer(base, spec)
    model = AutoModelForCausalLM.from_pretrained(base)
    _fit(model, _batch(tok, tool_sequences(tok, spec, questions)), steps=steps, lr=3e-3)
    model.save_pretrained(base)


def train_tool_adapter(base: str, dest: Path, spec, *, steps: int) -> None:
    """A real peft LoRA over the taught model, trained a few more steps on the same conversations (its
    weights are not zero, so export takes it; it calls the tool as the base does)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from cli.models.loading import load_tokenizer

    tok = load_tokenizer(base, spec)
    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                       "up_proj", "down_proj"]),
    )  # fmt: skip
    _fit(model, _batch(tok, tool_sequences(tok, spec)), steps=steps, lr=1e-3)
    model.save_pretrained(str(dest))
    tok.save_pretrained(str(dest))


def make_tool_run(root: Path) -> Path:
    """A tool run as prep + sft + grpo leave it: config.yaml with tools: [python] (and a short system prompt),
    base/tiny taught to call the tool, data/eval.parquet (GSM8K test #1-#6), sft and grpo adapters."""
    import pandas as pd

    from cli.config.schema import resolve
    from cli.models.resolve import resolve_model
    from cli.run.rundir import RunDir

    run = RunDir(root)
    cfg = resolve(overrides={"model": "tiny", "tools": ["python"], "format": FORMAT})
    run.save_config(cfg)
    base = resolve_model(cfg, run)
    spec = cfg.format_spec()
    rows = [json.loads(line) for line in (SAMPLES / "gsm8k_test.jsonl").read_text().splitlines()[:6]]
    # Taught on the held-out questions too: the tests want a model that calls on those, not a general one.
    teach_tool(base, spec, (*QUESTIONS, *(r["question"] for r in rows)))
    run.data_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "question": [r["question"] for r in rows],
            "answer": [r["answer"].split("####")[-1].strip() for r in rows],
            "solution": [r["answer"] for r in rows],
            "prompt_tokens": [0] * len(rows),
        }
    ).to_parquet(run.data_dir / "eval.parquet")
    train_tool_adapter(base, run.path / "sft" / "adapter", spec, steps=3)
    train_tool_adapter(base, run.path / "grpo" / "adapter", spec, steps=5)
    return run.path


def shared_tool_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tool run per test session, copied by tests that write into it."""
    root = tmp_path_factory.getbasetemp() / "tiny-tool-run"
    if not (root / "grpo" / "adapter" / "adapter_model.safetensors").exists():
        shutil.rmtree(root, ignore_errors=True)
        make_tool_run(root)
    return root

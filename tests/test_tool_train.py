"""Tool-integrated reasoning, format to training (docs/tools.md "Format", "Training"): the tool spec's chat
template and response template against TRL's own checks and parser, the GSM8K-annotation warm-up through
the real sandbox, the SFT mask, and one GRPO step of TRL's tool loop on a tiny model trained in-process
to call the tool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import invoke, one_error_line

from py_rewards.spec import FormatSpec, get_spec

SPEC = FormatSpec(tools=("python",))
CALL = {"type": "function", "function": {"name": "python", "arguments": {"code": "48/2"}}}
CONVERSATION = [
    *SPEC.messages("Natalia sold 48 clips in April and half as many in May. How many in all?"),
    {"role": "assistant", "content": "<start_working_out>In May 48/2 = ", "tool_calls": [CALL]},
    {"role": "tool", "name": "python", "content": "24.0"},
    {"role": "assistant", "content": "24, so 48+24 = 72.<end_working_out><SOLUTION>72</SOLUTION>"},
]


@pytest.fixture(scope="module")
def tok():
    from cli.models.resolve import build_tiny_tokenizer

    return build_tiny_tokenizer(SPEC)


def test_plain_spec_unchanged_by_tools() -> None:
    """A run without tools keeps its contract: the hash recorded by every earlier run, and no tool text."""
    plain = get_spec("seed000")
    assert plain.contract_hash() == "4b241bb8f2fe17740aa55bd879c86489cc024c2f5492f7967a412cdca8007003"
    assert "tool" not in plain.chat_template() and "tool" not in plain.system_prompt
    assert SPEC.contract_hash() != plain.contract_hash()
    assert FormatSpec.from_dict(SPEC.to_dict()) == SPEC
    with pytest.raises(ValueError, match="unknown tool"):
        FormatSpec(tools=("shell",))


def test_template_passes_trl_checks_and_parses(tok) -> None:
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        parse_response,
        supports_tool_calling,
    )

    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    text = tok.apply_chat_template(CONVERSATION, tokenize=False)
    call = SPEC.render_tool_call("48/2")
    assert f"In May 48/2 = {call}{tok.eos_token}{SPEC.render_tool_result('24.0')}24, so" in text
    prompt = tok.apply_chat_template(CONVERSATION[:2], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith(SPEC.reasoning_start)
    # no generation prompt after a tool turn: the model goes on with its working out
    after_tool = tok.apply_chat_template(CONVERSATION[:4], add_generation_prompt=True, tokenize=False)
    assert after_tool.endswith(SPEC.tool_result_end + "\n")
    ids = tok(prompt, add_special_tokens=False).input_ids
    turn = tok(f"In May 48/2 = {call}{tok.eos_token}", add_special_tokens=False).input_ids
    parsed = parse_response(tok, turn, prefix=ids)
    assert parsed["tool_calls"] == [CALL] and parsed["content"].startswith("In May")
    bad = tok(f"x {SPEC.tool_call_start}{{not json{SPEC.tool_call_end}{tok.eos_token}").input_ids
    assert "tool_calls" not in parse_response(tok, bad, prefix=ids)  # malformed: plain text, no call
    # what the rewards score: the model's own text, its call written back, the tool's result left out
    seen = SPEC.completion_text([parsed, CONVERSATION[3], CONVERSATION[4]])
    assert call in seen and "24.0" not in seen and seen.endswith("<SOLUTION>72</SOLUTION>")
    assert SPEC.find_tool_calls(seen) == ["48/2"]


def test_warmup_from_annotations_checked_in_sandbox() -> None:
    import pandas as pd

    from cli.prep import tool_warmup
    from cli.tools import PythonSandbox

    train = pd.DataFrame(
        {"question": ["q1", "q2", "q3", "q4"], "answer": ["72", "10", "5", "3"]}
    )  # fmt: skip
    raw = tool_warmup.raw_solutions(
        [
            {
                "question": "q1",
                "answer": "48/2 = <<48/2=24>>24 clips.\n48+24 = <<48+24=72>>72 in all.\n#### 72",
            },
            {"question": "q2", "answer": "She earned 0.2 x 50 = $<<0.2*50=11>>11.\n#### 10"},  # wrong value
            {"question": "q3", "answer": "No calculation here.\n#### 5"},
            {"question": "q4", "answer": "1/3 = <<1/3=0.33>>0.33, so <<1+2=3>>3.\n#### 3"},  # rounded value
        ]
    )
    with PythonSandbox() as sandbox:
        rows, counts = tool_warmup.build(SPEC, train, raw, sandbox, max_calls=8)
    assert counts.kept == 2 and counts.calls == 4 and len(rows) == 2
    assert counts.dropped == {"result differs from the annotation": 1, "no calculator annotation": 1}
    first = tool_warmup.messages_of(rows[0])
    assert " ".join(m["role"] for m in first) == "system user assistant tool assistant tool assistant"
    assert first[2]["content"] == "<start_working_out>48/2 = " and first[3]["content"] == "24.0"
    assert first[4]["content"] == "24 clips.\n48+24 = " and first[6]["content"].startswith("72 in all.")
    with PythonSandbox() as sandbox:
        _, capped = tool_warmup.build(SPEC, train, raw, sandbox, max_calls=1)
    assert capped.dropped["more calls than grpo.max_tool_calls"] == 2


def test_prep_tools_refuses_a_set_without_annotations(tmp_path: Path) -> None:
    line = one_error_line(
        invoke("prep", "math", "--run", tmp_path / "run", "--tools", "python", "--limit", "20")
    )
    assert "--tools python" in line and "GSM8K" in line


def test_filter_refuses_a_tool_run(tmp_path: Path) -> None:
    from cli.config.schema import resolve
    from cli.run.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.save_config(resolve(overrides={"model": "tiny", "tools": ["python"]}))
    line = one_error_line(invoke("filter", "--run", run.path))
    assert "does not run the python tool" in line and "grpo grpo" in line


def test_sft_rows_mask_the_tool_results(tmp_path: Path, tok) -> None:
    """The warm-up's labels cover the model's turns (working out, calls, EOS, answer), never the prompt or
    the tool's result."""
    from cli.config.schema import resolve
    from cli.prep import tool_warmup
    from cli.run.rundir import RunDir
    from cli.train.data import tool_sft_dataset

    run = RunDir(tmp_path / "run")
    run.data_dir.mkdir(parents=True)
    import pandas as pd

    pd.DataFrame({tool_warmup.COLUMN: [json.dumps(CONVERSATION)]}).to_parquet(run.data_dir / tool_warmup.FILE)
    cfg = resolve(overrides={"model": "tiny", "tools": ["python"]})
    dataset, info = tool_sft_dataset(cfg, run, tok)
    row = dataset[0]
    learned = tok.decode([t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m])
    assert learned == (
        f"<start_working_out>In May 48/2 = {SPEC.render_tool_call('48/2')}{tok.eos_token}"
        f"24, so 48+24 = 72.<end_working_out><SOLUTION>72</SOLUTION>{tok.eos_token}"
    )
    assert info["examples"] == 1


def test_tool_columns_from_the_real_sandbox() -> None:
    """What a log row gets: calls per completion and the share that used the tool (from the completions the
    rewards saw), the error rate and the seconds (from the sandbox's own counts); train.png draws them."""
    from cli.config.schema import SandboxConfig
    from cli.run.plots import train_png
    from cli.train.tool_use import ToolRun

    with ToolRun(SPEC, SandboxConfig().limits()) as tools:
        assert tools.tool("6*7") == "42" and tools.tool("1/0").startswith("Error: ZeroDivisionError")
        seen = tools.see([CONVERSATION[2:], [{"role": "assistant", "content": "no call"}], "plain text"])
        row = tools.take(window=2.0)
    assert seen[0] == [{"role": "assistant", "content": SPEC.completion_text(CONVERSATION[2:])}]
    assert seen[1][0]["content"] == "no call" and seen[2] == "plain text"
    assert row["tools/calls"] == 2 and row["tools/errors"] == 1 and row["tools/error_rate"] == 0.5
    assert row["tools/calls_per_completion"] == round(2 / 3, 4) and row["tools/used_share"] == round(1 / 3, 4)
    assert row["tools/seconds"] >= 0 and row["tools/share"] is not None
    rows = [{"step": s, "reward": 1.0, **row} for s in (1, 2)]
    assert train_png(rows, ["match_format_exactly"], "tool run")[:4] == b"\x89PNG"


def test_unsloth_refused_for_a_tool_run() -> None:
    from cli.common import GrpoError
    from cli.train.backends import tool_backend

    with pytest.raises(GrpoError, match="--backend hf"):
        tool_backend("unsloth", "unsloth")
    assert tool_backend("auto", "unsloth") == "hf" and tool_backend("hf", "hf") == "hf"


QUESTION = "What is 2+3?"


def call_the_tool(base: str, steps: int = 70) -> None:
    """Train the tiny model in ``base`` (all its weights, in place) to answer QUESTION with one call and,
    after the result, the answer; the prompt and the tool's result carry no loss (as in the warm-up)."""
    import torch
    from transformers import AutoModelForCausalLM

    from cli.models.loading import load_tokenizer

    tok = load_tokenizer(base, SPEC)
    prompt = tok.apply_chat_template(SPEC.messages(QUESTION), add_generation_prompt=True, tokenize=False)
    parts = [
        (prompt, False),
        ("Add them. " + SPEC.render_tool_call("9+9") + tok.eos_token, True),
        (SPEC.render_tool_result("18"), False),
        ("So 18.<end_working_out><SOLUTION>18</SOLUTION>" + tok.eos_token, True),
    ]
    ids, labels = [], []
    for text, learn in parts:
        piece = tok(text, add_special_tokens=False).input_ids
        ids += piece
        labels += piece if learn else [-100] * len(piece)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(base)


@pytest.mark.slow
def test_grpo_with_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prep --tools → a tiny model trained in-process to call the tool → one GRPO step of TRL's tool loop:
    the sandbox ran the calls, their results were masked out of the loss, the tool columns logged."""
    import pandas as pd
    from trl import GRPOTrainer

    from cli.config.schema import resolve
    from cli.models.resolve import resolve_model
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan as Launch
    from cli.train.plan import make_plan
    from cli.train.stages import run_grpo

    run = RunDir(tmp_path / "run")
    prepped = invoke(
        "prep", "gsm8k", "--run", run.path, "--tools", "python", "--limit", "60", "--eval-size", "4"
    )
    assert prepped.exit_code == 0, prepped.output
    stats = json.loads((run.data_dir / "stats.json").read_text())
    assert stats["tool_warmup"]["kept"] > 0 and stats["tools"] == ["python"]
    # GRPO's prompts: the question the model below learned to answer with a call.
    pd.DataFrame(
        {"question": [QUESTION] * 4, "answer": ["18"] * 4, "solution": [None] * 4, "prompt_tokens": [0] * 4}
    ).to_parquet(run.data_dir / "train.parquet")
    rerecord(run, "train.parquet")  # as prep records its files: eval and grpo check them (issue 40)
    over = {"grpo.max_steps": 1, "grpo.gens": 2, "grpo.max_completion_length": 64, "grpo.temperature": 0.7}
    cfg = resolve(saved=run.saved_config(), overrides=over)
    call_the_tool(resolve_model(cfg, run))

    seen: list[dict] = []
    original = GRPOTrainer._generate_and_score_completions

    def observed(self, inputs):  # records what TRL's tool loop produced; changes nothing
        out = original(self, inputs)
        seen.append({"ids": out["completion_ids"].tolist(), "tool_mask": out["tool_mask"].tolist()})
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", observed)
    run_grpo(make_plan(run, cfg, Launch(), resume=False, allow_dora_merge=False))

    row = next(r for r in map(json.loads, (run.logs_dir / "metrics.jsonl").read_text().splitlines())
               if r.get("stage") == "grpo" and "tools/calls" in r)  # fmt: skip
    assert row["tools/calls"] >= 1 and row["tools/used_share"] > 0 and row["tools/calls_per_completion"] > 0
    assert row["tools/error_rate"] is not None and row["tools/seconds"] >= 0
    from cli.models.loading import load_tokenizer

    tok = load_tokenizer(resolve_model(cfg, run), SPEC)
    masked = [
        tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0 and t != tok.pad_token_id])
        for batch in seen
        for ids, mask in zip(batch["ids"], batch["tool_mask"], strict=True)
    ]
    assert any(SPEC.render_tool_result("18") in m for m in masked)  # the sandbox's result, out of the loss
    assert (run.path / "logs" / "train.png").exists()


def rerecord(run, name: str) -> None:
    """Record a data file this test wrote in the manifest, as `grpo prep` records the files it writes."""
    from cli.run.atomic import atomic_write_json, file_sha256

    manifest = run.manifest()
    for stage in manifest.get("stages", {}).values():
        files = stage.get("files") if isinstance(stage, dict) else None
        for info in (files or {}).values() if isinstance(files, dict) else ():
            if isinstance(info, dict) and info.get("path") == f"data/{name}":
                info["sha256"] = file_sha256(run.data_dir / name)
    atomic_write_json(run.path / "manifest.json", manifest)

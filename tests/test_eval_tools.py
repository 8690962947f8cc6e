"""cli/infer/tool_loop.py and `grpo eval` on a tool run (cli/eval/tools.py): the real sandbox, a tiny model
taught in-process to call the tool (tests/tool_runs.py), no mock of the loop or the sandbox.

The loop is the one every engine runs (HF here; vLLM and llama.cpp through the same ``tool_loop``).
"""

from __future__ import annotations

import json

import pytest
from helpers import copy_run, invoke, one_error_line
from tool_runs import TOOL_CODE, TURN2, shared_tool_run


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory):
    return shared_tool_run(tmp_path_factory)


@pytest.fixture(scope="module")
def taught(tool_run):
    """The tool run's base model (taught to call), its tokenizer and contract, and six held-out prompts."""
    from cli.infer import generation, prompting
    from cli.models import loading
    from cli.run.data import eval_rows
    from cli.run.rundir import RunDir, run_config

    rd = RunDir(tool_run)
    spec = run_config(rd, None).format_spec()
    base = tool_run / "base" / "tiny"
    tok = loading.load_tokenizer(base, spec)
    model = loading.load_hf(base, dtype=generation.decode_dtype())
    rows = eval_rows(rd, 6)
    prompts = [prompting.prompt_text(tok, spec, r["question"]) for r in rows]
    return model, tok, spec, prompts


def _loop(taught, *, max_new_tokens=96, max_tool_calls=4, backend=None, sandbox=None):
    from cli.infer.tool_loop import HFBackend, LoopLimits, tool_loop
    from cli.tools import PythonSandbox

    model, tok, spec, prompts = taught
    backend = backend or HFBackend(model, tok, batch_size=4)
    ids = [backend.tokenize(p) for p in prompts]
    with sandbox or PythonSandbox() as box:
        return tool_loop(backend, prompts, ids, spec=spec, sandbox=box,
                         limits=LoopLimits(max_new_tokens, max_tool_calls))  # fmt: skip


def test_loop_runs_each_call_in_the_sandbox_and_continues(taught):
    _, tok, spec, prompts = taught
    out = _loop(taught)
    assert len(out) == len(prompts)
    for c in out:
        # The model wrote the call, the sandbox computed 9+9, the model went on after the result.
        assert [(r.code, r.result, r.kind) for r in c.calls] == [(TOOL_CODE, "18", "ok")]
        assert c.stop == "eos" and len(c.turns) == 2 and c.final == TURN2
        assert c.text == c.turns[0] + c.turns[1] and "<tool_response>" not in c.text  # the rewards' text
        # The ids: turn 1, its EOS, the rendered result (tokenized on its own, as TRL slices it), turn 2.
        first = tok(c.turns[0], add_special_tokens=False).input_ids
        result = tok(spec.render_tool_result("18"), add_special_tokens=False).input_ids
        assert c.tokens[: len(first) + 1 + len(result)] == [*first, tok.eos_token_id, *result]
        assert c.model_tokens == len(c.tokens) - 1 - len(result)
        assert c.transcript == c.turns[0] + tok.eos_token + spec.render_tool_result("18") + TURN2


def test_the_results_render_as_trl_renders_a_tool_turn(taught):
    """TRL's ``_get_tool_suffix_ids``: the chat template over a dummy call turn, cut after its EOS, against
    the same turn + tool messages + generation prompt. The loop's EOS + rendered results are exactly that."""
    _, tok, spec, _ = taught
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": "python", "arguments": {}}}]}]  # fmt: skip
    tools = [{"role": "tool", "name": "python", "content": t} for t in ("18", "Error: ZeroDivisionError: x")]
    prefix = tok.apply_chat_template(dummy, tokenize=True, return_dict=False)
    full = tok.apply_chat_template(
        dummy + tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    cut = max(i for i, t in enumerate(prefix) if t == tok.eos_token_id)
    trl_suffix = full[cut:]  # from the EOS on
    results = spec.render_tool_result("18") + spec.render_tool_result(tools[1]["content"])
    ours = [tok.eos_token_id, *tok(results, add_special_tokens=False).input_ids]
    assert trl_suffix == ours


def test_limits_end_a_completion_as_trl_does(taught):
    # No round allowed: the call is written, not run, and the completion ends there.
    for c in _loop(taught, max_tool_calls=0):
        assert c.calls == [] and c.unrun_calls == 1 and c.stop == "max_tool_calls" and len(c.turns) == 1
    # A budget the result does not fit in: the completion ends as it is (TRL drops such a result).
    first = _loop(taught)[0]
    tight = len(first.tokens) - len(first.tokens) // 4  # past the call, short of the whole completion
    for c in _loop(taught, max_new_tokens=tight):
        assert c.stop == "length" and len(c.tokens) <= tight


class _Prefilled:
    """A real HF engine whose first turn is given (a "prefilled" completion): the loop, the sandbox and every
    later turn are real; only what the model writes first is chosen by the test."""

    def __init__(self, inner, first: str) -> None:
        self.inner, self.first, self.eos_id, self.seen = inner, first, inner.eos_id, 0

    def tokenize(self, text):
        return self.inner.tokenize(text)

    def decode(self, ids):
        return self.inner.decode(ids)

    def generate(self, sequences, budgets):
        self.seen += 1
        if self.seen == 1:
            return [self.inner.tokenize(self.first)[:b] for b in budgets]
        return self.inner.generate(sequences, budgets)


def test_a_failing_call_comes_back_as_its_error_and_the_model_goes_on(taught):
    from cli.infer.tool_loop import HFBackend

    model, tok, spec, prompts = taught
    first = "Divide. " + spec.render_tool_call("print(1/0)") + "\n" + spec.render_tool_call("sum(range(5))")
    backend = _Prefilled(HFBackend(model, tok), first)
    out = _loop((model, tok, spec, prompts[:2]), backend=backend, max_new_tokens=320)
    for c in out:
        assert [r.kind for r in c.calls] == ["error", "ok"]
        assert c.calls[0].result.startswith("Error: ZeroDivisionError") and c.calls[1].result == "10"
        assert spec.render_tool_result(c.calls[0].result) in c.transcript and len(c.turns) == 2


@pytest.mark.slow
def test_eval_tool_run_with_and_without_the_tool(tool_run, tmp_path):
    run = copy_run(tool_run, tmp_path / "run")
    result = invoke("eval", "--run", run, "--limit", "4", "--max-new-tokens", "96", "--tools", "both")
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    rows = {r["checkpoint"]: r for r in report["results"]}
    assert list(rows) == ["base", "base:no-tool", "sft", "sft:no-tool", "grpo", "grpo:no-tool"]
    for stage in ("base", "sft", "grpo"):
        on, off = rows[stage], rows[stage + ":no-tool"]
        assert on["label"].endswith(", with the tool") and off["label"].endswith(", no tool")
        # Every completion called once; 18 is the answer of GSM8K test #1 only.
        assert on["tool_calls_per_completion"] == 1.0 and on["tool_use"] == 1.0 and on["tool_errors"] == 0.0
        assert on["accuracy_with_tool"] == 0.25 and on["accuracy_without_tool"] is None
        assert on["called_and_tagged"] == 1.0 and off["called_and_tagged"] == 0.0
        assert on["format_compliance"] == 1.0 and on["accuracy"] == 0.25 and on["stops"]["eos"] == 4
        # Without the tool the taught model still writes its call, which is not run: no answer.
        assert off["tool_calls_per_completion"] == 0.0 and off["calls_unrun"] == 4
        assert off["accuracy"] == 0.0 and off["accuracy_without_tool"] == 0.0
    pairs = {(p["a"], p["b"]): p for p in report["paired"]}
    tool_gain = pairs[("grpo:no-tool", "grpo")]
    assert tool_gain["mean_reward_diff"] > 0 and tool_gain["ci95"][0] > 0
    samples = [json.loads(x) for x in (run / "eval" / "samples.jsonl").read_text().splitlines()]
    grpo = [s for s in samples if s["checkpoint"] == "grpo"]
    assert grpo[0]["tool_calls"] == [{"code": TOOL_CODE, "result": "18", "kind": "ok"}]
    assert "<tool_response>\n18\n</tool_response>" in grpo[0]["transcript"]
    assert "<tool_response>" not in grpo[0]["completion"]
    md = (run / "eval" / "report.md").read_text()
    assert (
        "## Tool use" in md
        and "| After GRPO, with the tool | 1.00 | 100.0% | 100.0% | 0.0% | 25.0% (n=4) | — |" in md
    )
    assert "tool use" in result.output  # the printed table


@pytest.mark.slow
def test_eval_tools_off_scores_the_tool_free_form_only(tool_run, tmp_path):
    run = copy_run(tool_run, tmp_path / "run")
    result = invoke("eval", "--run", run, "--limit", "2", "--max-new-tokens", "64", "--models", "grpo",
                    "--tools", "off")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    assert [r["checkpoint"] for r in report["results"]] == ["grpo:no-tool"]


def test_eval_tools_flag_errors(run_dir, tool_run, tmp_path):
    # A run without the tool: --tools on / both is one line naming the way to a tool run.
    line = one_error_line(invoke("eval", "--run", copy_run(run_dir, tmp_path / "plain"), "--tools", "on"))
    assert "this run has no tool" in line and "--tools python" in line
    line = one_error_line(invoke("eval", "--run", copy_run(tool_run, tmp_path / "tool"), "--tools", "maybe"))
    assert "unknown --tools 'maybe'" in line

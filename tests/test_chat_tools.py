"""`grpo chat` on a tool run (cli/commands/chat_tools.py): a turn's calls are parsed, run in the real sandbox
and fed back in the format contract's flat text; the rounds are bounded. The model's turns are given as
text (what a model wrote), so the loop, the sandbox and the format are what is tested; then the real command
on tests/tool_runs.py's tiny model taught to call the tool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.commands.chat_tools import ChatTools, converse, feed_calls, visible
from cli.tools import PythonSandbox, SandboxLimits, ToolOutcome
from py_rewards.spec import FormatSpec

SPEC = FormatSpec(tools=("python",))
EOS = "<|eos|>"


def call(code: str, name: str = "python") -> str:
    body = json.dumps({"name": name, "arguments": {"code": code}})
    return f"{SPEC.tool_call_start}\n{body}\n{SPEC.tool_call_end}"


@pytest.fixture(scope="module")
def tools() -> Iterator[ChatTools]:
    with PythonSandbox(SandboxLimits(timeout_s=0.5)) as sandbox:
        yield ChatTools(sandbox, max_calls=2, eos_text=EOS)


def test_feed_calls_runs_each_call_and_renders_the_results(tools: ChatTools) -> None:
    turn = f"Natalia sold 48/2 = {call('print(48 / 2)')}\n{call('1 / 0')}\n{call('x', name='shell')}"
    seen: list[tuple[str, ToolOutcome]] = []
    follow = feed_calls(SPEC, turn, tools, lambda code, o: seen.append((code, o)))
    assert [(c, o.kind) for c, o in seen] == [("print(48 / 2)", "ok"), ("1 / 0", "error")]  # no "shell" call
    assert follow == (
        EOS
        + SPEC.render_tool_result("24.0")
        + SPEC.render_tool_result("Error: ZeroDivisionError: division by zero (line 1)")
    )
    assert follow.startswith(EOS + "<tool_response>\n24.0\n</tool_response>\n")
    assert feed_calls(SPEC, "no call here <SOLUTION>72</SOLUTION>", tools) is None


def test_converse_feeds_results_back_until_the_answer(tools: ChatTools) -> None:
    turns = [
        f"48/2 = {call('print(48 / 2)')}",
        f"24 in May; 48+24 = {call('48 + 24')}",
        "<SOLUTION>72</SOLUTION>",
    ]
    prompts: list[str] = []

    def model(prompt: str, i: int) -> str:
        prompts.append(prompt)
        return turns[i]

    text = converse(SPEC, "PROMPT", tools, model)
    r1, r2 = SPEC.render_tool_result("24.0"), SPEC.render_tool_result("72")
    assert text == turns[0] + EOS + r1 + turns[1] + EOS + r2 + turns[2]
    assert prompts == [
        "PROMPT",
        "PROMPT" + turns[0] + EOS + r1,
        "PROMPT" + turns[0] + EOS + r1 + turns[1] + EOS + r2,
    ]


def test_converse_stops_after_max_calls_rounds(tools: ChatTools) -> None:
    ran: list[str] = []

    def forever(_prompt: str, i: int) -> str:  # a model that never stops calling
        return f"again {call(f'print({i})')}"

    text = converse(
        SPEC, "P", tools, lambda _p, i: f"again {call(f'print({i})')}", lambda c, _o: ran.append(c)
    )
    assert ran == ["print(0)", "print(1)"]  # max_calls=2 rounds; the third turn's call is not run
    assert text.count(SPEC.tool_result_start) == 2 and text.endswith(call("print(2)"))


def test_a_hostile_call_in_chat_is_an_error_result(tools: ChatTools) -> None:
    follow = feed_calls(SPEC, call("open('/etc/passwd').read()"), tools)
    assert follow is not None and "Error: PermissionError" in follow
    assert tools.sandbox.run("print(1)").text == "1"


def test_visible_hides_a_call_while_it_streams() -> None:
    assert visible(SPEC, "48/2 = ") == "48/2 ="
    assert visible(SPEC, f"48/2 = {call('print(48 / 2)')[:20]}") == "48/2 =  [calling python…]"


# ---- the real command on a tiny model taught to call the tool (tests/tool_runs.py) ----------------------
@pytest.fixture(scope="module")
def tool_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tool_runs import shared_tool_run

    return shared_tool_run(tmp_path_factory)


@pytest.mark.slow
def test_chat_one_shot_runs_the_models_call(tool_run: Path) -> None:
    from helpers import invoke

    result = invoke("chat", "--run", tool_run, "--prompt", "What is 2+3?", "--max-new-tokens", "48")
    assert result.exit_code == 0, result.output
    # the model's call ran in the sandbox, its result went back, the model went on to its answer
    assert SPEC.render_tool_result("18") in result.output
    assert "So 18" in result.output and "<SOLUTION>18</SOLUTION>" in result.output
    args = ["chat", "--run", tool_run, "-p", "What is 2+3?", "--max-new-tokens", "48", "--answer-only"]
    answer = invoke(*args)
    assert answer.exit_code == 0 and answer.output.strip().splitlines()[-1] == "18", answer.output


@pytest.mark.slow
def test_chat_repl_shows_the_call_and_its_result(tool_run: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    before = monty_children()
    args = ["chat", "--run", str(tool_run), "--max-new-tokens", "48"]
    result = CliRunner().invoke(app, args, input="How many legs do 3 cats have?\n/exit\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "python tool" in out  # the banner says the run has the tool
    assert "9+9" in out and "result · ok" in out  # the code panel, then the result panel
    assert "solution" in out and "18" in out
    assert monty_children() - before == set()  # the chat's sandbox closed with the REPL


def monty_children() -> set[int]:
    import psutil

    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if "monty" in " ".join(p.cmdline()[:1]) and p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out

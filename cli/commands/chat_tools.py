"""`grpo chat` on a tool run: each call the model writes runs in the sandbox, shown as it happens.

The conversation is the format contract's flat text (docs/tools.md "Format"): the model writes a turn that
ends in ``<tool_call>`` blocks and EOS; every well-formed call runs in :class:`cli.tools.PythonSandbox`; the
turn, its EOS and the rendered results (``spec.render_tool_result``) are appended to the prompt and the
model continues its working out. At most ``grpo.max_tool_calls`` rounds of calls (as in training); a turn
that calls past them ends the answer, its calls not run. Each turn gets ``max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cli.common import console

if TYPE_CHECKING:
    from cli.tools import PythonSandbox, ToolOutcome
    from py_rewards.spec import FormatSpec

# (prompt so far, the turn's index) -> the turn's text: streamed to the screen, or generated quietly
TurnFn = Callable[[str, int], str]
OnCall = Callable[[str, "ToolOutcome"], None]


@dataclass
class ChatTools:
    """What a tool run's chat needs: the sandbox, the rounds allowed, and the text of the model's EOS."""

    sandbox: PythonSandbox
    max_calls: int
    eos_text: str


def feed_calls(spec: FormatSpec, turn: str, tools: ChatTools, on_call: OnCall | None = None) -> str | None:
    """Run the turn's well-formed calls; what follows the turn (its EOS and the results), or None when the
    turn has no call (the answer is done)."""
    calls = spec.find_tool_calls(turn)
    if not calls:
        return None
    results = []
    for code in calls:
        outcome = tools.sandbox.run(code)
        if on_call is not None:
            on_call(code, outcome)
        results.append(spec.render_tool_result(outcome.text))
    return tools.eos_text + "".join(results)


def converse(
    spec: FormatSpec, prompt: str, tools: ChatTools, turn: TurnFn, on_call: OnCall | None = None
) -> str:
    """The whole answer to ``prompt``: its turns with their EOS and results between them (flat text)."""
    text = ""
    for i in range(tools.max_calls + 1):
        new = turn(prompt + text, i)
        if i == tools.max_calls and spec.find_tool_calls(new):
            console.print(
                f"[yellow]note:[/] {tools.max_calls} rounds of tool calls reached; the last not run"
            )
            return text + new
        follow = feed_calls(spec, new, tools, on_call)
        if follow is None:
            return text + new
        text += new + follow
    return text


def visible(spec: FormatSpec, turn: str) -> str:
    """A turn as the screen shows it while it streams: up to its first call (the call gets a panel)."""
    head, sep, _ = turn.partition(spec.tool_call_start)
    return head.rstrip() + ("  [calling python…]" if sep else "")


def show_call(code: str, outcome: ToolOutcome) -> None:
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    console.print(Panel(Syntax(code, "python", theme="ansi_dark"), title="python", title_align="left",
                        border_style="cyan", expand=False))  # fmt: skip
    style = "green" if outcome.ok else "red"
    title = f"result · {outcome.kind} · {outcome.seconds * 1e3:.1f} ms"
    console.print(
        Panel(Text(outcome.text), title=title, title_align="left", border_style=style, expand=False)
    )


def stream_turn(engine: Any, max_new_tokens: int, render: Callable[..., Any]) -> TurnFn:
    """A TurnFn that streams each turn live (the reasoning dim, calls hidden until they run)."""
    from rich.live import Live

    spec = engine.spec

    def turn(prompt: str, i: int) -> str:
        text = ""
        if not console.is_terminal:
            text = "".join(engine.stream(prompt, max_new_tokens))
            console.print(render(spec, visible(spec, text), done=not spec.find_tool_calls(text), lead=i == 0))
            return text
        with Live(render(spec, "", lead=i == 0), console=console, refresh_per_second=12) as live:
            for piece in engine.stream(prompt, max_new_tokens):
                text += piece
                live.update(render(spec, visible(spec, text), lead=i == 0))
            live.update(render(spec, visible(spec, text), done=not spec.find_tool_calls(text), lead=i == 0))
        return text

    return turn


def quiet_turn(engine: Any, max_new_tokens: int) -> TurnFn:
    """A TurnFn that generates each turn whole, showing nothing (--answer-only, /compare)."""
    return lambda prompt, _i: engine.complete(prompt, max_new_tokens)


def answer(engine: Any, prompt: str, max_new_tokens: int, tools: ChatTools | None) -> str:
    """The whole answer, shown nowhere: one completion, or on a tool run its turns with the results."""
    if tools is None:
        return str(engine.complete(prompt, max_new_tokens))
    return converse(engine.spec, prompt, tools, quiet_turn(engine, max_new_tokens))


def open_tools(spec: FormatSpec, cfg: Any, eos_text: str) -> ChatTools | None:
    """The run's tool setup, or None when the run is not a tool run (its format offers no tools)."""
    if not spec.tools:
        return None
    from cli.tools import PythonSandbox

    return ChatTools(PythonSandbox(cfg.sandbox.limits()), cfg.grpo.max_tool_calls, eos_text)

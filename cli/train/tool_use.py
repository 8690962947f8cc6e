"""The python tool in a GRPO run: the sandbox TRL's tool loop calls, what the rewards see of a completion
that used it, and the tool columns of metrics.jsonl (docs/tools.md "Training").

TRL drives the turns (``GRPOTrainer(tools=[python])``, ``max_tool_calling_iterations``): it parses each
generated turn with the tokenizer's ``response_template`` (the format contract's), calls the tool, appends
the result with the chat template and generates again, and masks the results out of the loss
(``tool_mask``). What this module adds:

- :class:`ToolRun` owns the sandbox for the run (closed at the end, no worker left behind) and the TRL tool
  function over it. A tool error, timeout or memory stop is the tool's result text: the model reads it, the
  sandbox counts it, the run goes on.
- :meth:`ToolRun.see` turns each completion (assistant, tool, assistant, ... messages) into one assistant
  message holding the model's own text (:meth:`py_rewards.FormatSpec.completion_text`: its calls written
  back, the results left out), so every reward, Rust or custom, scores one text per completion; and counts
  the completions that called the tool.
- :meth:`ToolRun.take` gives the log step's tool columns: calls per completion, the share of completions
  that used the tool, the error rate, the seconds in the tool and their share of the step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

# metrics.jsonl columns (also read by the live view and train.png)
CALLS_PER_COMPLETION = "tools/calls_per_completion"
USED_SHARE = "tools/used_share"
ERROR_RATE = "tools/error_rate"
SECONDS = "tools/seconds"
SHARE = "tools/share"


class ToolRun:
    """The sandbox and the tool counters of one training run."""

    def __init__(self, spec: FormatSpec, limits: Any) -> None:
        from cli.tools import PythonSandbox, ToolStats, python_tool

        self.spec = spec
        self.stats = ToolStats()
        self.sandbox = PythonSandbox(limits, self.stats)
        self.tool: Callable[[str], str] = python_tool(self.sandbox)
        self._lock = threading.Lock()
        self._completions = 0
        self._used = 0

    def tools(self) -> list[Callable[[str], str]]:
        """What TRL's ``GRPOTrainer(tools=...)`` gets."""
        return [self.tool]

    def close(self) -> None:
        self.sandbox.close()

    def __enter__(self) -> ToolRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def see(self, completions: Sequence[Any]) -> list[Any]:
        """Count the batch's completions and the ones that called the tool; each as one assistant message
        with the model's own text (a plain-text completion is left as it is)."""
        out: list[Any] = []
        used = 0
        for completion in completions:
            if isinstance(completion, str):
                out.append(completion)
                continue
            used += any(m.get("role") == "tool" or m.get("tool_calls") for m in completion)
            out.append([{"role": "assistant", "content": self.spec.completion_text(completion)}])
        with self._lock:
            self._completions += len(completions)
            self._used += used
        return out

    def take(self, window: float) -> dict[str, float | None]:
        """The tool columns since the last call (``window``: the seconds those steps took)."""
        snap = self.stats.snapshot(reset=True)
        with self._lock:
            n, used = self._completions, self._used
            self._completions = self._used = 0
        calls, seconds = snap.get("tools/calls", 0.0), snap.get("tools/seconds", 0.0)
        row: dict[str, float | None] = {k: v for k, v in snap.items() if k != "tools/seconds"}
        row[CALLS_PER_COMPLETION] = round(calls / n, 4) if n else None
        row[USED_SHARE] = round(used / n, 4) if n else None
        row[ERROR_RATE] = round(snap.get("tools/errors", 0.0) / calls, 4) if calls else None
        row[SECONDS] = round(seconds, 4)
        row[SHARE] = round(seconds / window, 4) if window > 0 else None
        return row


def console_part(row: dict[str, Any]) -> str | None:
    """The live view's tool part: ``tools 1.2/compl, used 80%, errors 5%``."""
    per = row.get(CALLS_PER_COMPLETION)
    if per is None:
        return None
    text = f"tools {per:.2g}/compl, used {row.get(USED_SHARE) or 0:.0%}"
    if row.get(ERROR_RATE) is not None:
        text += f", errors {row[ERROR_RATE]:.0%}"
    return text

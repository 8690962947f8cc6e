"""The tool run's SFT warm-up, built from GSM8K's calculator annotations (`grpo prep gsm8k --tools python`).

GSM8K's worked solutions mark each calculation: ``Natalia sold 48/2 = <<48/2=24>>24 clips``. Each
``<<expr=value>>`` becomes a python tool call whose result the real sandbox computes; the conversation
goes on with the solution's own text after the annotation, so no text is invented::

    assistant: <start_working_out>Natalia sold 48/2 =   + call {"code": "48/2"}
    tool:      24.0
    assistant: 24 clips in May. ... <end_working_out><SOLUTION>72</SOLUTION>

A row is dropped (and counted by reason in ``data/stats.json`` under ``tool_warmup``) when a result does not
equal the value the annotation states (to the value's own decimals: ``<<1/3=0.33>>`` holds), when the
sandbox fails on an expression, when the row has no annotation, or when it has more calls than
``grpo.max_tool_calls``. Only the train split's rows are used (eval's stay held out). The conversations go
to ``data/sft_tools.parquet`` (one JSON list of chat messages per row), which `grpo sft` trains on.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

CALC = re.compile(r"<<([^<>]*)>>")
FILE = "sft_tools.parquet"
COLUMN = "messages_json"


@dataclass
class WarmupCounts:
    rows: int = 0
    kept: int = 0
    calls: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "kept": self.kept,
            "calls": self.calls,
            "calls_per_row": round(self.calls / self.kept, 3) if self.kept else None,
            "dropped": dict(self.dropped.most_common()),
        }


def same_value(result: str, stated: str) -> bool:
    """The sandbox's result equals the annotation's value: exactly as numbers, or rounded to the stated
    value's decimals (GSM8K writes ``<<1/3=0.33>>``).

    >>> same_value("24.0", "24"), same_value("0.3333333333333333", "0.33"), same_value("25", "24")
    (True, True, False)
    """
    try:
        got, want = float(result.strip().replace(",", "")), float(stated.strip().replace(",", ""))
    except ValueError:
        return False
    if not (math.isfinite(got) and math.isfinite(want)):
        return False
    if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9):
        return True
    decimals = len(stated.strip().partition(".")[2])
    return decimals > 0 and round(got, decimals) == round(want, decimals)


def conversation(
    spec: FormatSpec, question: str, reasoning: str, answer: str, run: Any
) -> tuple[list[dict[str, Any]] | None, str, int]:
    """The chat messages of one annotated solution, or None and why not; and its number of calls.

    ``run(code) -> ToolOutcome``: the sandbox. ``reasoning``: the solution before ``####``, annotations kept.
    """
    messages: list[dict[str, Any]] = spec.messages(question)
    pos, calls = 0, 0
    prefix = spec.reasoning_start
    for m in CALC.finditer(reasoning):
        expr, eq, value = m.group(1).rpartition("=")
        if not eq or not expr.strip():
            return None, "annotation without '='", calls
        outcome = run(expr.strip())
        if outcome.kind != "ok":
            return None, "tool error", calls
        if not same_value(outcome.text, value):
            return None, "result differs from the annotation", calls
        call = {"type": "function", "function": {"name": "python", "arguments": {"code": expr.strip()}}}
        messages.append(
            {"role": "assistant", "content": prefix + reasoning[pos : m.start()], "tool_calls": [call]}
        )
        messages.append({"role": "tool", "name": "python", "content": outcome.text})
        prefix, pos, calls = "", m.end(), calls + 1
    if calls == 0:
        return None, "no calculator annotation", 0
    tail = reasoning[pos:].strip()
    final = f"{tail}{spec.reasoning_end}{spec.solution_start}{answer}{spec.solution_end}"
    messages.append({"role": "assistant", "content": final})
    return messages, "", calls


def raw_solutions(records: Sequence[Any]) -> dict[str, str]:
    """question → GSM8K answer text before ``####`` (annotations kept), from the rows prep read."""
    out: dict[str, str] = {}
    for r in records:
        if not isinstance(r, Mapping):
            continue
        q, a = r.get("question"), r.get("answer")
        if isinstance(q, str) and isinstance(a, str) and "####" in a:
            out.setdefault(q, a.rpartition("####")[0].strip())
    return out


def build(
    spec: FormatSpec, train: Any, raw: Mapping[str, str], sandbox: Any, max_calls: int
) -> tuple[list[str], WarmupCounts]:
    """The warm-up conversations (JSON text, one per kept row) of the train rows, and the counts."""
    counts = WarmupCounts()
    rows: list[str] = []
    for question, answer in zip(train["question"], train["answer"], strict=True):
        counts.rows += 1
        reasoning = raw.get(str(question))
        if reasoning is None:
            counts.dropped["no annotated solution"] += 1
            continue
        messages, why, calls = conversation(spec, str(question), reasoning, str(answer).strip(), sandbox.run)
        if messages is None:
            counts.dropped[why] += 1
            continue
        if calls > max_calls:
            counts.dropped["more calls than grpo.max_tool_calls"] += 1
            continue
        counts.kept += 1
        counts.calls += calls
        rows.append(json.dumps(messages, ensure_ascii=False))
    return rows, counts


def messages_of(text: str) -> list[dict[str, Any]]:
    """One row of ``sft_tools.parquet`` back as chat messages."""
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("a warm-up row is not a list of messages")
    return value

"""`grpo eval` on a tool run: every checkpoint decoded through the tool loop (:mod:`cli.infer.tool_loop`) with
the sandbox training used, the tool columns, and the tool-free form of the same checkpoints.

``--tools`` (a tool run's default ``on``):

- ``on``: each checkpoint asked with the tool contract (the system prompt's tool paragraph), its calls run
  in the sandbox, at most ``grpo.max_tool_calls`` rounds per completion, as in training;
- ``off``: the tool-free contract (the same tags, no tool paragraph) and no loop: a call the model writes
  anyway ends its completion unrun (counted as ``calls_unrun``);
- ``both``: each checkpoint twice, the tool-free row ``<checkpoint>:no-tool`` right after it, and the paired
  difference of the two on the same prompts: what the tool adds.

The tool columns (report.json, report.md's "Tool use" table, the printed table): calls per completion, the
share of completions that called, the share of calls that failed, accuracy (seed rule) of the completions
with a call and of those without, and the seconds spent in the sandbox. Scored text is the model's own
(``spec.completion_text``: the results left out), as the rewards see it in training.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError

if TYPE_CHECKING:
    from cli.config.schema import Config
    from cli.infer.tool_loop import Backend, ToolCompletion
    from py_rewards.spec import FormatSpec

MODES = ("auto", "on", "off", "both")
TOOL_DEFINITION = (
    "Tool columns: a call is a well-formed python call the sandbox ran (at most grpo.max_tool_calls rounds "
    "a completion); a tool error is a result of kind error, timeout, memory, output (cut) or crash; "
    "accuracy (seed rule) of the completions with at least one call and of those with none; a no-tool row "
    "asks the same checkpoint with the tool-free system prompt and runs no call (the difference tool row − "
    "no-tool row, paired over prompts, is what the tool adds); completion length counts the tool results."
)
NO_TOOL = ":no-tool"  # suffix of a checkpoint's tool-free row


@dataclass
class ToolEval:
    """How one `grpo eval` treats the tool: the mode, the two contracts, the loop's limits, the sandbox."""

    mode: str  # on | off | both
    spec: FormatSpec  # the run's (tool) contract
    free_spec: FormatSpec  # the same contract without the tool
    max_tool_calls: int
    limits: Any = None  # cli.tools.SandboxLimits
    free_prompts: list[str] = field(default_factory=list)
    sandbox: Any = None  # cli.tools.PythonSandbox, started on the first call

    def stages(self, checkpoints: Sequence[str]) -> list[str]:
        if self.mode == "off":
            return [c + NO_TOOL for c in checkpoints]
        if self.mode == "both":
            return [s for c in checkpoints for s in (c, c + NO_TOOL)]
        return list(checkpoints)

    def open(self) -> Any:
        from cli.tools import PythonSandbox

        if self.sandbox is None:
            self.sandbox = PythonSandbox(self.limits) if self.limits is not None else PythonSandbox()
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


@contextlib.contextmanager
def session(tools: ToolEval | None, tokenizer: Any, rows: Sequence[dict[str, str]]) -> Iterator[None]:
    """The tool-free prompts for the rows; the sandbox (started by the first call) closed at the end."""
    from cli.infer import prompting

    if tools is None:
        yield
        return
    tools.free_prompts = [prompting.prompt_text(tokenizer, tools.free_spec, r["question"]) for r in rows]
    try:
        yield
    finally:
        tools.close()


def plan(cfg: Config, spec: FormatSpec, requested: str) -> ToolEval | None:
    """The run's tool settings for eval, or None on a run without a tool (``--tools off`` or ``auto``)."""
    if requested not in MODES:
        raise GrpoError(f"unknown --tools {requested!r} (choose auto, on, off or both)")
    if not spec.tools:
        if requested in ("on", "both"):
            raise GrpoError(
                f"--tools {requested}: this run has no tool (prep it with `grpo prep NAME --tools python`)"
            )
        return None
    mode = "on" if requested == "auto" else requested
    return ToolEval(
        mode=mode,
        spec=spec,
        free_spec=dataclasses.replace(spec, tools=()),
        max_tool_calls=cfg.grpo.max_tool_calls,
        limits=cfg.sandbox.limits(),
    )


def checkpoint(stage: str) -> str:
    """The checkpoint a row decodes (``grpo:no-tool`` → ``grpo``)."""
    return stage.removesuffix(NO_TOOL)


def label(stage: str, labels: dict[str, str]) -> str:
    base = labels.get(checkpoint(stage), checkpoint(stage))
    return base + ", no tool" if stage.endswith(NO_TOOL) else base + ", with the tool"


# ---- decoding -----------------------------------------------------------------------------------------
def decode(
    tools: ToolEval, stage: str, backend: Backend, prompts: Sequence[str], max_new_tokens: int
) -> list[ToolCompletion]:
    """One row's completions through the shared loop: the tool form runs calls, the tool-free form none."""
    from cli.infer.tool_loop import LoopLimits, tool_loop

    free = stage.endswith(NO_TOOL)
    if free:
        prompts = tools.free_prompts
    ids = [backend.tokenize(p) for p in prompts]
    rounds = 0 if free else tools.max_tool_calls
    return tool_loop(
        backend, prompts, ids, spec=tools.free_spec if free else tools.spec, sandbox=tools.open(),
        limits=LoopLimits(max_new_tokens, rounds),
    )  # fmt: skip


def hf_decode(
    job: Any,
    stage: str,
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    progress: Callable[[int], None] | None = None,
    tokens: Callable[[int, int], None] | None = None,
) -> list[ToolCompletion]:
    """A row of ``job`` (the EvalJob) through HF ``generate`` and the loop; ``tokens``: the turn under way."""
    from cli.infer.tool_loop import HFBackend

    backend = HFBackend(model, tokenizer, batch_size=job.batch_size, tokens=tokens)
    out = decode(job.tools, stage, backend, prompts, job.max_new_tokens)
    if progress is not None:
        progress(len(out))
    return out


def vllm_generate(job: Any, base_path: str, tokenizer: Any) -> dict[str, list[Any]]:
    """Every row through one vLLM engine (base + each adapter as a LoRA request) and the loop HF's rows
    go through; the base-chat row (the model's own template) too, with no call run. ``job``: the EvalJob."""
    import time

    from cli.infer.tool_loop import LoopLimits, VLLMBackend, tool_loop
    from cli.infer.vllm_engine import greedy_engine

    assert job.tools is not None
    t_gen = time.perf_counter()
    stages, tool_rows = job.stages(), set(job.tools.stages(job.checkpoints))
    every = [*job.prompts, *job.tools.free_prompts, *job.native_prompts]
    longest = max(len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in every)
    used = {c: job.adapters[c] for c in {checkpoint(s) for s in stages} if c in job.adapters}
    llm, info, lora = greedy_engine(base_path, len(job.prompts), longest, job.max_new_tokens, used)
    out, seconds = {}, {}
    for stage in stages:
        t0 = time.perf_counter()
        if stage not in tool_rows:  # the base-chat row
            backend = VLLMBackend(llm, tokenizer, None, stop_ids=job.native_stops)
            ids = [backend.tokenize(p) for p in job.native_prompts]
            out[stage] = tool_loop(backend, job.native_prompts, ids, spec=job.tools.free_spec, sandbox=None,
                                   limits=LoopLimits(job.max_new_tokens, 0))  # fmt: skip
        else:
            backend = VLLMBackend(llm, tokenizer, lora(checkpoint(stage)))
            out[stage] = decode(job.tools, stage, backend, job.prompts, job.max_new_tokens)
        seconds[stage] = round(time.perf_counter() - t0, 2)
    total = round(time.perf_counter() - t_gen, 2)
    job.engine_info = {**info, "stage_seconds": seconds, "generation_seconds": total}
    return out


# ---- the tool columns ---------------------------------------------------------------------------------
def columns(spec: FormatSpec, gens: Sequence[ToolCompletion], correct: Sequence[bool]) -> dict[str, Any]:
    """A row's tool columns (the accuracies are None where no completion falls in the group).

    ``called_and_tagged``: the share of completions that made a call and put an answer between the solution
    tags of their last turn (the issue's "well-formed tool run")."""
    from cli.infer.tool_loop import call_stats

    called = [c for g, c in zip(gens, correct, strict=True) if g.calls]
    uncalled = [c for g, c in zip(gens, correct, strict=True) if not g.calls]
    out: dict[str, Any] = {k: round(v, 4) for k, v in call_stats(gens).items()}
    out.update(
        tool_completions=len(called),
        accuracy_with_tool=round(sum(called) / len(called), 4) if called else None,
        accuracy_without_tool=round(sum(uncalled) / len(uncalled), 4) if uncalled else None,
        called_and_tagged=round(
            sum(1 for g in gens if g.calls and _tagged(spec, g.final)) / max(1, len(gens)), 4
        ),
        calls_unrun=sum(g.unrun_calls for g in gens),
        mean_model_tokens=round(sum(g.model_tokens for g in gens) / max(1, len(gens)), 2),
        stops={s: sum(1 for g in gens if g.stop == s) for s in ("eos", "length", "max_tool_calls")},
    )
    return out


def _tagged(spec: FormatSpec, turn: str) -> bool:
    """An answer between the solution tags (non-empty)."""
    _, start, after = turn.partition(spec.solution_start)
    answer, end, _ = after.partition(spec.solution_end)
    return bool(start and end and answer.strip())


def sample_fields(g: ToolCompletion) -> dict[str, Any]:
    """What samples.jsonl adds per completion: each call and its result, and the whole transcript."""
    return {
        "tool_calls": [{"code": r.code, "result": r.result, "kind": r.kind} for r in g.calls],
        "stop": g.stop,
        "transcript": g.transcript,
    }


def pairs(per_prompt: dict[str, list[float]]) -> list[tuple[str, str]]:
    """(tool-free row, tool row) of each checkpoint scored both ways: the paired difference is the tool's."""
    return [(k, checkpoint(k)) for k in per_prompt if k.endswith(NO_TOOL) and checkpoint(k) in per_prompt]


def markdown(results: Sequence[dict[str, Any]]) -> list[str]:
    """report.md's "Tool use" table (empty without tool rows)."""
    rows = [r for r in results if "tool_calls_per_completion" in r]
    if not rows:
        return []
    lines = [
        "",
        "## Tool use",
        "",
        "| Model Checkpoint | Calls per completion | Used the tool (%) | Call + tagged answer (%) "
        "| Tool errors (% of calls) | Accuracy with a call (%) | Accuracy without a call (%) "
        "| Seconds in the tool |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['tool_calls_per_completion']:.2f} | {_pct(r['tool_use'])} | "
            f"{_pct(r['called_and_tagged'])} | "
            f"{_pct(r['tool_errors'])} | {_pct(r['accuracy_with_tool'], r['tool_completions'])} | "
            f"{_pct(r['accuracy_without_tool'], r['n'] - r['tool_completions'])} | {r['tool_seconds']:.2f} |"
        )
    lines += ["", TOOL_DEFINITION]
    return lines


def _pct(value: float | None, n: int | None = None) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.1f}%" + (f" (n={n})" if n is not None else "")


def print_table(results: Sequence[dict[str, Any]]) -> None:
    from rich.table import Table

    from cli.common import console

    rows = [r for r in results if "tool_calls_per_completion" in r]
    if not rows:
        return
    table = Table(title="tool use")
    for name in ("Model Checkpoint", "calls / completion", "used the tool", "tool errors",
                 "accuracy with a call", "accuracy without"):  # fmt: skip
        table.add_column(name, justify="left" if name == "Model Checkpoint" else "right")
    for r in rows:
        table.add_row(
            r["label"], f"{r['tool_calls_per_completion']:.2f}", _pct(r["tool_use"]), _pct(r["tool_errors"]),
            _pct(r["accuracy_with_tool"], r["tool_completions"]),
            _pct(r["accuracy_without_tool"], r["n"] - r["tool_completions"]),
        )  # fmt: skip
    console.print(table)

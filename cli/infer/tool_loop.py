"""The tool loop at inference: generate → find the calls → run them in the sandbox → append the results →
continue, for every engine (HF generate, vLLM, llama.cpp): `grpo eval` and export's verification.

It is TRL's loop (``GRPOTrainer._tool_call_loop``) replayed outside the trainer, on the format contract's
flat text (``FormatSpec`` with ``tools``; docs/tools.md "Format"), so a model is judged on the turns it was
trained on:

- a turn ends at EOS; its text is searched for calls (``spec.find_tool_calls``: the code of each
  well-formed python call; a malformed block is no call);
- each call runs in the sandbox (:class:`cli.tools.PythonSandbox`: a failure comes back as the result's
  text); the turn's EOS and the rendered results (``spec.render_tool_result``, what the chat template writes
  for ``tool`` messages, which TRL's ``_get_tool_suffix_ids`` slices out) are appended to the ids, never
  re-tokenized, and the model continues its working out;
- at most ``max_tool_calls`` rounds of calls (TRL's ``max_tool_calling_iterations``, set from
  ``grpo.max_tool_calls``); a turn with calls past it ends the completion, its calls not run. Every token,
  the model's and the results', counts against ``max_new_tokens`` (TRL's ``max_completion_length``): a
  result that would not fit ends the completion as it is, as TRL drops it.

An engine is a :class:`Backend`: greedy continuations of token-id sequences, tokenize, decode
(:class:`HFBackend`, :class:`VLLMBackend`, :class:`GGUFBackend`); ``on_call`` sees each call and its result
as it happens. `grpo chat` streams its turns token by token on the same contract helpers instead
(cli/commands/chat_tools.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


class Backend(Protocol):
    """What the loop needs from an engine."""

    eos_id: int

    def generate(self, sequences: list[list[int]], budgets: list[int]) -> list[list[int]]:
        """Greedy continuation of each sequence, at most ``budgets[i]`` tokens, EOS excluded."""
        ...

    def tokenize(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class CallRecord:
    """A call made during a completion and what came back (``kind``: the sandbox's ToolOutcome.kind:
    ok, error, timeout, memory, output, crash)."""

    code: str
    result: str
    kind: str
    seconds: float


@dataclass
class ToolCompletion:
    """One completion with its tool turns.

    ``tokens``: the ids after the prompt, the model's turns each (but the last) followed by its EOS and the
    rendered results (TRL's ``completion_ids``); ``model_tokens``: how many the model wrote (TRL's
    ``tool_mask``); ``turns``: the text of each assistant turn; ``text``: the model's own text, every turn in
    order with its calls, the results left out: what the rewards read (``spec.completion_text``);
    ``transcript``: everything decoded, results included; ``stop``: ``eos`` (a turn ended without a call),
    ``length`` (the budget ran out, mid-turn or before a result fitted) or ``max_tool_calls`` (a turn's calls
    past the limit, not run)."""

    prompt: str
    tokens: list[int] = field(default_factory=list)
    model_tokens: int = 0
    turns: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    unrun_calls: int = 0
    stop: str = "eos"
    transcript: str = ""

    @property
    def text(self) -> str:
        return "".join(self.turns)

    @property
    def final(self) -> str:
        """The last assistant turn: where the answer goes."""
        return self.turns[-1] if self.turns else ""

    def to_json(self) -> dict[str, Any]:
        calls = [[r.code, r.result, r.kind, r.seconds] for r in self.calls]
        return {"tokens": self.tokens, "model_tokens": self.model_tokens, "turns": self.turns,
                "calls": calls, "unrun_calls": self.unrun_calls, "stop": self.stop,
                "transcript": self.transcript}  # fmt: skip

    @classmethod
    def from_json(cls, prompt: str, d: dict[str, Any]) -> ToolCompletion:
        calls = [CallRecord(code, result, kind, seconds) for code, result, kind, seconds in d["calls"]]
        return cls(prompt, d["tokens"], d["model_tokens"], d["turns"], calls, d["unrun_calls"], d["stop"],
                   d["transcript"])  # fmt: skip


@dataclass(frozen=True)
class LoopLimits:
    max_new_tokens: int
    max_tool_calls: int  # rounds of calls per completion (TRL's max_tool_calling_iterations)


@dataclass(frozen=True)
class ToolSettings:
    """A tool run's loop settings as one JSON-able value (export's verification hands them to its llama.cpp
    child): the rounds of calls per completion and the sandbox's limits (SandboxLimits's fields)."""

    max_tool_calls: int
    limits: dict[str, Any]

    def run(self, backend: Backend, spec: FormatSpec, prompts: Sequence[str],
            prompt_ids: Sequence[Sequence[int]], max_new_tokens: int) -> list[ToolCompletion]:  # fmt: skip
        """The loop with a sandbox of its own, closed at the end."""
        from cli.tools import PythonSandbox, SandboxLimits

        with PythonSandbox(SandboxLimits(**self.limits)) as sandbox:
            return tool_loop(backend, prompts, prompt_ids, spec=spec, sandbox=sandbox,
                             limits=LoopLimits(max_new_tokens, self.max_tool_calls))  # fmt: skip

    def request(self, spec: FormatSpec) -> dict[str, Any]:
        return {"spec": spec.to_dict(), "max_tool_calls": self.max_tool_calls, "limits": self.limits}


OnCall = Callable[[int, CallRecord], None]  # (index of the completion, a call and its result), as they run


def run_calls(spec: FormatSpec, turn: str, sandbox: Any) -> list[CallRecord]:
    """The turn's well-formed calls through the sandbox (``PythonSandbox.run`` never raises for the code)."""
    out = []
    for code in spec.find_tool_calls(turn):
        o = sandbox.run(code)
        out.append(CallRecord(code, o.text, o.kind, o.seconds))
    return out


def results_text(spec: FormatSpec, records: Sequence[CallRecord]) -> str:
    """What follows a turn's EOS: its results as the chat template renders ``tool`` messages."""
    return "".join(spec.render_tool_result(r.result) for r in records)


def tool_loop(
    backend: Backend,
    prompts: Sequence[str],
    prompt_ids: Sequence[Sequence[int]],
    *,
    spec: FormatSpec,
    sandbox: Any,
    limits: LoopLimits,
    on_call: OnCall | None = None,
) -> list[ToolCompletion]:
    """Greedy completions of ``prompt_ids``, every call run in ``sandbox`` (see the module's doc); the
    sequences that go on after their results are decoded together, turn by turn."""
    done = [ToolCompletion(p) for p in prompts]
    rounds = [0] * len(done)
    active = list(range(len(done)))
    while active:
        budgets = [limits.max_new_tokens - len(done[i].tokens) for i in active]
        outs = backend.generate([[*prompt_ids[i], *done[i].tokens] for i in active], budgets)
        following = []
        for i, new, budget in zip(active, outs, budgets, strict=True):
            if _next_turn(spec, done[i], (new, backend.decode(new)), budget, rounds[i], limits):
                records = run_calls(spec, done[i].turns[-1], sandbox)
                rounds[i] += 1
                done[i].calls += records
                for r in records:
                    if on_call is not None:
                        on_call(i, r)
                suffix = [backend.eos_id, *backend.tokenize(results_text(spec, records))]
                if len(done[i].tokens) + len(suffix) >= limits.max_new_tokens:
                    done[i].stop = "length"  # TRL drops a result that would overflow: the completion ends
                    continue
                done[i].tokens += suffix
                following.append(i)
        active = following
    for c in done:
        c.transcript = backend.decode(c.tokens)
    return done


def _next_turn(spec: FormatSpec, c: ToolCompletion, turn: tuple[list[int], str], budget: int, rounds: int,
               limits: LoopLimits) -> bool:  # fmt: skip
    """Record a generated turn (its ids and text); whether it ends in calls to run."""
    ids, text = turn
    c.tokens += ids
    c.model_tokens += len(ids)
    c.turns.append(text)
    if len(ids) >= budget:
        c.stop = "length"
        return False
    calls = spec.find_tool_calls(text)
    if calls and rounds >= limits.max_tool_calls:
        c.stop, c.unrun_calls = "max_tool_calls", len(calls)
    return bool(calls) and rounds < limits.max_tool_calls


def call_stats(completions: Sequence[ToolCompletion]) -> dict[str, float]:
    """Calls per completion, the share that called, the share of calls that failed, seconds in the tool."""
    n = len(completions) or 1
    calls = [r for c in completions for r in c.calls]
    return {
        "tool_calls_per_completion": len(calls) / n,
        "tool_use": sum(1 for c in completions if c.calls) / n,
        "tool_errors": sum(1 for r in calls if r.kind != "ok") / len(calls) if calls else 0.0,
        "tool_seconds": round(sum(r.seconds for r in calls), 4),
    }


# ---- the engines ----------------------------------------------------------------------------------
class HFBackend:
    """``model.generate``, greedy, over left-padded batches of token ids (as :func:`generation.hf_generate`
    decodes text prompts: the same arguments, the same stops, so a run without calls decodes the same)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 8,
        progress: Callable[[int], None] | None = None,
        tokens: Callable[[int, int], None] | None = None,
    ) -> None:
        from cli.infer.generation import _eos_ids

        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.progress, self.tokens = max(1, batch_size), progress, tokens
        self.eos = _eos_ids(tokenizer, model)
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0]

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def generate(self, sequences: list[list[int]], budgets: list[int]) -> list[list[int]]:
        import torch

        from cli.infer.generation import _token_counter, _trim

        device = next(self.model.parameters()).device
        out: list[list[int]] = []
        for start in range(0, len(sequences), self.batch_size):
            batch = sequences[start : start + self.batch_size]
            budget = budgets[start : start + self.batch_size]
            width = max(len(s) for s in batch)
            ids = torch.tensor([[self.pad] * (width - len(s)) + s for s in batch], device=device)
            mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in batch], device=device)
            # The tokens of the turn under way, after every step (a CPU batch runs for minutes).
            extra = (
                {"stopping_criteria": [_token_counter(self.tokens, width, self.eos)]} if self.tokens else {}
            )
            with torch.inference_mode():
                gen = self.model.generate(
                    input_ids=ids, attention_mask=mask, max_new_tokens=max(budget), eos_token_id=self.eos,
                    pad_token_id=self.pad, do_sample=False, num_beams=1, temperature=None, top_p=None,
                    top_k=None, min_p=None, **extra,
                )  # fmt: skip
            for row, b in zip(gen[:, width:].tolist(), budget, strict=True):
                out.append(_trim(row, self.eos, self.pad)[:b])
            if self.progress is not None:
                self.progress(len(batch))
        return out


class VLLMBackend:
    """One vLLM engine (and LoRA request), greedy, prompts as token ids: the eval's vLLM path."""

    def __init__(self, llm: Any, tokenizer: Any, lora: Any = None, stop_ids: Sequence[int] = ()) -> None:
        from cli.infer.generation import _eos_ids

        self.llm, self.tokenizer, self.lora = llm, tokenizer, lora
        self.eos = _eos_ids(tokenizer)
        self.eos += [int(t) for t in stop_ids if int(t) not in self.eos]
        self.eos_id = int(tokenizer.eos_token_id)

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def generate(self, sequences: list[list[int]], budgets: list[int]) -> list[list[int]]:
        from vllm import SamplingParams

        from cli.infer.generation import _trim

        params = [
            SamplingParams(temperature=0.0, max_tokens=b, skip_special_tokens=False, stop_token_ids=self.eos)
            for b in budgets
        ]
        results = self.llm.generate(
            [{"prompt_token_ids": s} for s in sequences], params, lora_request=self.lora, use_tqdm=False
        )
        return [_trim(list(r.outputs[0].token_ids), self.eos, self.tokenizer.pad_token_id) for r in results]


class GGUFBackend:
    """A GGUF file through llama.cpp (:class:`cli.infer.generation.GGUFModel`), one sequence at a time."""

    def __init__(self, gguf: Any) -> None:
        self.gguf = gguf
        self.eos_id = int(gguf.eos)

    def tokenize(self, text: str) -> list[int]:
        return list(self.gguf.tokenize(text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.gguf.detokenize(ids))

    def generate(self, sequences: list[list[int]], budgets: list[int]) -> list[list[int]]:
        return [self.gguf.generate_ids(s, b) for s, b in zip(sequences, budgets, strict=True)]

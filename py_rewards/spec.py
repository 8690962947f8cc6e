"""The format contract: one object owns the tags, the system prompt, the chat template, the stop
strings and the reward scores.

SFT data, the generation prompt, sampling stop strings, the reward functions, eval and the GGUF
metadata all read from a :class:`FormatSpec`. Seed 000 (Qwen3-4B two-stage) is the default; seed
001's ``<<…>>`` / ``<<\\boxed{…}>>`` format is the preset ``seed001``; users can define their own tags.

>>> spec = FormatSpec()
>>> spec.render_completion("2+2=4", "4")
'<start_working_out>2+2=4<end_working_out><SOLUTION>4</SOLUTION>'
>>> spec.generation_prompt_suffix
'<start_working_out>'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

__all__ = ["PRESETS", "TOOL_NAMES", "FormatSpec", "RewardScores", "get_spec"]

_TOOL_TAGS = ("tool_call_start", "tool_call_end", "tool_result_start", "tool_result_end")


@dataclass(frozen=True)
class RewardScores:
    """Score tiers of the four seed-000 rewards (seed 000, "Four-Tier Reward Definitions")."""

    # match_format_exactly
    exact: float = 3.0
    # match_format_approximately: per tag, +hit if it occurs exactly once, else miss
    approx_hit: float = 0.5
    approx_miss: float = -1.0
    # check_answer_accuracy
    answer_exact: float = 5.0
    answer_strip: float = 3.5
    answer_ratio_10: float = 2.0
    answer_ratio_20: float = 1.5
    answer_wrong: float = -2.5
    answer_unparsable: float = -4.5
    answer_missing: float = -2.0
    # check_numeric_extraction
    numeric_hit: float = 3.5
    numeric_miss: float = -1.5
    numeric_unparsable: float = 0.0
    numeric_missing: float = -2.5
    # check_math_answer: the answer equals the gold one under py_rewards.math_equal (the rules:
    # reward_core/math/src/lib.rs; why Math-Verify is the reference: docs/design-facts.md)
    math_correct: float = 5.0
    math_wrong: float = -2.5
    math_missing: float = -2.0  # no marked answer: no solution tags, no closed box, no answer phrase


_SEED000_SYSTEM = (
    "You are given a problem. "
    "Think about the problem and provide your working out between {reasoning_start} and "
    "{reasoning_end}. Then, provide your solution between {solution_start}{solution_end}"
)

# The tool paragraph a tool-enabled spec appends to its system prompt (``str.format`` over the tags and the
# tool tags; literal braces doubled). What the tool does, its limits, and where the answer still goes.
_TOOL_PROMPT = (
    " You can run Python to calculate: inside your working out, write exactly "
    '{tool_call_start}\n{{"name": "python", "arguments": {{"code": "..."}}}}\n{tool_call_end} and stop. '
    "The code runs in a sandbox (no files, network or processes; a few seconds and a little memory per call; "
    "modules such as math only); what it prints, and the value of its last line, comes back between "
    "{tool_result_start} and {tool_result_end}, or one Error line. Then continue your working out. "
    "The answer still goes between {solution_start}{solution_end}."
)

# Tools a spec can offer the model (cli/tools runs them).
TOOL_NAMES = ("python",)

_SEED001_SYSTEM = (
    "A conversation between User and Assistant. The user asks a problem, "
    "and the Assistant solves it. The assistant first thinks about the "
    "reasoning process in the mind and then provides the user with the answer. "
    "The reasoning process and answer are enclosed within respective tags: "
    "<<some thoughts here>> and <<\\boxed{{answer}}>>."
)


def _call_code(body: str) -> str | None:
    """The code of one call block's JSON body, or None when it is not a well-formed python call."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    if not isinstance(call, dict) or call.get("name") != "python":
        return None
    args = call.get("arguments")
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return None
    code = args.get("code") if isinstance(args, dict) else None
    return code if isinstance(code, str) else None


def _jinja_str(text: str) -> str:
    """Quote ``text`` as a single-quoted Jinja string literal (Jinja unescapes backslashes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


@dataclass(frozen=True)
class FormatSpec:
    """Tags, system prompt, template and scores of one output format.

    The completion a model must write is
    ``{reasoning_start}working{reasoning_end}{solution_start}answer{solution_end}``.
    The generation prompt ends with ``reasoning_start`` (seed 000), so the model starts inside its
    working out.
    """

    name: str = "seed000"
    reasoning_start: str = "<start_working_out>"
    reasoning_end: str = "<end_working_out>"
    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    # ``str.format`` template over the four tag names; literal braces doubled.
    system_prompt_template: str = _SEED000_SYSTEM
    scores: RewardScores = field(default_factory=RewardScores)
    # Tool-integrated reasoning (docs/tools.md): the tools offered (empty: none, and a spec without tools is
    # byte for byte the plain one: same template, prompt and contract hash) and the Hermes/Qwen2.5 blocks.
    tools: tuple[str, ...] = ()
    tool_call_start: str = "<tool_call>"
    tool_call_end: str = "</tool_call>"
    tool_result_start: str = "<tool_response>"
    tool_result_end: str = "</tool_response>"
    tool_prompt_template: str = _TOOL_PROMPT

    def __post_init__(self) -> None:
        for f in ("reasoning_start", "reasoning_end", "solution_start", "solution_end", *_TOOL_TAGS):
            value = getattr(self, f)
            if not isinstance(value, str) or not value:
                raise ValueError(f"format tag {f!r} must be a non-empty string, got {value!r}")
        if isinstance(self.tools, str) or not all(isinstance(t, str) for t in self.tools):
            raise ValueError(f"format 'tools' must be a list of tool names, got {self.tools!r}")
        object.__setattr__(self, "tools", tuple(self.tools))
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown:
            raise ValueError(f"unknown tool(s) {', '.join(unknown)} (choose from {', '.join(TOOL_NAMES)})")
        try:
            self.system_prompt  # noqa: B018 - validate the template once
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"bad system_prompt_template: {exc}") from None

    # ---- text the model sees -------------------------------------------------------------
    @property
    def tags(self) -> dict[str, str]:
        return {
            "reasoning_start": self.reasoning_start,
            "reasoning_end": self.reasoning_end,
            "solution_start": self.solution_start,
            "solution_end": self.solution_end,
        }

    @property
    def tool_tags(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in _TOOL_TAGS}

    @property
    def system_prompt(self) -> str:
        text = self.system_prompt_template.format(**self.tags)
        if self.tools:
            text += self.tool_prompt_template.format(**self.tags, **self.tool_tags)
        return text

    @property
    def generation_prompt_suffix(self) -> str:
        return self.reasoning_start

    def render_completion(self, reasoning: str, answer: str) -> str:
        """The target completion for SFT: working out, then the answer, all tagged.

        The generation prompt already ends with ``reasoning_start``; SFT trains on the whole
        assistant turn, which repeats it (as seed 000's ``format_row`` does).
        """
        return (
            f"{self.reasoning_start}{reasoning}{self.reasoning_end}"
            f"{self.solution_start}{answer}{self.solution_end}"
        )

    def chat_template(self) -> str:
        """Seed 000's Jinja chat template with this spec's system prompt and reasoning tag.

        It opens with the tokenizer's BOS when it has one (Gemma, Llama): TRL's GRPO and our
        inference tokenize the rendered prompt without special tokens, so the template must
        carry it. Tokenizers without BOS (Qwen) render seed 000's text byte for byte. A spec with
        tools renders :meth:`tool_chat_template` instead.
        """
        if self.tools:
            return self.tool_chat_template()
        return (
            "{% if bos_token %}{{ bos_token }}{% endif %}"
            "{% if messages[0]['role'] == 'system' %}"
            "{{ messages[0]['content'] + eos_token }}"
            "{% set loop_messages = messages[1:] %}"
            "{% else %}"
            "{{ " + _jinja_str(self.system_prompt) + " + eos_token }}"
            "{% set loop_messages = messages %}"
            "{% endif %}"
            "{% for message in loop_messages %}"
            "{% if message['role'] == 'user' %}"
            "{{ message['content'] }}"
            "{% elif message['role'] == 'assistant' %}"
            "{{ message['content'] + eos_token }}"
            "{% endif %}"
            "{% endfor %}"
            "{% if add_generation_prompt %}{{ " + _jinja_str(self.reasoning_start) + " }}{% endif %}"
        )

    def tool_chat_template(self) -> str:
        """The chat template of a tool spec: seed 000's, plus assistant ``tool_calls`` and ``tool`` turns.

        An assistant turn is its content, then each call as ``<tool_call>\\n{json}\\n</tool_call>`` (joined by
        a newline), then EOS: generation stops there and the tool runs. A tool turn is
        ``<tool_response>\\n{result}\\n</tool_response>\\n`` with no EOS and no generation prompt after it:
        the model goes on with its working out. Assistant parts sit in ``{% generation %}`` blocks so SFT's
        ``assistant_only_loss`` trains on them and not on the tool results. Prefix-preserving, as TRL's
        tool loop needs (``is_chat_template_prefix_preserving``).
        """
        call_open, call_close = _jinja_str(self.tool_call_start + "\n"), _jinja_str("\n" + self.tool_call_end)
        result_open = _jinja_str(self.tool_result_start + "\n")
        result_close = _jinja_str("\n" + self.tool_result_end + "\n")
        return (
            "{% if bos_token %}{{ bos_token }}{% endif %}"
            "{% if messages[0]['role'] == 'system' %}"
            "{{ messages[0]['content'] + eos_token }}"
            "{% set loop_messages = messages[1:] %}"
            "{% else %}"
            "{{ " + _jinja_str(self.system_prompt) + " + eos_token }}"
            "{% set loop_messages = messages %}"
            "{% endif %}"
            "{% for message in loop_messages %}"
            "{% if message['role'] == 'user' %}"
            "{{ message['content'] }}"
            "{% elif message['role'] == 'assistant' %}"
            "{% generation %}"
            "{{ message['content'] or '' }}"
            "{% if message['tool_calls'] %}"
            "{% for call in message['tool_calls'] %}"
            "{% set fn = call['function'] if call['function'] is defined else call %}"
            "{% set args = fn['arguments'] %}"
            "{% if not loop.first %}{{ '\\n' }}{% endif %}"
            "{{ " + call_open + " }}"
            "{% if args is string %}"
            "{{ '{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' + args + '}' }}"
            "{% else %}"
            "{{ {'name': fn['name'], 'arguments': args} | tojson }}"
            "{% endif %}"
            "{{ " + call_close + " }}"
            "{% endfor %}"
            "{% endif %}"
            "{{ eos_token }}"
            "{% endgeneration %}"
            "{% elif message['role'] == 'tool' %}"
            "{{ " + result_open + " + message['content'] + " + result_close + " }}"
            "{% endif %}"
            "{% endfor %}"
            "{% if add_generation_prompt and not (loop_messages and loop_messages[-1]['role'] == 'tool') %}"
            "{{ " + _jinja_str(self.reasoning_start) + " }}"
            "{% endif %}"
        )

    # ---- tool calls and results as text ----------------------------------------------------
    def render_tool_call(self, code: str, name: str = "python") -> str:
        """One call as the model writes it (the JSON as the chat template's ``tojson`` writes it)."""
        body = json.dumps({"name": name, "arguments": {"code": code}}, ensure_ascii=False)
        return f"{self.tool_call_start}\n{body}\n{self.tool_call_end}"

    def render_tool_result(self, text: str) -> str:
        """One tool result as the model reads it (a tool turn of the chat template)."""
        return f"{self.tool_result_start}\n{text}\n{self.tool_result_end}\n"

    def find_tool_calls(self, text: str) -> list[str]:
        """The code of each well-formed ``python`` call in one generated turn, in order.

        Well-formed: a ``tool_call`` block whose body is a JSON object with ``name`` "python" and a string
        ``arguments.code``. Anything else in a block (bad JSON, another name) is not a call.

        >>> FormatSpec(tools=("python",)).find_tool_calls(
        ...     'x <tool_call>\\n{"name": "python", "arguments": {"code": "1+1"}}\\n</tool_call>')
        ['1+1']
        """
        out: list[str] = []
        pattern = re.escape(self.tool_call_start) + r"\s*(.*?)\s*" + re.escape(self.tool_call_end)
        for body in re.findall(pattern, text, flags=re.DOTALL):
            code = _call_code(body)
            if code is not None:
                out.append(code)
        return out

    def completion_text(self, completion: str | Sequence[Mapping[str, Any]]) -> str:
        """What the rewards score: the model's own text of a completion.

        A ``str`` passes through. A list of chat messages (TRL's tool loop: assistant, tool, assistant,
        ...) becomes each assistant message's content with its calls written back as ``tool_call`` blocks,
        in order; the tool results are left out (they are not the model's writing, carry no loss and could
        print the solution tags).
        """
        if isinstance(completion, str):
            return completion
        parts: list[str] = []
        for message in completion:
            if message.get("role", "assistant") != "assistant":
                continue
            parts.append(str(message.get("content") or ""))
            calls = message.get("tool_calls") or []
            for i, call in enumerate(calls):
                fn = call.get("function", call) if isinstance(call, Mapping) else {}
                args = fn.get("arguments") if isinstance(fn, Mapping) else None
                code = args.get("code") if isinstance(args, Mapping) else None
                body = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
                if isinstance(code, str) and fn.get("name") == "python":
                    body = json.dumps({"name": "python", "arguments": {"code": code}}, ensure_ascii=False)
                parts.append(("\n" if i else "") + f"{self.tool_call_start}\n{body}\n{self.tool_call_end}")
        return "".join(parts)

    def response_template(self, eos_token: str) -> dict[str, Any]:
        """transformers' ``response_template`` (>= 5.13) that parses one generated turn into
        ``{"role": "assistant", "content": ..., "tool_calls": [...]}``: what TRL's tool loop reads
        (``tokenizer.parse_response``). A turn starts after the generation prompt (the reasoning-start tag)
        or after a tool result; the content runs to EOS."""
        return {
            "defaults": {"role": "assistant"},
            "start_anchor": [self.reasoning_start, self.tool_result_end + "\n"],
            "fields": {
                "tool_calls": {
                    "open": self.tool_call_start,
                    "close_pattern": re.escape(self.tool_call_end) + r"\s*",
                    "repeats": True,
                    "content": "json",
                    "transform": {"type": "function", "function": "{content}"},
                },
                "content": {"close_pattern": re.escape(eos_token) + r"\s*", "content": "text"},
            },
        }

    def apply_to(self, tokenizer: Any) -> Any:
        """Give ``tokenizer`` this spec's chat template and, with tools, the ``response_template`` TRL's
        tool loop parses the generated turns with (TRL only knows the templates of the models it lists)."""
        tokenizer.chat_template = self.chat_template()
        if self.tools:
            tokenizer.response_template = self.response_template(str(tokenizer.eos_token))
        return tokenizer

    def messages(self, question: str) -> list[dict[str, str]]:
        """The prompt as chat messages (system + user), as seed 000's ``parse_dapo`` builds it."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": question},
        ]

    def stop_strings(self, eos_token: str | None) -> list[str]:
        """Sampling stops: the EOS token (seed 000 ``SamplingParams(stop=[eos])``)."""
        return [eos_token] if eos_token else []

    # ---- identity ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data; a spec without tools leaves the tool fields out, so the contract hash
        of every tool-free run stays what it was before tools existed."""
        out = asdict(self)
        if not self.tools:
            for f in ("tools", "tool_prompt_template", *_TOOL_TAGS):
                out.pop(f)
        else:
            out["tools"] = list(self.tools)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FormatSpec:
        """Build from a mapping (YAML ``format:`` section); unknown keys are an error."""
        data = dict(data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown format field(s): {', '.join(unknown)}")
        scores = data.pop("scores", None)
        if scores is not None and not isinstance(scores, RewardScores):
            score_fields = {f.name for f in fields(RewardScores)}
            bad = sorted(set(scores) - score_fields)
            if bad:
                raise ValueError(f"unknown reward score(s): {', '.join(bad)}")
            scores = RewardScores(**{k: float(v) for k, v in scores.items()})
        if "tools" in data and data["tools"] is not None and not isinstance(data["tools"], str):
            data["tools"] = tuple(data["tools"])
        base = PRESETS.get(str(data.get("name", "")), PRESETS["seed000"])
        out = replace(base, **data)
        if scores is not None:
            out = replace(out, scores=scores)
        return out

    def contract_hash(self) -> str:
        """sha256 of the canonical JSON form: recorded in each run's manifest."""
        blob = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()


PRESETS: dict[str, FormatSpec] = {
    "seed000": FormatSpec(),
    # Seed 001: <<reasoning>> <<\boxed{answer}>>
    "seed001": FormatSpec(
        name="seed001",
        reasoning_start="<<",
        reasoning_end=">>",
        solution_start="<<\\boxed{",
        solution_end="}>>",
        system_prompt_template=_SEED001_SYSTEM,
    ),
}


def get_spec(spec: FormatSpec | str | Mapping[str, Any] | None = None) -> FormatSpec:
    """Resolve a preset name, a mapping or a spec to a :class:`FormatSpec` (None → seed 000)."""
    if spec is None:
        return PRESETS["seed000"]
    if isinstance(spec, FormatSpec):
        return spec
    if isinstance(spec, str):
        try:
            return PRESETS[spec]
        except KeyError:
            raise ValueError(
                f"unknown format preset {spec!r} (choose from {', '.join(sorted(PRESETS))})"
            ) from None
    if isinstance(spec, Mapping):
        return FormatSpec.from_dict(spec)
    raise TypeError(
        f"format spec must be a FormatSpec, a preset name or a mapping, got {type(spec).__name__}"
    )

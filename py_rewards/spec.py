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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

__all__ = ["PRESETS", "FormatSpec", "RewardScores", "get_spec"]


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

_SEED001_SYSTEM = (
    "A conversation between User and Assistant. The user asks a problem, "
    "and the Assistant solves it. The assistant first thinks about the "
    "reasoning process in the mind and then provides the user with the answer. "
    "The reasoning process and answer are enclosed within respective tags: "
    "<<some thoughts here>> and <<\\boxed{{answer}}>>."
)


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

    def __post_init__(self) -> None:
        for f in ("reasoning_start", "reasoning_end", "solution_start", "solution_end"):
            value = getattr(self, f)
            if not isinstance(value, str) or not value:
                raise ValueError(f"format tag {f!r} must be a non-empty string, got {value!r}")
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
    def system_prompt(self) -> str:
        return self.system_prompt_template.format(**self.tags)

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
        carry it. Tokenizers without BOS (Qwen) render seed 000's text byte for byte.
        """
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
        return asdict(self)

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

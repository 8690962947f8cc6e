"""The format contract at inference time: the prompt a model is asked with, and how its answer splits.

The same contract training used (:class:`py_rewards.FormatSpec`): system prompt, chat template ending
with the reasoning-start tag, the tags that split a completion into reasoning and solution. Used by
`grpo chat`, `grpo eval` and `grpo export` (HF tokenizers and GGUF models alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


def contract(spec: FormatSpec, eos_token: str | None) -> dict[str, Any]:
    """What a consumer of an exported model needs to prompt it like training did."""
    return {
        "format": spec.to_dict(),
        "contract_sha256": spec.contract_hash(),
        "system_prompt": spec.system_prompt,
        "chat_template": spec.chat_template(),
        "generation_prompt_suffix": spec.generation_prompt_suffix,
        "eos_token": eos_token,
        "stop_strings": spec.stop_strings(eos_token),
    }


def prompt_text(
    tokenizer: Any, spec: FormatSpec, question: str, history: Sequence[dict[str, str]] = ()
) -> str:
    """The generation prompt: system + (history) + user, ending with the reasoning-start tag."""
    messages = spec.messages(question)
    if history:
        messages = [messages[0], *history, messages[1]]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def split_completion(spec: FormatSpec, text: str) -> tuple[str, str | None, str]:
    """(reasoning, solution or None, rest) of a completion that starts after the reasoning tag."""
    reasoning, sep, after = text.partition(spec.reasoning_end)
    if not sep:
        # No closing tag yet: everything is reasoning unless the solution tag shows up.
        reasoning, sep2, after2 = text.partition(spec.solution_start)
        if not sep2:
            return text, None, ""
        solution, _, rest = after2.partition(spec.solution_end)
        return reasoning, solution, rest
    pre, sep2, after2 = after.partition(spec.solution_start)
    if not sep2:
        return reasoning, None, after
    solution, _, rest = after2.partition(spec.solution_end)
    return reasoning, solution, (pre + rest)


def render_prompt(
    spec: FormatSpec,
    eos_token: str,
    question: str,
    history: Sequence[dict[str, str]] = (),
    bos_token: str | None = None,
) -> str:
    """The contract's chat template rendered without an HF tokenizer (for GGUF models).

    ``bos_token``: the BOS text when the model wants one (the template writes it first), else None.
    """
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    messages = spec.messages(question)
    if history:
        messages = [messages[0], *history, messages[1]]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(spec.chat_template()).render(
        messages=messages, eos_token=eos_token, bos_token=bos_token, add_generation_prompt=True
    )


def native_prompt(tokenizer: Any, question: str) -> str:
    """The question alone, as one user turn in the model's *own* chat template (no system prompt or tags of
    ours): how a user of the untuned model would ask it."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
    )


def turn_end_ids(tokenizer: Any) -> list[int]:
    """The special token the model's own template closes an assistant turn with (``<|im_end|>``,
    ``<|eot_id|>``, ``<end_of_turn>``), found by rendering a turn; [] when there is none beyond EOS.

    A base or instruct model asked in its own format stops there, which is not always its EOS (Qwen2.5 GGUFs:
    EOS ``<|endoftext|>``, turns end with ``<|im_end|>``).
    """
    mark = "\u2063grpo-answer\u2063"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": mark}], tokenize=False
        )
    except Exception:  # noqa: BLE001 - a template that cannot render an assistant turn: EOS alone stops
        return []
    _, found, tail = text.partition(mark)
    if not found:
        return []
    ids = tokenizer(tail.lstrip(), add_special_tokens=False)["input_ids"]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= {i for i, t in tokenizer.added_tokens_decoder.items() if getattr(t, "special", False)}
    return [int(ids[0])] if ids and ids[0] in special else []

"""py_rewards/spec.py: the contract's chat template — with no BOS token it renders seed 000's text.

Gemma (and Llama) need BOS first, so the template writes it itself; Qwen-style tokenizers have no BOS,
and the template then renders seed 000's text byte for byte. One BOS on every path (GRPO, eval/chat/
export, SFT) is checked in tests/test_bos.py.
"""

from __future__ import annotations

import pytest

from cli.models.resolve import build_tiny_tokenizer
from py_rewards.spec import get_spec

BOS_TAG = "{% if bos_token %}{{ bos_token }}{% endif %}"


def _render(template: str, **kw: object) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment().from_string(template).render(**kw)


@pytest.mark.parametrize("preset", ["seed000", "seed001"])
def test_template_without_bos_is_seed000_text(preset: str) -> None:
    spec = get_spec(preset)
    template = spec.chat_template()
    assert template.startswith(BOS_TAG)
    old = template[len(BOS_TAG) :]
    msgs = spec.messages("What is 2+3?")
    for extra in ({}, {"bos_token": None}, {"bos_token": ""}):
        for gen in (True, False):
            kw = {"messages": msgs, "eos_token": "<|endoftext|>", "add_generation_prompt": gen, **extra}
            assert _render(template, **kw) == _render(old, **kw)
    tiny = build_tiny_tokenizer(spec)
    assert tiny.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False).startswith(
        spec.system_prompt
    )

"""cli/train/vllm_levers.py: the colocated engine's settings and the one-call LoRA hand-off.

The hand-off is checked against TRL 1.15's own colocate walk (``VLLMGeneration._iter_named_params``) on a
tiny PEFT model: the same names and the same merged weights; after the first hand-off, exactly the weights
the merge changes. vLLM itself does not run on a CPU: where its engine is called, a recorder stands in
for it, and only our plumbing is under test there.
"""

from __future__ import annotations

import contextlib
import types

import pytest

from cli.config.schema import Config
from cli.train import vllm_levers


def _peft_model():  # noqa: ANN202
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=61, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=False,
    )  # fmt: skip
    model = get_peft_model(Qwen2ForCausalLM(config), LoraConfig(r=2, target_modules=["q_proj", "down_proj"]))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p)
    return model


def _trl_walk(model):  # noqa: ANN001, ANN202
    """TRL's colocate hand-off, its own code: (name, merged weight) for every weight it pushes."""
    from trl.generation.vllm_generation import VLLMGeneration

    dist = types.SimpleNamespace(gather_params=lambda params: contextlib.nullcontext(), is_fsdp=False)
    fake = types.SimpleNamespace(model=model, _dist=dist)
    fake._fix_param_name_to_vllm = types.MethodType(VLLMGeneration._fix_param_name_to_vllm, fake)
    return [(n, t.clone()) for n, t in VLLMGeneration._iter_named_params(fake)]


def _ours(model, *, lora_only: bool):  # noqa: ANN001, ANN202
    return [(n, t.clone()) for n, t in vllm_levers.merged_weights(model, lora_only=lora_only)]


def test_the_lora_hand_off_pushes_what_trl_pushes() -> None:
    import torch

    model = _peft_model()
    base = dict((n, t.clone()) for n, t in vllm_levers.vllm_names(model, lora_only=False))
    full = _ours(model, lora_only=False)  # ours first: TRL's walk leaves the model changed by rounding
    lora = dict(_ours(model, lora_only=True))
    trl = _trl_walk(model)
    assert [n for n, _ in full] == [n for n, _ in trl]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(full, trl, strict=True))
    # after the first hand-off: exactly the weights the merge changed, merged the same way
    changed = {n for n, t in trl if not torch.equal(t, base[n])}
    assert len(changed) == 4 and changed <= set(lora)  # q_proj and down_proj of 2 layers
    assert all(n.endswith(".bias") for n in set(lora) - changed)  # and their layers' (unchanged) biases
    assert all(torch.equal(lora[n], t) for n, t in trl if n in lora)
    assert all("q_proj" in n or "down_proj" in n for n in lora)


def test_trls_merge_and_unmerge_moves_bf16_base_weights_ours_does_not() -> None:
    """TRL's colocate hand-off merges the LoRA into the bf16 weights in place and unmerges it after:
    W + ΔW - ΔW rounds, so the frozen base weights change at every hand-off. The out-of-place merge never
    touches them."""
    import torch

    model = _peft_model().to(torch.bfloat16)
    before = {n: t.clone() for n, t in vllm_levers.vllm_names(model, lora_only=False)}
    for _ in range(3):
        _ours(model, lora_only=False)
    assert all(torch.equal(before[n], t) for n, t in vllm_levers.vllm_names(model, lora_only=False))
    for _ in range(3):
        _trl_walk(model)
    moved = [n for n, t in vllm_levers.vllm_names(model, lora_only=False) if not torch.equal(before[n], t)]
    assert moved and all("q_proj" in n or "down_proj" in n for n in moved)


class _Recorder:
    """Stands in for vLLM's engine (no CPU build): records what `load_weights` is given."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.resets = 0
        runner = types.SimpleNamespace(model=types.SimpleNamespace(load_weights=self._load))
        executor = types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner))
        self.llm_engine = types.SimpleNamespace(model_executor=executor)

    def _load(self, weights: list) -> None:  # noqa: ANN001
        self.calls.append([n for n, _ in weights])

    def reset_prefix_cache(self) -> None:
        self.resets += 1


def test_installed_hand_off_is_one_call_and_lora_only_after_the_first() -> None:
    import torch

    model = _peft_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    engine = _Recorder()
    generation = types.SimpleNamespace(
        mode="colocate", enable_sleep_mode=False, model=model, llm=engine,
        _dist=types.SimpleNamespace(is_fsdp=False), accelerator=types.SimpleNamespace(num_processes=1),
    )  # fmt: skip
    trainer = types.SimpleNamespace(vllm_generation=generation)
    assert vllm_levers.install_lora_sync(trainer) is None
    generation.sync_weights()
    generation.sync_weights()
    assert len(engine.calls) == 2 and engine.resets == 2
    # the first: every weight (the names TRL's walk gives: the test above)
    assert engine.calls[0] == [n for n, _ in vllm_levers.vllm_names(model, lora_only=False)]
    assert len(engine.calls[1]) == 6 and set(engine.calls[1]) < set(engine.calls[0])  # 4 weights, 2 biases
    after = dict(model.named_parameters())
    # the hand-off, timed as the phase clock's `sync` phase
    from cli.train.phases import PhaseTimes

    clock = PhaseTimes()
    assert vllm_levers.time_hand_off(trainer, clock.timed)
    generation.sync_weights()
    assert len(engine.calls) == 3 and clock.calls["sync"] == 1 and "phase_sync_s" in clock.take()
    assert not vllm_levers.time_hand_off(types.SimpleNamespace(), clock.timed)  # no engine: nothing to time
    assert all(torch.equal(before[n], after[n]) for n in before)  # the model untouched


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"mode": "server"}, "not a colocated engine"),
        ({"enable_sleep_mode": True}, "sleep mode"),
        ({"accelerator": types.SimpleNamespace(num_processes=2)}, "several processes"),
    ],
)
def test_trl_hand_off_stays_where_the_lora_one_does_not_apply(change: dict, why: str) -> None:
    generation = types.SimpleNamespace(
        mode="colocate", enable_sleep_mode=False, model=_peft_model(),
        _dist=types.SimpleNamespace(is_fsdp=False), accelerator=types.SimpleNamespace(num_processes=1),
    )  # fmt: skip
    for key, value in change.items():
        setattr(generation, key, value)
    trainer = types.SimpleNamespace(vllm_generation=generation)
    assert why in (vllm_levers.install_lora_sync(trainer) or "")
    assert not hasattr(generation, "sync_weights")  # TRL's own method is left alone


def test_engine_kwargs_follow_the_settings() -> None:
    g = Config().grpo
    assert vllm_levers.engine_kwargs(g) == {}  # the defaults: TRL's engine as it is
    g.vllm_cudagraph, g.vllm_quantization, g.vllm_async_scheduling = "full_decode_only", "fp8", "on"
    assert vllm_levers.engine_kwargs(g) == {
        "compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"},
        "quantization": "fp8",
        "async_scheduling": True,
    }
    g.vllm_async_scheduling = "off"
    assert vllm_levers.engine_kwargs(g)["async_scheduling"] is False


def test_engine_settings_reach_trls_llm_call_and_are_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    import trl.generation.vllm_generation as generation

    from cli.common import GrpoError

    seen: list[dict] = []
    monkeypatch.setattr(generation, "LLM", lambda **kw: seen.append(kw), raising=False)  # no vLLM on a CPU
    stand_in = generation.LLM
    with vllm_levers.engine_settings({"quantization": "fp8"}):
        generation.LLM(model="m", quantization=None, max_num_batched_tokens=4096)
        with pytest.raises(GrpoError, match="already quantized"):
            generation.LLM(model="m", quantization="bitsandbytes")
    assert seen == [{"model": "m", "quantization": "fp8", "max_num_batched_tokens": 4096}]
    assert generation.LLM is stand_in


def test_dora_keeps_trls_hand_off() -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=61, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1,
    )  # fmt: skip
    dora = get_peft_model(Qwen2ForCausalLM(config), LoraConfig(r=2, target_modules=["q_proj"], use_dora=True))
    generation = types.SimpleNamespace(
        mode="colocate", enable_sleep_mode=False, model=dora,
        _dist=types.SimpleNamespace(is_fsdp=False), accelerator=types.SimpleNamespace(num_processes=1),
    )  # fmt: skip
    why = vllm_levers.install_lora_sync(types.SimpleNamespace(vllm_generation=generation))
    assert why is not None and "DoRA" in why and not hasattr(generation, "sync_weights")

"""Generation of many prompts at once through vLLM: greedy (``grpo eval`` on a GPU), or sampled n per
prompt from one adapter (``grpo filter`` on a GPU, :func:`sample_all`).

One engine serves every checkpoint: the base model, and each LoRA adapter as a vLLM ``LoRARequest``,
so base / SFT / GRPO are decoded by the same kernels. Prompts go in as token ids made by our tokenizer
without special tokens (the chat template writes BOS itself where the model wants one), and outputs are
cut at EOS and decoded the way the HF path decodes them, so the two engines score the same text.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run import signals

if TYPE_CHECKING:
    from cli.infer.generation import Sampling

ENGINES = ("auto", "hf", "vllm")


def vllm_usable() -> tuple[bool, str]:
    """(usable, why not) — vLLM needs its package and a CUDA GPU."""
    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not installed (pip install 'grpo[train,vllm]')"
    signals.held_import("torch")
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible"
    return True, ""


def choose_engine(requested: str) -> str:
    if requested not in ENGINES:
        raise GrpoError(f"unknown --engine {requested!r} (choose auto, hf or vllm)")
    if requested == "hf":
        return "hf"
    ok, why = vllm_usable()
    if requested == "vllm" and not ok:
        raise GrpoError(f"--engine vllm: {why}; use --engine hf")
    return "vllm" if ok else "hf"


def _lora_rank(adapters: dict[str, Path]) -> int:
    rank = 8
    for path in adapters.values():
        try:
            rank = max(rank, int(json.loads((Path(path) / "adapter_config.json").read_text()).get("r", 8)))
        except (OSError, ValueError):
            continue
    # vLLM accepts only some ranks; round up to one of them.
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= allowed:
            return allowed
    raise GrpoError(f"LoRA rank {rank} is above what vLLM serves (512): use --engine hf")


SAMPLED = "#sampled"  # the suffix of a checkpoint's sampled completions in generate_all's answer


@dataclass(frozen=True)
class Extra:
    """What :func:`generate_all` decodes beyond each checkpoint's greedy completions."""

    # Named prompt sets, ``(prompts, stop ids)`` beyond EOS, through the base model alone, greedy (`grpo
    # eval`'s base row in the model's own chat template).
    base: dict[str, tuple[Sequence[str], Sequence[int]]] = field(default_factory=dict)
    # `grpo eval --samples N`: ``sampling.n`` completions of each prompt per checkpoint, grouped per prompt,
    # under ``"<checkpoint>#sampled"``.
    sampling: Sampling | None = None


def generate_all(
    base_path: str,
    tokenizer: Any,
    prompts: Sequence[str],
    checkpoints: Sequence[str],
    adapters: dict[str, Path],
    *,
    max_new_tokens: int,
    progress: Any = None,
    extra: Extra | None = None,
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Greedy completions of ``prompts`` per checkpoint (``base`` or an ``adapters`` key), and ``extra``."""
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")  # the minimal vLLM bundle has no flashinfer
    import torch
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from cli.infer.generation import Generation, _eos_ids, _trim
    from cli.infer.vllm_memory import model_shape, plan_vllm

    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    base_sets: dict[str, tuple[list[list[int]], list[int], list[str]]] = {}
    for name, (extra_prompts, stops) in (extra.base if extra else {}).items():
        tokens = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in extra_prompts]
        base_sets[name] = (tokens, [int(t) for t in stops], list(extra_prompts))
    longest = max((len(x) for x in [*ids, *(t for e in base_sets.values() for t in e[0])]), default=1)
    used = {k: v for k, v in adapters.items() if k in checkpoints}
    total = int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    plan = plan_vllm(
        "auto",
        model_shape(base_path),
        sequences=min(len(ids), 256),
        prompt_tokens=longest,
        completion_tokens=max_new_tokens,
        total_bytes=total,
    )
    kwargs: dict[str, Any] = {
        "model": str(base_path),
        "tokenizer": str(base_path),
        "max_model_len": longest + max_new_tokens,
        "gpu_memory_utilization": plan.utilization,
        "max_num_seqs": 256,
        "seed": 0,
    }
    if used:
        kwargs.update(enable_lora=True, max_lora_rank=_lora_rank(used), max_loras=1)
    llm = _start(LLM, kwargs)
    eos = _eos_ids(tokenizer)
    pad = tokenizer.pad_token_id
    params = SamplingParams(
        temperature=0.0, max_tokens=max_new_tokens, skip_special_tokens=False, stop_token_ids=eos or None
    )
    inputs = [{"prompt_token_ids": list(x)} for x in ids]
    out: dict[str, list[Any]] = {}
    seconds: dict[str, float] = {}
    for n, stage in enumerate(checkpoints, start=1):
        t0 = time.perf_counter()
        lora = LoRARequest(stage, n, str(used[stage])) if stage in used else None
        results = llm.generate(inputs, params, lora_request=lora, use_tqdm=False)
        gens = []
        for prompt, res in zip(prompts, results, strict=True):
            toks = _trim(list(res.outputs[0].token_ids), eos, pad)
            gens.append(Generation(prompt, tokenizer.decode(toks, skip_special_tokens=False), toks))
        out[stage] = gens
        seconds[stage] = round(time.perf_counter() - t0, 2)
        if progress is not None:
            progress(stage, len(gens))
        if extra and extra.sampling:  # the same engine, the same adapter
            out[stage + SAMPLED] = _sampled(
                llm, tokenizer, prompts, inputs, extra.sampling, max_new_tokens, lora
            )
    for stage, (extra_ids, stops, extra_prompts) in base_sets.items():
        t0 = time.perf_counter()
        stop = eos + [t for t in stops if t not in eos]
        out[stage] = _greedy_base(llm, tokenizer, extra_prompts, extra_ids, stop, max_new_tokens)
        seconds[stage] = round(time.perf_counter() - t0, 2)
        if progress is not None:
            progress(stage, len(out[stage]))
    info = {"engine": "vllm", "gpu_memory_utilization": plan.utilization, "vllm_gib": plan.vllm_gib}
    return out, {**info, "stage_seconds": seconds}


def _sampled(
    llm: Any, tokenizer: Any, prompts: Sequence[str], inputs: list[Any], sampling: Sampling, max_new: int,
    lora: Any,
) -> list[list[Any]]:  # fmt: skip
    """``sampling.n`` completions of each prompt (grouped per prompt) from one checkpoint, seeded."""
    from vllm import SamplingParams

    from cli.infer.generation import Generation, _eos_ids, _trim

    eos = _eos_ids(tokenizer)
    params = SamplingParams(
        n=sampling.n, temperature=sampling.temperature, min_p=sampling.min_p, top_p=sampling.top_p,
        max_tokens=max_new, stop_token_ids=eos or None, skip_special_tokens=False, seed=sampling.seed,
        **({"top_k": sampling.top_k} if sampling.top_k else {}),
    )  # fmt: skip
    results = llm.generate(inputs, params, lora_request=lora, use_tqdm=False)
    groups = []
    for prompt, res in zip(prompts, results, strict=True):
        group = []
        for o in res.outputs:
            toks = _trim(list(o.token_ids), eos, tokenizer.pad_token_id)
            group.append(Generation(prompt, tokenizer.decode(toks, skip_special_tokens=False), toks))
        groups.append(group)
    return groups


def greedy_engine(
    base_path: str, sequences: int, prompt_tokens: int, max_new_tokens: int, adapters: dict[str, Path]
) -> tuple[Any, dict[str, Any], Any]:
    """A vLLM engine for greedy decoding of ``sequences`` prompts of up to ``prompt_tokens`` tokens plus
    ``max_new_tokens`` (tool results included), with ``adapters`` servable; and a function giving each
    checkpoint's ``LoRARequest`` (None for the base model). `grpo eval`'s tool loop drives it
    (:class:`cli.infer.tool_loop.VLLMBackend`), as :func:`generate_all` drives its own."""
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")  # the minimal vLLM bundle has no flashinfer
    import torch
    from vllm import LLM
    from vllm.lora.request import LoRARequest

    from cli.infer.vllm_memory import model_shape, plan_vllm

    total = int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    shape = model_shape(base_path)
    plan = plan_vllm("auto", shape, sequences=min(sequences, 256), prompt_tokens=prompt_tokens,
                     completion_tokens=max_new_tokens, total_bytes=total)  # fmt: skip
    kwargs: dict[str, Any] = {
        "model": str(base_path), "tokenizer": str(base_path), "max_model_len": prompt_tokens + max_new_tokens,
        "gpu_memory_utilization": plan.utilization, "max_num_seqs": 256, "seed": 0,
    }  # fmt: skip
    if adapters:
        kwargs.update(enable_lora=True, max_lora_rank=_lora_rank(adapters), max_loras=1)
    llm = _start(LLM, kwargs)
    ids = {name: n for n, name in enumerate(adapters, start=1)}

    def lora(stage: str) -> Any:
        return LoRARequest(stage, ids[stage], str(adapters[stage])) if stage in adapters else None

    info = {"engine": "vllm", "gpu_memory_utilization": plan.utilization, "vllm_gib": plan.vllm_gib}
    return llm, info, lora


def _greedy_base(
    llm: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    ids: Sequence[Sequence[int]],
    stop: list[int],
    max_new: int,
) -> list[Any]:
    """Greedy completions from the base model alone, cut at the first token of ``stop``."""
    from vllm import SamplingParams

    from cli.infer.generation import Generation, _trim

    params = SamplingParams(temperature=0.0, max_tokens=max_new, skip_special_tokens=False,
                            stop_token_ids=stop or None)  # fmt: skip
    results = llm.generate([{"prompt_token_ids": list(x)} for x in ids], params, use_tqdm=False)
    gens = []
    for prompt, res in zip(prompts, results, strict=True):
        toks = _trim(list(res.outputs[0].token_ids), stop, tokenizer.pad_token_id)
        gens.append(Generation(prompt, tokenizer.decode(toks, skip_special_tokens=False), toks))
    return gens


def _start(llm_class: Any, kwargs: dict[str, Any]) -> Any:
    """The vLLM engine, or one line saying why it did not start."""
    try:
        return llm_class(**kwargs)
    except Exception as exc:  # noqa: BLE001 - one line, not vLLM's stack
        text = str(exc).strip().splitlines()
        raise GrpoError(
            f"vLLM could not start ({text[0] if text else type(exc).__name__}); use --engine hf"
        ) from None


MAX_SAMPLED_SEQS = 1024  # `grpo filter`'s max_num_seqs: the 270M model's KV cache held ~9,700 on an H200


def sample_all(
    base_path: str,
    tokenizer: Any,
    prompts: Sequence[str],
    adapter: tuple[str, Path],
    sampling: Sampling,
    *,
    max_new_tokens: int,
) -> tuple[list[list[Any]], dict[str, Any]]:
    """``sampling.n`` completions of each prompt (grouped per prompt) from the base model + one LoRA adapter
    (``(name, folder)``), every prompt in one ``generate`` call: `grpo filter` on a GPU.

    The vLLM path of the bench script that ran rounds 2 and 3 on an H200 (bench/learning-gpu.md@ea4c471).
    """
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")  # the minimal vLLM bundle has no flashinfer
    import torch
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from cli.infer.generation import Generation, _eos_ids, _trim

    name, path = adapter
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    longest = max((len(x) for x in ids), default=1)
    total = int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    seqs, plan = _sampling_plan(base_path, min(len(ids) * sampling.n, MAX_SAMPLED_SEQS), sampling.n,
                                longest, max_new_tokens, total)  # fmt: skip
    llm = _start(LLM, {
        "model": str(base_path),
        "tokenizer": str(base_path),
        "max_model_len": longest + max_new_tokens,
        "gpu_memory_utilization": plan.utilization,
        "enable_lora": True,
        "max_lora_rank": _lora_rank({name: path}),
        "max_loras": 1,
        "max_num_seqs": seqs,
        "seed": sampling.seed,
    })  # fmt: skip
    eos = _eos_ids(tokenizer)
    params = SamplingParams(
        n=sampling.n,
        temperature=sampling.temperature,
        min_p=sampling.min_p,
        top_p=sampling.top_p,
        max_tokens=max_new_tokens,
        stop_token_ids=eos or None,
        skip_special_tokens=False,
        seed=sampling.seed,
        **({"top_k": sampling.top_k} if sampling.top_k else {}),
    )
    t0 = time.perf_counter()
    results = llm.generate(
        [{"prompt_token_ids": list(x)} for x in ids],
        params,
        lora_request=LoRARequest(name, 1, str(path)),
        use_tqdm=False,
    )
    seconds = round(time.perf_counter() - t0, 2)
    groups = []
    for prompt, res in zip(prompts, results, strict=True):
        group = []
        for o in res.outputs:
            toks = _trim(list(o.token_ids), eos, tokenizer.pad_token_id)
            group.append(Generation(prompt, tokenizer.decode(toks, skip_special_tokens=False), toks))
        groups.append(group)
    info = {"engine": "vllm", "gpu_memory_utilization": plan.utilization, "vllm_gib": plan.vllm_gib,
            "max_num_seqs": seqs, "generation_seconds": seconds}  # fmt: skip
    return groups, info


def _sampling_plan(
    base_path: str, seqs: int, n: int, prompt_tokens: int, completion_tokens: int, total: int
) -> tuple[int, Any]:
    """(max_num_seqs, vLLM memory plan): ``seqs`` concurrent sequences, halved until their KV cache fits."""
    from cli.infer.vllm_memory import model_shape, plan_vllm

    shape = model_shape(base_path)
    while True:
        try:
            plan = plan_vllm("auto", shape, sequences=seqs, prompt_tokens=prompt_tokens,
                             completion_tokens=completion_tokens, total_bytes=total)  # fmt: skip
            return seqs, plan
        except GrpoError:
            if seqs <= n:
                raise GrpoError(
                    f"vLLM needs more GPU memory than there is for {seqs} sequences of {prompt_tokens} + "
                    f"{completion_tokens} tokens: lower --max-new-tokens or --samples, or use --engine hf"
                ) from None
            seqs = max(n, seqs // 2)

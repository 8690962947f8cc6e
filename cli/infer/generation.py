"""Generation: batched HF decoding (greedy, or sampled n per prompt), HF token streaming, GGUF files
through llama.cpp.

Completions end at EOS (not included); :func:`token_agreement` compares two sets of greedy completions
token by token (export verification).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.common import GrpoError


@dataclass
class Generation:
    prompt: str
    text: str
    tokens: list[int] = field(default_factory=list)  # completion ids, EOS excluded


def decode_dtype() -> Any:
    """The dtype to decode in: the weights' own on a GPU, float32 on the CPU, whose bf16 matmuls are slow
    without native support (Gemma-3-270M, stored bf16, decoded 4 x 24 tokens in 78-80 s in bf16 and 55-61 s
    in float32 here, 2 cores at load 9)."""
    import torch

    return "auto" if torch.cuda.is_available() else torch.float32


def _eos_ids(tokenizer: Any, model: Any | None = None) -> list[int]:
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None)
    for e in [extra] if isinstance(extra, int) else (extra or []):
        if int(e) not in ids:
            ids.append(int(e))
    return ids


def _trim(ids: Sequence[int], eos: Sequence[int], pad: int | None) -> list[int]:
    out: list[int] = []
    for t in ids:
        if t in eos:
            break
        out.append(int(t))
    # Trailing pads after an EOS-less stop never happen with greedy decoding, but strip them anyway.
    while out and pad is not None and out[-1] == pad and pad not in eos:
        out.pop()
    return out


def hf_generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
    stop_ids: Sequence[int] = (),
    tokens: TokenReport | None = None,
) -> list[Generation]:
    """Greedy, batched, left-padded decoding; completions end at EOS or a token of ``stop_ids`` (not
    included). ``progress``: the prompts of each finished batch; ``tokens``: after every decoding step,
    (tokens decoded so far in this batch, its sequences that have ended)."""
    greedy = {"do_sample": False, "num_beams": 1, "temperature": None, "top_p": None, "top_k": None,
              "min_p": None}  # fmt: skip
    how = _Decode(max_new_tokens, batch_size, greedy, progress=progress, stop_ids=stop_ids, tokens=tokens)
    return [group[0] for group in _hf_decode(model, tokenizer, prompts, how)]


# (tokens decoded so far in the batch, sequences of the batch that reached EOS), after each decoding step.
TokenReport = Callable[[int, int], None]


def _token_counter(report: TokenReport, width: int, eos: Sequence[int]) -> Any:
    """A stopping criterion that never stops: it reports how far a batch has got after every decoding step.

    A batch of long completions on the CPU runs for minutes; without this only its end showed."""
    import torch
    from transformers import StoppingCriteria

    eos_ids = torch.tensor(list(eos) or [-1])

    class TokenCounter(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            new = input_ids[:, width:]
            ended = torch.isin(new, eos_ids.to(new.device))
            done = ended.any(dim=-1)
            lengths = torch.where(done, ended.int().argmax(dim=-1), new.shape[1])
            report(int(lengths.sum()), int(done.sum()))
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return TokenCounter()


@dataclass(frozen=True)
class Sampling:
    """How :func:`hf_sample` (and :func:`cli.infer.vllm_engine.sample_all`) draw ``n`` completions per prompt:
    GRPO's rollout settings (``top_k`` 0: off, ``min_p`` 0: off), seeded."""

    n: int
    temperature: float = 1.0
    top_p: float = 1.0
    min_p: float = 0.0
    top_k: int = 0
    seed: int = 0


def hf_sample(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    sampling: Sampling,
    *,
    max_new_tokens: int,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> list[list[Generation]]:
    """``sampling.n`` sampled completions of each prompt (grouped per prompt, in prompt order), batched
    ``batch_size`` prompts at a time; completions end at EOS (not included)."""
    import torch

    torch.manual_seed(sampling.seed)
    kwargs = {
        "do_sample": True,
        "num_beams": 1,
        "num_return_sequences": sampling.n,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        # Explicit values, as GRPO's rollouts pass them: None would mean the model's generation_config
        # (Qwen3's: top_k 20, top_p 0.95). transformers: top_k 0 and min_p 0 are off.
        "top_k": sampling.top_k or 0,
        "min_p": sampling.min_p,
    }
    how = _Decode(max_new_tokens, batch_size, kwargs, n=sampling.n, progress=progress)
    return _hf_decode(model, tokenizer, prompts, how)


@dataclass(frozen=True)
class _Decode:
    """How :func:`_hf_decode` decodes: the budget, the batch, ``generate``'s arguments, ``n`` rows per
    prompt, extra stop tokens, and the two progress reports (finished prompts; tokens per step)."""

    max_new_tokens: int
    batch_size: int
    decoding: dict[str, Any]
    n: int = 1
    progress: Callable[[int], None] | None = None
    stop_ids: Sequence[int] = ()
    tokens: TokenReport | None = None


def _hf_decode(model: Any, tokenizer: Any, prompts: Sequence[str], how: _Decode) -> list[list[Generation]]:
    """``model.generate`` over left-padded batches with ``how.decoding``'s arguments; ``how.n`` rows per
    prompt (``num_return_sequences``: a prompt's rows are consecutive), grouped per prompt."""
    import torch

    device = next(model.parameters()).device
    eos = _eos_ids(tokenizer, model)
    eos += [int(t) for t in how.stop_ids if int(t) not in eos]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    results: list[list[Generation]] = []
    batch_size, n = max(1, how.batch_size), how.n
    for start in range(0, len(prompts), batch_size):
        batch = list(prompts[start : start + batch_size])
        enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        width = enc["input_ids"].shape[1]
        extra = {"stopping_criteria": [_token_counter(how.tokens, width, eos)]} if how.tokens else {}
        with torch.inference_mode():
            out = model.generate(
                **enc, max_new_tokens=how.max_new_tokens, eos_token_id=eos or None, pad_token_id=pad,
                **how.decoding,
                **extra,
            )  # fmt: skip
        rows = out[:, width:].tolist()
        for i, prompt in enumerate(batch):
            group = []
            for row in rows[i * n : (i + 1) * n]:
                ids = _trim(row, eos, pad)
                group.append(Generation(prompt, tokenizer.decode(ids, skip_special_tokens=False), ids))
            results.append(group)
        if how.progress is not None:
            how.progress(len(batch))
    return results


def hf_stream(model: Any, tokenizer: Any, prompt: str, *, max_new_tokens: int) -> Iterator[str]:
    """Stream text pieces of a greedy completion (``TextIteratorStreamer`` + a generate thread)."""
    import threading

    import torch
    from transformers import TextIteratorStreamer

    device = next(model.parameters()).device
    eos = _eos_ids(tokenizer, model)
    enc = tokenizer([prompt], return_tensors="pt", add_special_tokens=False).to(device)
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=600)
    error: list[BaseException] = []

    def work() -> None:
        try:
            with torch.inference_mode():
                model.generate(
                    **enc,
                    streamer=streamer,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    eos_token_id=eos or None,
                    pad_token_id=tokenizer.pad_token_id,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    min_p=None,
                )
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)
            streamer.end()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    yield from streamer
    thread.join()
    if error:
        raise error[0]


def llama_repack_default() -> bool:
    """Whether llama.cpp may repack weights into its extra CPU buffer types (AMX, REPACK).

    Off unless ``GRPO_LLAMA_REPACK=1``: on the AMX-capable Xeons of our CI VMs (Firecracker), llama.cpp's
    AMX kernels die with SIGILL on the first quantized matmul (q8_0, q4_k_m; f16 is fine) — seen here
    2026-11-29 with llama-cpp-python 0.3.36 built natively. The plain CPU kernels handle every type.
    """
    return os.environ.get("GRPO_LLAMA_REPACK", "0").strip().lower() in ("1", "true", "yes", "on")


class GGUFModel:
    """A GGUF file through llama.cpp (:mod:`cli.infer.llamacpp`): greedy decoding (ids or text), streaming."""

    def __init__(
        self, path: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None, repack: bool | None = None
    ) -> None:
        from cli.infer import llamacpp

        self.path = Path(path)
        if not self.path.is_file():
            raise GrpoError(f"GGUF file not found: {self.path}")
        repack = llama_repack_default() if repack is None else repack
        self.n_ctx = n_ctx
        self.llm = llamacpp.Llama(str(self.path), n_ctx=n_ctx, n_threads=n_threads, repack=repack)
        self.eos = self.llm.token_eos()

    @property
    def bos_text(self) -> str | None:
        """BOS as text when the GGUF asks for one (tokenizer.ggml.add_bos_token), else None.

        The template writes BOS itself (``tokenize`` adds none), as the HF path does for Gemma.
        """
        meta = self.llm.metadata
        if str(meta.get("tokenizer.ggml.add_bos_token", "false")).lower() != "true":
            return None
        bos = self.llm.token_bos()
        return self.detokenize([bos]) if bos is not None and bos >= 0 else None

    def tokenize(self, text: str) -> list[int]:
        # The prompt already carries its special tokens (the template writes them as text).
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids), special=True).decode("utf-8", errors="replace")

    def _ids(self, prompt_ids: Sequence[int], max_new_tokens: int) -> Iterator[int]:
        for tok in self.llm.greedy(list(prompt_ids), max_new_tokens):
            if tok == self.eos or self.llm.is_eog(tok):
                return
            yield tok

    def generate_ids(self, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
        """Greedy continuation of ``prompt_ids`` up to EOS (excluded) or ``max_new_tokens``."""
        return list(self._ids(prompt_ids, max_new_tokens))

    def stream(self, prompt: str, max_new_tokens: int) -> Iterator[str]:
        """Text pieces as tokens arrive (bytes of a split UTF-8 character are held back)."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for tok in self._ids(self.tokenize(prompt), max_new_tokens):
            piece = decoder.decode(self.llm.piece(tok, special=False))
            if piece:
                yield piece
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def close(self) -> None:
        self.llm.close()


def token_agreement(reference: Sequence[Sequence[int]], other: Sequence[Sequence[int]]) -> dict[str, float]:
    """How close two sets of greedy completions are, token by token.

    - ``token_match``: identical tokens at the same position / tokens in the longer of each pair;
    - ``prefix``: mean share of each pair's common prefix over the longer completion;
    - ``exact``: share of prompts whose completions are identical.
    """
    same = total = 0
    prefixes: list[float] = []
    exact = 0
    for a, b in zip(reference, other, strict=False):
        longest = max(len(a), len(b))
        same += sum(1 for x, y in zip(a, b, strict=False) if x == y)
        total += longest
        k = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            k += 1
        prefixes.append(k / longest if longest else 1.0)
        exact += int(list(a) == list(b))
    n = len(prefixes)
    return {
        "token_match": same / total if total else 1.0,
        "prefix": sum(prefixes) / n if n else 1.0,
        "exact": exact / n if n else 1.0,
    }

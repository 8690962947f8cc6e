"""Loading and generation shared by `grpo export`, `grpo chat` and `grpo eval`.

One place knows how to find the run's adapters, load base / base+adapter / merged / GGUF models,
build the prompt from the format contract, decode greedily in batches with HF, stream tokens (HF
``TextIteratorStreamer`` or a llama.cpp stream) and score completions with the reward functions.

Heavy frameworks (torch, transformers, peft, llama.cpp) are imported inside the functions.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.rundir import RunDir

ADAPTER_STAGES = ("grpo", "sft")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
MERGED_DIRNAME = "merged-16bit"


# ---- where things live in a run ----------------------------------------------------------------
def adapter_dir(run: RunDir, stage: str) -> Path:
    """``<run>/<stage>/adapter``: where `grpo sft` / `grpo grpo` save their LoRA (peft save_pretrained)."""
    return run.path / stage / "adapter"


def has_adapter(path: Path) -> bool:
    return (path / "adapter_config.json").is_file() and any((path / w).is_file() for w in ADAPTER_WEIGHTS)


def _mtime(path: Path) -> float:
    return max(
        (path / name).stat().st_mtime
        for name in ("adapter_config.json", *ADAPTER_WEIGHTS)
        if (path / name).exists()
    )


def available_adapters(run: RunDir) -> dict[str, Path]:
    """Trained adapters of the run by stage (``grpo``, ``sft``), only those present."""
    return {s: adapter_dir(run, s) for s in ADAPTER_STAGES if has_adapter(adapter_dir(run, s))}


def pick_adapter(run: RunDir, stage: str | None = None) -> tuple[str, Path]:
    """The adapter of ``stage``, or the newest one (GRPO wins a tie: it is the later stage)."""
    require_run(run)
    found = available_adapters(run)
    if stage not in (None, "auto", "newest"):
        if stage not in ADAPTER_STAGES:
            raise GrpoError(f"unknown adapter source {stage!r} (choose grpo or sft)")
        if stage not in found:
            raise GrpoError(
                f"no {stage} adapter in {run.path} ({stage}/adapter): "
                f"run `grpo {stage} --run {run.path}` first"
            )
        return stage, found[stage]
    if not found:
        raise GrpoError(
            f"nothing trained yet in {run.path}: no sft/adapter or grpo/adapter — run "
            f"`grpo sft --run {run.path}` (then `grpo grpo`) first"
        )
    # Newest by the manifest's stage end times (they survive copies), else by file time; ties go to GRPO.
    try:
        stages = run.manifest().get("stages", {})
    except GrpoError:
        stages = {}
    finished = {s: str(stages.get(s, {}).get("finished") or "") for s in found}
    if all(finished.values()):
        best = max(found, key=lambda s: (finished[s], s == "grpo"))
    else:
        best = max(found, key=lambda s: (_mtime(found[s]), s == "grpo"))
    return best, found[best]


def require_run(run: RunDir) -> None:
    if not run.path.is_dir():
        raise GrpoError(
            f"no run directory at {run.path}: start a run with `grpo prep NAME --run {run.path}` "
            "(or pass --run DIR)"
        )


def run_config(run: RunDir, config_file: Path | None = None) -> Any:
    """The run's saved config (the model it was trained on, the format contract), + ``--config``."""
    from cli.rundir import resolve_config

    require_run(run)
    return resolve_config(run, config_file=config_file)


# ---- adapter checks (seed 003: "check that no saved tensor is entirely zero") -----------------
def adapter_weights_path(path: Path) -> Path:
    for name in ADAPTER_WEIGHTS:
        if (path / name).is_file():
            return path / name
    raise GrpoError(f"adapter folder {path} has no adapter_model.safetensors")


def load_adapter_tensors(path: Path) -> dict[str, Any]:
    """Read the adapter's tensors; a corrupt or truncated file is one clear error."""
    weights = adapter_weights_path(path)
    try:
        cfg = json.loads((path / "adapter_config.json").read_text())
        if not isinstance(cfg, dict) or "peft_type" not in cfg:
            raise ValueError("no peft_type")
    except (OSError, ValueError) as exc:
        raise GrpoError(
            f"adapter config {path / 'adapter_config.json'} is corrupt ({exc}): re-run training"
        ) from None
    try:
        if weights.suffix == ".safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(weights))
        else:
            import torch

            tensors = torch.load(str(weights), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any decode failure means the file is unusable
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GrpoError(
            f"adapter file {weights} is corrupt or truncated ({first}): re-run training"
        ) from None
    if not tensors:
        raise GrpoError(f"adapter file {weights} holds no tensors: re-run training")
    return tensors


def zero_tensors(tensors: dict[str, Any]) -> list[str]:
    """Names of tensors that are entirely zero (an untrained LoRA B, a broken save)."""
    return sorted(name for name, t in tensors.items() if t.numel() > 0 and not bool(t.any()))


# ---- the format contract -----------------------------------------------------------------------
def contract(spec: Any, eos_token: str | None) -> dict[str, Any]:
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


def prompt_text(tokenizer: Any, spec: Any, question: str, history: Sequence[dict[str, str]] = ()) -> str:
    """The generation prompt: system + (history) + user, ending with the reasoning-start tag."""
    messages = spec.messages(question)
    if history:
        messages = [messages[0], *history, messages[1]]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def split_completion(spec: Any, text: str) -> tuple[str, str | None, str]:
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


# ---- rewards -----------------------------------------------------------------------------------
def reward_functions(spec: Any) -> tuple[Callable[..., list[float]], Callable[..., list[float]], str]:
    """(match_format_exactly, check_answer_accuracy, where-they-came-from), bound to ``spec``'s tags.

    ``py_rewards.make_reward_funcs`` (Rust core, or its pure-Python reference backend with
    ``PY_REWARDS_BACKEND=python``) — the same functions training used.
    """
    from py_rewards import make_reward_funcs

    funcs, _ = make_reward_funcs(spec, ["match_format_exactly", "check_answer_accuracy"])
    return funcs[0], funcs[1], "py_rewards"


@dataclass
class Scores:
    format: list[float]
    accuracy: list[float]
    format_ok: list[bool]
    correct: list[bool]
    source: str = ""
    # Issue #13: the answer (solution tags, else the last \boxed{}) equals the gold one under
    # py_rewards.math_equal (MATH-style LaTeX judged like Math-Verify).
    math_correct: list[bool] = field(default_factory=list)

    def mean(self, name: str) -> float:
        vals = [float(v) for v in getattr(self, name)]
        return sum(vals) / len(vals) if vals else float("nan")


_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")


def _number(text: str) -> float | None:
    """``float`` of an answer, allowing thousands separators ("1,000" but not "1,0")."""
    text = text.strip()
    if "," in text:
        if not _THOUSANDS.match(text):
            return None
        text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _numeric_equal(guess: str, true: str) -> bool:
    a, b = _number(guess), _number(true)
    return a is not None and a == b


def score(
    spec: Any, completions: Sequence[str], answers: Sequence[str], prompts: Sequence[Any] | None = None
) -> Scores:
    """Rewards of ``completions`` plus the two eval verdicts.

    - format compliance: ``match_format_exactly > 0`` (seed 000's FORMAT regex matched);
    - correct: ``check_answer_accuracy`` reached its exact or strip tier (the extracted solution equals the
      gold answer, maybe after ``strip()``), or the solution equals the answer numerically
      (thousands separators allowed: ``"1,000"`` == ``"1000.0"``).
      The 90-110 % ratio tiers are partial credit, not correct.
    """
    fmt_fn, acc_fn, source = reward_functions(spec)
    msgs = [[{"role": "assistant", "content": c}] for c in completions]
    prompts = list(prompts) if prompts is not None else [""] * len(completions)
    answers = [str(a) for a in answers]
    fmt = [float(x) for x in fmt_fn(prompts=prompts, completions=msgs, answer=answers)]
    acc = [float(x) for x in acc_fn(prompts=prompts, completions=msgs, answer=answers)]
    sc = spec.scores
    correct = []
    for c, a, s in zip(completions, answers, acc, strict=False):
        ok = s >= min(sc.answer_exact, sc.answer_strip)
        if not ok:
            _, solution, _ = split_completion(spec, c)
            ok = s != sc.answer_missing and solution is not None and _numeric_equal(solution, a)
        correct.append(bool(ok))
    return Scores(fmt, acc, [f > 0 for f in fmt], correct, source, math_verdicts(spec, completions, answers))


def math_verdicts(spec: Any, completions: Sequence[str], answers: Sequence[str]) -> list[bool]:
    """Whether each completion's answer (between the solution tags, else its last ``\\boxed{}``)
    equals the gold answer under ``py_rewards.math_equal``; no answer is not correct."""
    from py_rewards import extract_math_answer, math_equal_batch

    extracted = [extract_math_answer(c, spec.solution_start, spec.solution_end) for c in completions]
    verdicts = math_equal_batch([e if e is not None else "" for e in extracted], [str(a) for a in answers])
    return [bool(v) and e is not None for v, e in zip(verdicts, extracted, strict=True)]


# ---- loading -----------------------------------------------------------------------------------
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_tokenizer(path: str | Path, spec: Any) -> Any:
    """A tokenizer with the contract's chat template, left padding, and a pad token."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot load the tokenizer from {path}: {_first_line(exc)}") from None
    tok.chat_template = spec.chat_template()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def quiet_transformers() -> None:
    """No per-load progress bars or info chatter in the terminal (chat, export tables)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def torch_threads() -> None:
    import torch

    quiet_transformers()
    n = int(os.environ.get("GRPO_THREADS", "0") or 0)
    if n > 0:
        torch.set_num_threads(n)


def load_hf(path: str | Path, *, dtype: Any = "auto", device: str | None = None) -> Any:
    """An HF causal LM in eval mode (on CUDA when available unless ``device`` says otherwise)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_threads()
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot load the model from {path}: {_first_line(exc)}") from None
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device).eval()


def attach_adapter(model: Any, adapter: Path) -> Any:
    """``PeftModel`` over ``model`` with the adapter at ``adapter`` (checked for corruption first)."""
    from peft import PeftModel

    load_adapter_tensors(adapter)  # one clear line for a corrupt file, before peft's traceback
    try:
        return PeftModel.from_pretrained(model, str(adapter), is_trainable=False).eval()
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot attach the adapter {adapter}: {_first_line(exc)}") from None


def adapter_tokenizer_path(adapter: Path, base: str) -> str:
    """Where to load the tokenizer from: the base model's, unless training changed the vocabulary.

    Training saves a tokenizer beside the adapter, but a transformers round trip can rewrite it (seen
    here with Gemma 3 under transformers 5: merges dropped, so llama.cpp cannot load the GGUF), so the
    base's files win whenever both have the same vocabulary size.
    """
    if not (adapter / "tokenizer_config.json").exists():
        return base
    from transformers import AutoTokenizer

    try:
        same = len(AutoTokenizer.from_pretrained(str(adapter), trust_remote_code=False)) == len(
            AutoTokenizer.from_pretrained(base, trust_remote_code=False)
        )
    except Exception:  # noqa: BLE001 - an unreadable adapter tokenizer: the base's is the safe choice
        return base
    return base if same else str(adapter)


# ---- greedy generation -------------------------------------------------------------------------
@dataclass
class Generation:
    prompt: str
    text: str
    tokens: list[int] = field(default_factory=list)  # completion ids, EOS excluded


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
) -> list[Generation]:
    """Greedy, batched, left-padded decoding; completions end at EOS (not included)."""
    import torch

    device = next(model.parameters()).device
    eos = _eos_ids(tokenizer, model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    results: list[Generation] = []
    for start in range(0, len(prompts), max(1, batch_size)):
        batch = list(prompts[start : start + batch_size])
        enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.inference_mode():
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                eos_token_id=eos or None,
                pad_token_id=pad,
                temperature=None,
                top_p=None,
                top_k=None,
                min_p=None,
            )
        width = enc["input_ids"].shape[1]
        for prompt, row in zip(batch, out[:, width:].tolist(), strict=False):
            ids = _trim(row, eos, pad)
            results.append(Generation(prompt, tokenizer.decode(ids, skip_special_tokens=False), ids))
        if progress is not None:
            progress(len(batch))
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


# ---- llama.cpp ---------------------------------------------------------------------------------
def llama_repack_default() -> bool:
    """Whether llama.cpp may repack weights into its extra CPU buffer types (AMX, REPACK).

    Off unless ``GRPO_LLAMA_REPACK=1``: on the AMX-capable Xeons of our CI VMs (Firecracker), llama.cpp's
    AMX kernels die with SIGILL on the first quantized matmul (q8_0, q4_k_m; f16 is fine) — seen here
    2026-11-29 with llama-cpp-python 0.3.36 built natively. The plain CPU kernels handle every type.
    """
    return os.environ.get("GRPO_LLAMA_REPACK", "0").strip().lower() in ("1", "true", "yes", "on")


class GGUFModel:
    """A GGUF file through llama.cpp (:mod:`cli.llamacpp`): greedy decoding from ids or text, streaming."""

    def __init__(
        self, path: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None, repack: bool | None = None
    ) -> None:
        from cli import llamacpp

        self.path = Path(path)
        if not self.path.is_file():
            raise GrpoError(f"GGUF file not found: {self.path}")
        repack = llama_repack_default() if repack is None else repack
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


# ---- agreement ---------------------------------------------------------------------------------
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


# ---- held-out prompts --------------------------------------------------------------------------
def eval_rows(run: RunDir, limit: int | None = None) -> list[dict[str, str]]:
    """``question``/``answer`` rows of ``<run>/data/eval.parquet`` (written by `grpo prep`)."""
    path = run.data_dir / "eval.parquet"
    if not path.exists():
        return []
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=["question", "answer"])
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot read {path}: {_first_line(exc)}") from None
    rows = [
        {"question": str(q), "answer": str(a)}
        for q, a in zip(table["question"].to_pylist(), table["answer"].to_pylist(), strict=False)
    ]
    return rows[:limit] if limit is not None else rows


def fallback_rows(limit: int) -> list[dict[str, str]]:
    """Bundled GSM8K test sample, used for verification when the run has no eval split."""
    from cli.models import SAMPLES

    rows = []
    with open(SAMPLES / "gsm8k_test.jsonl", encoding="utf-8") as fh:
        for raw in fh:
            row = json.loads(raw)
            rows.append({"question": row["question"], "answer": row["answer"].split("####")[-1].strip()})
            if len(rows) >= limit:
                break
    return rows


def render_prompt(
    spec: Any,
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

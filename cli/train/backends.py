"""Backends: ``unsloth`` (FastLanguageModel + TRL) and ``hf`` (transformers + peft + TRL).

Unsloth patches transformers/TRL when it is imported, so :func:`import_backend` must run before
anything imports ``trl``/``transformers``/``peft`` (Unsloth prints a warning and loses its speed-ups
otherwise). Under ``hf`` Unsloth is never imported, so TRL runs unpatched.

Both backends train a LoRA adapter. A later stage continues the run's previous adapter by building the
same LoRA from the adapter's own ``adapter_config.json`` and loading its weights into it, so Unsloth's
patched LoRA layers (and its vLLM LoRA hand-off) stay in place.

The trainer arguments that depend on the hardware (precision, optimizer, gradient checkpointing) are the
plan's (:mod:`cli.train.plan`); on a CPU, the hf backend's log-probs come from our LM head
(:mod:`cli.train.lm_head`), since TRL's Triton kernel has no CPU driver.

Long because: both backends' loading, LoRA and saving, and the choice between them (with a tool run's
refusal of Unsloth), are one decision read in one place.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run.atomic import atomic_dir
from cli.run.console import err_console
from cli.run.ranks import barrier, is_main, local_rank
from cli.run.rundir import RunDir
from cli.train.hardware import Hardware, sharded, training_dtype

if TYPE_CHECKING:
    from cli.config.schema import Config

BACKENDS = ("unsloth", "hf")

# Measured on one H200, Qwen3-4B-shaped weights, LoRA r=16, G=4x256 (docs/design-facts.md "Training
# backends").
DORA_COST = (
    "DoRA is on (lora.dora): on an H200 under Unsloth it measured 45–52 s per GRPO step vs 3.9 s for plain "
    "rsLoRA (~12x slower); set lora.dora: false (--no-dora) unless you are reproducing a seed"
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def unsloth_installed() -> bool:
    return importlib.util.find_spec("unsloth") is not None


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def choose_backend(requested: str) -> str:
    """``auto`` → unsloth when installed, else hf. No heavy import happens here."""
    if requested == "auto":
        return "unsloth" if unsloth_installed() else "hf"
    if requested not in BACKENDS:
        raise GrpoError(f"unknown backend {requested!r} (choose unsloth, hf or auto)")
    if requested == "unsloth" and not unsloth_installed():
        raise GrpoError(
            "--backend unsloth: unsloth is not installed (pip install 'grpo[train]'), or use --backend hf"
        )
    return requested


# H200 (bench/learning-gpu.md rounds 12-14), 1.5B, 128 x 384 tokens, vLLM: hf 2.8-4.4 s/step, Unsloth 6.4-8.5
AUTO_HF_ON_GPU = (
    "auto → hf: with vLLM rollouts on a GPU the hf backend's GRPO step measured 2.6-2.8x faster than "
    "Unsloth's (H200, 1.5B, bench/learning-gpu.md rounds 12-14); --backend unsloth to choose it"
)


def choose_grpo_backend(requested: str, *, gpu_vllm: bool) -> tuple[str, str]:
    """The GRPO stage's backend and why, in one line. ``auto`` takes the faster one for the hardware: hf
    when the rollouts go through vLLM on a GPU (``gpu_vllm``: measured faster there), else as
    :func:`choose_backend` (Unsloth when installed: its generation is the faster one without vLLM)."""
    chosen = choose_backend(requested)
    if requested != "auto":
        return chosen, f"{chosen}: asked for (--backend {requested})"
    if gpu_vllm:
        return "hf", AUTO_HF_ON_GPU
    if chosen == "unsloth":
        return chosen, "auto → unsloth: installed, and the rollouts use HF generate (no vLLM on a GPU here)"
    return chosen, "auto → hf: unsloth is not installed"


def tool_backend(requested: str, chosen: str) -> str:
    """A tool run (config ``tools``) trains on the hf backend: TRL's tool loop (``tools=``) is the one this
    release runs and tests (HF generate on the CPU; TRL colocate or server vLLM on a GPU, the same code
    path). Unsloth's generated trainers and its fast_inference rollouts are not checked with it, so a tool
    run is not half-run there (docs/tools.md "Training")."""
    if chosen != "unsloth":
        return chosen
    if requested == "unsloth":
        raise GrpoError(
            "--tools python: the unsloth backend does not run TRL's tool loop here; use --backend hf "
            "(TRL with HF generate, or colocated vLLM on a GPU)"
        )
    err_console.print(
        "[yellow]note:[/] tools: using the hf backend (TRL's tool loop; Unsloth's is not checked)"
    )
    return "hf"


def import_backend(backend: str, *, use_vllm: bool = False) -> None:
    """Import Unsloth first (before TRL/transformers/peft), as Unsloth requires; with hf, torch. Either is the
    stage's first heavy import, which the callers hold stop signals through (:func:`signals.deferred`)."""
    if backend != "unsloth":
        import torch  # noqa: F401 - not later, outside the hold (a model other than tiny, --backend hf)

        return
    from cli.run import lean

    lean.release()  # Unsloth imports bitsandbytes itself
    if use_vllm:
        # Seed 000: vLLM standby frees the rollout engine's memory during the training pass.
        os.environ.setdefault("UNSLOTH_VLLM_STANDBY", "1")
    from cli.run import quiet

    try:
        with quiet.captured():  # Unsloth's banner and import-time warnings go to the run's log file
            import unsloth  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken install (e.g. torchvision/torch mismatch) is one line
        raise GrpoError(
            f"cannot import unsloth ({type(exc).__name__}: {_first_line(exc)}); "
            "fix the install or use --backend hf"
        ) from None


# ---- LoRA settings ------------------------------------------------------------------------------
def uses_dora(cfg: Config, adapter: Path | None) -> bool:
    """DoRA when the adapter a stage continues has it, or (fresh adapter) when the config asks for it."""
    return bool(adapter_settings(adapter)["dora"]) if adapter else cfg.lora.dora


def adapter_settings(adapter: Path) -> dict[str, Any]:
    """LoRA shape of a saved adapter (so the next stage rebuilds exactly that adapter)."""
    path = Path(adapter) / "adapter_config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GrpoError(f"cannot read {path}: {exc}; re-run the stage that wrote it") from None
    targets = data.get("target_modules") or []  # a list, or a regex string
    return {
        "r": int(data.get("r", 16)),
        "alpha": int(data.get("lora_alpha", data.get("r", 16))),
        "dropout": float(data.get("lora_dropout", 0.0) or 0.0),
        "target_modules": sorted(targets) if isinstance(targets, list) else targets,
        "rslora": bool(data.get("use_rslora", False)),
        "dora": bool(data.get("use_dora", False)),
    }


def lora_settings(cfg: Config, adapter: Path | None) -> dict[str, Any]:
    if adapter is not None:
        got = adapter_settings(adapter)
        want = {"r": cfg.lora.r, "alpha": cfg.lora.alpha, "rslora": cfg.lora.rslora, "dora": cfg.lora.dora}
        diff = [f"{k}={got[k]}" for k in want if got[k] != want[k]]
        if diff:
            err_console.print(
                f"[yellow]note:[/] continuing the adapter in {adapter} with its own LoRA settings "
                f"({', '.join(diff)}), not the config's"
            )
        return got
    return {
        "r": cfg.lora.r,
        "alpha": cfg.lora.alpha,
        "dropout": cfg.lora.dropout,
        "target_modules": list(cfg.lora.target_modules),
        "rslora": cfg.lora.rslora,
        "dora": cfg.lora.dora,
    }


def _torch_dtype(name: str) -> Any:
    import torch

    if name in (None, "", "auto"):
        return None
    try:
        return {
            "bfloat16": torch.bfloat16,
            "bf16": torch.bfloat16,
            "float16": torch.float16,
            "fp16": torch.float16,
            "float32": torch.float32,
            "fp32": torch.float32,
        }[name]
    except KeyError:
        raise GrpoError(f"unknown dtype {name!r} (auto, bfloat16, float16 or float32)") from None


# ---- loading ------------------------------------------------------------------------------------
def load_for_training(
    cfg: Config,
    run: RunDir,
    *,
    backend: str,
    adapter: Path | None = None,
    use_vllm: bool = False,
    vllm_utilization: float | None = None,
) -> tuple[Any, Any]:
    """Base model + a trainable LoRA (continuing ``adapter`` when given) and the run's tokenizer."""
    from cli.models import pad
    from cli.models.resolve import resolve_model

    path = resolve_model(cfg, run)
    lora = lora_settings(cfg, adapter)
    tokenizer, choice = _run_tokenizer(cfg, path)
    if backend == "unsloth":
        # Unsloth reads the tokenizer itself and checks its pad there (on a GPU it refuses pad = eos): it gets
        # the run's tokenizer, with the chosen pad, from the run directory.
        tokenizer_dir = _pad_tokenizer_dir(run, tokenizer) if choice.changed else None
        model, tokenizer = _load_unsloth(cfg, path, lora, use_vllm, vllm_utilization, tokenizer_dir)
    else:
        model = _load_hf(cfg, path, lora)
    tokenizer = _prepare_tokenizer(tokenizer, cfg)
    if tokenizer.pad_token_id != choice.id:
        raise GrpoError(
            f"the trainer's tokenizer pads with {tokenizer.pad_token!r}, not the run's {choice.token!r}: "
            "set pad_token in the run's config"
        )
    pad.sync_model(model, choice)
    pad.report(run, choice)
    if adapter is not None:
        load_adapter_weights(model, adapter)
    return model, tokenizer


def _run_tokenizer(cfg: Config, path: str) -> tuple[Any, Any]:
    """The base model's tokenizer with the run's pad (:mod:`cli.models.pad`), and that choice."""
    from transformers import AutoTokenizer

    from cli.models import pad

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise GrpoError(f"cannot load model {cfg.model!r} ({path}): {_first_line(exc)}") from None
    return tokenizer, pad.for_path(tokenizer, path, cfg.pad_token)


def _pad_tokenizer_dir(run: RunDir, tokenizer: Any) -> str:
    """``<run>/base/tokenizer``: the base tokenizer with the run's pad, written for Unsloth to load."""
    dest = run.path / "base" / "tokenizer"
    if is_main():
        with atomic_dir(dest) as tmp:
            tokenizer.save_pretrained(str(tmp))
    barrier()
    return str(dest)


def _prepare_tokenizer(tokenizer: Any, cfg: Config) -> Any:
    # Unsloth may hand back a processor; the text tokenizer is inside it.
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    cfg.format_spec().apply_to(tok)  # the chat template (and, with tools, the response template)
    return tok


def _load_unsloth(
    cfg: Config,
    path: str,
    lora: dict[str, Any],
    use_vllm: bool,
    utilization: float | None,
    tokenizer_dir: str | None = None,
) -> tuple[Any, Any]:
    from unsloth import FastLanguageModel

    kwargs: dict[str, Any] = {
        "model_name": path,
        "max_seq_length": cfg.max_seq_length,
        "dtype": _torch_dtype(cfg.dtype),
        "load_in_4bit": cfg.load_in_4bit,
        "trust_remote_code": False,  # never run a model folder's own code, never ask
    }
    if tokenizer_dir is not None:
        kwargs["tokenizer_name"] = tokenizer_dir
    if use_vllm:
        # Unsloth's standby mode replaces any share below ~0.88 of the card by its own (124 GiB on an
        # H200 for a 4B model): keep the share the plan gave the rollout (cli.infer.vllm_memory).
        os.environ["UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE"] = "1"
        kwargs.update(fast_inference=True, max_lora_rank=lora["r"], gpu_memory_utilization=utilization)
    try:
        model, tokenizer = FastLanguageModel.from_pretrained(**kwargs)
    except (OSError, ValueError) as exc:
        raise GrpoError(
            f"cannot load model {cfg.model!r} ({path}) with unsloth: {_first_line(exc)}"
        ) from None
    gc = cfg.lora.gradient_checkpointing
    try:
        model = FastLanguageModel.get_peft_model(
            model,
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules=lora["target_modules"],
            bias="none",
            use_rslora=lora["rslora"],
            use_dora=lora["dora"],
            use_gradient_checkpointing=gc if gc not in ("", "none", "false", False, None) else False,
            random_state=cfg.seed,
        )
    except ValueError as exc:
        raise GrpoError(
            f"cannot attach LoRA to {cfg.model!r}: {_first_line(exc)} (check lora.target_modules)"
        ) from None
    return model, tokenizer


def _load_hf(cfg: Config, path: str, lora: dict[str, Any]) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from cli.train.lora_inputs import skip_casts_under_autocast

    dtype = _torch_dtype(training_dtype(cfg.dtype, Hardware.probe()))  # the one rule the plan also shows
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise GrpoError(f"cannot load model {cfg.model!r} ({path}): {_first_line(exc)}") from None
    if torch.cuda.is_available() and not sharded():
        # One GPU per rank under `grpo grpo --gpus N` (DeepSpeed / FSDP place the shards themselves).
        model = model.to(f"cuda:{local_rank()}")
    model.config.use_cache = False
    peft_cfg = LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=lora["target_modules"],
        bias="none",
        use_rslora=lora["rslora"],
        use_dora=lora["dora"],
        task_type="CAUSAL_LM",
    )
    try:
        model = get_peft_model(model, peft_cfg)
    except ValueError as exc:
        raise GrpoError(
            f"cannot attach LoRA to {cfg.model!r}: {_first_line(exc)} (check lora.target_modules)"
        ) from None
    skip_casts_under_autocast(model)  # float32 adapters on bf16 weights: no input copy under autocast
    return model


def load_adapter_weights(model: Any, adapter: Path) -> None:
    """Load a saved LoRA's weights into the freshly attached LoRA of the same shape."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    file = Path(adapter) / "adapter_model.safetensors"
    if not file.exists():
        raise GrpoError(f"{file} is missing: re-run the stage that wrote {adapter}")
    state = load_file(str(file))
    result = set_peft_model_state_dict(model, state)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise GrpoError(
            f"the adapter in {adapter} does not fit this model ({len(unexpected)} unmatched tensors, e.g. "
            f"{unexpected[0]}): was the run's model changed?"
        )


def save_adapter(model: Any, tokenizer: Any, dest: Path, state_dict: dict[str, Any] | None = None) -> Path:
    """LoRA adapter + tokenizer, written to a temp folder and renamed into place (rank 0 only)."""
    if not is_main():
        return dest
    with atomic_dir(dest) as tmp:
        model.save_pretrained(str(tmp), state_dict=state_dict)  # None: the model's own LoRA weights
        tokenizer.save_pretrained(str(tmp))
    return dest


def save_trained_adapter(trainer: Any, model: Any, tokenizer: Any, dest: Path) -> Path:
    """The final adapter of a stage, from one or several processes.

    Under DDP every rank holds the whole LoRA: rank 0 saves it. Under DeepSpeed / FSDP the weights
    may be sharded: every rank takes part in gathering them, rank 0 writes. That holds for a single
    process too: ZeRO-3 replaces every parameter by an empty placeholder even on one GPU, so the
    model's own ``state_dict()`` would save zero-size tensors.
    """
    state = None
    if sharded():
        state = trainer.accelerator.get_state_dict(trainer.model_wrapped)
    save_adapter(model, tokenizer, dest, state_dict=state)
    barrier()
    return dest


def peak_gpu_gib() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)

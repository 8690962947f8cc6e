"""Loading models for inference: tokenizer with the contract's template, HF model, base + adapter.

Adapter files are checked first (seed 003: "check that no saved tensor is entirely zero"; a corrupt
or truncated file is one clear line, before peft's traceback). torch, transformers, peft and
safetensors are imported inside the functions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, first_line
from cli.run.rundir import ADAPTER_WEIGHTS

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


def load_tokenizer(path: str | Path, spec: FormatSpec, pad_token: str = "auto") -> Any:
    """A tokenizer with the contract's chat template, left padding, and the pad training used
    (:mod:`cli.models.pad`; ``pad_token``: the run's config)."""
    from transformers import AutoTokenizer

    from cli.models import pad

    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot load the tokenizer from {path}: {first_line(exc)}") from None
    spec.apply_to(tok)
    tok.padding_side = "left"
    pad.for_path(tok, path, pad_token)
    return tok


def native_tokenizer(path: str | Path, pad_token: str = "auto") -> Any:
    """The model's tokenizer with its own chat template (and the run's pad, left padding), or None when it has
    no template: `grpo eval` asks the base model in its own format too."""
    from transformers import AutoTokenizer

    from cli.models import pad

    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot load the tokenizer from {path}: {first_line(exc)}") from None
    if not isinstance(tok.chat_template, str) or not tok.chat_template.strip():
        return None
    tok.padding_side = "left"
    pad.for_path(tok, path, pad_token)
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
        raise GrpoError(f"cannot load the model from {path}: {first_line(exc)}") from None
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device).eval()


def native_dtype(path: str | Path) -> Any:
    """The dtype the model's weights are stored in (its config's ``dtype``), or None when unknown."""
    import torch
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path), trust_remote_code=False)
    except Exception:  # noqa: BLE001 - the load that follows reports a broken model with one line
        return None
    value = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(value, str):
        value = getattr(torch, value, None)
    return value if isinstance(value, torch.dtype) else None


def attach_adapter(model: Any, adapter: Path) -> Any:
    """``PeftModel`` over ``model`` with the adapter at ``adapter`` (checked for corruption first)."""
    from peft import PeftModel

    load_adapter_tensors(adapter)  # one clear line for a corrupt file, before peft's traceback
    try:
        return PeftModel.from_pretrained(model, str(adapter), is_trainable=False).eval()
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot attach the adapter {adapter}: {first_line(exc)}") from None


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

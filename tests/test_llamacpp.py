"""Tests for cli/infer/llamacpp.py."""

from __future__ import annotations

from helpers import needs_gguf


@needs_gguf
def test_k_quant_kernels_round_trip_through_gguf_py() -> None:
    """llama.cpp's ggml_quantize_chunk (xllamacpp) → bytes that gguf-py's own dequantizer reads back."""
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize

    from cli.infer import llamacpp

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((8, 512)).astype(np.float32)
    for qtype, tol in ((T.Q4_K, 0.15), (T.Q6_K, 0.04), (T.Q5_0, 0.08), (T.Q8_0, 0.01)):
        raw = np.frombuffer(llamacpp.quantize_rows(qtype.value, rows), dtype=np.uint8).reshape(8, -1)
        back = dequantize(raw, qtype)
        assert back.shape == rows.shape, qtype
        rel = np.abs(back - rows).mean() / np.abs(rows).mean()
        assert rel < tol, (qtype.name, rel)

"""Tests for cli/export/gguf.py."""

from __future__ import annotations


def test_tensor_types_follow_llama_quantize() -> None:
    from cli.export.gguf import tensor_type

    # 28 layers (Qwen3-4B): use_more_bits picks layers 0-2, 5, 8, …, 23, 24-27 for attn_v / ffn_down.
    more = [i for i in range(28) if tensor_type(f"blk.{i}.ffn_down.weight", "q4_k_m", 28, False) == "Q6_K"]
    assert more == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
    assert tensor_type("blk.4.attn_v.weight", "q4_k_m", 28, False) == "Q4_K"
    assert tensor_type("blk.4.attn_q.weight", "q5_k_m", 28, False) == "Q5_K"
    assert tensor_type("output.weight", "q4_k_m", 28, False) == "Q6_K"
    # Tied embeddings (no output.weight): token_embd is the output matrix and gets Q6_K.
    assert tensor_type("token_embd.weight", "q4_k_m", 28, True) == "Q6_K"
    assert tensor_type("token_embd.weight", "q4_k_m", 28, False) == "Q4_K"
    assert tensor_type("blk.1.attn_v.weight", "q4_k_s", 28, False) == "Q5_K"

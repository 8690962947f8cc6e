"""cli/infer/vllm_memory.py: vLLM's share of the GPU — the plan, the setting, the model's shape.

The sizes are checked against the arithmetic written out here, for the two models the project measures
on the H200 (Qwen3-4B and Gemma-3-270M shapes), so a change of the plan shows up as a changed figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fails_fast

from cli.common import GrpoError
from cli.infer.vllm_memory import (
    GIB,
    KV_HEADROOM,
    VLLM_MARGIN_BYTES,
    ModelShape,
    model_shape,
    parse_utilization,
    plan_vllm,
)

H200 = int(139.8 * GIB)
QWEN3_4B = ModelShape(layers=36, kv_heads=8, head_dim=128, weight_bytes=8_044_936_192)
GEMMA3_270M = ModelShape(layers=18, kv_heads=1, head_dim=256, weight_bytes=536_223_744)


def test_auto_share_is_weights_plus_kv_plus_margin() -> None:
    plan = plan_vllm(
        "auto", QWEN3_4B, sequences=8, prompt_tokens=128, completion_tokens=1024, total_bytes=H200
    )
    kv = 2 * 36 * 8 * 128 * 2  # K and V, bf16: 147,456 bytes per token
    need = QWEN3_4B.weight_bytes + int(KV_HEADROOM * 8 * 1152 * kv) + VLLM_MARGIN_BYTES
    assert plan.auto and plan.kv_tokens == 8 * 1152 and plan.need_bytes == need
    assert plan.utilization == round(need / H200, 4)
    # Seed 000's recipe fits a 15 GB card: vLLM's share must leave room for training on a 16 GiB budget.
    assert 12 < plan.vllm_gib < 13
    assert "auto" in plan.describe() and "9216 tokens" in plan.describe()


def test_a_small_model_gets_a_small_share_with_a_floor() -> None:
    plan = plan_vllm(
        "auto", GEMMA3_270M, sequences=64, prompt_tokens=200, completion_tokens=300, total_bytes=H200
    )
    assert 0.02 <= plan.utilization < 0.05
    tiny = ModelShape(layers=2, kv_heads=1, head_dim=8, weight_bytes=1000)
    assert (
        plan_vllm(
            "auto", tiny, sequences=2, prompt_tokens=4, completion_tokens=4, total_bytes=H200 * 10
        ).utilization
        == 0.02
    )


def test_a_number_overrides_and_unknown_shapes_keep_the_old_default() -> None:
    plan = plan_vllm(0.3, QWEN3_4B, sequences=8, prompt_tokens=128, completion_tokens=1024, total_bytes=H200)
    assert not plan.auto and plan.utilization == 0.3
    assert (
        plan_vllm(
            "auto", None, sequences=8, prompt_tokens=1, completion_tokens=1, total_bytes=H200
        ).utilization
        == 0.6
    )


def test_a_gpu_too_small_is_one_clear_error() -> None:
    with pytest.raises(GrpoError, match=r"vLLM rollouts need about .* GiB.*--vllm off"):
        plan_vllm(
            "auto", QWEN3_4B, sequences=64, prompt_tokens=512, completion_tokens=4096, total_bytes=16 * GIB
        )


@pytest.mark.parametrize("bad", ["most", 0, 1, 1.5, -0.2, [0.5]])
def test_bad_utilization_values(bad) -> None:
    with pytest.raises(GrpoError, match="gpu_memory_utilization must be auto or a fraction"):
        parse_utilization(bad)


def test_utilization_values_read_from_yaml() -> None:
    assert parse_utilization("auto") is None and parse_utilization(None) is None
    assert parse_utilization("0.25") == 0.25 and parse_utilization(0.7) == 0.7


def test_config_rejects_a_bad_share_before_anything_runs(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("grpo:\n  gpu_memory_utilization: 1.2\n")
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--config", str(cfg)])
    assert "grpo.gpu_memory_utilization must be auto or a fraction in (0, 1), not 1.2" in line
    assert not (tmp_path / "r").exists()


def test_model_shape_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "text_config": {
                    "hidden_size": 640,
                    "num_attention_heads": 4,
                    "num_hidden_layers": 18,
                    "num_key_value_heads": 1,
                    "head_dim": 256,
                    "vocab_size": 262144,
                    "intermediate_size": 2048,
                },
            }
        )
    )
    shape = model_shape(tmp_path)
    assert shape is not None and (shape.layers, shape.kv_heads, shape.head_dim) == (18, 1, 256)
    assert shape.kv_bytes_per_token == 2 * 18 * 256 * 2
    assert shape.weight_bytes == 2 * (18 * (4 * 640 * 640 + 3 * 640 * 2048) + 262144 * 640)  # estimate
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1234)
    assert model_shape(tmp_path).weight_bytes == 1234  # real files win over the estimate
    assert model_shape(tmp_path / "missing") is None

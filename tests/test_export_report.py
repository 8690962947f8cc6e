"""Tests for cli/export/report.py."""

from __future__ import annotations


def test_export_warns_when_an_artifact_loses_the_format() -> None:
    from cli.export.report import degraded

    def art(name: str, kind: str, hf: float, got: float) -> dict:
        return {
            "name": name,
            "kind": kind,
            "rewards": {"hf": {"match_format_exactly": hf}, "artifact": {"match_format_exactly": got}},
        }

    # Gemma-3-270M's measured case: q4_k_m 0.00 vs 1.12 (warned), q8_0 0.75 vs 1.12 (kept).
    warned = degraded(
        [
            art("gguf-q8_0", "gguf", 1.125, 0.75),
            art("gguf-q4_k_m", "gguf", 1.125, 0.0),
            art("merged-16bit", "merged", 0.0, 0.0),
        ]
    )
    assert (
        len(warned) == 1
        and warned[0].startswith("gguf-q4_k_m lost the trained format")
        and "q8_0" in warned[0]
    )


def test_export_judges_by_the_threshold_and_names_what_to_try() -> None:
    """SmolLM2-135M's q8_0: format reward 0.75 → 0.38 (49 % lost) passed silently under a fixed half."""
    from cli.config.schema import Config
    from cli.export.report import degraded

    rewards = {"hf": {"match_format_exactly": 0.75, "check_answer_accuracy": 2.0},
               "artifact": {"match_format_exactly": 0.38, "check_answer_accuracy": 2.0}}  # fmt: skip
    art = {"name": "gguf-q8_0", "kind": "gguf", "type": "q8_0", "verify_prompts": 8, "rewards": rewards}
    (line,) = degraded([art], Config().verify_max_loss)
    assert "format reward 0.38 vs 0.75 (49 % lost)" in line and "on 8 prompts" in line
    assert "answer reward" not in line and "export --gguf f16 (or bf16) instead" in line
    assert degraded([art], 0.6) == []  # the threshold is the setting's
    rewards["artifact"]["check_answer_accuracy"] = 0.5
    assert "answer reward 0.50 vs 2.00 (75 % lost)" in degraded([art], 0.6)[0]

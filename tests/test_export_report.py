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

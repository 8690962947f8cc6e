"""Comparable rows by default (issue 40, item 7): `grpo eval`'s decode budget is its own.

A `--max-completion-length 96` given to `grpo grpo` is saved in config.yaml; the next `grpo eval` used to
decode at 96 tokens with no note, and the before/after tables stopped being comparable.
"""

from __future__ import annotations

import json

from helpers import copy_run, invoke


def test_eval_budget_is_its_own_and_the_table_says_it(run_dir, tmp_path) -> None:
    run = copy_run(run_dir, tmp_path / "run")
    cfg = run / "config.yaml"
    cfg.write_text(cfg.read_text().replace("max_completion_length: null", "max_completion_length: 4"))
    assert "max_completion_length: 4" in cfg.read_text()
    result = invoke("eval", "--run", run, "--models", "grpo", "--limit", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["max_new_tokens"] == 512
    assert "max 512 new tokens" in (run / "eval" / "report.md").read_text()

"""Tests for cli/train/data.py."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_sft_on_a_set_without_worked_solutions_says_so(tmp_path: Path) -> None:
    import pandas as pd

    from cli.common import GrpoError
    from cli.config.schema import Config
    from cli.models.resolve import build_tiny_tokenizer
    from cli.run.rundir import RunDir
    from cli.train.data import sft_dataset
    from py_rewards.spec import get_spec

    run = RunDir(tmp_path / "r")
    run.data_dir.mkdir(parents=True)
    # What `grpo prep dapo --source` wrote before the first runs (docs/history.md): DAPO rows carry no
    # solution at all.
    pd.DataFrame(
        {"question": ["q1", "q2"], "answer": ["1", "2"], "solution": pd.Series([None, None], dtype=object)}
    ).to_parquet(run.data_dir / "train.parquet")
    with pytest.raises(GrpoError, match="no worked solutions") as err:
        sft_dataset(Config(), run, build_tiny_tokenizer(get_spec("seed000")))
    assert "max_seq_length" not in str(err.value) and "grpo prep" in str(err.value)

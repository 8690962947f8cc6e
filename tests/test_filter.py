"""cli/commands/filter.py, cli/train/passrate.py, generation.hf_sample and the filtered prompts in
cli/run/data.py,
cli/train/data.py and cli/commands/prep.py: `grpo filter` end to end on the tiny model, `grpo grpo` on
what it kept, --clear, staleness, bad inputs.

Uses the run built by tests/helpers.py's make_run (tiny Qwen3 + real peft adapters trained to answer
"<SOLUTION>18</SOLUTION>" to anything), with a train.parquet written here: three prompts whose gold answer
is 18 (the adapters solve them) and three whose answer is not. The adapters' margins are small, so the
run samples at grpo.temperature 0.2 (a --config file): there every sample of the first three is right,
at 1.0 (the default) none is. The vLLM path (cli/infer/vllm_engine.py sample_all) needs a GPU and is not run
here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLES, copy_run, fails_fast, grpo_cli, invoke, manifest, ok, one_error_line

GOLD = ["18", "7", "18", "42", "18", "5"]  # the adapters answer 18: rows 0, 2 and 4 are solved
SOLVED_ROWS = [0, 2, 4]
SAMPLING = "grpo:\n  temperature: 0.2\n"
FAST = ("--samples", "4", "--max-new-tokens", "24", "--decode-batch", "3")


def write_train(run: Path, gold: list[str] = GOLD) -> list[str]:
    """data/train.parquet as prep writes it (question, answer, solution, prompt_tokens); its questions."""
    import pandas as pd

    lines = (SAMPLES / "gsm8k_train.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines[: len(gold)]]
    questions = [r["question"] for r in rows]
    pd.DataFrame(
        {
            "question": questions,
            "answer": gold,
            "solution": [r["answer"] for r in rows],
            "prompt_tokens": [len(q.split()) for q in questions],
        }
    ).to_parquet(run / "data" / "train.parquet", index=False)
    return questions


def filter_cmd(run: Path, config: Path, *args: str):
    return invoke("filter", "--run", run, "--config", config, *FAST, *args)


@pytest.fixture(scope="module")
def sampling_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("filter-config") / "sampling.yaml"
    path.write_text(SAMPLING)
    return path


@pytest.fixture(scope="module")
def filtered(run_dir: Path, sampling_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained tiny run with train.parquet written and `grpo filter --keep solved` run once (copy to
    change it)."""
    run = copy_run(run_dir, tmp_path_factory.mktemp("filtered") / "run")
    write_train(run)
    result = filter_cmd(run, sampling_config, "--keep", "solved")
    assert result.exit_code == 0, result.output
    return run


def files(run: Path) -> dict[str, bytes]:
    """The filter's files as bytes (absent: missing)."""
    return {n: (run / "data" / n).read_bytes() for n in ("grpo_prompts.parquet", "passrate.json")
            if (run / "data" / n).exists()}  # fmt: skip


@pytest.mark.slow
def test_keep_solved_keeps_exactly_what_the_adapter_solves(filtered: Path, sampling_config, tmp_path) -> None:
    import pandas as pd

    from cli.run.atomic import file_sha256

    train = pd.read_parquet(filtered / "data" / "train.parquet")
    kept = pd.read_parquet(filtered / "data" / "grpo_prompts.parquet")
    assert list(kept.columns) == [*train.columns, "solved"] and str(kept["solved"].dtype) == "int64"
    assert kept["question"].tolist() == train["question"].iloc[SOLVED_ROWS].tolist()
    assert kept["answer"].tolist() == ["18", "18", "18"] and kept["solved"].tolist() == [4, 4, 4]
    report = json.loads((filtered / "data" / "passrate.json").read_text())
    assert (report["prompts"], report["samples"], report["kept"], report["keep"]) == (6, 4, 3, "solved")
    assert (report["adapter"], report["engine"], report["not_sampled"]) == ("sft", "hf", 0)
    assert report["solved_histogram"] == {"0": 3, "1": 0, "2": 0, "3": 0, "4": 3}
    assert report["sample_accuracy"] == 0.5 and report["format_rate"] == 1.0
    assert 0 < report["mean_completion_tokens"] < 24 and report["generation_seconds"] >= 0
    # GRPO's sampling settings, from the run's config (+ --config), seeded by the run's seed.
    assert report["sampling"] == {"temperature": 0.2, "top_p": 1.0, "min_p": 0.1, "top_k": 0,
                                  "max_new_tokens": 24, "seed": 3407}  # fmt: skip
    assert report["train_sha256"] == file_sha256(filtered / "data" / "train.parquet")  # no stats.json here
    assert report["file"]["sha256"] == file_sha256(filtered / "data" / "grpo_prompts.parquet")
    stage = manifest(filtered)["stages"]["filter"]
    assert (stage["kept"], stage["adapter"], stage["engine"]) == (3, "sft", "hf") and stage["finished"]

    # --keep mixed on the same prompts: every group is all right or all wrong, nothing to keep. Exit 1, one
    # line that says so, and the previous filter's files are as they were.
    run = copy_run(filtered, tmp_path / "run")
    before = files(run)
    line = one_error_line(filter_cmd(run, sampling_config))
    assert "3 were never solved and 3 always solved in 4 samples" in line and "--keep solved" in line
    assert files(run) == before
    assert manifest(run)["stages"]["filter"] == stage


@pytest.mark.slow
def test_limit_one_sample_and_the_grpo_adapter(filtered: Path, sampling_config, tmp_path) -> None:
    import pandas as pd

    run = copy_run(filtered, tmp_path / "run")
    args = ("--limit", "4", "--samples", "1", "--keep", "solved", "--adapter", "grpo")  # 1 sample: fine here
    result = invoke("filter", "--run", run, "--config", sampling_config, "--max-new-tokens", "24", *args)
    assert result.exit_code == 0, result.output
    assert "--limit 4: the other 2 are not kept" in result.output
    assert "grpo grpo --run" in result.output and "2 kept prompts" in result.output
    kept = pd.read_parquet(run / "data" / "grpo_prompts.parquet")
    assert kept["solved"].tolist() == [1, 1] and kept["answer"].tolist() == ["18", "18"]
    report = json.loads((run / "data" / "passrate.json").read_text())
    counts = (report["prompts"], report["prompts_in_train"], report["limit"], report["not_sampled"])
    assert counts == (4, 6, 4, 2)
    assert report["adapter"] == "grpo" and report["adapter_path"].endswith("grpo/adapter")


@pytest.mark.slow
def test_grpo_trains_on_the_filtered_prompts(filtered: Path, tmp_path) -> None:
    run = copy_run(filtered, tmp_path / "run")
    out = ok(grpo_cli("grpo", "--run", str(run), "--backend", "hf", "--gens", "2", "--max-steps", "1",
                      "--max-completion-length", "8"))  # fmt: skip
    assert "on the 3 prompts `grpo filter` kept of 6" in out and "grpo filter --clear" in out
    assert "grpo: 3 prompts" in out
    data = manifest(run)["stages"]["grpo"]["data"]
    assert data["prompts_from"] == "grpo filter (3 of 6)" and data["prompts"] == 3


def test_clear(filtered: Path, tmp_path) -> None:
    run = copy_run(filtered, tmp_path / "run")
    result = invoke("filter", "--run", run, "--clear")
    assert result.exit_code == 0, result.output
    assert result.output.strip().startswith("removed data/grpo_prompts.parquet and data/passrate.json")
    assert len(result.output.strip().splitlines()) == 1
    assert files(run) == {} and (run / "data" / "train.parquet").is_file()
    result = invoke("filter", "--run", run, "--clear")
    assert result.exit_code == 0 and "nothing to clear" in result.output


def test_stale_filter_is_ignored(filtered: Path, tmp_path, capsys) -> None:
    from cli.config.schema import Config
    from cli.models.resolve import build_tiny_tokenizer
    from cli.run.data import filtered_prompts
    from cli.run.rundir import RunDir
    from cli.train.data import grpo_dataset
    from py_rewards.spec import get_spec

    run = RunDir(copy_run(filtered, tmp_path / "run"))
    tokenizer = build_tiny_tokenizer(get_spec("seed000"))
    dataset, info = grpo_dataset(Config(), run, tokenizer, 10_000)
    assert (len(dataset), info["prompts_from"]) == (3, "grpo filter (3 of 6)")
    assert "on the 3 prompts `grpo filter` kept" in capsys.readouterr().out

    write_train(run.path, ["18", "18", "18", "42", "18", "5"])  # a new train.parquet: the filter is stale
    passrate, note = filtered_prompts(run)
    assert passrate is None and "stale" in note and "re-run `grpo filter" in note
    dataset, info = grpo_dataset(Config(), run, tokenizer, 10_000)
    assert (len(dataset), info["prompts_from"]) == (6, "train.parquet")
    err = capsys.readouterr().err
    assert "note:" in err and "stale" in err and "grpo filter" in err

    # prep's record of train.parquet (stats.json) is what counts when there is one.
    write_train(run.path)
    assert filtered_prompts(run)[0] is not None
    stats = {"files": {"train": {"path": "data/train.parquet", "rows": 6, "sha256": "0" * 64}}}
    (run.data_dir / "stats.json").write_text(json.dumps(stats))
    assert filtered_prompts(run)[0] is None


@pytest.mark.slow
def test_prep_removes_a_stale_filter(filtered: Path, tmp_path) -> None:
    run = copy_run(filtered, tmp_path / "run")
    src = SAMPLES / "gsm8k_train.jsonl"
    result = invoke("prep", "gsm8k", "--source", src, "--limit", "24", "--eval-size", "4", "--run", run)
    assert result.exit_code == 0, result.output
    assert "removed data/grpo_prompts.parquet and data/passrate.json" in result.output
    assert files(run) == {} and (run / "data" / "train.parquet").is_file()


def test_bad_inputs(filtered: Path, run_dir: Path, sampling_config, tmp_path) -> None:
    assert "no run directory" in one_error_line(invoke("filter", "--run", tmp_path / "none"))
    assert not (tmp_path / "none").exists()
    # run_dir has adapters but no train split.
    run = copy_run(run_dir, tmp_path / "unprepped")
    line = one_error_line(invoke("filter", "--run", run))
    assert "prepped data not found" in line and "grpo prep" in line
    assert files(run) == {}

    run = copy_run(filtered, tmp_path / "run")
    before = files(run)

    def refused(*args: str, code: int = 2) -> str:
        result = invoke("filter", "--run", run, *args)
        assert result.exit_code == code, result.output
        assert files(run) == before  # the previous filter is untouched
        return one_error_line(result)

    line = refused("--samples", "1")
    assert "--keep mixed" in line and "--samples 2 or more" in line and "--keep solved" in line
    assert "unknown --keep 'most'" in refused("--keep", "most")
    assert "unknown --adapter 'dpo'" in refused("--adapter", "dpo")
    assert "unknown --engine" in refused("--engine", "tgi")
    if not _vllm_and_gpu():
        line = refused("--engine", "vllm")
        assert "--engine vllm:" in line and "--engine hf" in line


def test_no_adapter_is_refused_before_any_model_loads(filtered: Path, tmp_path) -> None:
    run = copy_run(filtered, tmp_path / "run")
    shutil.rmtree(run / "grpo" / "adapter")
    before = files(run)
    line = fails_fast(["filter", "--run", str(run), "--adapter", "grpo"])
    assert line == f"error: no grpo adapter in {run}: run `grpo grpo --run {run}` first"
    assert files(run) == before


def test_dry_run_and_help(runner, tmp_path) -> None:
    import yaml

    from cli.main import app

    run = tmp_path / "run"
    args = ["filter", "--run", str(run), "--samples", "16", "--keep", "solved", "--dry-run"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.stdout)
    assert shown["filter"]["samples"] == 16 and shown["filter"]["keep"] == "solved"
    assert shown["grpo"]["temperature"] == 1.0 and not run.exists()
    result = runner.invoke(app, ["filter", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--run", "--config", "--dry-run", "--samples", "--adapter", "--keep", "--limit",
                 "--max-new-tokens", "--engine", "--decode-batch", "--clear"):  # fmt: skip
        assert flag in result.output, flag
    commands = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert commands.index("│ sft ") < commands.index("│ filter ") < commands.index("│ grpo ")


def test_select() -> None:
    from cli.train.passrate import select

    solved = [0, 1, 3, 4, 2, 0]
    assert select(solved, 4, "mixed") == [1, 2, 4]
    assert select(solved, 4, "solved") == [1, 2, 3, 4]
    assert select([0, 0], 4, "solved") == []


def _vllm_and_gpu() -> bool:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()

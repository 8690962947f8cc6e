"""cli/train/control.py: the placebo attempt (`grpo grpo --control …`) and `grpo eval`'s GRPO − control.

The derangement, the shuffled answers and the drawn rewards on their own; then the real chain on the tiny
model: a GRPO attempt, a shuffled-answers control and a random-reward control of the same settings (real
TRL trainer, subprocesses), kept apart in the run directory, and `grpo eval` saying what GRPO added beyond
the placebo.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers import SAMPLES, cli_env, grpo_cli, invoke, metrics, ok, one_error_line

from cli.train.control import derangement, random_rewards, shuffle_answers
from cli.train.rewards import Reward


def test_derangement_moves_every_prompt_and_is_seeded() -> None:
    for n in (2, 3, 7, 50):
        for seed in range(5):
            perm = derangement(n, seed)
            assert sorted(perm) == list(range(n)) and all(perm[i] != i for i in range(n))
    assert derangement(20, 1) == derangement(20, 1) != derangement(20, 2)


def test_shuffled_answers_take_another_prompts_gold() -> None:
    from datasets import Dataset

    golds = [str(i) for i in range(10)]
    ds = Dataset.from_list([{"prompt": f"q{i}", "answer": a} for i, a in enumerate(golds)])
    out, info = shuffle_answers(ds, seed=3407)
    assert out["prompt"] == ds["prompt"]  # the prompts stay in place; only their gold moves
    assert sorted(out["answer"]) == golds and all(a != b for a, b in zip(out["answer"], golds, strict=True))
    assert info["prompts_whose_borrowed_gold_equals_their_own"] == 0
    assert shuffle_answers(ds, seed=3407)[0]["answer"] == out["answer"]


def test_random_reward_draws_from_the_batchs_own_scores() -> None:
    def exact(prompts, completions, answer, **kw):
        return [5.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    (drawn,) = random_rewards([Reward("exact", exact, 1.0)], seed=1)
    assert drawn.name == "exact" and drawn.func.__name__ == "exact"
    completions = [str(i % 4) for i in range(400)]
    real = exact(None, completions, ["0"] * 400)
    scores = drawn.func(None, completions, ["0"] * 400)
    assert set(scores) <= {0.0, 5.0} and abs(sum(scores) / 400 - sum(real) / 400) < 0.5  # same mean
    # Independent of the completion: the correct ones (every 4th) are paid no more often than the rest.
    hit = [s for s, c in zip(scores, completions, strict=True) if c == "0"]
    assert 0.5 < sum(hit) / len(hit) / 1.25 < 1.6
    rng = random.Random(0)
    all_zero = drawn.func(None, [str(rng.random()) for _ in range(8)], ["x"] * 8)
    assert all_zero == [0.0] * 8  # a batch with no signal stays without one


@pytest.mark.slow
def test_control_attempts_are_kept_apart_and_judged(tiny_run: Path) -> None:
    run = str(tiny_run)
    src = SAMPLES / "gsm8k_train.jsonl"
    assert (
        invoke("prep", "gsm8k", "--source", src, "--limit", "24", "--model", "tiny", "--run", run).exit_code
        == 0
    )
    settings = ("--gens", "2", "--batch-size", "2", "--max-steps", "1", "--max-completion-length", "8")
    out = ok(grpo_cli("grpo", "--run", run, *settings))
    assert "grpo done: 1 step (attempt 1)" in out
    grpo_adapter = (tiny_run / "grpo" / "adapter" / "adapter_model.safetensors").read_bytes()

    # A flag that changes a setting would make the placebo unmatched: refused in one line.
    line = one_error_line(invoke("grpo", "--run", run, "--control", "shuffled-answers", "--max-steps", "3"))
    assert "grpo.max_steps" in line and "matched" in line
    line = one_error_line(invoke("grpo", "--run", run, "--control", "coin"))
    assert "grpo.control" in line and "shuffled-answers" in line

    dump = tiny_run.parent / "reward-log"  # every batch the rewards scored (cli/train/rewards.py)
    out = ok(
        grpo_cli(
            "grpo",
            "--run",
            run,
            "--control",
            "shuffled-answers",
            env={**cli_env(), "GRPO_REWARD_LOG": str(dump)},
        )
    )
    # The rewards saw other prompts' golds: no prompt was scored against its own.
    import pandas as pd

    train = pd.read_parquet(tiny_run / "data" / "train.parquet")
    gold = {str(q): str(a).strip() for q, a in zip(train["question"], train["answer"], strict=True)}
    batches = [json.loads(x) for x in (dump / "rank0.jsonl").read_text().splitlines()]
    seen = [(p[-1]["content"], a) for b in batches for p, a in zip(b["prompts"], b["answer"], strict=True)]
    assert seen and {a for _, a in seen} <= set(gold.values())
    same = {q for q, a in seen if gold[q] == a}  # only where two prompts share a gold answer
    assert "CONTROL attempt 2 (shuffled-answers)" in out and "grpo done: 1 step (attempt 2, CONTROL" in out
    ckpts = tiny_run / "grpo" / "checkpoints"
    assert json.loads((ckpts / "attempt-2" / "control.json").read_text())["control"] == "shuffled-answers"
    mark = json.loads((tiny_run / "grpo" / "control" / "control.json").read_text())
    assert mark["attempt"] == 2 and mark["steps"] == 1
    assert (tiny_run / "grpo" / "control" / "adapter" / "adapter_model.safetensors").is_file()
    # The GRPO adapter, its curves and the run's settings are the GRPO attempt's still.
    assert (tiny_run / "grpo" / "adapter" / "adapter_model.safetensors").read_bytes() == grpo_adapter
    assert (tiny_run / "logs" / "train-control.png").is_file() and (tiny_run / "logs" / "train.png").is_file()
    assert "control: null" in (tiny_run / "config.yaml").read_text()
    rows = [r for r in metrics(tiny_run) if r.get("stage") == "grpo"]
    assert [(r["attempt"], r.get("control")) for r in rows] == [(1, None), (2, "shuffled-answers")]
    stages = json.loads((tiny_run / "manifest.json").read_text())["stages"]
    assert stages["grpo_control"]["control"] == "shuffled-answers" and stages["grpo"]["attempt"] == 1
    assert len(same) <= stages["grpo_control"]["data"]["prompts_whose_borrowed_gold_equals_their_own"] < 12

    # --resume continues an attempt as what it was.
    line = one_error_line(invoke("grpo", "--run", run, "--resume"))
    assert "placebo control (shuffled-answers)" in line

    out = ok(grpo_cli("grpo", "--run", run, "--control", "random-reward"))
    assert "grpo done: 1 step (attempt 3, CONTROL: random-reward)" in out

    # eval: GRPO against its placebo, paired, in one line a user can quote.
    result = invoke("eval", "--run", run, "--limit", "4", "--max-new-tokens", "8", "--models", "sft,grpo")
    assert result.exit_code == 0, result.output
    report = json.loads((tiny_run / "eval" / "report.json").read_text())
    assert [r["checkpoint"] for r in report["results"]] == ["grpo", "control"]  # no SFT adapter: skipped
    verdict = report["verdict"]
    assert verdict["control"]["control"] == "random-reward"
    diffs = {(d["a"], d["b"], d["metric"]) for d in verdict["differences"]}
    assert ("control", "grpo", "accuracy") in diffs
    assert (
        verdict["placebo"].startswith("GRPO added ")
        and "beyond a placebo run of the same length" in verdict["placebo"]
    )
    assert "(random-reward, 1 step)" in verdict["placebo"]
    assert verdict["placebo"] in result.output.replace("\n", " ") or "GRPO added" in result.output
    assert "beyond a placebo run" in (tiny_run / "eval" / "report.md").read_text()

"""cli/train/trainer.py, canary.py, dynamic.py: our TRL subclasses and what they call.

The subclasses override or call the names in GRPO_NAMES / SFT_NAMES: if an upgrade of TRL (or Unsloth,
whose generated trainer replaces TRL's on a GPU) renames one, these tests fail, and the trainer refuses to
start with one line — a feature is never switched off silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fresh_copy, grpo_cli, ok

from cli.common import GrpoError
from cli.train.trainer import GRPO_NAMES, SFT_NAMES, _checked, missing_names


def test_the_installed_trl_has_every_name_we_override_or_call() -> None:
    from trl import GRPOTrainer, SFTTrainer

    assert missing_names(GRPOTrainer, GRPO_NAMES) == [], (
        "TRL renamed a GRPOTrainer method cli/train/trainer.py uses"
    )
    assert missing_names(SFTTrainer, SFT_NAMES) == [], (
        "TRL renamed an SFTTrainer method cli/train/trainer.py uses"
    )


def test_unsloth_trainer_has_them_too() -> None:
    """Unsloth generates its GRPOTrainer from TRL's source when it patches (on a GPU): checked where it is."""
    import trl

    try:
        import unsloth  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"unsloth does not import here: {exc}")
    cls = trl.GRPOTrainer
    if not cls.__name__.startswith("Unsloth"):
        pytest.skip("Unsloth keeps TRL's own trainer on a CPU (it patches on a GPU); TRL's was checked above")
    assert missing_names(cls, GRPO_NAMES) == []


def test_a_missing_name_refuses_with_one_line() -> None:
    class Renamed:
        def training_step(self) -> None: ...

    with pytest.raises(GrpoError, match=r"has no _generate_and_score_completions, .*install those versions"):
        _checked(Renamed, GRPO_NAMES)


# ---- the canary -----------------------------------------------------------------------------------
def _rows(pairs: list[tuple[float, float]]) -> list[dict[str, float]]:
    return [
        {"sampling/importance_sampling_ratio/mean": r, "sampling/sampling_logp_difference/mean": d}
        for r, d in pairs
    ]


def _run_canary(pairs: list[tuple[float, float]], *, from_adapter: bool) -> tuple[list[str], list[dict]]:
    from cli.train.canary import RolloutCanary

    said: list[str] = []
    canary = RolloutCanary(from_adapter=from_adapter, warn=said.append)
    rows = _rows(pairs)
    for row in rows:
        canary.check(row)
    return said, rows


def test_canary_is_silent_on_a_healthy_engine() -> None:
    said, rows = _run_canary([(1.0, 0.012), (0.98, 0.015), (1.03, 0.011)] * 5, from_adapter=True)
    assert said == [] and not any("canary" in r for r in rows)


def test_canary_fires_on_drift_once_until_it_clears() -> None:
    # TRL 1.15's default with min_p 0.1 (measured on the H200): ratio 0.048, 0.045 nats/token
    said, rows = _run_canary([(0.048, 0.045), (0.05, 0.045), (1.0, 0.01), (0.2, 0.05)], from_adapter=False)
    assert len(said) == 2 and "importance-sampling ratio mean 0.048" in said[0]
    assert [r.get("canary") for r in rows] == ["drift", "drift", None, "drift"]


def test_canary_fires_when_rollouts_ignore_the_adapter() -> None:
    # From an SFT adapter, an engine still on the base model is far off from the first step.
    said, rows = _run_canary([(0.9, 0.41), (0.95, 0.40)], from_adapter=True)
    assert len(said) == 1 and "may come from the base model" in said[0] and rows[0]["canary"] == "stale"
    # From a fresh LoRA, it shows as a gap that grows while the trainer's weights move and the engine's stay.
    said, rows = _run_canary(
        [(1.0, 0.01)] + [(1.0, 0.01 + 0.02 * k) for k in range(1, 8)], from_adapter=False
    )
    assert len(said) == 1 and "drift away" in said[0] and rows[-1]["canary"] == "stale"


def test_canary_ignores_rows_without_engine_logprobs() -> None:
    said, _ = _run_canary([], from_adapter=True)
    from cli.train.canary import RolloutCanary

    canary = RolloutCanary(from_adapter=True, warn=said.append)
    canary.check({"reward": 1.0, "loss": 0.0})
    assert said == [] and canary.steps == 0


# ---- dynamic sampling ------------------------------------------------------------------------------
def test_splice_swaps_a_group_and_repads() -> None:
    from types import SimpleNamespace

    import torch

    from cli.train.dynamic import splice

    gens = 2
    out = {
        "prompt_ids": torch.tensor([[0, 5, 6], [0, 5, 6], [7, 8, 9], [7, 8, 9]]),
        "prompt_mask": torch.tensor([[0, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]]),
        "completion_ids": torch.tensor([[1, 2], [3, 0], [4, 0], [5, 0]]),
        "completion_mask": torch.tensor([[1, 1], [1, 0], [1, 0], [1, 0]]),
        "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0]),
        "num_items_in_batch": torch.tensor(5),
    }
    extra = {
        "prompt_ids": torch.tensor([[0, 0, 0, 3], [0, 0, 0, 3]]),
        "prompt_mask": torch.tensor([[0, 0, 0, 1], [0, 0, 0, 1]]),
        "completion_ids": torch.tensor([[9, 9, 9], [8, 0, 0]]),
        "completion_mask": torch.tensor([[1, 1, 1], [1, 0, 0]]),
        "advantages": torch.tensor([0.7, -0.7]),
        "num_items_in_batch": torch.tensor(4),
    }
    trainer = SimpleNamespace(processing_class=SimpleNamespace(pad_token_id=0))
    new = splice(out, extra, slot=0, group=0, gens=gens, trainer=trainer)
    assert new["prompt_ids"].tolist() == [[0, 0, 0, 3], [0, 0, 0, 3], [0, 7, 8, 9], [0, 7, 8, 9]]  # left pad
    assert new["prompt_mask"][2:].tolist() == [[0, 1, 1, 1], [0, 1, 1, 1]]
    assert new["completion_ids"].tolist() == [[9, 9, 9], [8, 0, 0], [4, 0, 0], [5, 0, 0]]  # right pad
    assert new["advantages"].tolist() == pytest.approx([0.7, -0.7, 1.0, -1.0])
    assert int(new["num_items_in_batch"]) == 6  # recounted: 3 + 1 + 1 + 1


@pytest.mark.slow
def test_dynamic_sampling_refills_groups_in_a_real_run(prepped: Path, tmp_path: Path) -> None:
    """A tiny GRPO run whose reward splits groups at random: groups with no spread are refilled within the
    step, and the rows say how many."""
    run = fresh_copy(prepped, tmp_path)
    cfg = tmp_path / "dyn.yaml"
    cfg.write_text("grpo:\n  dynamic_sampling: true\n  dynamic_max_retries: 3\n")
    ok(
        grpo_cli(
            "grpo", "--run", str(run), "--config", str(cfg), "--backend", "hf", "--max-steps", "3",
            "--gens", "4", "--batch-size", "8", "--max-completion-length", "8", "--save-steps", "0",
            "--rewards", "tests._coin_rewards:coin",
        )
    )  # fmt: skip
    rows = [json.loads(x) for x in (run / "logs" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("stage") == "grpo" and "dynamic/refilled_groups" in r]
    assert len(steps) == 3
    assert sum(r["dynamic/refilled_groups"] for r in steps) > 0, steps
    assert all(0 <= r["dynamic/frac_zero_std_after"] <= 1 for r in steps)
    assert all(r["dynamic/frac_zero_std_after"] <= r["frac_reward_zero_std"] + 1e-9 for r in steps), steps

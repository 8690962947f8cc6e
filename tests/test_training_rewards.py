"""cli/train/rewards.py: rewards that raise or return None / NaN / inf are counted per reward, left out of
the advantage, kept out of metrics.jsonl as non-JSON; a run whose rewards all fail stops before saving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _bad_rewards import always_raises, nan_none_inf
from helpers import fresh_copy, grpo_cli, manifest

from cli.common import GrpoError
from cli.train.rewards import Reward, RewardTracker, wrap_rewards


def test_none_nan_inf_are_counted_and_left_out(capsys) -> None:
    tracker = RewardTracker()
    (f,) = wrap_rewards([Reward("odd", nan_none_inf, 1.0)], tracker)
    scores = f(prompts=[""] * 8, completions=["a"] * 8, answer=["1"] * 8)
    assert scores == [None, None, None, 1.0] * 2
    row = tracker.take()
    assert row["reward_problems/odd"] == 6
    err = capsys.readouterr().err
    assert "reward 'odd' returned NaN" in err and "returned None" in err and "infinite" in err
    f(prompts=[""] * 4, completions=["a"] * 4, answer=["1"] * 4)
    assert "reward 'odd'" not in capsys.readouterr().err  # warned once per reward and kind
    assert tracker.take()["reward_problems/odd"] == 3


def test_a_raising_reward_is_counted_and_the_others_carry_on(capsys) -> None:
    tracker = RewardTracker()
    fs = wrap_rewards([Reward("bad", always_raises, 1.0), Reward("odd", nan_none_inf, 1.0)], tracker)
    assert fs[0](prompts=[""] * 4, completions=["a"] * 4) == [None] * 4
    assert fs[1](prompts=[""] * 4, completions=["a"] * 4) == [None, None, None, 1.0]  # one score left: go on
    assert "reward 'bad' raised RuntimeError: database unreachable" in capsys.readouterr().err
    assert tracker.take()["reward_problems/bad"] == 4


def test_every_reward_failing_stops_the_run() -> None:
    tracker = RewardTracker()
    fs = wrap_rewards([Reward("bad", always_raises, 1.0), Reward("bad2", always_raises, 1.0)], tracker)
    fs[0](prompts=[""] * 2, completions=["a"] * 2)
    with pytest.raises(GrpoError, match="no reward gave a score on this batch .*bad: 2 lost, bad2: 2 lost"):
        fs[1](prompts=[""] * 2, completions=["a"] * 2)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ([1.0], "returned 1 scores for 2 completions"),
        (3.0, r"returned 3.0 \(float\), not a list"),
        (["x", 1], r"returned 'x' \(str\) for completion 0"),
        # The audit's rows: numeric strings were parsed, a bare string split into characters ("01" → 0, 1),
        # a dict's keys taken as scores; all trained on with exit 0.
        (["0.5", "1"], r"returned '0.5' \(str\) for completion 0: a reward returns a list with one number"),
        ("01", r"returned '01' \(str\), not a list"),
        ({"0": 1, "1": 0}, r"returned \{'0': 1, '1': 0\} \(dict\), not a list"),
        ([[1.0], [2.0]], r"returned \[1.0\] \(list\) for completion 0"),
    ],
)
def test_malformed_scores_name_the_reward(returned, message: str) -> None:
    (f,) = wrap_rewards([Reward("weird", lambda **kw: returned, 1.0)], RewardTracker())
    with pytest.raises(GrpoError, match="reward 'weird' " + message):
        f(prompts=["", ""], completions=["a", "b"])


def test_bools_count_as_0_and_1_and_numpy_scalars_as_numbers() -> None:
    import numpy as np

    (f,) = wrap_rewards([Reward("ok", lambda **kw: [True, np.float32(0.5)], 1.0)], RewardTracker())
    assert f(prompts=["", ""], completions=["a", "b"]) == [1.0, 0.5]


def test_sys_exit_in_a_reward_is_reported_as_such() -> None:
    from cli.config.schema import RewardSpec
    from cli.train.rewards import resolve_rewards

    with pytest.raises(
        GrpoError, match=r"'_exit_rewards.anything' called sys.exit\(3\): a reward module must"
    ):
        resolve_rewards([RewardSpec("_exit_rewards.anything", 1.0)])

    def exits(**kw):
        raise SystemExit(0)

    (f,) = wrap_rewards([Reward("quits", exits, 1.0)], RewardTracker())
    with pytest.raises(GrpoError, match=r"reward 'quits' called sys.exit\(0\)"):
        f(prompts=[""], completions=["a"])


@pytest.mark.slow
def test_a_run_whose_rewards_all_fail_saves_nothing(prepped: Path, tmp_path: Path) -> None:
    """Hardening, round 1 (docs/history.md): training ran on NaN, then wrote grpo/adapter without a manifest
    entry."""
    run = fresh_copy(prepped, tmp_path)
    proc = grpo_cli(
        "grpo",
        "--run",
        str(run),
        "--backend",
        "hf",
        "--gens",
        "2",
        "--max-steps",
        "2",
        "--max-completion-length",
        "8",
        "--rewards",
        "_bad_rewards.always_raises",
    )
    assert proc.returncode != 0
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "no reward gave a score" in errors[0], proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    assert not (run / "grpo" / "adapter").exists()
    assert "grpo" not in manifest(run).get("stages", {})
    metrics_file = run / "logs" / "metrics.jsonl"
    for line in metrics_file.read_text().splitlines() if metrics_file.exists() else []:
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))

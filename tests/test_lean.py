"""cli/run/lean.py: scikit-learn, SciPy, torchvision (and, without CUDA, bitsandbytes and torchao) kept out
of a command's start-up, and back the moment grpo imports code that may need them.

Each case runs in a fresh interpreter: what a process imported cannot be taken back inside pytest's own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO, cli_env

_PROBE = r"""
import importlib.util, json, sys
from cli.config.schema import RewardSpec
from cli.run import lean
from cli.train.rewards import resolve_rewards
lean.hide()
state = {"hidden": list(lean.hidden())}
if state["hidden"]:
    from transformers import AutoModelForCausalLM  # noqa: F401  the import that used to pull it in
    import peft  # noqa: F401
    state["loaded"] = sys.modules.get("sklearn") is not None
    state["others"] = sorted(m for m in ("scipy", "torchvision") if sys.modules.get(m) is not None)
    state["found"] = importlib.util.find_spec("sklearn") is not None
    resolve_rewards([RewardSpec(name="match_format_exactly"), RewardSpec(name="check_answer_accuracy")])
    state["after_built_in"] = list(lean.hidden())
    resolve_rewards([RewardSpec(name="_train_seed_rewards.match_format_exactly")])  # user code
    state["after_custom"] = list(lean.hidden())
    import sklearn.metrics
    state["roc"] = callable(sklearn.metrics.roc_curve)
print(json.dumps(state))
"""


def _probe(**env: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        env={**cli_env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kept_out_of_transformers_and_peft_until_user_code_needs_it() -> None:
    pytest.importorskip("sklearn")  # the `cosine` extra brings it; without it there is nothing to hide
    state = _probe()
    assert "sklearn" in state["hidden"]
    assert not state["loaded"] and not state["found"]  # transformers and peft loaded without it
    assert state["others"] == []  # nor SciPy and torchvision (object-detection losses, image transforms)
    assert "sklearn" in state["after_built_in"]  # the Rust rewards need nothing
    assert state["after_custom"] == []  # a dotted reward is user code: it may import scikit-learn
    assert state["roc"]  # and then it imports as usual


def test_grpo_lean_0_turns_it_off() -> None:
    assert _probe(GRPO_LEAN="0") == {"hidden": []}

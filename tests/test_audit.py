"""cli/train/audit.py: the verifier audit (grpo.audit_every) with the real Math-Verify in its own process,
and on the real trainer: logs/audit.jsonl, the agreement in the metrics rows, the warning lines."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import SAMPLES, grpo_cli, invoke, metrics, ok

from cli.train.audit import Auditor
from py_rewards.spec import get_spec

SPEC = get_spec("seed000")


def answer(text: str) -> str:
    return f"Worked out.<end_working_out><SOLUTION>{text}</SOLUTION>"


def auditor(tmp_path: Path, said: list[str], **cfg) -> Auditor:
    settings = {"audit_every": 1, "audit_sample": 16, "audit_min_agreement": 0.9, "audit_constant_batches": 3}
    return Auditor(SPEC, tmp_path / "logs", SimpleNamespace(**{**settings, **cfg}), warn=said.append)


def test_audit_finds_where_the_verifiers_disagree(tmp_path: Path) -> None:
    said: list[str] = []
    aud = auditor(tmp_path, said).start()
    # 0.5 against the gold \frac{1}{2}: the seed rule (exact, strip, a number) says wrong, Math-Verify right.
    # 18 against 18: both right; 17 against 18: both wrong.
    batch = [answer("0.5")] * 6 + [answer("18")] * 5 + [answer("17")] * 5
    golds = ["\\frac{1}{2}"] * 6 + ["18"] * 10
    for _ in range(2):
        aud.observe([[{"role": "assistant", "content": c}] for c in batch], golds)
    aud.close()
    rows = [json.loads(x) for x in (tmp_path / "logs" / "audit.jsonl").read_text().splitlines()]
    assert [r["batch"] for r in rows] == [1, 2] and all(r["n"] == 16 and r["agree"] == 10 for r in rows)
    pair = rows[0]["disagreements"][0]
    assert pair["gold"] == "\\frac{1}{2}" and pair["pred"] == "0.5" and pair["train"] is False
    assert pair["math_verify"] is True and len(rows[0]["disagreements"]) == 6
    assert aud.take() == {"audit_agreement": 0.625, "audit_judged": 32}
    (low,) = said
    assert "agrees with the training verifier on only 62% of 32 answers" in low and "audit.jsonl" in low


def test_audit_warns_on_constant_verdicts_and_a_dead_process(tmp_path: Path) -> None:
    said: list[str] = []
    aud = auditor(tmp_path, said, audit_every=100).start()
    wrong = [answer("1")] * 4
    for _ in range(5):
        aud.observe(wrong, ["2"] * 4)
    assert len(said) == 1 and "wrong (0) in 3 rollout batches in a row" in said[0] and "verl #5635" in said[0]
    assert aud.proc is not None
    aud.proc.kill()
    aud.proc.wait()
    aud.every = 1
    aud.observe([answer("2"), answer("1")], ["2", "2"])
    assert len(said) == 2 and "audit process died" in said[1]
    aud.close()


@pytest.mark.slow
def test_audit_during_training(tiny_run: Path, tmp_path: Path) -> None:
    run = str(tiny_run)
    src = SAMPLES / "gsm8k_train.jsonl"
    assert (
        invoke("prep", "gsm8k", "--source", src, "--limit", "16", "--model", "tiny", "--run", run).exit_code
        == 0
    )
    conf = tmp_path / "audit.yaml"
    conf.write_text("grpo:\n  audit_every: 1\n  audit_sample: 4\n  audit_constant_batches: 1\n")
    args = ("--gens", "2", "--batch-size", "2", "--max-steps", "2", "--max-completion-length", "8")
    out = ok(grpo_cli("grpo", "--run", run, "--config", str(conf), *args))
    # The random tiny model never answers: every verdict is 0, which is what the constant check is for.
    assert "every correctness verdict was wrong (0) in 1 rollout batches" in out
    assert "audit 100%" in out  # the live line
    rows = [json.loads(x) for x in (tiny_run / "logs" / "audit.jsonl").read_text().splitlines()]
    assert len(rows) >= 2 and all(r["n"] == 2 and r["agreement"] == 1.0 for r in rows)  # a batch of 2
    steps = [r for r in metrics(tiny_run) if r.get("stage") == "grpo" and "step" in r]
    assert steps[-1]["audit_agreement"] == 1.0 and steps[-1]["audit_judged"] >= 4

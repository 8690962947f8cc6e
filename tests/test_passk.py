"""cli/eval/passk.py, cli/eval/verdict.py: pass@k against brute force, maj@k, the collapse line, and
`grpo eval --samples N` on the tiny run (real sampling through the real adapters, real scoring)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from helpers import copy_run, invoke

from cli.eval.passk import SampledStage, collapse_line, ks_for, majority_correct, paired, pass_at_k
from cli.eval.stats import bootstrap_ci


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k by enumeration: the share of the k-subsets of n samples (c correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)
    # pass@1 is the share of correct samples; pass@n is "any correct".
    assert all(pass_at_k(n, c, 1) == pytest.approx(c / n) for c in range(n + 1))
    assert all(pass_at_k(n, c, n) == float(c > 0) for c in range(n + 1))


def test_pass_at_k_large_n_is_stable_and_checked() -> None:
    # The closed form 1 - C(n-c, k)/C(n, k) with n = 200 in exact integers, against the product form.
    n, c, k = 200, 7, 50
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)
    for bad in ((4, 5, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)
    assert ks_for(8) == [1, 2, 4, 8] and ks_for(6) == [1, 2, 4, 6] and ks_for(1) == [1]


def test_majority_vote() -> None:
    # "5" twice beats "7" once; the winner is correct when a sample giving it is.
    assert majority_correct(["5", "7", "5"], [True, False, True])
    assert not majority_correct(["7", "5", "7"], [False, True, False])
    # A tie goes to the answer given first; samples without an answer do not vote.
    assert majority_correct(["5", "7", None, None], [True, False, False, False])
    assert not majority_correct(["7", "5", None], [False, True, False])
    assert not majority_correct([None, None], [False, False])


def stage(name: str, solved: list[int], n: int = 4) -> SampledStage:
    return SampledStage(name, n, solved, [c > n // 2 for c in solved], 1.0, 10.0)


def test_collapse_line_and_pairs() -> None:
    # SFT: a few correct on many prompts (pass@1 low, pass@4 high); GRPO: all right on few prompts.
    sft = stage("sft", [1, 1, 1, 1, 0, 0])
    grpo = stage("grpo", [4, 4, 0, 0, 0, 0])
    line = collapse_line({"sft": sft, "grpo": grpo})
    assert line is not None and "pass@1 rose" in line and "pass@4 fell" in line
    assert "16.7% → 33.3%" in line and "66.7% → 33.3%" in line
    assert collapse_line({"sft": grpo, "grpo": sft}) is None  # the other way round is no collapse
    diffs = {(d["a"], d["b"], d["metric"]): d for d in paired({"sft": sft, "grpo": grpo})}
    assert set(diffs) == {("sft", "grpo", m) for m in ("pass@1", "pass@4", "maj@4")}
    d = diffs[("sft", "grpo", "pass@4")]
    assert d["diff"] == pytest.approx(1 / 3 - 2 / 3, abs=1e-4) and d["ci95"][0] <= d["diff"] <= d["ci95"][1]
    mean, lo, hi = bootstrap_ci([1.0, 0.0, 1.0, 0.0])
    assert mean == 0.5 and 0 <= lo < 0.5 < hi <= 1


@pytest.mark.slow
def test_eval_samples_on_the_tiny_run(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    # Near-greedy sampling (the run's GRPO temperature, set here): the adapters' answers survive it, so the
    # figures are not all zero; at the tiny run's temperature 1.0 a random 2-layer model writes noise.
    cool = tmp_path / "cool.yaml"
    cool.write_text("grpo:\n  temperature: 0.05\n")
    args = ("eval", "--run", run, "--limit", "3", "--max-new-tokens", "24", "--models", "sft,grpo")
    result = invoke(*args, "--samples", "4", "--config", cool)
    assert result.exit_code == 0, result.output
    report = json.loads((run / "eval" / "report.json").read_text())
    sampled = report["sampled"]
    assert (
        sampled["samples"] == 4
        and sampled["sampling"]["n"] == 4
        and sampled["sampling"]["temperature"] == 0.05
    )
    greedy = {r["checkpoint"]: r for r in report["results"]}
    rows = {r["checkpoint"]: r for r in sampled["results"]}
    assert set(rows) == {"sft", "grpo"}
    for r in rows.values():
        p1, p2, p4 = (r[f"pass@{k}"]["value"] for k in (1, 2, 4))
        assert 0 <= p1 <= p2 <= p4 <= 1  # pass@k grows with k
        assert r["pass@1"]["ci95"][0] <= p1 <= r["pass@1"]["ci95"][1]
        assert 0 <= r["maj@4"]["value"] <= p4
        assert p4 > 0 and r["format_compliance"] > 0  # near-greedy: the adapters' format and answers stay
        assert abs(p1 - greedy[r["checkpoint"]]["accuracy"]) <= 1 / 3
    metrics = {(d["a"], d["b"], d["metric"]) for d in sampled["paired"]}
    assert ("sft", "grpo", "pass@4") in metrics
    # The verdict table leads report.md and the printed output, at most 80 columns wide.
    md = (run / "eval" / "report.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| model")]
    assert table and "pass@4" in table[0] and "maj@4" in table[0]
    verdict_page = md.split("\n---\n")[0].splitlines()
    assert any(line.startswith("| SFT − ") or line.startswith("| GRPO − ") for line in verdict_page)
    assert max(len(line) for line in verdict_page[1:]) <= 80  # all but the title (it names the data)
    assert "pass@4" in result.output
    # Seeded: the same command gives the same figures.
    again = invoke(*args, "--samples", "4", "--config", cool)
    assert again.exit_code == 0, again.output
    redo = json.loads((run / "eval" / "report.json").read_text())["sampled"]["results"]
    assert [{**r, "seconds": 0} for r in redo] == [{**r, "seconds": 0} for r in sampled["results"]]
    bad = invoke(*args, "--samples", "0")  # the option's bound: click's usage error, before any work
    assert bad.exit_code == 2 and "--samples" in bad.output and "Traceback" not in bad.output

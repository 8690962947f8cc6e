"""cli/eval/scoring.py: the verdicts `grpo eval` and export verification give a completion."""

from __future__ import annotations

import py_rewards


def test_eval_scores_both_rules_side_by_side() -> None:
    """`grpo eval`'s verdicts: the seed rule misses LaTeX answers that math_equal accepts."""
    from cli.eval.scoring import score

    spec = py_rewards.get_spec("seed000")
    done = "working<end_working_out><SOLUTION>{}</SOLUTION>".format
    completions = [
        done("42"),
        done("\\frac{1}{2}"),
        done("2\\sqrt{3}"),
        done("7"),
        "no answer \\boxed{90^\\circ}",
    ]
    answers = ["42", "0.5", "\\sqrt{12}", "8", "90"]
    sc = score(spec, completions, answers)
    assert sc.correct == [True, False, False, False, False]
    assert sc.math_correct == [True, True, True, False, True]

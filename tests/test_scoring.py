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


def test_eval_reads_answers_as_the_reward_does() -> None:
    """`grpo eval`'s math_equal column reads the answer where the check_math_answer reward does:
    the solution tags, else the boxes (joined boxes are one set), else an answer phrase; an empty
    box, an unclosed one or candidates listed are no correct answer."""
    from cli.eval.scoring import math_verdicts

    spec = py_rewards.get_spec("seed000")
    cases = [
        ("so $x = \\boxed{1}$ or $x = \\boxed{2}$.", "1, 2", True),
        ("Final Answer: The final answer is $\\frac{7}{32}$. I hope it is correct.", "7:32", True),
        ("so $(p, q) = (3, 2)$, hence \\boxed{(p,q)=(3,2)}", "(3,2)", True),
        ("\\boxed{-2 \\le x \\le 7}", "[-2,7]", True),
        ("The answer is $\\boxed{}$. It is 5.", "5", False),
        ("\\boxed{\\frac{14}{3}", "\\frac{14}{3}", False),
        ("$\\boxed{4}$ or $\\boxed{5}$", "5", False),
        ("I think it is 5.", "5", False),  # prose alone marks no answer
    ]
    completions, golds, want = zip(*cases, strict=True)
    assert math_verdicts(spec, list(completions), list(golds)) == list(want)
    rewards = py_rewards.check_math_answer(completions=list(completions), answer=list(golds))
    assert [r == spec.scores.math_correct for r in rewards] == list(want)


LENIENT = [
    # (completion, gold, correct by the last number)
    ("<end_working_out><SOLUTION>18</SOLUTION>", "18", True),  # our format: the solution is the last number
    ("16 - 3 - 4 = 9 eggs, 9 * $2 = $18.", "18", True),  # GSM8K style: the last number, a final "."
    ("She makes $18.00 every day.", "18", True),  # numerically equal
    ("That is 1,000 ducks", "1000", True),  # thousands separators
    ("The answer is 18. Next: 3 more questions", "18", False),  # the *last* number, as graders take it
    ("<end_working_out> <SOLUTION></SOLUTION> so 18", "18", True),  # no format needed
    ("x = -3", "-3", True),  # a minus sign
    ("60-20", "-20", False),  # a dash between numbers is no minus sign
    ("no number at all", "18", False),
    ("\\frac{1}{2}", "\\frac{1}{2}", False),  # a gold that is not a number is never matched this way
]


def test_lenient_accuracy_is_the_last_number() -> None:
    from cli.eval.scoring import lenient_verdicts, score

    completions, golds, want = zip(*LENIENT, strict=True)
    assert lenient_verdicts(completions, golds) == list(want)
    sc = score(py_rewards.get_spec("seed000"), list(completions), list(golds))
    assert sc.lenient_correct == list(want)
    assert sc.correct[0] and not sc.correct[1]  # the seed rule needs the tags

"""`grpo eval`: score checkpoints on held-out problems, and the scoring every stage shares.

- :mod:`cli.eval.scoring`: format compliance and correctness of completions (the training rewards' rules).
- :mod:`cli.eval.evaluation`: the rows, the decoding of each checkpoint, the scores.
- :mod:`cli.eval.report`: report.json / report.md / eval.png / samples.jsonl and the table.
- :mod:`cli.eval.stats`: Wilson and paired bootstrap intervals.
"""

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.eval import NAME` loads its module on first
# use.
_EXPORTS = {
    "EvalJob": "evaluation",
    "load_rows": "evaluation",
    "math_verdicts": "scoring",
    "paired_bootstrap": "stats",
    "wilson": "stats",
    "evaluation": "evaluation:",
    "scoring": "scoring:",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

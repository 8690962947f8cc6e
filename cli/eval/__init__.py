"""`grpo eval`: score checkpoints on held-out problems, and the scoring every stage shares.

- :mod:`cli.eval.scoring`: format compliance and correctness of completions (the training rewards' rules).
- :mod:`cli.eval.evaluation`: the rows, the decoding of each checkpoint, the scores.
- :mod:`cli.eval.report`: report.json / report.md / eval.png / samples.jsonl and the table.
- :mod:`cli.eval.stats`: Wilson and paired bootstrap intervals.
"""

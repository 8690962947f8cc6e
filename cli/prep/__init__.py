"""`grpo prep`: a dataset (hub, local file or the bundled sample) into the run's ``data/``.

- :mod:`cli.prep.load`: load, detect the schema, parse question / answer / solution, filter, split.
- :mod:`cli.prep.steps`: the command's steps over those (load, seed 000's filters, write parquet + stats,
  the summary).
- :mod:`cli.prep.files`: local ``--source`` files read with bounds (regular files, 1 MiB lines, JSON size).
"""

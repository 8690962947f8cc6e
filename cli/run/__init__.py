"""The run directory, the spine that chains the stages, and what every stage shares around it.

- :mod:`cli.run.rundir`: the layout (``data/``, ``sft/``, ``grpo/``, ``export/``, ``eval/``, ``logs/``), the
  resolved ``config.yaml``, ``manifest.json``, adapters, metrics.
- :mod:`cli.run.data`: the one reader of ``<run>/data/`` (training, eval, export and the filter read it here).
- :mod:`cli.run.lock`: one writer per run directory (flock); :mod:`cli.run.atomic`: temp + rename writes.
- :mod:`cli.run.quiet`: library chatter to ``<run>/logs/grpo.log``; :mod:`cli.run.console`: rank-0 consoles.
- :mod:`cli.run.ranks`: which process this is under accelerate; :mod:`cli.run.plots`: train.png / eval.png.
- :mod:`cli.run.heartbeat`: a line at least every few seconds while a command works; :mod:`cli.run.cpu`:
  torch's CPU threads on a shared machine.

Stages sit above this package and never import each other's internals through it.
"""

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

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.run import NAME` loads its module on first
# use.
_EXPORTS = {
    "RunDir": "rundir",
    "SAMPLES": "data",
    "atomic_dir": "atomic",
    "fallback_rows": "data",
    "lean": "lean:",
    "read_stats": "data",
    "run_config": "rundir",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

"""The shared ground of every command's options: what can be set, and how a value is checked.

- :mod:`cli.config.settings`: the declaration of one option (``setting(...)``: type, default, help, flag,
  bounds, panel) and its check.
- :mod:`cli.config.schema`: the typed :class:`~cli.config.schema.Config` (its sections, the seed presets),
  resolved from the run's saved config, a preset, ``--config FILE.yaml`` and flags, and validated.
- :mod:`cli.config.options`: the Typer options and the overrides map generated from the declarations.
- :mod:`cli.config.command_options`: the options of filter, eval, export, chat, serve and the launcher
  flags of ``grpo grpo``, declared the same way.

Nothing here imports a framework or reads a run directory: the run layer (:mod:`cli.run`) sits on top.
"""

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.config import NAME` loads its module on first
# use.
_EXPORTS = {
    "resolve": "schema",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

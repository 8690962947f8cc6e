"""Training stages shared by `grpo sft` and `grpo grpo`.

- :mod:`cli.train.backends`: pick unsloth or hf, load the model + LoRA (or the run's SFT adapter),
  trainer arguments that depend on the hardware (precision, optimizer), save adapters atomically.
- :mod:`cli.train.data`: SFT format examples and GRPO prompt datasets from ``<run>/data``.
- :mod:`cli.train.rewards`: rewards from ``py_rewards`` by name or by dotted path, timed.
- :mod:`cli.train.live`: the live view (a ``TrainerCallback``), metrics.jsonl rows, Ctrl-C.

Heavy frameworks are imported inside functions only (``grpo --help`` stays instant), and under the
unsloth backend :func:`cli.train.backends.import_backend` imports Unsloth before TRL/transformers,
as Unsloth requires.
"""

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.train import NAME` loads its module on first
# use.
_EXPORTS = {
    "Auditor": "audit",
    "PhaseTimes": "phases",
    "Support": "lm_head",
    "cpu_bf16": "hardware",
    "grpo_dataset": "data",
    "kind_reader": "profile:_kind_reader",
    "score_tokens": "lm_head",
    "summarize": "profile",
    "table": "profile",
    "write_profile": "profile",
    "write_trace": "profile",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

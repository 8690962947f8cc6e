"""Optional libraries a `grpo` process never uses, kept out of its start-up.

transformers imports scikit-learn whenever it is installed (for one ROC curve in assisted decoding, which
grpo never runs: sentence-transformers, the cosine reward's encoder, brings it in), and on a machine
without an NVIDIA device peft and transformers import bitsandbytes and torchao (quantised layers and
8-bit optimisers, which need CUDA). Measured with `python bench/bench_startup.py` on 2 idle cores
(2026-12-01, 7 alternating pairs): importing transformers' causal-LM class, peft and TRL's GRPO trainer took
11.4 s instead of 15.1 s (0.77x); every command that loads a model starts that much sooner.

transformers' model code also imports SciPy (``scipy.optimize``) and torchvision, for object-detection losses
and image transforms that a text model never calls. Without them, importing torch, transformers, peft, TRL's
trainers, datasets and pyplot took 0.95x the CPU seconds (farm-bench, 7 alternating pairs, 2026-12-05, load
11-14: 7.07 s against 7.45 s).

A name in ``sys.modules`` set to None is how Python marks a module absent: ``importlib.util.find_spec``
returns None for it, so the libraries' own availability checks report "not installed" and skip it.
:func:`release` takes the marks away before grpo imports code that may need them (a custom reward, the
cosine reward, Unsloth, `grpo doctor`'s package report); from then on they import as usual.
``GRPO_LEAN=0`` turns this off.
"""

from __future__ import annotations

import os
import sys

from cli.run.cpu import nvidia_device

ALWAYS = ("sklearn", "scipy", "torchvision")
WITHOUT_CUDA = ("bitsandbytes", "torchao")
_marked: list[str] = []


def hide() -> None:
    """Mark the unused libraries absent (those not imported yet); called once, as a command starts."""
    if os.environ.get("GRPO_LEAN", "1").strip() == "0":
        return
    names = ALWAYS + (() if nvidia_device() else WITHOUT_CUDA)
    for name in names:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]
            _marked.append(name)


def release() -> None:
    """Take the marks away: a later ``import`` of those libraries works as if :func:`hide` never ran."""
    while _marked:
        name = _marked.pop()
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def hidden() -> tuple[str, ...]:
    return tuple(_marked)

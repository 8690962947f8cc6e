"""py_rewards: the GRPO format and answer rewards of the seed recipes, exact and linear-time.

The scoring runs in Rust (``py_rewards._core``); :mod:`py_rewards.reference` keeps the seeds'
Python as the test oracle and a fallback backend. Importing this package needs only numpy.

>>> from py_rewards import REGISTRY, make_reward_funcs
>>> sorted(REGISTRY)[:3]
['check_answer', 'check_answer_accuracy', 'check_math_answer']
"""

from __future__ import annotations

from . import reference
from ._core import (
    RewardCorePanic,
    Scorer,
    extract_math_answer,
    math_equal,
    normalize_math,
    runtime_info,
)
from .rewards import (
    BACKEND_ENV,
    REGISTRY,
    RewardFunc,
    check_answer,
    check_answer_accuracy,
    check_math_answer,
    check_numbers,
    check_numeric_extraction,
    cosine_correctness_reward_func,
    get_reward,
    get_scorer,
    int_parsable_reward_func,
    make_reward_funcs,
    match_format_approximately,
    match_format_exactly,
    math_equal_batch,
    score_seed000,
    strict_format_reward_func,
)
from .spec import PRESETS, FormatSpec, RewardScores, get_spec

__all__ = [
    "BACKEND_ENV",
    "PRESETS",
    "REGISTRY",
    "FormatSpec",
    "RewardCorePanic",
    "RewardFunc",
    "RewardScores",
    "Scorer",
    "check_answer",
    "check_answer_accuracy",
    "check_math_answer",
    "check_numbers",
    "check_numeric_extraction",
    "cosine_correctness_reward_func",
    "extract_math_answer",
    "get_reward",
    "get_scorer",
    "get_spec",
    "int_parsable_reward_func",
    "make_reward_funcs",
    "match_format_approximately",
    "match_format_exactly",
    "math_equal",
    "math_equal_batch",
    "normalize_math",
    "reference",
    "runtime_info",
    "score_seed000",
    "strict_format_reward_func",
]

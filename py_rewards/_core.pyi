"""Type stub of the Rust extension ``py_rewards._core`` (reward_core/src/python/)."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, final

from typing_extensions import Self

__all__ = [
    "ENV_NUM_THREADS",
    "ENV_PARALLEL",
    "RewardCorePanic",
    "SEED000_NAMES",
    "Scorer",
    "_after_fork_in_child",
    "extract_math_answer",
    "math_equal",
    "math_equal_batch",
    "normalize_math",
    "py_float",
    "py_strip",
    "runtime_info",
]

SEED000_NAMES: list[str]
ENV_PARALLEL: str
ENV_NUM_THREADS: str

class RewardCorePanic(RuntimeError):
    """A Rust panic in the reward core, raised as a normal exception."""

@final
class Scorer:
    """Compiled tags + scores of one format, with a one-batch cache of the seed-000 scores."""

    def __new__(
        cls,
        reasoning_start: str,
        reasoning_end: str,
        solution_start: str,
        solution_end: str,
        scores: Mapping[str, float] | None = None,
    ) -> Self: ...
    @property
    def tags(self) -> tuple[str, str, str, str]: ...
    def seed000_column(
        self, completions: Sequence[Any], answer: Sequence[str] | None = None, column: int | str | None = None
    ) -> list[float]: ...
    def seed000(
        self, completions: Sequence[Any], answer: Sequence[str] | None = None
    ) -> dict[str, list[float] | None]: ...
    def strict_format(self, completions: Sequence[Any]) -> list[float]: ...
    def int_parsable(self, completions: Sequence[Any]) -> list[float]: ...
    def extract_boxed(self, completions: Sequence[Any]) -> list[str]: ...
    def check_math(self, completions: Sequence[Any], answer: Sequence[str]) -> list[float]: ...
    def format_group(self, text: str) -> str | None: ...
    def numeric_group(self, text: str) -> str | None: ...
    def clear_cache(self) -> None: ...
    def cache_info(self) -> tuple[int, int, int]: ...

def py_float(s: str) -> float | None: ...
def py_strip(s: str) -> str: ...
def runtime_info() -> tuple[bool, int, str]: ...
def math_equal(pred: object, gold: object) -> bool: ...
def math_equal_batch(preds: Iterable[object], golds: Iterable[object]) -> list[bool]: ...
def normalize_math(s: str) -> str: ...
def extract_math_answer(text: str, solution_start: str, solution_end: str) -> str | None: ...
def _after_fork_in_child() -> None: ...

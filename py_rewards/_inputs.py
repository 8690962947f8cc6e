"""Argument checks shared by both backends (the Rust binding raises the same errors, same words)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

BYTES = (bytes, bytearray, memoryview)  # iterable, but as ints: never a batch of texts


def not_bytes(value: Any, what: str, items: str) -> None:
    """Refuse bare bytes where a batch is expected: iterated, they are one int per byte (``b"12"`` was
    judged as two answers, 49 and 50). The Rust binding checks the rest with the same words."""
    if isinstance(value, BYTES):
        raise TypeError(f"{what} must be a list of {items}, got {type(value).__name__}")


def batch(value: Any, what: str) -> list[Any]:
    """A batch argument as a list: refused when it is a single str, bytes, a mapping or a set."""
    if isinstance(value, str):
        raise TypeError(f"{what} must be a list of answers, got a single str")
    if not isinstance(value, Iterable) or isinstance(value, (Mapping, Set, *BYTES)):
        raise TypeError(f"{what} must be a list of answers, got {type(value).__name__}")
    return list(value)


def contents(completions: Any) -> list[str]:
    """The text of each completion: a ``str``, or the first chat message's ``content``.

    >>> contents(["a", [{"role": "assistant", "content": "b"}]])
    ['a', 'b']
    """
    if completions is None:
        raise ValueError("completions is required (got None)")
    if isinstance(completions, str):
        raise TypeError("completions must be a list of completions, got a single str")
    # A mapping would be scored over its keys, a set in no order, bytes as one int per byte.
    if not isinstance(completions, Iterable) or isinstance(completions, (Mapping, Set, *BYTES)):
        raise TypeError(f"completions must be a list of completions, got {type(completions).__name__}")
    out: list[str] = []
    for i, c in enumerate(completions):
        if isinstance(c, str):
            out.append(c)
            continue
        try:
            content = c[0]["content"]
        except Exception:
            raise TypeError(
                f"completions[{i}] must be a str or a list of chat messages with a str 'content', "
                f"got {type(c).__name__}"
            ) from None
        if not isinstance(content, str):
            raise TypeError(f"completions[{i}][0]['content'] must be str, got {type(content).__name__}")
        out.append(content)
    return out


def answers(answer: Any, n: int, reward: str) -> list[str]:
    """The gold answers: one ``str`` per completion."""
    if answer is None:
        raise ValueError(f"{reward} needs answer= (one gold answer per completion), got None")
    if isinstance(answer, str):
        raise TypeError("answer must be a list of str (one per completion), got a single str")
    if not isinstance(answer, Iterable) or isinstance(answer, (Mapping, Set, *BYTES)):
        raise TypeError(f"answer must be a list of str (one per completion), got {type(answer).__name__}")
    out = list(answer)
    for i, a in enumerate(out):
        if not isinstance(a, str):
            raise TypeError(f"answer[{i}] must be str, got {type(a).__name__}")
    if len(out) != n:
        raise ValueError(f"answer has {len(out)} items but completions has {n}")
    return out

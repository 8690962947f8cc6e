"""Math data for `grpo prep`: load (hub or local file), parse question/answer/solution, filter, cut, split.

Plain functions over plain rows; ``cli/commands/prep.py`` composes them. What each step does, and the
seed line it reproduces:

- **Load** a hub dataset by name (:data:`DATASETS`) through ``datasets.load_dataset``, or a local
  ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` (``--source``). The hub is probed first with a short
  socket timeout: with no network, ``load_dataset`` otherwise retries for ~30 s before failing.
- **Detect the schema from the columns** (:func:`detect_schema`), not from the name, so a local copy of
  any of the supported layouts parses: GSM8K (``#### N``), MATH500 (``answer`` / ``\\boxed{}``),
  verl parquet (``prompt`` messages + ``reward_model.ground_truth``: the DAPO and MATH copies),
  DAPO-Math-17k-Processed (``prompt`` + ``solution``, seed 000 ``parse_dapo``), OpenMathReasoning
  (``problem`` + ``expected_answer`` + ``generated_solution``), OpenR1 (``problem`` + ``answer``).
- **Bad rows** (invalid JSON line, missing/non-string question, no parsable answer) are counted by
  reason, never fatal.
- **Numeric filter** as seed 000: ``pd.to_numeric(answers, errors="coerce").notnull()``.
- **Prompt-length cut** as seed 000: ``int(np.quantile(lengths, 0.90))`` and keep ``length <= cut``.
- **Held-out eval split**, deterministic in the seed.

Long because: the readers (hub, bundled samples, four file types) and the seven row layouts that
:func:`detect_schema` recognises share the plain-row types and the bad-row accounting. Readers and
schemas could still become two modules (docs/history.md "Structure").
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import socket
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from cli.common import GrpoError
from cli.prep import files as data_files
from cli.run.data import SAMPLES, strip_think

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


# Columns any schema below reads; everything else is dropped at load time (OpenR1 rows carry
# whole generations we never use).
USEFUL_COLUMNS = (
    "question",
    "answer",
    "problem",
    "solution",
    "expected_answer",
    "generated_solution",
    "prompt",
    "reward_model",
    "ability",
)

SUPPORTED_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


@dataclass(frozen=True)
class HubDataset:
    """A dataset `grpo prep NAME` loads by hub name."""

    name: str
    repo: str
    config: str | None
    split: str
    purpose: str = "grpo"  # grpo: train/eval prompts; sft: format warm-up examples (sft.parquet)
    sample: str | None = None  # bundled fallback in cli/data/samples when the hub is unreachable


DATASETS: dict[str, HubDataset] = {
    # Seed 000 Stage 2. The "en" config is the English subset of the processed DAPO set; answers are
    # parsed with parse_dapo. gsm8k: '#### N' answers. math: MATH500, mostly non-numeric answers
    # (--keep-non-numeric).
    "dapo": HubDataset("dapo", "open-r1/DAPO-Math-17k-Processed", "en", "train", sample="dapo_math.parquet"),
    "gsm8k": HubDataset("gsm8k", "openai/gsm8k", "main", "train", sample="gsm8k_train.jsonl"),
    "math": HubDataset("math", "HuggingFaceH4/MATH-500", None, "test", sample="math500.jsonl"),
    # Seed 000 Stage 1: the SFT format warm-up set.
    # Offline: GSM8K's worked solutions (numeric answers) stand in (no OpenMathReasoning sample is public).
    "openmath-mini": HubDataset(
        "openmath-mini",
        "unsloth/OpenMathReasoning-mini",
        None,
        "cot",
        purpose="sft",
        sample="gsm8k_train.jsonl",
    ),
    # Seed 001.
    "openr1": HubDataset("openr1", "open-r1/OpenR1-Math-220k", None, "train"),
}


# What `grpo prep` adds as the stage-1 warm-up set when the GRPO set has no worked solutions (DAPO).
WARMUP_DATASET = "openmath-mini"


def dataset_names() -> str:
    return ", ".join(DATASETS)


# ---- loading -------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """Raw rows plus where they came from."""

    records: list[Any]
    source: str  # a path, "hub:<repo>" or "bundled:<file>"
    sha256: str | None = None
    bad: Counter = field(default_factory=Counter)  # rows unreadable at load time (bad JSON lines)
    rows_read: int = 0
    fingerprint: str | None = None


def read_file(path: Path, limit: int | None = None) -> Loaded:
    """Read a local data file into raw records (the first ``limit`` rows)."""
    from cli.run.atomic import file_sha256

    path = Path(path).expanduser()
    if not path.exists():
        raise GrpoError(f"data file not found: {path}")
    if path.is_dir():
        raise GrpoError(f"--source must be a file ({', '.join(SUPPORTED_SUFFIXES)}), got a directory: {path}")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise GrpoError(f"unsupported data file {path.name}: use {', '.join(SUPPORTED_SUFFIXES)}")
    data_files.check_regular(path)  # /dev/zero, a pipe: endless, never read
    try:
        if suffix == ".jsonl":
            loaded = _read_jsonl(path, limit)
        elif suffix == ".json":
            loaded = _read_json(path, limit)
        elif suffix == ".parquet":
            loaded = _read_parquet(path, limit)
        else:
            loaded = _read_csv(path, limit)
    except GrpoError:
        raise
    except UnicodeDecodeError:
        raise GrpoError(f"cannot read {path}: not UTF-8 text (corrupt or binary file?)") from None
    except OSError as exc:
        raise GrpoError(f"cannot read {path}: {exc.strerror or exc}") from None
    loaded.sha256 = file_sha256(path)
    return loaded


def _read_jsonl(path: Path, limit: int | None) -> Loaded:
    records, bad, n = data_files.read_jsonl(path, limit)
    return Loaded(records, str(path), bad=bad, rows_read=n)


def _read_json(path: Path, limit: int | None) -> Loaded:
    data = data_files.read_json(path, limit)
    return Loaded(data, str(path), rows_read=len(data))


def _read_parquet(path: Path, limit: int | None) -> Loaded:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        names = [c for c in pf.schema_arrow.names if c in USEFUL_COLUMNS]
        if not names:
            raise GrpoError(f"cannot tell the schema of {path}: columns {pf.schema_arrow.names}; {_EXPECTED}")
        if limit is None:
            table = pf.read(columns=names)
        else:
            batches = []
            got = 0
            for batch in pf.iter_batches(batch_size=max(1, min(limit, 4096)), columns=names):
                batches.append(batch)
                got += batch.num_rows
                if got >= limit:
                    break
            table = pa.Table.from_batches(batches).slice(0, limit) if batches else None
    except (pa.ArrowException, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GrpoError(f"cannot read {path}: not a valid Parquet file ({msg})") from None
    records = table.to_pylist() if table is not None else []
    return Loaded(records, str(path), rows_read=len(records))


def _read_csv(path: Path, limit: int | None) -> Loaded:
    import pandas as pd

    data_files.check_csv_lines(path)
    try:
        df = pd.read_csv(path, nrows=limit, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GrpoError(f"cannot read {path}: not a valid CSV file ({msg})") from None
    records = df.to_dict("records")
    return Loaded(records, str(path), rows_read=len(records))


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the HF hub endpoint accepts a TCP connection (fast: no retries; asked once per command,
    which loads up to three hub datasets and a tokenizer)."""
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(url)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    return _connects(host, port, timeout)


@functools.lru_cache(maxsize=8)
def _connects(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def in_local_cache(repo: str) -> bool:
    """Whether the HF caches hold anything of dataset ``repo``: looked up on disk, without importing
    ``datasets`` (seconds on a loaded machine) only to hear that an offline load cannot work."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    home = Path(os.environ.get("HF_HOME") or cache / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub")
    prepared = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return (hub / f"datasets--{repo.replace('/', '--')}").exists() or (
        prepared / repo.replace("/", "___")
    ).exists()


def _env_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


@contextlib.contextmanager
def offline_unless_reachable(timeout: float = 3.0) -> Iterator[bool]:
    """Hub clients in offline mode (local cache only) while the hub is unreachable; yields ``offline``.

    Without this, every hub call (``load_dataset``, ``from_pretrained``) retries for ~30 s before failing
    on a machine with no network.
    """
    offline = _env_offline() or not hub_reachable(timeout)
    mods = []
    if offline:
        import importlib

        for name in ("huggingface_hub.constants", "datasets.config"):
            try:
                mods.append(importlib.import_module(name))
            except ImportError:
                pass
    saved = [(m, getattr(m, "HF_HUB_OFFLINE")) for m in mods if hasattr(m, "HF_HUB_OFFLINE")]  # noqa: B009
    try:
        for m, _ in saved:
            setattr(m, "HF_HUB_OFFLINE", True)  # noqa: B010 - typed modules do not all declare it
        yield offline
    finally:
        for m, value in saved:
            setattr(m, "HF_HUB_OFFLINE", value)  # noqa: B010


def is_hub_model(name: str) -> bool:
    """Whether loading ``name`` goes to the hub (not a built-in, not a local folder)."""
    return name not in ("tiny", "gemma3-270m", "gemma-3-270m") and not Path(name).expanduser().exists()


def load_hub(ds: HubDataset, split: str | None = None, limit: int | None = None) -> Loaded:
    """``datasets.load_dataset`` by hub name; fails fast when neither the hub nor the cache has it.

    With no network the HF client retries for ~30 s; we probe the endpoint first and, if it is not
    reachable, load in offline mode (the local cache only), which fails in about a second.
    """
    split = split or ds.split
    if (_env_offline() or not hub_reachable()) and not in_local_cache(ds.repo):
        raise HubUnavailable(f"cannot load {ds.repo} (hub not reachable and not in the local cache)")
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    try:
        import datasets
    except ImportError as exc:
        raise GrpoError(
            f"loading {ds.repo} from the hub needs the 'datasets' package ({exc}); "
            "pip install datasets, or pass --source FILE"
        ) from None
    hub_split = f"{split}[:{limit}]" if limit is not None else split
    with offline_unless_reachable() as offline:
        try:
            dataset = datasets.load_dataset(ds.repo, ds.config, split=hub_split)
        except Exception as exc:  # noqa: BLE001 - any hub/cache failure becomes one line
            reason = (
                "hub not reachable and not in the local cache"
                if offline
                else (str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            )
            raise HubUnavailable(f"cannot load {ds.repo} ({reason})") from None
    keep = [c for c in dataset.column_names if c in USEFUL_COLUMNS]
    dataset = dataset.select_columns(keep)
    records = dataset.to_list()
    return Loaded(
        records,
        f"hub:{ds.repo}" + (f"/{ds.config}" if ds.config else "") + f"[{split}]",
        rows_read=len(records),
        fingerprint=getattr(dataset, "_fingerprint", None),
    )


class HubUnavailable(GrpoError):
    """The hub (and the local cache) could not provide the dataset."""


def load_bundled(ds: HubDataset, limit: int | None = None) -> Loaded:
    """The MIT-licensed sample shipped in cli/data/samples (see its README)."""
    assert ds.sample is not None
    loaded = read_file(SAMPLES / ds.sample, limit)
    loaded.source = f"bundled:{ds.sample}"
    return loaded


# ---- parsing -------------------------------------------------------------------------------------


class BadRow(Exception):
    """A row that cannot be used; the message is the reason it is counted under."""


_EXPECTED = (
    "expected question+answer (GSM8K), problem+answer/solution (MATH, OpenR1), prompt+reward_model (verl "
    "parquet), prompt+solution (DAPO processed) or problem+expected_answer (OpenMathReasoning)"
)

# Seed 000 ``parse_dapo``: the answer after "Answer:", else the whole solution.
DAPO_ANSWER = re.compile(r"(?:Answer|ans|result):?\s*\$?\s*(.+?)(?:\n|$)", re.IGNORECASE)
# GSM8K calculator annotations: "48/2 = <<48/2=24>>24".
GSM8K_CALC = re.compile(r"<<[^<>]*>>")


def parse_dapo_answer(solution: str) -> str:
    m = DAPO_ANSWER.search(solution)
    return m.group(1).strip() if m else solution.strip()


def gsm8k_answer(text: str) -> tuple[str, str]:
    """``(answer, worked solution)`` of a GSM8K answer field.

    The gold answer is the text after ``####`` with thousands commas removed (``1,080`` -> ``1080``), the
    form the seeds' numeric rewards compare against; the solution is the reasoning before it without
    the ``<<calc>>`` annotations.

    >>> gsm8k_answer("48/2 = <<48/2=24>>24 clips.\\n#### 1,024")
    ('1024', '48/2 = 24 clips.')
    """
    if "####" not in text:
        raise BadRow("no '####' answer")
    reasoning, _, tail = text.rpartition("####")
    answer = tail.strip().replace(",", "")
    if not answer:
        raise BadRow("empty answer")
    return answer, GSM8K_CALC.sub("", reasoning).strip()


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``), braces balanced.

    >>> last_boxed(r"so $x = \boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    """
    best = None
    for macro in ("\\boxed", "\\fbox"):
        idx = text.rfind(macro)
        if idx >= 0 and (best is None or idx > best[0]):
            best = (idx, macro)
    if best is None:
        return None
    i = best[0] + len(best[1])
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def _text(value: Any, what: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise BadRow(f"missing {what}")
    if not isinstance(value, str):
        raise BadRow(f"{what} not a string")
    if not value.strip():
        raise BadRow(f"empty {what}")
    return value


def _answer_text(value: Any) -> str:
    """Answers may be numbers in parquet/JSON: 34 -> '34', 2.0 -> '2'; anything else must be text."""
    if isinstance(value, bool):
        raise BadRow("answer not a string")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    return _text(value, "answer").strip()


def _optional_text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _user_content(messages: Any) -> str:
    """The last user message of a chat prompt (list of {role, content})."""
    if isinstance(messages, str):
        return _text(messages, "question")
    try:
        items = list(messages)
    except TypeError:
        raise BadRow("question not a string") from None
    content = None
    for m in items:
        if isinstance(m, Mapping) and m.get("role", "user") == "user":
            content = m.get("content")
    return _text(content, "question")


def _row_gsm8k(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    q = _text(r.get("question"), "question")
    answer, solution = gsm8k_answer(_text(r.get("answer"), "answer"))
    return q, answer, solution or None


def _row_question_answer(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    q = _text(r.get("question"), "question")
    return q, _answer_text(r.get("answer")), _optional_text(r.get("solution"))


def _row_problem_answer(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    q = _text(r.get("problem"), "question")
    solution = _optional_text(r.get("solution"))
    try:
        answer = _answer_text(r.get("answer"))
    except BadRow:
        boxed = last_boxed(solution) if solution else None
        if not boxed:
            raise
        answer = boxed
    return q, answer, solution


def _row_problem_solution(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    q = _text(r.get("problem"), "question")
    solution = _text(r.get("solution"), "solution")
    answer = last_boxed(solution)
    if not answer:
        raise BadRow("no \\boxed{} answer")
    return q, answer, solution


def _row_openmath(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    # Seed 000 format_row: str(expected_answer).strip(); <think> tags removed from the solution.
    q = _text(r.get("problem"), "question")
    raw = r.get("expected_answer")
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        raise BadRow("missing answer")
    answer = str(raw).strip()
    if not answer:
        raise BadRow("empty answer")
    sol = r.get("generated_solution")
    solution = strip_think(sol) if isinstance(sol, str) else None
    return q, answer, solution or None


def _row_dapo_processed(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    q = _text(r.get("prompt"), "question")
    return q, parse_dapo_answer(_text(r.get("solution"), "answer")), None


def _row_verl(r: Mapping[str, Any]) -> tuple[str, str, str | None]:
    rm = r.get("reward_model")
    if not isinstance(rm, Mapping) or "ground_truth" not in rm:
        raise BadRow("missing answer")
    gt = rm["ground_truth"]
    solution = None
    if isinstance(gt, Mapping):  # MATH copy: {question, solution, target}
        solution = _optional_text(gt.get("solution"))
        try:
            answer = _answer_text(gt.get("target"))
        except BadRow:
            boxed = last_boxed(solution) if solution else None
            if not boxed:
                raise
            answer = boxed
    else:  # DAPO copy: the answer itself
        answer = _answer_text(gt)
    try:
        q = _user_content(r.get("prompt"))
    except BadRow:
        if not (isinstance(gt, Mapping) and isinstance(gt.get("question"), str)):
            raise
        q = _text(gt["question"], "question")
    return q, answer, solution


SCHEMAS = {
    "gsm8k": _row_gsm8k,
    "question-answer": _row_question_answer,
    "problem-answer": _row_problem_answer,
    "problem-solution": _row_problem_solution,
    "openmath": _row_openmath,
    "dapo-processed": _row_dapo_processed,
    "verl": _row_verl,
}


def _first(records: Sequence[Any], key: str) -> Any:
    for r in records[:200]:
        if isinstance(r, Mapping) and r.get(key) is not None:
            return r[key]
    return None


def detect_schema(records: Sequence[Any], source: str = "data") -> str:
    """Which layout ``records`` use, from their columns (and a look at the first values)."""
    cols: set[str] = set()
    for r in records[:200]:
        if isinstance(r, Mapping):
            cols.update(str(k) for k in r)
    if "prompt" in cols and "solution" in cols and isinstance(_first(records, "prompt"), str):
        return "dapo-processed"
    if "prompt" in cols and "reward_model" in cols:
        return "verl"
    if "problem" in cols and "expected_answer" in cols:
        return "openmath"
    if "question" in cols and "answer" in cols:
        answers = [r.get("answer") for r in records[:200] if isinstance(r, Mapping)]
        texts = [a for a in answers if isinstance(a, str)]
        if texts and sum("####" in a for a in texts) * 2 >= len(texts):
            return "gsm8k"
        return "question-answer"
    if "problem" in cols and "answer" in cols:
        return "problem-answer"
    if "problem" in cols and "solution" in cols:
        return "problem-solution"
    shown = sorted(cols)[:12]
    raise GrpoError(f"cannot tell the schema of {source}: columns {shown}; {_EXPECTED}")


@dataclass
class Parsed:
    questions: list[str]
    answers: list[str]
    solutions: list[str | None]
    bad: Counter
    filtered_ability: int = 0


def parse_records(records: Iterable[Any], schema: str) -> Parsed:
    """Parse raw rows with ``schema``; bad rows are counted by reason.

    Rows with an ``ability`` field keep only math (seed 000: ``ability == "MATH"``; the local DAPO and
    MATH parquet copies spell it ``math``, hence case-insensitive).
    """
    fn = SCHEMAS[schema]
    out = Parsed([], [], [], Counter())
    for r in records:
        if not isinstance(r, Mapping):
            out.bad["row not an object"] += 1
            continue
        ability = r.get("ability")
        if isinstance(ability, str) and ability.strip().upper() != "MATH":
            out.filtered_ability += 1
            continue
        try:
            q, a, s = fn(r)
        except BadRow as exc:
            out.bad[str(exc)] += 1
            continue
        out.questions.append(q)
        out.answers.append(a)
        out.solutions.append(s)
    return out


# ---- filters and splits --------------------------------------------------------------------------


def numeric_mask(answers: Sequence[str]) -> Any:
    """Seed 000: ``pd.to_numeric(answers, errors="coerce").notnull()`` as a numpy bool array."""
    import numpy as np
    import pandas as pd

    if not answers:
        return np.zeros(0, dtype=bool)
    return pd.to_numeric(pd.Series(list(answers), dtype=object), errors="coerce").notnull().to_numpy()


def quantile_cut(lengths: Sequence[int], q: float) -> tuple[int, Any]:
    """Seed 000: ``cut = int(np.quantile(lengths, q))``; keep ``length <= cut``."""
    import numpy as np

    arr = np.asarray(lengths)
    cut = int(np.quantile(arr, q))
    return cut, arr <= cut


def eval_split(n: int, eval_size: int, seed: int) -> tuple[Any, Any]:
    """Deterministic ``(train_idx, eval_idx)`` over ``range(n)``, both sorted (original order kept).

    The held-out set takes at most half the rows, so a small dataset still leaves prompts to train on.
    """
    import numpy as np

    k = min(max(eval_size, 0), n // 2)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[k:]), np.sort(perm[:k])


def percentiles(lengths: Sequence[int]) -> dict[str, float]:
    import numpy as np

    if len(lengths) == 0:
        return {}
    arr = np.asarray(lengths)
    out: dict[str, float] = {"min": int(arr.min())}
    for p in (50, 90, 95, 99):
        out[f"p{p}"] = float(np.percentile(arr, p))
    out["max"] = int(arr.max())
    out["mean"] = round(float(arr.mean()), 2)
    return out


def prompt_lengths(tokenizer: Any, spec: FormatSpec, questions: Sequence[str], batch: int = 512) -> list[int]:
    """Token length of each question's generation prompt (system + user + reasoning-start tag).

    Seed 000: ``len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True))``;
    rendered and encoded in batches here (the same ids: the template adds no special tokens twice).
    """
    out: list[int] = []
    for i in range(0, len(questions), batch):
        convs = [spec.messages(q) for q in questions[i : i + batch]]
        texts = tokenizer.apply_chat_template(convs, add_generation_prompt=True, tokenize=False)
        enc = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        out.extend(len(ids) for ids in enc)
    return out


def conversation_lengths(
    tokenizer: Any,
    spec: FormatSpec,
    questions: Sequence[str],
    answers: Sequence[str],
    solutions: Sequence[str | None],
    batch: int = 256,
) -> list[int]:
    """Token length of whole SFT conversations (seed 000 ``format_row``; capped at max_seq_length // 2)."""
    out: list[int] = []
    for i in range(0, len(questions), batch):
        convs = [
            [*spec.messages(q), {"role": "assistant", "content": spec.render_completion(s or "", a)}]
            for q, a, s in zip(
                questions[i : i + batch], answers[i : i + batch], solutions[i : i + batch], strict=True
            )
        ]
        texts = tokenizer.apply_chat_template(convs, tokenize=False)
        enc = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        out.extend(len(ids) for ids in enc)
    return out

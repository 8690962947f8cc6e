"""Local data files for `grpo prep --source`, read with bounds (docs/history.md "Hardening, round 1").

A file that is one endless line (``/dev/zero`` behind a ``.jsonl`` name, a runaway export) was read until
the machine ran out of memory. Here only regular files are read; JSON Lines and CSV are read a line at a
time with a cap on the line's length, so an absurd line is refused — naming the file and the line — after
reading at most the cap, never the rest; a ``.json`` array, which has to be parsed whole, is refused
above a size cap (JSON Lines has no such limit).
"""

from __future__ import annotations

import json
import stat
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cli.common import GrpoError

MAX_LINE_BYTES = 1 << 20  # one row of math data is a few KB; a 1 MiB line is not a question
MAX_JSON_BYTES = 256 << 20  # a .json array is parsed whole: beyond this, JSON Lines


def mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def check_regular(path: Path) -> None:
    """Refuse devices, pipes and sockets: they can be endless (``/dev/zero``) and have no size to check."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
        )  # fmt: skip
        raise GrpoError(f"--source {path} is {kind}, not a regular file: nothing read")


def bounded_lines(path: Path, max_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line; a line longer than ``max_bytes`` is one clear error, raised
    after reading ``max_bytes`` of it and nothing more. A leading byte-order mark is dropped."""
    with open(path, "rb") as fh:
        number = 0
        while True:
            raw = fh.readline(max_bytes + 1)
            if not raw:
                return
            number += 1
            if len(raw) > max_bytes and not (len(raw) == max_bytes + 1 and raw.endswith(b"\n")):
                raise GrpoError(
                    f"{path}: line {number} is longer than {mib(max_bytes)} (a row of math data is a few KB; "
                    "is this the right file?): nothing read past it"
                )
            text = raw.decode("utf-8")
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield number, text


def read_jsonl(path: Path, limit: int | None) -> tuple[list[Any], Counter[str], int]:
    """``(records, bad rows by reason, rows read)`` of a JSON Lines file."""
    records: list[Any] = []
    bad: Counter[str] = Counter()
    first_error = None
    n = 0
    for number, line in bounded_lines(path):
        if not line.strip():
            continue
        if limit is not None and n >= limit:
            break
        n += 1
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            bad["invalid JSON line"] += 1
            first_error = first_error or f"line {number}: {exc.msg}"
    if n and not records:
        raise GrpoError(f"cannot read {path}: no line is valid JSON ({first_error}); is it JSON Lines?")
    return records, bad, n


def read_json(path: Path, limit: int | None) -> list[Any]:
    """The rows of a ``.json`` array (or of the one array inside a ``{"train": [...]}`` mapping)."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise GrpoError(
            f"{path} is {mib(size)}: a .json array is read whole, up to {mib(MAX_JSON_BYTES)}; "
            "convert it to JSON Lines (.jsonl, one row a line), which has no such limit"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise GrpoError(f"cannot read {path}: invalid JSON (line {exc.lineno}: {exc.msg})") from None
    if isinstance(data, Mapping):
        # {"train": [...]} or {"data": [...]}: one list of rows inside.
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise GrpoError(f"cannot read {path}: expected a JSON array of rows")
        data = lists[0]
    if not isinstance(data, list):
        raise GrpoError(f"cannot read {path}: expected a JSON array of rows")
    return data[:limit] if limit is not None else data


def check_csv_lines(path: Path) -> None:
    """A CSV is parsed by pandas, which would read an endless line whole: check the lines' lengths first."""
    for _ in bounded_lines(path):
        pass

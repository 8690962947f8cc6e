"""A llama.cpp GGUF file's header, read and checked without touching its tensor data.

``read_header`` walks the metadata and the tensor table (GGUF v2/v3: magic, version, counts, key/values,
tensor infos) and checks the file holds every tensor byte the table declares, so a bad or truncated file is
one line before a two-minute load. It reads the vocabulary (the token names and types, which the tokenizer
import needs) and skips the other long string arrays (the merges) without decoding them; ``gguf``'s own
``GGUFReader`` builds a view per string and took 25 s on Qwen2.5-Coder-1.5B's 300 K of them here.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.common import GrpoError

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 counted in 32 bits; llama.cpp has written v3 since 2023

# Metadata value types (GGUF spec): fixed-size scalars by struct format; 8 is a string, 9 an array.
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_KEEP_STRINGS = ("tokenizer.ggml.tokens",)  # the one string array read whole (token types need the names)


@dataclass
class Header:
    """What :func:`read_header` learns from a GGUF without reading its tensor data."""

    path: Path
    version: int
    size: int
    metadata: dict[str, Any]
    tensors: int
    data_end: int  # the byte where the last tensor ends
    architecture: str = ""
    tokens: list[str] = field(default_factory=list)
    token_types: list[int] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


class _Cut(Exception):
    """The file ends inside the metadata or the tensor table."""


class _Reader:
    def __init__(self, buf: Any) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.buf):
            raise _Cut
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        n = self.take("Q")
        if self.pos + n > len(self.buf):
            raise _Cut
        text = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value(self, kind: int, keep: bool) -> Any:
        if kind in _SCALAR:
            return self.take(_SCALAR[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown metadata value type {kind}")
        inner, count = self.take("I"), self.take("Q")
        if inner in _SCALAR:
            return list(self.take(f"{count}{_SCALAR[inner]}")) if count else []
        if inner != _STRING:
            raise ValueError(f"unsupported metadata array of type {inner}")
        if keep:
            return [self.string() for _ in range(count)]
        for _ in range(count):  # walk past a long string array (merges) without decoding it
            n = self.take("Q")
            self.pos += n
        if self.pos > len(self.buf):
            raise _Cut
        return count


def read_header(path: Path) -> Header:
    """Check ``path`` is a whole GGUF and read its metadata (no tensor data): :class:`GrpoError` otherwise."""
    import importlib.util

    name = str(path)
    if importlib.util.find_spec("gguf") is None:
        raise GrpoError(f"--model {name} needs the gguf package to read it: pip install 'grpo[gguf]'")
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    if not path.is_file():
        raise GrpoError(f"model file {name} does not exist" if not path.exists() else f"{name} is not a file")
    size = path.stat().st_size
    if size < 24:
        raise GrpoError(f"{name} is not a GGUF file: {size} bytes, too short for a GGUF header")
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[:4] != MAGIC:
                raise GrpoError(f"{name} is not a GGUF file (it starts with {bytes(buf[:4])!r}, not b'GGUF')")
            r = _Reader(buf)
            r.pos = 4
            version, tensors, kv = r.take("IQQ")
            if version not in VERSIONS:
                raise GrpoError(f"{name} is GGUF version {version}; llama.cpp GGUF versions 2 and 3 are read")
            meta: dict[str, Any] = {}
            for _ in range(kv):
                key = r.string()
                meta[key] = r.value(r.take("I"), key in _KEEP_STRINGS)
            align = int(meta.get("general.alignment", 32))
            ends = []
            for _ in range(tensors):
                r.string()
                dims = r.take(f"{r.take('I')}Q")
                kind, offset = r.take("IQ")
                try:
                    block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
                except (ValueError, KeyError):
                    raise GrpoError(f"{name}: a tensor has the unknown ggml type {kind}") from None
                count = 1
                for d in dims if isinstance(dims, tuple) else (dims,):
                    count *= d
                ends.append(offset + count // block * nbytes)
            data_start = -(-r.pos // align) * align
    except _Cut:
        raise GrpoError(f"{name} is cut short: the file ends inside its header ({size} bytes)") from None
    except (ValueError, OverflowError, struct.error, MemoryError) as exc:
        raise GrpoError(f"{name} is not a readable GGUF file ({exc})") from None
    data_end = data_start + max(ends, default=0)
    if data_end > size:
        raise GrpoError(
            f"{name} is cut short: its tensors need {data_end:,} bytes, the file has {size:,} "
            "(download it again)"
        )
    header = Header(path, version, size, meta, tensors, data_end, str(meta.get("general.architecture") or ""))
    header.tokens = list(meta.pop("tokenizer.ggml.tokens", []) or [])
    header.token_types = list(meta.get("tokenizer.ggml.token_type") or [])
    if not header.architecture:
        raise GrpoError(f"{name} has no general.architecture in its metadata")
    if not header.tokens:
        raise GrpoError(
            f"{name} carries no tokenizer (tokenizer.ggml.tokens): grpo needs the model's vocabulary"
        )
    return header

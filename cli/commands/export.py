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

import shutil
import time
from pathlib import Path
from typing import Any

from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, RunOpt, console, err_console
from cli.config.command_options import ExportOptions
from cli.config.options import check_choices, typed_options
from cli.errors import handle_errors
from cli.export.builders import Job, check_4bit
from cli.run.rundir import RunDir, dry_run_exit, run_config


@handle_errors
@typed_options(ExportOptions)
def export(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    *,
    opts: ExportOptions,
) -> None:
    from cli.export import gguf as gg
    from cli.run import signals
    from cli.run.preflight import check_run

    # ---- every check that needs no model, before any work ----------------------------------------
    types = gg.parse_types(opts.gguf) if opts.gguf is not None else []
    if opts.pick_checkpoint and (len(types) != 1 or opts.adapter not in (None, "auto", "newest", "grpo")):
        raise GrpoError(
            "--pick-checkpoint picks among GRPO checkpoints at one quantization: --gguf TYPE (one type)"
        )
    check_choices(opts)  # --merged, --adapter
    merged = opts.merged.lower() if opts.merged else None
    lora = opts.lora or not (merged or types)
    if types:
        gg.require_tools(types)
    if merged == "4bit":
        check_4bit()
    rd = RunDir(run)
    if dry_run:
        shown = {"lora": lora, "merged": merged, "gguf": list(types), "adapter": opts.adapter,
                 "out": opts.out, "verify": opts.verify, "verify_tokens": opts.verify_tokens}  # fmt: skip
        dry_run_exit(rd, config, "export", shown)
    _check_run_writable(rd)  # held (one writer) and writable: export records itself in the manifest
    cfg = run_config(rd, config)
    stage, adapter = rd.pick_adapter(opts.adapter)
    check_run(rd, data=("eval.parquet",), adapters=[adapter])  # a damaged file: one line, before any work
    signals.held_import("torch")  # first here, not inside the adapter check's read
    _check_trained(adapter, opts.allow_zero)
    from cli.models.resolve import resolve_model

    wanted = ["lora"] if lora else []
    wanted += [f"merged-{merged}"] if merged else []
    wanted += [f"gguf-{t}" for t in types]
    console.print(
        f"export: {', '.join(wanted)} from the {stage} adapter over {cfg.model}, each verified on "
        f"{opts.verify} held-out prompt(s) × {opts.verify_tokens} tokens",
        soft_wrap=True,
    )
    out = Path(opts.out) if opts.out is not None else rd.export_dir
    job = Job(rd=rd, cfg=cfg, spec=cfg.format_spec(), stage=stage, adapter=adapter,
              base_path=str(resolve_model(cfg, rd)), staging=out,
              name=opts.name or f"{rd.path.resolve().name}-{stage}", lora=lora, merged=merged, types=types,
              verify=opts.verify, verify_tokens=opts.verify_tokens)  # fmt: skip
    if opts.pick_checkpoint:
        from cli.export.pick import pick

        job.adapter, _ = pick(job, types[0], opts.pick_prompts, out)  # then exported and verified as usual
    _export(job, out, opts.allow_zero)


def _check_run_writable(rd: RunDir) -> None:
    from cli.export.staging import check_writable

    rd.require_exists()
    rd.hold("grpo export")
    check_writable(rd.path, "export records what it wrote in the run's manifest.json — make the run "
                   "directory writable, or copy it (cp -r) and export from the copy")  # fmt: skip


def _check_trained(adapter: Path, allow_zero: bool) -> None:
    """Seed 003's check before anything is built: an all-zero LoRA tensor means it never trained."""
    from cli.models import loading

    zeros = loading.zero_tensors(loading.load_adapter_tensors(adapter))
    if zeros and not allow_zero:
        raise GrpoError(
            f"{len(zeros)} all-zero tensor(s) in {adapter} (e.g. {zeros[0]}): the LoRA looks untrained "
            "(seed 003's check); re-run training or pass --allow-zero"
        )


def _export(job: Job, out: Path, allow_zero: bool) -> None:
    """Build in a staging folder inside ``out``, move into place, write verify.json, print the table.

    An artifact with all-zero tensors fails the export before anything is moved into place, unless
    --allow-zero, which keeps it with a warning (it used to write the artifacts, then exit 1)."""
    from cli.export.builders import build_all
    from cli.export.report import print_table, print_tool_agreement, write_report
    from cli.export.staging import move_into_place, staging_dir
    from cli.run import heartbeat

    created = not out.exists()
    job.staging = staging_dir(out)
    t0 = time.time()
    try:
        with heartbeat.working("export: loading", console=console):
            artifacts = build_all(job)
        _zero_tensors(job, artifacts, allow_zero)
        move_into_place(job.staging, out, artifacts)
    except BaseException:
        shutil.rmtree(job.staging, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a failed first export leaves no empty export folder either
        raise
    finally:
        shutil.rmtree(job.staging, ignore_errors=True)
    spec, report_path = job.spec, out / "verify.json"
    head = {"run": str(job.rd.path), "model": str(job.cfg.model), "source": job.stage,
            "adapter": str(job.adapter), "format": spec.name,
            "contract_sha256": spec.contract_hash()}  # fmt: skip
    report = write_report(
        report_path,
        head,
        artifacts,
        verify_tokens=job.verify_tokens,
        warnings=job.warnings,
        t0=t0,
        max_loss=job.cfg.verify_max_loss,
    )
    job.rd.record_stage(
        "export",
        {
            "source": job.stage,
            "out": str(out),
            "artifacts": {a["name"]: a["path"] for a in artifacts},
            "seconds": report["seconds"],
        },
    )
    print_table(artifacts, report)
    print_tool_agreement(artifacts)
    for w in report["warnings"]:
        err_console.print(f"[yellow]warning:[/] {w}")
    console.print(f"verification: {report_path}")


def _zero_tensors(job: Job, artifacts: list[dict[str, Any]], allow_zero: bool) -> None:
    """Seed 003's check on what was built: a failure (nothing moved into place), or with --allow-zero a
    warning in verify.json."""
    zeros = {a["name"]: len(a["zero_tensors"]) for a in artifacts if a.get("zero_tensors")}
    if not zeros:
        return
    listed = ", ".join(f"{name} ({n})" for name, n in zeros.items())
    if not allow_zero:
        raise GrpoError(
            f"verification failed: all-zero tensors in {listed}; nothing written (--allow-zero keeps them)",
            code=1,
        )
    job.warnings.append(f"all-zero tensors kept (--allow-zero): {listed}")

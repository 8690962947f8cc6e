"""`grpo export --gguf TYPE --pick-checkpoint`: keep the checkpoint that is best *after* quantization.

Quantization can erase a fine-tune, and not evenly: the checkpoint that scores best in 16 bits is not always
the one that scores best in q4_k_m. So every saved checkpoint of the run's latest GRPO attempt (a placebo
attempt is never a candidate), and the final adapter, is exported at TYPE into a scratch folder, decoded by
llama.cpp greedily on a held-out slice (the *last* ``--pick-prompts`` rows of data/eval.parquet, so that
`grpo eval --limit K` on the first rows stays apart from the choice when K is small enough) and scored with
the training verifier (the seed rule, :func:`cli.eval.scoring.score`). The best accuracy wins (ties: the
better format, then the later step); the export then runs as usual from it, and ``export/pick.json`` keeps
every candidate's score and the reason.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from cli.common import GrpoError, console
from cli.run.atomic import atomic_write_json
from cli.run.data import eval_rows
from cli.run.rundir import RunDir, has_adapter


def candidates(rd: RunDir) -> list[tuple[str, Path]]:
    """(name, adapter folder) of every saved checkpoint of the latest GRPO attempt, then the final adapter."""
    root = rd.grpo_dir / "checkpoints"
    attempts = sorted(
        (int(p.name.partition("-")[2]), p)
        for p in (root.glob("attempt-*") if root.is_dir() else [])
        if p.name.partition("-")[2].isdigit() and not (p / "control.json").exists()
    )
    out: list[tuple[str, Path]] = []
    if attempts:
        n, folder = attempts[-1]
        steps = sorted(
            (int(c.name.rpartition("-")[2]), c)
            for c in folder.glob("checkpoint-*")
            if c.name.rpartition("-")[2].isdigit() and has_adapter(c)
        )
        out = [(f"attempt-{n}/{c.name}", c) for _, c in steps]
    final = rd.adapter_dir("grpo")
    if has_adapter(final):
        out.append(("grpo/adapter (final)", final))
    if len(out) < 2:
        raise GrpoError(
            f"--pick-checkpoint needs saved GRPO checkpoints in {root} to choose among (found {len(out)}): "
            "train with `grpo grpo --save-steps N`"
        )
    return out


def budget(job: Any) -> int:
    """The completion budget the candidates are scored with: the run's GRPO one (as `grpo eval`), else 512."""
    return int(job.cfg.grpo.max_completion_length or 512)


def _score(job: Any, path: Path, rows: list[dict[str, str]], tokenizer: Any, runner: Any) -> dict[str, Any]:
    from cli.eval import scoring
    from cli.infer import prompting

    prompts = [prompting.prompt_text(tokenizer, job.spec, r["question"]) for r in rows]
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    res = runner(path, prompts, ids, budget(job))
    sc = scoring.score(job.spec, res["texts"], [r["answer"] for r in rows],
                       prompts=[job.spec.messages(r["question"]) for r in rows])  # fmt: skip
    n = len(rows)
    return {
        "correct": sum(sc.correct),
        "n": n,
        "accuracy": sum(sc.correct) / n,
        "format": sum(sc.format_ok) / n,
    }


def pick(job: Any, qtype: str, prompts: int, out: Path) -> tuple[Path, dict[str, Any]]:
    """Export every candidate at ``qtype``, score it, return the best adapter and the record (pick.json)."""
    import dataclasses

    from cli.export import gguf as gg
    from cli.export.builders import build_all
    from cli.models import loading

    rows = eval_rows(job.rd)[-prompts:]
    if not rows:
        raise GrpoError(
            f"--pick-checkpoint scores on held-out prompts: no data/eval.parquet in {job.rd.path}"
        )
    scored = []
    out.mkdir(parents=True, exist_ok=True)
    for name, adapter in candidates(job.rd):
        console.print(f"pick: {name} → GGUF {qtype}, {len(rows)} held-out prompts…")
        with tempfile.TemporaryDirectory(prefix=".pick.", dir=out) as tmp:
            one = dataclasses.replace(job, adapter=adapter, staging=Path(tmp), lora=False, merged=None,
                                      types=[qtype], verify=0, warnings=[])  # fmt: skip
            build_all(one)
            (path,) = sorted(Path(tmp).glob(f"gguf-{qtype}/*.gguf"))
            tokenizer = loading.load_tokenizer(
                loading.adapter_tokenizer_path(adapter, job.base_path), job.spec, job.cfg.pad_token
            )
            scored.append({"checkpoint": name, "adapter": str(adapter),
                           **_score(job, path, rows, tokenizer, gg.generate)})  # fmt: skip
    best = max(enumerate(scored), key=lambda x: (x[1]["accuracy"], x[1]["format"], x[0]))[1]
    final = next((s for s in scored if s["checkpoint"].endswith("(final)")), None)
    why = (
        f"{best['checkpoint']}: {best['correct']} of {best['n']} correct after {qtype} "
        f"({100 * best['accuracy']:.0f}%, format {100 * best['format']:.0f}%) on the last {best['n']} "
        "held-out prompts, the best of "
        + ", ".join(f"{s['checkpoint']} {100 * s['accuracy']:.0f}%" for s in scored)
    )
    if final is not None and final is not best:
        why += f"; the final adapter scored {100 * final['accuracy']:.0f}% after {qtype}"
    record = {"type": qtype, "prompts": len(rows), "slice": "the last rows of data/eval.parquet",
              "decoding": "greedy, llama.cpp", "max_new_tokens": budget(job), "candidates": scored,
              "chosen": best["checkpoint"], "adapter": best["adapter"], "why": why}  # fmt: skip
    atomic_write_json(out / "pick.json", record)
    console.print(f"pick: {why}", soft_wrap=True)
    return Path(best["adapter"]), record

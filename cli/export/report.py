"""The export report: ``<export>/verify.json`` (kept across exports) and the table printed at the end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cli.common import console
from cli.export.staging import human
from cli.run.atomic import atomic_write_json

AGREEMENT = (
    "token_match: identical tokens at the same position / tokens of the longer "
    "completion; prefix: mean common-prefix share; exact: share of identical completions"
)


def write_report(
    report_path: Path,
    head: dict[str, Any],
    artifacts: list[dict[str, Any]],
    *,
    verify_tokens: int,
    warnings: list[str],
    t0: float,
    max_loss: float = 0.4,
) -> dict[str, Any]:
    """verify.json: this export's artifacts, plus those of earlier exports that still exist."""
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
        **head,
        "verify_prompts": artifacts[0].get("verify_prompts", 0) if artifacts else 0,
        "verify_tokens": verify_tokens,
        "decoding": "greedy",
        "agreement_definition": AGREEMENT,
        "seconds": round(time.time() - t0, 2),
        "warnings": warnings + degraded(artifacts, max_loss),
        "artifacts": kept + artifacts,
    }
    atomic_write_json(report_path, report)
    return report


def print_table(artifacts: list[dict[str, Any]], report: dict[str, Any]) -> None:
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
            human(a["bytes"]),
            str(len(a["zero_tensors"])) if a["zero_tensors"] else "0",
            {True: "ok", None: "not verified"}.get(a.get("reloaded"), "FAIL"),
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
    from cli.run.tables import fit

    console.print(fit(table, console))


# The quantization to try when an artifact of this type loses the fine-tune: one step up in precision.
TRY_INSTEAD = {"q4_0": "q8_0", "q4_k_s": "q5_k_m or q8_0", "q4_k_m": "q5_k_m or q8_0", "q5_0": "q8_0",
               "q5_k_s": "q8_0", "q5_k_m": "q8_0", "q6_k": "q8_0", "q8_0": "f16 (or bf16)"}  # fmt: skip
REWARDS = (("match_format_exactly", "format reward"), ("check_answer_accuracy", "answer reward"))


def degraded(artifacts: list[dict[str, Any]], max_loss: float = 0.4) -> list[str]:
    """Artifacts that lost ``max_loss`` or more of the HF model's format reward or answer reward on the same
    prompts (``verify_max_loss``), one line each with the figures and what to export instead.

    Seen on Gemma-3-270M: q4_k_m kept 0 of the 3/8 formatted answers (q8_0 kept 2); on SmolLM2-135M q8_0
    halved the format reward (0.75 → 0.38): a LoRA's small weight change does not survive the rounding.
    """
    out = []
    for a in artifacts:
        rewards = a.get("rewards") or {}
        lost = []
        for key, label in REWARDS:
            hf = (rewards.get("hf") or {}).get(key)
            got = (rewards.get("artifact") or {}).get(key)
            if hf is not None and got is not None and hf > 0 and got <= (1 - max_loss) * hf:
                lost.append(f"{label} {got:.2f} vs {hf:.2f} ({100 * (1 - got / hf):.0f} % lost)")
        if not lost:
            continue
        if a.get("kind") == "gguf":
            better = TRY_INSTEAD.get(str(a.get("type") or a["name"].removeprefix("gguf-")))
            hint = f"export --gguf {better} instead" if better else "use the LoRA export (or a larger model)"
        else:
            hint = "use the LoRA export"
        n = a.get("verify_prompts")
        on = f" on {n} prompts" if n else ""
        out.append(
            f"{a['name']} lost the trained format: {', '.join(lost)} against the HF model{on} "
            f"(verify_max_loss {max_loss:g}): rounding erased the fine-tune; {hint}"
        )
    return out


def print_tool_agreement(artifacts: list[dict[str, Any]]) -> None:
    """A tool run's verification: for each artifact, its calls against the HF model's on the same prompts."""
    for a in artifacts:
        t = a.get("tools")
        if not t:
            continue
        calls = t["calls_per_completion"]
        console.print(
            f"{a['name']}: tool calls match HF on {100 * t['call_match']:.0f}% of prompts, results on "
            f"{100 * t['result_match']:.0f}%; calls per completion {calls['hf']:.2f} HF / "
            f"{calls['artifact']:.2f} artifact",
            soft_wrap=True,
        )

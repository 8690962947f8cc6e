"""`grpo eval`'s verdict: one table of every checkpoint side by side, the paired differences that say
whether training worked, and the lines a user can quote.

- the table (report.md's top, and what the command prints): a row per checkpoint (base, base in its own
  chat template, SFT, GRPO, the placebo control, each GGUF), columns format %, accuracy by each rule, pass@1 /
  pass@N / maj@N (``--samples N``) and mean length: short headers, so it stays readable at 80 columns;
- the paired differences, in points with 95 % paired bootstrap intervals over prompts: SFT − base,
  GRPO − SFT, GRPO − control, and each GGUF against the checkpoint it was exported from;
- "GRPO added X points [lo, hi] beyond a placebo run of the same length" when a control attempt was scored
  (`grpo grpo --control …`), and the diversity-collapse line of :func:`cli.eval.passk.collapse_line`.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from cli.eval.stats import paired_bootstrap
from cli.run.rundir import RunDir

NA = "—"
SHORT = {"base": "base", "base-chat": "base-chat", "sft": "SFT", "grpo": "GRPO", "control": "control"}
# (later, earlier): what each stage added on the same prompts; GGUF rows pair with their source.
PAIRS = (("sft", "base"), ("grpo", "sft"), ("grpo", "control"))
RULES = (("correct", "accuracy"), ("correct_lenient", "last number"))
CONTROL_FILE = "control.json"  # <run>/grpo/control/control.json: what the placebo attempt was


def short(checkpoint: str) -> str:
    return SHORT.get(checkpoint, checkpoint)


def control_info(rd: RunDir) -> dict[str, Any] | None:
    """The placebo attempt's record (kind, attempt, steps), when `grpo grpo --control` saved one."""
    path = rd.grpo_dir / "control" / CONTROL_FILE
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def control_adapter(rd: RunDir) -> dict[str, Path]:
    """``{"control": grpo/control/adapter}`` when a placebo attempt saved one (`grpo grpo --control`)."""
    from cli.run.rundir import has_adapter

    path = rd.grpo_dir / "control" / "adapter"
    return {"control": path} if has_adapter(path) else {}


def per_prompt(samples: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    """Each checkpoint's per-prompt verdicts (``correct``, ``correct_lenient``) in row order, as 0/1."""
    out: dict[str, list[float]] = {}
    for s in samples:
        if s.get(key) is not None:
            out.setdefault(s["checkpoint"], []).append(float(s[key]))
    return out


def pairs_for(checkpoints: list[str]) -> list[tuple[str, str]]:
    """The (later, earlier) pairs present: the stage pairs, then each GGUF (``grpo@q4_k_m``) against its
    source checkpoint."""
    out = [(b, a) for b, a in PAIRS if a in checkpoints and b in checkpoints]
    out += [(c, c.partition("@")[0]) for c in checkpoints if "@" in c and c.partition("@")[0] in checkpoints]
    return out


def differences(samples: list[dict[str, Any]], sampled: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Paired differences (later − earlier, same prompts) of accuracy by the seed rule and the last number,
    and of pass@1 / pass@N / maj@N when sampled."""
    out = []
    for key, name in RULES:
        verdicts = per_prompt(samples, key)
        for b, a in pairs_for(list(verdicts)):
            if len(verdicts[a]) != len(verdicts[b]):
                continue
            diff, lo, hi = paired_bootstrap(verdicts[a], verdicts[b])
            out.append({"a": a, "b": b, "metric": name, "diff": round(diff, 4),
                        "ci95": [round(lo, 4), round(hi, 4)]})  # fmt: skip
    for d in (sampled or {}).get("paired") or []:
        out.append(dict(d))
    return out


def placebo_line(diffs: list[dict[str, Any]], control: dict[str, Any] | None) -> str | None:
    """The line a user can quote: what GRPO added beyond its placebo control (accuracy, seed rule)."""
    d = next((d for d in diffs if (d["a"], d["b"], d["metric"]) == ("control", "grpo", "accuracy")), None)
    if d is None:
        return None
    lo, hi = d["ci95"]
    kind = f" ({control['control']}" if control and control.get("control") else " ("
    n = control.get("steps") if control else None
    steps = f", {n} step{'' if n == 1 else 's'}" if n is not None else ""
    tail = f"{kind}{steps})" if kind != " (" or steps else ""
    verdict = "" if lo > 0 or hi < 0 else "; the interval holds 0: no evidence that RL did anything here"
    return (
        f"GRPO added {100 * d['diff']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] beyond a placebo run "
        f"of the same length{tail}{verdict}"
    )


def rows(results: list[dict[str, Any]], sampled: dict[str, Any] | None) -> tuple[list[str], list[list[str]]]:
    """The verdict table: its header and one row of strings per checkpoint."""
    by_stage = {r["checkpoint"]: r for r in (sampled or {}).get("results") or []}
    n = (sampled or {}).get("samples")
    header = ["model", "format", "seed", "math", "last"]
    if n:
        header += ["pass@1", f"pass@{n}", f"maj@{n}"]
    header += ["tokens"]

    def pct(value: Any) -> str:
        return NA if value is None else f"{100 * value:.1f}"

    table = []
    for r in results:
        row = [short(r["checkpoint"]), pct(r.get("format_compliance")), pct(r.get("accuracy")),
               pct(r.get("accuracy_math")), pct(r.get("accuracy_lenient"))]  # fmt: skip
        if n:
            s = by_stage.get(r["checkpoint"])
            row += [pct(s[m]["value"]) if s else NA for m in ("pass@1", f"pass@{n}", f"maj@{n}")]
        row.append(f"{r['mean_completion_tokens']:.0f}")
        table.append(row)
    return header, table


def _grid(header: list[str], body: list[list[str]], text: int = 1) -> list[str]:
    """A markdown table padded to line up in plain text; the first ``text`` columns left, numbers right."""
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]

    def line(cells: list[str]) -> str:
        parts = [
            c.ljust(w) if i < text else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 2)) if i < text else ("-" * (w + 1) + ":") for i, w in enumerate(widths)
    )
    rule += "|"
    return [line(header), rule, *(line(r) for r in body)]


def diff_table(diffs: list[dict[str, Any]]) -> list[str]:
    body = []
    for d in diffs:
        lo, hi = d["ci95"]
        body.append([f"{short(d['b'])} − {short(d['a'])}", d["metric"], f"{100 * d['diff']:+.1f}",
                     f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"])  # fmt: skip
    return _grid(["difference", "metric", "points", "95 % interval"], body, text=2) if body else []


def lines(verdict: dict[str, Any]) -> list[str]:
    """The one-line findings: the placebo line, the collapse line."""
    return [x for x in (verdict.get("placebo"), verdict.get("collapse")) if x]


def build(
    results: list[dict[str, Any]], samples: list[dict[str, Any]], sampled: dict[str, Any] | None,
    control: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    """report.json's ``verdict``: the table, the differences, the lines."""
    diffs = differences(samples, sampled)
    header, body = rows(results, sampled)
    return {
        "header": header,
        "rows": body,
        "names": "; ".join(f"{short(r['checkpoint'])} = {r['label']}" for r in results),
        "differences": diffs,
        "placebo": placebo_line(diffs, control),
        "collapse": (sampled or {}).get("collapse"),
        "control": control,
    }


LEGEND = (
    "format, seed, math, last: format compliance and accuracy by the seed rule, math_equal and the last "
    "number (%, greedy); pass@1, pass@k: unbiased pass@k over the samples (seed rule); maj: the most given "
    "answer is correct; tokens: mean completion length. Intervals: report.json, and the details below."
)


def markdown(verdict: dict[str, Any], title: str) -> str:
    out = [f"# {title}", "", *_grid(verdict["header"], verdict["rows"]), ""]
    if verdict.get("names"):
        out += [*textwrap.wrap(f"Rows: {verdict['names']}.", 80), ""]
    diffs = diff_table(verdict["differences"])
    if diffs:
        out += ["Paired differences (later − earlier, same prompts, paired bootstrap):", "", *diffs, ""]
    found = lines(verdict)
    if found:
        out += [*(f"**{x}**" for x in found), ""]
    out += [*textwrap.wrap(LEGEND, 80), "", "---", ""]
    return "\n".join(out)


def print_verdict(verdict: dict[str, Any], title: str) -> None:
    """The verdict as the command prints it: plain aligned columns (≤ 80 wide with up to 8 samples)."""
    from cli.common import console

    console.print(title, markup=False, highlight=False)
    for text in _grid(verdict["header"], verdict["rows"]):
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    if verdict.get("names"):
        console.print(f"rows: {verdict['names']}", markup=False, highlight=False, soft_wrap=True)
    diffs = diff_table(verdict["differences"])
    if diffs:
        console.print("paired differences (later − earlier, 95 % paired bootstrap over prompts):")
        for text in diffs:
            console.print(text, markup=False, highlight=False, soft_wrap=True)
    for x in lines(verdict):
        console.print(x, markup=False, highlight=False, soft_wrap=True)

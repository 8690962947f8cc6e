"""The learning issue's backend checks from one lease (2026-12-04, round 12): the figures learning-gpu.md
quotes for it, from the raw files in bench/results/backends-2026-12-04/.

- the IS ratio and per-token log-prob difference on the hf backend (TRL colocate) and the Unsloth backend
  (``fast_inference``, its compile off), step by step;
- the hf step after the LoRA-input fix against round 11's run at the same steps (same seed and settings, so
  the same prompts), phase by phase: steps 2, 3, 4 and 7 (1 starts the engine, 5 is under the profiler,
  6 pays for writing its trace). ``logprobs`` is the phase clock's sum of both log-prob passes (the
  loss's own included); ``trainer_s`` is the step less vLLM's generation;
- step 5's kernels by kind, this run against round 11's;
- the pad = eos runs (bench/h200_pad_eos.sh's summary);
- round 13 (bench/results/backends-2026-12-04b/, a second lease that day): the Unsloth backend compiled, its
  128-completion step split into 16 accumulation steps of 8 rows (8 chunks a scoring graph, 305d6b0), against
  round 12's run of the same prompts with Unsloth's compile off and the step whole: IS weighting, and each
  step's phases side by side (steps 1-4; step 5 sat under the profiler in both);
- round 14 (bench/results/backends-2026-12-04c/, a third lease): the Unsloth run as d30f34b's plan runs a
  128-completion step (compile off, the step whole, as the plan's start line says), against round 12's run of
  the same prompts: IS weighting and each step's phases (another machine: the same settings measured twice).

    python bench/backends_report.py [--json bench/learning-gpu.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RES = HERE / "results" / "backends-2026-12-04"
RES14 = HERE / "results" / "backends-2026-12-04c"
RES13 = HERE / "results" / "backends-2026-12-04b"
ROUND11 = HERE / "results" / "qwen-coder-10min"
SAME_STEPS = (2, 3, 4, 7)
PHASES = ("phase_generate_s", "phase_logprobs_s", "phase_loss_s", "phase_backward_s", "phase_rollout_s")


def grpo_rows(path: Path) -> dict[int, dict[str, Any]]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {r["step"]: r for r in rows if r.get("stage") == "grpo"}


def weighting(rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The IS ratio's per-step mean, its extremes (single tokens' weights under token_truncate, after the
    clamp, as TRL and Unsloth log them), the per-token difference."""
    mean = [r["sampling/importance_sampling_ratio/mean"] for r in rows.values()]
    diff = [r["sampling/sampling_logp_difference/mean"] for r in rows.values()]
    return {
        "steps": len(rows),
        "ratio_mean_range": [round(min(mean), 4), round(max(mean), 4)],
        "token_weight_min": round(min(r["sampling/importance_sampling_ratio/min"] for r in rows.values()), 3),
        "token_weight_max": round(max(r["sampling/importance_sampling_ratio/max"] for r in rows.values()), 3),
        "logp_diff_per_token_range": [round(min(diff), 4), round(max(diff), 4)],
        "logp_diff_per_token_mean": round(statistics.fmean(diff), 4),
    }


def same_steps(new: dict[int, dict[str, Any]], old: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Each phase at the same steps, and the median over steps of new / old."""
    out: dict[str, Any] = {"steps": list(SAME_STEPS), "per_step": {}}
    for s in SAME_STEPS:
        a, b = old[s], new[s]
        out["per_step"][s] = {
            "length": [round(a["completions/mean_length"]), round(b["completions/mean_length"])],
            "step_s": [round(a["step_seconds"], 2), round(b["step_seconds"], 2)],
            **{k.removeprefix("phase_").removesuffix("_s"): [round(a[k], 2), round(b[k], 2)] for k in PHASES},
            # all but vLLM's generation (which the fix does not touch, and which varies with the lengths)
            "trainer_s": [
                round(a["step_seconds"] - a["phase_generate_s"], 2),
                round(b["step_seconds"] - b["phase_generate_s"], 2),
            ],
        }
    per = out["per_step"].values()
    out["median_new_over_old"] = {
        key: round(statistics.median(p[key][1] / p[key][0] for p in per), 3)
        for key in ("step_s", "trainer_s", "generate", "logprobs", "loss", "backward")
    }
    out["median_step_s"] = [
        round(statistics.median(p["step_s"][0] for p in per), 2),
        round(statistics.median(p["step_s"][1] for p in per), 2),
    ]
    out["train_peak_gib"] = [old[4]["train_peak_gib"], new[4]["train_peak_gib"]]
    return out


def split_vs_eager(split: dict[int, dict[str, Any]], eager: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Round 13's compiled split steps against round 12's eager whole steps, step by step ([eager, split])."""
    steps = sorted(set(split) & set(eager))

    def pair(s: int, key: str) -> list[float]:
        return [round(eager[s][key], 2), round(split[s][key], 2)]

    per = {
        s: {
            "length": [
                round(eager[s]["completions/mean_length"]),
                round(split[s]["completions/mean_length"]),
            ],
            "step_s": pair(s, "step_seconds"),
            **{k.removeprefix("phase_").removesuffix("_s"): pair(s, k) for k in PHASES},
        }
        for s in steps
    }
    later = [s for s in steps if s >= 3]  # 1 compiles (split) or warms up (eager); 2 still warms eager
    return {
        "steps": steps,
        "per_step": per,
        "split_over_eager_steps_3_on": {
            key: round(statistics.median(per[s][key][1] / per[s][key][0] for s in later), 2)
            for key in ("step_s", "generate", "logprobs", "loss", "backward")
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures under the key backends_2026_12_04")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from qwen_coder_report import profile_kinds

    a, c, old = (
        grpo_rows(RES / "A_metrics.jsonl"),
        grpo_rows(RES / "C_nocompile_metrics.jsonl"),
        grpo_rows(ROUND11 / "A_metrics.jsonl"),
    )
    out = {
        "is_weighting": {"hf_trl_colocate": weighting(a), "unsloth_fast_inference_compile_off": weighting(c)},
        "hf_step_after_lora_input_fix_vs_round11": same_steps(a, old),
        "profile_step5": {
            "round11": profile_kinds(ROUND11 / "A_profile_step5.json"),
            "after_fix": profile_kinds(RES / "A_profile_step5.json"),
            "unsloth_compile_off": profile_kinds(RES / "C_nocompile_profile_step5.json"),
        },
        "unsloth_compile_off_steps_s": {s: round(r["step_seconds"], 2) for s, r in c.items()},
        "pad_eos": (RES / "pad_eos_summary.txt").read_text().splitlines(),
    }
    split = grpo_rows(RES13 / "C_split_metrics.jsonl")
    out["round13"] = {
        "is_weighting_unsloth_compiled_split": weighting(split),
        "unsloth_split_vs_compile_off": split_vs_eager(split, c),
        "trainer_args": {
            k: json.loads((RES13 / "C_split_trainer_args.json").read_text())[k]
            for k in (
                "per_device_train_batch_size",
                "gradient_accumulation_steps",
                "steps_per_generation",
                "unsloth_grpo_mini_batch",
                "unsloth_logit_chunk_multiplier",
            )
        },  # fmt: skip
        "pad_eos": (RES13 / "pad_eos_summary.txt").read_text().splitlines(),
    }
    eager = grpo_rows(RES14 / "C_eager_metrics.jsonl")
    out["round14"] = {
        "is_weighting_unsloth_plan_compile_off": weighting(eager),
        "plan_run_vs_round12_compile_off": split_vs_eager(eager, c),
    }
    # per step [round 12, round 14]; the ratio 14 / 12
    same = out["round14"]["plan_run_vs_round12_compile_off"]
    same["round14_over_round12_steps_3_on"] = same.pop("split_over_eager_steps_3_on")
    print(json.dumps(out, indent=1))
    if args.json:
        data = json.loads(args.json.read_text()) if args.json.exists() else {}
        data["backends_2026_12_04"] = out
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

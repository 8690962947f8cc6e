"""cli/train/plan.py and cli/run/budget.py: `grpo grpo` decides everything once, before a model loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, cli_env, fresh_copy

from cli.common import GrpoError
from cli.config.schema import Config
from cli.run.budget import RolloutBudget


def test_budget_is_one_rule() -> None:
    cfg = Config()
    cfg.max_seq_length = 1024
    b = RolloutBudget.of(cfg, {"max_prompt_length": 200})
    assert (b.prompt, b.completion, b.sequences) == (200, 824, cfg.grpo.gens)  # what the cut leaves
    cfg.grpo.max_completion_length, cfg.grpo.batch_size, cfg.grpo.grad_accum = 300, 8, 2
    b = RolloutBudget.of(cfg, {"max_prompt_length": 200})
    # steps_per_generation defaults to grad_accum: two batches per rollout
    assert (b.completion, b.sequences, b.kv_tokens) == (300, 16, 16 * 500)
    assert RolloutBudget.of(cfg, {}).prompt == 512  # no cut recorded: half the context
    assert RolloutBudget.of(cfg, {}, completion=64).completion == 64  # a command's own flag wins
    cfg.grpo.max_completion_length = None
    with pytest.raises(
        GrpoError, match="leaves no room for completions after prompts of 1024 tokens.*--max-new"
    ):
        RolloutBudget.of(cfg, {"max_prompt_length": 1024}, flag="--max-new-tokens")


def test_plan_is_made_without_torch_and_maps_our_names_to_trl(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    code = f"""
import sys
from cli.config.schema import resolve
from cli.run.rundir import RunDir
from cli.train.distributed import Plan
from cli.train.plan import make_plan
cfg = resolve(overrides={{"grpo.min_p": 0.05, "grpo.vllm_is_mode": "sequence_truncate", "backend": "hf"}})
plan = make_plan(RunDir({str(run)!r}), cfg, Plan(), resume=False, allow_dora_merge=False)
assert "torch" not in sys.modules, "the plan imported torch"
args = plan.trl_args("<|endoftext|>")
print(plan.backend, plan.use_vllm, plan.budget.prompt, args["min_p"], args["max_completion_length"],
      args["optim"], args["bf16"], "use_cpu" in args, "vllm_importance_sampling_mode" in args,
      plan.support)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    words = out.stdout.split()
    stats = yaml.safe_load((run / "data" / "stats.json").read_text())
    cut = int(stats["max_prompt_length"])
    want = ["hf", "False", str(cut), "0.05", str(2048 - cut), "adamw_torch", "False", "True", "False"]
    assert words[:9] == want
    # On a CPU the hf backend scores log-probs with our head (TRL's Triton kernel has no CPU driver).
    assert "Support(temperature=1.0, min_p=0.0" in out.stdout


def test_dry_run_prints_the_plan(prepped: Path, tmp_path: Path, runner) -> None:  # noqa: ANN001
    from helpers import dry_run

    run = fresh_copy(prepped, tmp_path)
    printed = dry_run(runner, "grpo", "--run", str(run), "--gens", "4", "--max-completion-length", "32")
    plan = printed["plan"]
    assert plan["budget"]["completion_tokens"] == 32 and plan["budget"]["sequences_per_rollout"] == 4
    assert plan["rollouts"] == "HF generate" and plan["importance_sampling"] is None
    assert set(plan["rewards"]) == {r["name"] for r in printed["grpo"]["rewards"]}
    # No data yet: the plan says why instead of failing the dry run.
    empty = dry_run(runner, "grpo", "--run", str(tmp_path / "new"))
    assert str(empty["plan"]).startswith("none yet:") and "grpo prep" in empty["plan"]


def test_importance_sampling_mode_reaches_trl_on_both_backends(prepped: Path, tmp_path: Path) -> None:
    """auto: per-token truncation in [0.5, 2] on the hf backend and under Unsloth alike (both forms cost the
    same under Unsloth: docs/importance-sampling.md); an explicit mode is passed as it is; off is off."""
    import dataclasses

    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan
    from cli.train.plan import is_mode, make_plan

    assert Config().grpo.vllm_is_mode == "auto"
    assert is_mode("auto") == "token_truncate"
    assert is_mode("token_mask") == "token_mask" and is_mode("off") == "off"

    run = fresh_copy(prepped, tmp_path)
    seen = {}
    for backend, mode in (("hf", "auto"), ("unsloth", "auto"), ("unsloth", "token_mask"), ("hf", "off")):
        cfg = resolve(overrides={"backend": "hf", "grpo.vllm_is_mode": mode})
        plan = make_plan(RunDir(run), cfg, Plan(), resume=False, allow_dora_merge=False)
        # The GPU's plan, as a CPU can build it: vLLM rollouts on the chosen backend.
        share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)
        plan = dataclasses.replace(plan, backend=backend, use_vllm=True, support=None, vllm=share)
        args = plan.trl_args("<|endoftext|>")
        seen[backend, mode] = (
            args["vllm_importance_sampling_correction"],
            args.get("vllm_importance_sampling_mode"),
            args.get("vllm_importance_sampling_clip_min"),
            args.get("vllm_importance_sampling_clip_max"),
            (plan.describe()["importance_sampling"] or {}).get("mode"),
        )
    assert seen["hf", "auto"] == (True, "token_truncate", 0.5, 2.0, "token_truncate")
    assert seen["unsloth", "auto"] == (True, "token_truncate", 0.5, 2.0, "token_truncate")
    assert seen["unsloth", "token_mask"][1] == "token_mask"
    assert seen["hf", "off"] == (False, None, None, None, None)


def test_score_rollout_support_switches_unsloths_kept_set_scoring_too(prepped: Path, tmp_path: Path) -> None:
    """grpo.score_rollout_support is one switch for both backends: off, Unsloth is told to score the full
    vocabulary (UNSLOTH_GRPO_TRUNCATED_SUPPORT=0, set by the stage before the trainer is built); on (the
    default), Unsloth keeps its automatic kept-set scoring and nothing is set; the hf backend sets nothing."""
    import dataclasses

    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan
    from cli.train.plan import UNSLOTH_KEPT_SET_ENV, make_plan

    run = fresh_copy(prepped, tmp_path)
    share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)
    seen = {}
    for backend, score in (("unsloth", True), ("unsloth", False), ("hf", False)):
        cfg = resolve(overrides={"backend": "hf", "grpo.score_rollout_support": score})
        plan = make_plan(RunDir(run), cfg, Plan(), resume=False, allow_dora_merge=False)
        plan = dataclasses.replace(plan, backend=backend, use_vllm=True, support=None, vllm=share)
        seen[backend, score] = (plan.backend_env(), plan.describe()["trainer_logprobs"])
    assert seen["unsloth", False] == ({UNSLOTH_KEPT_SET_ENV: "0"}, "Unsloth's own, over the full vocabulary")
    assert seen["unsloth", True][0] == {} and "kept set" in seen["unsloth", True][1]
    assert seen["hf", False][0] == {}
    # HF generate has no rollout distribution to match: nothing is set under Unsloth either
    no_vllm = dataclasses.replace(plan, backend="unsloth", use_vllm=False, vllm=None)
    assert no_vllm.backend_env() == {}


def test_unsloth_scores_kept_sets_in_small_compiled_graphs(prepped: Path, tmp_path: Path) -> None:
    """Under Unsloth with truncated vLLM rollouts, the plan keeps each of Unsloth's compiled kept-set scoring
    graphs at SCORING_CHUNKS chunks (it unrolls rows x multiplier chunks: 128 rows at its default 4 did not
    finish compiling in 6.6 min on the H200). The old-logprob pass gets an even count of small
    mini-batches; the loss pass gets small device steps, with more accumulation steps so that the optimizer
    step keeps its completions; long completions get more chunks per row and fewer rows. Nothing changes
    where Unsloth takes its fused path or another backend runs."""
    import dataclasses

    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan
    from cli.train.plan import make_plan
    from cli.train.unsloth_scoring import SCORING_CHUNKS, scoring_layout

    run = fresh_copy(prepped, tmp_path)
    share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)

    def layout(backend: str = "unsloth", vllm: bool = True, **grpo: object) -> tuple[int, ...] | None:
        over = {"backend": "hf", "grpo.gens": 4, **{f"grpo.{k}": v for k, v in grpo.items()}}
        cfg = resolve(overrides=over)
        plan = make_plan(RunDir(run), cfg, Plan(), resume=False, allow_dora_merge=False)
        plan = dataclasses.replace(
            plan, backend=backend, use_vllm=vllm, support=None, vllm=share if vllm else None
        )
        args, scoring = plan.trl_args("<|endoftext|>"), plan.unsloth_scoring()
        g = cfg.grpo
        # The optimizer step and the rollout keep their completions whatever the split
        assert args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] == (
            g.per_device_batch * g.grad_accum
        )
        spg = args.get("steps_per_generation", args["gradient_accumulation_steps"])
        assert args["per_device_train_batch_size"] * spg == g.per_device_batch * g.rollout_steps
        if scoring is None:
            assert not any(k.startswith("unsloth_") for k in args)
            assert plan.describe()["unsloth_scoring"] is None
            assert args["per_device_train_batch_size"] == g.per_device_batch
            return None
        assert args["unsloth_grpo_mini_batch"] == scoring.mini_batches
        assert args["unsloth_logit_chunk_multiplier"] == scoring.multiplier
        assert plan.describe()["unsloth_scoring"]["rows"] == scoring.rows
        assert scoring.rows * scoring.multiplier <= SCORING_CHUNKS
        steps = (args["per_device_train_batch_size"], args["gradient_accumulation_steps"])
        return (*steps, scoring.mini_batches, scoring.multiplier)

    assert SCORING_CHUNKS == 8
    # the 1.5B run: 128 completions of <= 384 tokens: 16 accumulation steps of 8 rows, one chunk per row,
    # old log-probs in 16 mini-batches of 8
    assert layout(batch_size=128, min_p=0.1, max_completion_length=384) == (8, 16, 16, 1)
    assert layout(batch_size=12, min_p=0.1, max_completion_length=384) == (6, 2, 2, 1)  # 6 rows: even split
    assert layout(batch_size=4, min_p=0.1, max_completion_length=384) == (4, 1, 1, 1)
    assert scoring_layout(128, 1, 384).describe(128) == (
        "Unsloth scores the rollouts' kept set in compiled graphs of ≤ 8 chunks: each device step of 128 "
        "completions runs as 16 accumulation steps of 8 (the same optimizer step); old log-probs in 16 "
        "mini-batches"
    )
    one = scoring_layout(4, 1, 384).describe(4)
    assert one.endswith("device steps of 4 completions; old log-probs in one pass")
    assert layout(batch_size=104, top_k=20, min_p=0.0, max_completion_length=384) == (8, 13, 13, 1)
    # 36 rows: 6 a step; old log-probs in 6 mini-batches of 6, not 8, 8, 8, 8, 4
    assert layout(batch_size=36, top_p=0.9, min_p=0.0, max_completion_length=384) == (6, 6, 6, 1)
    # already accumulating: the split multiplies it; rollouts of 2 steps: old log-probs over both
    assert layout(batch_size=16, grad_accum=2, min_p=0.1, max_completion_length=384) == (8, 4, 4, 1)
    # 4,096-token completions: 4 chunks a row, so 2 rows a step
    assert layout(batch_size=16, min_p=0.1, max_completion_length=4096) == (2, 8, 8, 4)
    # Untruncated rollouts (Unsloth's fused scorer), its kept-set scoring off, HF generate, the hf backend
    assert layout(batch_size=128, min_p=0.0) is None
    assert layout(batch_size=128, min_p=0.1, score_rollout_support=False) is None
    assert layout(batch_size=128, min_p=0.1, vllm=False) is None
    assert layout("hf", batch_size=128, min_p=0.1) is None


def test_an_unsloth_that_drops_a_field_refuses_with_one_line() -> None:
    from types import SimpleNamespace

    from cli.train.stages import kept_unsloth_args

    args = {"unsloth_grpo_mini_batch": 16, "min_p": 0.1}
    kept_unsloth_args(SimpleNamespace(unsloth_grpo_mini_batch=16, min_p=0.1), args)  # kept: nothing said
    with pytest.raises(
        GrpoError, match=r"does not keep unsloth_grpo_mini_batch: install the Unsloth version"
    ):
        kept_unsloth_args(SimpleNamespace(min_p=0.1), args)
    # Unsloth resets a device batch it finds indivisible by the group size: the plan's split must survive
    split = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 16}
    reset = SimpleNamespace(per_device_train_batch_size=16, gradient_accumulation_steps=16)
    with pytest.raises(GrpoError, match=r"does not keep per_device_train_batch_size: install"):
        kept_unsloth_args(reset, split)

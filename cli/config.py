"""Typed run configuration: defaults < run's saved config < preset < --config YAML < flags.

The resolved config is written to ``<run>/config.yaml`` by each stage, so later stages need no
``--model``: the model chosen at the first stage is remembered by the run.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from cli.common import GrpoError

# Seed 000's random seed (``random_state = 3407``): the default of every seeded step (data split, LoRA init,
# sampling, the tiny model's weights).
SEED = 3407

SEED_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class LoraConfig:
    r: int = 16
    alpha: int = 16
    dropout: float = 0.0
    rslora: bool = True
    # DoRA costs ~12x per GRPO step under Unsloth (DESIGN.md) and vLLM cannot serve it: off by default.
    dora: bool = False
    target_modules: list[str] = field(default_factory=lambda: list(SEED_TARGETS))
    gradient_checkpointing: str = "unsloth"


@dataclass
class PrepConfig:
    dataset: str = "gsm8k"
    source: str | None = None  # local .jsonl/.parquet/.csv instead of the hub
    split: str | None = None  # hub split; None -> the dataset's own (MATH-500: test; openmath-mini: cot)
    limit: int | None = None
    eval_size: int = 50  # held-out prompts for `grpo eval` / export verification
    prompt_quantile: float = 0.9  # seed 000: keep prompts up to the 90th-percentile token length
    keep_non_numeric: bool = False  # seed 000 keeps numeric answers only; MATH-style answers need this
    seed: int = SEED


@dataclass
class SFTConfig:
    max_steps: int = 60
    epochs: float | None = None  # seed 003 trains 2 epochs; max_steps wins when both are set
    learning_rate: float = 2e-4
    batch_size: int = 2
    grad_accum: int = 4
    warmup_steps: int = 5
    packing: bool = True
    num_examples: int = 59  # seed 000: ~59 format examples
    # keep format examples up to this many tokens (whole chat); 0 = max_seq_length/2 as in seed 000.
    # Short worked solutions teach a small model to close the tags before a generation budget runs out.
    max_example_tokens: int = 0
    logging_steps: int = 5
    optim: str = "auto"  # adamw_8bit where bitsandbytes works, else adamw_torch
    weight_decay: float = 0.0
    save_steps: int = 0


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
    gens: int = 4  # group size G (num_generations)
    max_steps: int = 100
    learning_rate: float = 5e-6
    weight_decay: float = 0.001
    warmup_ratio: float = 0.1
    lr_scheduler: str = "linear"
    optim: str = "auto"
    temperature: float = 1.0
    min_p: float = 0.1
    top_p: float = 1.0
    top_k: int | None = None
    beta: float = 0.0
    loss_type: str = "dapo"
    # PPO clip range. Passed explicitly so that every backend trains the same objective: Unsloth turns an
    # explicit loss_type "dapo" into the DAPO paper's clip-higher (0.28) and masked truncations unless
    # told otherwise, while TRL keeps these defaults (what seed 000, which names no loss_type, ran).
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None: same as epsilon; DAPO paper: 0.28
    mask_truncated_completions: bool = False  # DAPO paper: true (truncated completions get no loss)
    scale_rewards: str = "group"
    batch_size: int | None = None  # per-device prompts*gens; None -> gens (one prompt per step)
    grad_accum: int = 1
    max_prompt_length: int | None = None  # None -> prep's p90 cut
    max_completion_length: int | None = None  # None -> max_seq_length - max_prompt_length
    save_steps: int = 50
    logging_steps: int = 1
    rewards: list[RewardSpec] = field(default_factory=_seed000_rewards)
    report_to: str = "none"  # tensorboard|wandb|swanlab|none
    vllm: str = "auto"  # auto|on|off: colocated vLLM through Unsloth's fast_inference
    vllm_server: str = ""  # HOST:PORT of a `trl vllm-serve` (grpo serve) server: TRL's server mode
    # vLLM's share of the GPU: auto sizes it from the rollout (weights + KV + margin); a fraction overrides.
    gpu_memory_utilization: float | str = "auto"
    max_grad_norm: float = 1.0


@dataclass
class Config:
    model: str = "tiny"
    backend: str = "auto"  # auto|unsloth|hf
    format: Any = "seed000"  # preset name or a mapping of FormatSpec fields
    preset: str | None = None
    seed: int = SEED
    max_seq_length: int = 2048
    load_in_4bit: bool = False
    dtype: str = "auto"
    lora: LoraConfig = field(default_factory=LoraConfig)
    prep: PrepConfig = field(default_factory=PrepConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format_spec(self):  # -> py_rewards.FormatSpec
        from py_rewards.spec import get_spec

        try:
            return get_spec(self.format)
        except (ValueError, TypeError) as exc:
            raise GrpoError(f"config 'format': {exc}") from None


# Seed presets. Only what differs from the defaults above.
PRESETS: dict[str, dict[str, Any]] = {
    # Seed 000: Qwen3-4B-Base two-stage; rsLoRA + DoRA r=16; G=4; DAPO.
    "qwen3-4b": {
        "model": "unsloth/Qwen3-4B-Base",
        "format": "seed000",
        "max_seq_length": 2048,
        "lora": {"r": 16, "alpha": 16, "rslora": True, "dora": True},
        "prep": {"dataset": "dapo"},
        "sft": {"max_steps": 60, "learning_rate": 2e-4, "batch_size": 2, "grad_accum": 4, "warmup_steps": 5},
        "grpo": {
            "gens": 4,
            "max_steps": 100,
            "learning_rate": 5e-6,
            "weight_decay": 0.001,
            "warmup_ratio": 0.1,
            "lr_scheduler": "linear",
            "temperature": 1.0,
            "min_p": 0.1,
        },
    },
    # Seed 001: Llama-3.2-3B-Instruct; r=64, alpha=128, rsLoRA + DoRA; <<..>>/\boxed{} format; cosine.
    "llama3.2-3b": {
        "model": "unsloth/Llama-3.2-3B-Instruct",
        "format": "seed001",
        "max_seq_length": 2048,
        "lora": {"r": 64, "alpha": 128, "rslora": True, "dora": True},
        "prep": {"dataset": "openr1"},
        "sft": {"max_steps": 10, "learning_rate": 5e-5, "batch_size": 2, "grad_accum": 4},
        "grpo": {
            "gens": 4,
            "max_steps": 500,
            "learning_rate": 5e-6,
            "weight_decay": 0.001,
            "warmup_ratio": 0.1,
            "lr_scheduler": "cosine",
            "temperature": 1.0,
            "min_p": 0.1,
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
        "format": "seed000",
        "max_seq_length": 2048,
        "lora": {"r": 32, "alpha": 64, "rslora": False, "dora": False},
        "prep": {"dataset": "dapo"},
        "sft": {"max_steps": 0, "epochs": 2, "learning_rate": 2e-4, "batch_size": 1, "grad_accum": 1},
        "grpo": {
            "gens": 4,
            "max_steps": 100,
            "learning_rate": 5e-6,
            "weight_decay": 0.01,
            "warmup_ratio": 0.1,
            "lr_scheduler": "linear",
            "temperature": 1.0,
            "save_steps": 100,
            "report_to": "swanlab",
            "gpu_memory_utilization": 0.7,
        },
    },
}


_SECTIONS: dict[str, type] = {"lora": LoraConfig, "prep": PrepConfig, "sft": SFTConfig, "grpo": GRPOConfig}


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
    out = []
    for item in value or []:
        if isinstance(item, RewardSpec):
            out.append(item)
        elif isinstance(item, str):
            name, _, weight = item.strip().partition("=")
            out.append(RewardSpec(name.strip(), float(weight) if weight else 1.0))
        elif isinstance(item, Mapping) and "name" in item:
            out.append(RewardSpec(str(item["name"]), float(item.get("weight", 1.0))))
        else:
            raise GrpoError(f"bad reward entry {item!r}: use a name, 'name=weight' or {{name:, weight:}}")
    return out


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise GrpoError(f"config file not found: {path}") from None
    except OSError as exc:
        raise GrpoError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
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


def validate(cfg: Config) -> None:
    if cfg.backend not in ("auto", "unsloth", "hf"):
        raise GrpoError(f"unknown backend {cfg.backend!r} (choose unsloth, hf or auto)")
    if cfg.grpo.gens < 2:
        raise GrpoError("--gens must be at least 2: GRPO compares completions within a group")
    if cfg.grpo.report_to not in ("none", "tensorboard", "wandb", "swanlab"):
        raise GrpoError(f"unknown --report-to {cfg.grpo.report_to!r} (tensorboard, wandb, swanlab or none)")
    if cfg.grpo.vllm not in ("auto", "on", "off"):
        raise GrpoError(f"grpo.vllm must be auto, on or off, not {cfg.grpo.vllm!r}")
    from cli.training.gpu_memory import parse_utilization

    parse_utilization(cfg.grpo.gpu_memory_utilization)
    if not 0 < cfg.prep.prompt_quantile <= 1:
        raise GrpoError("prep.prompt_quantile must be in (0, 1]")
    if cfg.lora.r <= 0:
        raise GrpoError("lora.r must be positive")
    _check_ranges(cfg)
    if cfg.sft.max_example_tokens < 0:
        raise GrpoError("sft.max_example_tokens must be 0 (max_seq_length/2) or positive")
    cfg.format_spec()  # raises on a bad format section


def _check_ranges(cfg: Config) -> None:
    """Values that type-check but make no sense: refused with the key, before anything runs."""
    g, t, lora = cfg.grpo, cfg.sft, cfg.lora
    rules: list[tuple[str, Any, bool, str]] = [
        ("max_seq_length", cfg.max_seq_length, cfg.max_seq_length >= 16, "at least 16"),
        ("grpo.max_steps", g.max_steps, g.max_steps >= 1, "at least 1"),
        ("grpo.learning_rate", g.learning_rate, g.learning_rate > 0, "positive"),
        ("grpo.temperature", g.temperature, g.temperature > 0, "positive"),
        ("grpo.min_p", g.min_p, 0 <= g.min_p <= 1, "in [0, 1]"),
        ("grpo.top_p", g.top_p, 0 < g.top_p <= 1, "in (0, 1]"),
        ("grpo.top_k", g.top_k, g.top_k is None or g.top_k >= 0, "0 (off) or more"),
        ("grpo.beta", g.beta, g.beta >= 0, "0 or more"),
        ("grpo.epsilon", g.epsilon, g.epsilon > 0, "positive"),
        ("grpo.epsilon_high", g.epsilon_high, g.epsilon_high is None or g.epsilon_high > 0, "positive"),
        ("grpo.warmup_ratio", g.warmup_ratio, 0 <= g.warmup_ratio < 1, "in [0, 1)"),
        ("grpo.weight_decay", g.weight_decay, g.weight_decay >= 0, "0 or more"),
        ("grpo.grad_accum", g.grad_accum, g.grad_accum >= 1, "at least 1"),
        ("grpo.batch_size", g.batch_size, g.batch_size is None or g.batch_size >= 1, "at least 1"),
        ("grpo.save_steps", g.save_steps, g.save_steps >= 0, "0 (no checkpoints) or more"),
        ("grpo.logging_steps", g.logging_steps, g.logging_steps >= 1, "at least 1"),
        ("grpo.max_grad_norm", g.max_grad_norm, g.max_grad_norm > 0, "positive"),
        (
            "grpo.max_completion_length",
            g.max_completion_length,
            g.max_completion_length is None or g.max_completion_length >= 1,
            "at least 1",
        ),
        (
            "grpo.max_prompt_length",
            g.max_prompt_length,
            g.max_prompt_length is None or g.max_prompt_length >= 1,
            "at least 1",
        ),
        ("sft.max_steps", t.max_steps, t.max_steps >= 0, "0 (use sft.epochs) or more"),
        ("sft.epochs", t.epochs, t.epochs is None or t.epochs > 0, "positive"),
        ("sft.learning_rate", t.learning_rate, t.learning_rate > 0, "positive"),
        ("sft.batch_size", t.batch_size, t.batch_size >= 1, "at least 1"),
        ("sft.grad_accum", t.grad_accum, t.grad_accum >= 1, "at least 1"),
        ("sft.warmup_steps", t.warmup_steps, t.warmup_steps >= 0, "0 or more"),
        ("sft.num_examples", t.num_examples, t.num_examples >= 1, "at least 1"),
        ("sft.logging_steps", t.logging_steps, t.logging_steps >= 1, "at least 1"),
        ("lora.alpha", lora.alpha, lora.alpha > 0, "positive"),
        ("lora.dropout", lora.dropout, 0 <= lora.dropout < 1, "in [0, 1)"),
        ("prep.eval_size", cfg.prep.eval_size, cfg.prep.eval_size >= 0, "0 or more"),
        ("prep.limit", cfg.prep.limit, cfg.prep.limit is None or cfg.prep.limit >= 1, "at least 1"),
    ]
    for key, value, ok, want in rules:
        if not ok:
            raise GrpoError(f"config {key!r} must be {want}, not {value!r}")
    if t.max_steps == 0 and t.epochs is None:
        raise GrpoError("config 'sft.max_steps' is 0: set sft.epochs, or a number of steps")


def to_yaml(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True)

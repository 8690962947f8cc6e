"""Plain Unsloth + TRL GRPO (no `grpo` CLI): step time, peak GPU memory and reward time share, as JSON.

    python bench/gpu/make_random_model.py --out /tmp/qwen3-4b-random
    python bench/gpu/h200_grpo_plain.py --model /tmp/qwen3-4b-random --steps 10            # G=8 x 1024 tokens
    python bench/gpu/h200_grpo_plain.py --model /tmp/qwen3-4b-random --gens 4 --completion-len 256 --steps 10

The same configuration through the CLI (it reports s/step, peak GiB and reward time in
<run>/logs/metrics.jsonl and its final summary line):

    grpo prep gsm8k --model /tmp/qwen3-4b-random --run runs/bench
    grpo grpo --run runs/bench --gens 8 --max-completion-length 1024 --max-steps 10

Defaults are the seed-000 GRPO settings at the sizes of docs/design-facts.md: LoRA r=16 (alpha 16,
rsLoRA, no DoRA) on q/k/v/o/gate/up/down, G=8 completions of 1024 tokens for one ~128-token prompt
per step, lr 5e-6, temperature 1.0, min_p 0.1, 8-bit AdamW. A random-weight model rarely samples EOS;
``--force-length`` (default on) also sets a minimum length so every completion is exactly
``--completion-len`` tokens. vLLM rollouts (Unsloth ``fast_inference``) are used when vLLM is
installed, unless ``--no-vllm``. Per step it prints one JSON line; at the end one JSON summary:
``{"s_per_step": …, "first_step_s": …, "peak_gib": …, "reward_share": …}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
WORDS = (
    "a farmer has some apples and sells half of them at the market then buys twelve more how many "
    "apples does the farmer have now if each basket holds seven apples and there are nine baskets"
).split()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model", required=True, help="HF folder or hub id (e.g. bench/gpu/make_random_model.py output)"
    )
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--gens", type=int, default=8, help="G, completions per prompt")
    p.add_argument("--prompts-per-step", type=int, default=1)
    p.add_argument("--completion-len", type=int, default=1024)
    p.add_argument("--prompt-len", type=int, default=128, help="prompt tokens (approximately)")
    p.add_argument(
        "--prompts-from",
        type=Path,
        default=None,
        help="a prepped run directory: the prompts `grpo grpo` trains on there (its data, within prep's "
        "prompt cut) instead of the synthetic ones, so the pair runs the same prompts",
    )
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=None, help="default: = r")
    p.add_argument("--no-rslora", action="store_true")
    p.add_argument("--dora", action="store_true", help="DoRA (~12x slower: docs/design-facts.md)")
    p.add_argument("--lr", type=float, default=5e-6)
    p.add_argument("--max-seq-length", type=int, default=2048)
    p.add_argument("--no-vllm", action="store_true", help="HF generate even when vLLM is installed")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.6)
    p.add_argument(
        "--vllm-is",
        default="token_truncate:0.5:2",
        help="TRL's vLLM importance-sampling correction as MODE:MIN:MAX, or off (Unsloth's own default). "
        "The default is what `grpo grpo` passes (grpo.vllm_is_mode: auto), so the pair "
        "compares like with like: the correction costs an extra log-prob pass",
    )
    p.add_argument("--force-length", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--phases",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time generation, weight hand-off, rewards, log-prob passes and backward per step",
    )
    p.add_argument("--gradient-checkpointing", default="unsloth")
    p.add_argument("--out", type=Path, default=Path("outputs/bench_grpo_plain"))
    return p.parse_args(argv)


def _timed(base: type, phases: Any) -> type:
    """``base`` with its rollout, generation, rewards, log-prob passes, loss and step timed by ``phases``."""
    names = {
        "_generate_and_score_completions": "rollout",
        "_generate": "generate",
        "_calculate_rewards": "rewards",
        "_get_per_token_logps_and_entropies": "logprobs",
        "compute_loss": "loss",
        "training_step": "train_step",
    }

    def timed(name: str, phase: str) -> Any:
        def method(self: Any, *a: Any, **kw: Any) -> Any:
            with phases.timed(phase):
                return getattr(base, name)(self, *a, **kw)

        return method

    return type("TimedGRPOTrainer", (base,), {n: timed(n, p) for n, p in names.items()})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    use_vllm = not args.no_vllm and importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()
    if use_vllm:
        os.environ.setdefault("UNSLOTH_VLLM_STANDBY", "1")
    # Unsloth first: it patches transformers/TRL when imported.
    from unsloth import FastLanguageModel  # noqa: I001
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    sys.path.insert(0, str(REPO))
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    kwargs = {}
    if use_vllm:
        kwargs = {
            "fast_inference": True,
            "max_lora_rank": args.lora_r,
            "gpu_memory_utilization": args.gpu_memory_utilization,
        }
    t_load = time.perf_counter()
    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=args.model, max_seq_length=args.max_seq_length, dtype=None, load_in_4bit=False, **kwargs
    )
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
    model = FastLanguageModel.get_peft_model(
        model,
        r=args.lora_r,
        lora_alpha=args.lora_alpha or args.lora_r,
        target_modules=TARGETS,
        use_rslora=not args.no_rslora,
        use_dora=args.dora,
        use_gradient_checkpointing=args.gradient_checkpointing,
        random_state=3407,
    )
    load_s = time.perf_counter() - t_load
    tokenizer.chat_template = spec.chat_template()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    # Prompts of ~prompt_len tokens (system prompt + a wordy question), all different.
    def prompt(i: int) -> list[dict[str, str]]:
        words: list[str] = [str(i)]
        while True:
            msgs = spec.messages(" ".join(words) + "?")
            text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            if len(tokenizer(text, add_special_tokens=False)["input_ids"]) >= args.prompt_len:
                return msgs
            words.append(WORDS[(len(words) + i) % len(WORDS)])

    n_prompts = args.steps * args.prompts_per_step + 8
    if args.prompts_from is not None:
        # the prompts `grpo grpo` trains on, by its own code: the run's rows within prep's cut (the p90)
        from cli.run import RunDir, read_stats, run_config
        from cli.train import grpo_dataset

        rd = RunDir(args.prompts_from)
        cut = int(read_stats(rd)["max_prompt_length"])
        dataset, _ = grpo_dataset(run_config(rd), rd, tokenizer, cut)
    else:
        dataset = Dataset.from_list([{"prompt": prompt(i), "answer": str(i)} for i in range(n_prompts)])

    reward_time = [0.0]
    rewards = _rewards(spec, reward_time)

    gen_kwargs: dict = {}
    vllm_kwargs: dict = {}
    if use_vllm:
        from vllm import SamplingParams

        vllm_kwargs["vllm_sampling_params"] = SamplingParams(
            min_p=0.1,
            top_p=1.0,
            top_k=-1,
            seed=3407,
            stop=[tokenizer.eos_token],
            include_stop_str_in_output=True,
            # vLLM checks min_tokens against max_tokens when the params are built (Unsloth sets the real
            # max_tokens from max_completion_length later).
            **(
                {"min_tokens": args.completion_len, "max_tokens": args.completion_len}
                if args.force_length
                else {}
            ),
        )
        vllm_kwargs["use_vllm"] = True
        if args.vllm_is == "off":
            vllm_kwargs["vllm_importance_sampling_correction"] = False
        else:
            mode, low, high = args.vllm_is.split(":")
            vllm_kwargs.update(
                vllm_importance_sampling_correction=True,
                vllm_importance_sampling_mode=mode,
                vllm_importance_sampling_clip_min=float(low),
                vllm_importance_sampling_clip_max=float(high),
            )
    elif args.force_length:
        gen_kwargs["min_new_tokens"] = args.completion_len

    cuda = torch.cuda.is_available()
    bf16 = cuda and model.dtype == torch.bfloat16
    config = GRPOConfig(
        output_dir=str(args.out),
        learning_rate=args.lr,
        weight_decay=0.001,
        warmup_steps=0.1,
        lr_scheduler_type="linear",
        optim="adamw_8bit" if cuda else "adamw_torch",
        logging_steps=1,
        per_device_train_batch_size=args.gens * args.prompts_per_step,
        gradient_accumulation_steps=1,
        num_generations=args.gens,
        max_completion_length=args.completion_len,
        temperature=1.0,
        min_p=0.1,
        max_steps=args.steps,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        bf16=bf16,
        fp16=cuda and not bf16,
        generation_kwargs=gen_kwargs or None,
        **vllm_kwargs,
    )
    steps: list[dict] = []
    # The same phase clock as `grpo grpo` (cli/train/phases.py) around the same trainer methods: a plain
    # subclass that only times, it changes nothing.
    sys.path.insert(0, str(REPO))
    from cli.train import PhaseTimes

    phases = PhaseTimes(PhaseTimes.cuda_sync()) if args.phases else None
    trainer_cls = _timed(GRPOTrainer, phases) if phases is not None else GRPOTrainer
    trainer = trainer_cls(
        model=model, processing_class=tokenizer, reward_funcs=rewards, args=config, train_dataset=dataset
    )
    # What the trainer runs with (after Unsloth's changes), beside `grpo grpo`'s own record of it
    # (grpo/checkpoints/attempt-N/trainer_args.json): the overhead pair can diff the two.
    Path(args.out).mkdir(parents=True, exist_ok=True)
    record = json.dumps(trainer.args.to_dict(), indent=2, default=str)
    (Path(args.out) / "trainer_args.json").write_text(record)

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.t = time.perf_counter()
            self.r = 0.0

        def on_step_end(self, a, state, control, **kw):  # noqa: ANN001, ANN201
            now = time.perf_counter()
            row = {
                "step": state.global_step,
                "s": round(now - self.t, 3),
                "reward_s": round(reward_time[0] - self.r, 4),
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
            }
            if phases is not None:
                row.update(phases.take())
            self.t, self.r = now, reward_time[0]
            steps.append(row)
            print(json.dumps(row), flush=True)

    trainer.add_callback(Timer())
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):  # the JSON lines replace the trainer's own printing
        trainer.remove_callback(cb)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    times = [r["s"] for r in steps]
    steady = times[1:] if len(times) > 1 else times
    lengths = [
        e["completions/mean_length"] for e in trainer.state.log_history if "completions/mean_length" in e
    ]

    def logged(key: str) -> float | None:
        values = [e[key] for e in trainer.state.log_history if isinstance(e.get(key), (int, float))]
        return round(statistics.median(values), 4) if values else None

    summary = {
        "model": args.model,
        "backend": "unsloth" + (" + vLLM" if use_vllm else ""),
        "gens": args.gens,
        "completion_len": args.completion_len,
        "mean_completion_len": round(statistics.mean(lengths), 1) if lengths else None,
        # the synthetic prompts' length; --prompts-from uses the run's own prompts (≤ its cut) instead
        "prompt_len": None if args.prompts_from else args.prompt_len,
        "prompts_from": str(args.prompts_from) if args.prompts_from else None,
        # TRL's (and Unsloth's) record of the correction: absent when it did not run
        "is_ratio_median": logged("sampling/importance_sampling_ratio/mean"),
        "logp_diff_median": logged("sampling/sampling_logp_difference/mean"),
        "lora": {"r": args.lora_r, "rslora": not args.no_rslora, "dora": args.dora},
        "steps": len(times),
        "load_s": round(load_s, 1),
        "first_step_s": times[0] if times else None,
        "s_per_step": round(statistics.mean(steady), 3) if steady else None,
        "s_per_step_median": round(statistics.median(steady), 3) if steady else None,
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "reward_s": round(reward_time[0], 4),
        "reward_share": round(reward_time[0] / total, 5) if total > 0 else None,
        "train_s": round(total, 1),
        "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
        "phases_median": {
            k: round(statistics.median(r[k] for r in steps[1:] if k in r), 4)
            for k in sorted({k for r in steps[1:] for k in r if k.startswith("phase_")})
        },
    }
    print(json.dumps(summary), flush=True)
    return 0


def _rewards(spec, reward_time: list[float]) -> list:  # noqa: ANN001
    """Seed 000's four rewards (py_rewards, the Rust core) wrapped to time them; pure-Python fallback."""
    try:
        from py_rewards import make_reward_funcs

        funcs, _ = make_reward_funcs(spec)
    except ImportError:
        from py_rewards import reference  # type: ignore[attr-defined]

        funcs = [reference.match_format_exactly, reference.match_format_approximately,
                 reference.check_answer_accuracy, reference.check_numeric_extraction]  # fmt: skip

    def timed(f):  # noqa: ANN001, ANN202
        def g(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            t = time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                reward_time[0] += time.perf_counter() - t

        g.__name__ = getattr(f, "__name__", "reward")
        return g

    return [timed(f) for f in funcs]


if __name__ == "__main__":
    raise SystemExit(main())

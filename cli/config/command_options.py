"""The options of `grpo filter`, `eval`, `export`, `chat`, `serve` and of `grpo grpo`'s launcher, declared
once (:func:`cli.config.settings.setting`).

They are not part of the run's config (nothing here is saved in <run>/config.yaml): a field's default is
the flag's default, its type the flag's type, its bounds the option's ``min``/``max``.
:func:`cli.config.options.typed_options` makes the typer options and hands the command one instance:

    @handle_errors
    @typed_options(EvalOptions)
    def eval_(run: RunOpt = DEFAULT_RUN, ..., *, opts: EvalOptions) -> None: ...

Checks whose message or moment users know (``--models``, ``--engine``, chat's ``--source``) stay where
they were, in the command.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cli.config.schema import SCALE
from cli.config.settings import setting

MERGED_KINDS = ("16bit", "4bit")  # `grpo export --merged`

# Help panels.
DATA, GENERATION, WHAT, VERIFY, MODEL, SERVER, KEEP = (
    "Data", "Generation", "What to export", "Verification", "Model", "Server", "What to keep"
)  # fmt: skip


@dataclass(frozen=True)
class FilterOptions:
    limit: int | None = setting(
        None,
        help="Sample only the first N prompts of train.parquet (the others are not kept).",
        flag="--limit",
        panel=DATA,
        ge=1,
    )
    samples: int = setting(
        8, help="Completions sampled per prompt (judge each prompt by this many).", flag="--samples",
        panel=GENERATION, ge=1,
    )  # fmt: skip
    adapter: str = setting(
        "sft",
        help="Which adapter samples: sft, or grpo to filter again with the GRPO adapter.",
        flag="--adapter",
        panel=GENERATION,
        choices=("sft", "grpo"),
    )
    keep: str = setting(
        "mixed",
        help="mixed: prompts solved by some samples but not all (their groups teach GRPO); "
        "solved: every prompt solved at least once.",
        flag="--keep",
        panel=KEEP,
        choices=("mixed", "solved"),
    )
    max_new_tokens: int | None = setting(
        None,
        help="Completion budget (default: the run's grpo.max_completion_length, as GRPO samples).",
        flag="--max-new-tokens",
        panel=GENERATION,
        ge=1,
    )
    engine: str = setting(
        "auto",
        help="auto (vLLM when installed and a GPU is visible: every prompt at once), hf or vllm.",
        flag="--engine",
        panel=GENERATION,
    )
    batch_size: int = setting(
        8, help="Prompts decoded together (hf engine).", flag="--decode-batch", panel=GENERATION, ge=1,
        renamed="--batch-size",
    )  # fmt: skip
    clear: bool = setting(
        False,
        help="Remove the filter (data/grpo_prompts.parquet, passrate.json): GRPO uses every prompt again.",
        flag="--clear",
        panel=KEEP,
    )


@dataclass(frozen=True)
class EvalOptions:
    data: str | None = setting(
        None,
        help="gsm8k or math (prep's loader or the bundled samples) instead of the run's eval split.",
        flag="--data",
        panel=DATA,
    )
    source: Path | None = setting(
        None,
        help="Local .jsonl, .json, .parquet or .csv file with question (or problem) and answer columns.",
        flag="--source",
        panel=DATA,
    )
    limit: int | None = setting(
        None, help="Score at most N problems (default: all of them).", flag="--limit", panel=DATA, ge=1
    )
    models: str = setting(
        "base,sft,grpo",
        help="Comma list of checkpoints to score among base, sft, grpo (those present), and base-chat: the "
        "base model in its own chat template, no format asked (it comes with base when the tokenizer has a "
        "template).",
        flag="--models",
        panel=GENERATION,
    )
    # eval's own budget, whatever `grpo grpo` was given: a --max-completion-length of 96 saved in config.yaml
    # made the next eval decode at 96 and the before/after tables stopped being comparable. The table says it.
    max_new_tokens: int = setting(
        512,
        help="Completion budget per problem (eval's own; the table says what it used).",
        flag="--max-new-tokens",
        panel=GENERATION,
        ge=1,
    )
    # 32: a batch runs until its longest completion ends, so fewer, fuller batches finish sooner (20 prompts
    # of Gemma-3-270M on 2 cores: one batch of 20 at 0.39 s a token against three of <= 8).
    batch_size: int = setting(
        32, help="Prompts decoded together (hf engine).", flag="--decode-batch", panel=GENERATION, ge=1,
        renamed="--batch-size",
    )  # fmt: skip
    engine: str = setting(
        "auto",
        help="auto (vLLM when installed and a GPU is visible: all prompts at once), hf or vllm.",
        flag="--engine",
        panel=GENERATION,
    )
    # pass@k needs samples: N per prompt at GRPO's own sampling settings (cli/eval/passk.py).
    samples: int = setting(
        1,
        help="Also sample N completions per prompt (the run's GRPO temperature, seeded) for pass@1, pass@k "
        "and maj@N (1: greedy only).",
        flag="--samples",
        panel=GENERATION,
        ge=1,
        le=1024,
    )
    # A tool run (docs/tools.md "Eval"): each checkpoint with its calls run in the sandbox, without the tool,
    # or both (the tool-free row after each, and their paired difference: what the tool adds).
    tools: str = setting(
        "auto",
        help="On a tool run: on (calls run in the sandbox, as in training; auto's choice), off (the "
        "tool-free prompt, no calls run) or both (each checkpoint both ways, and the difference).",
        flag="--tools",
        panel=GENERATION,
    )


@dataclass(frozen=True)
class ExportOptions:
    lora: bool = setting(
        False,
        help="The LoRA adapter + tokenizer + format contract (default when nothing else is asked).",
        flag="--lora",
        panel=WHAT,
    )
    merged: str | None = setting(
        None,
        help="Merge into the original 16-bit weights: 16bit, or 4bit (bitsandbytes, CUDA only).",
        flag="--merged",
        panel=WHAT,
        choices=MERGED_KINDS,
    )
    gguf: str | None = setting(
        None,
        help="Comma list of GGUF types: f16, bf16, q8_0 (converter), q4_k_m, q5_k_m, … (llama.cpp).",
        flag="--gguf",
        panel=WHAT,
    )
    adapter: str | None = setting(
        None,
        help="Which adapter: grpo or sft (default: the newest).",
        flag="--adapter",
        panel=WHAT,
        choices=("grpo", "sft", "auto"),
        want="grpo or sft",
        renamed="--source",
    )
    out: Path | None = setting(None, help="Output folder (default: <run>/export).", flag="--out", panel=WHAT)
    name: str | None = setting(
        None, help="Base name of GGUF files (default: <run name>-<stage>).", flag="--name", panel=WHAT
    )
    pick_checkpoint: bool = setting(
        False,
        help="With one --gguf type: export every saved checkpoint of the latest GRPO attempt at it, score "
        "each on held-out prompts through llama.cpp, keep the best after quantization (export/pick.json).",
        flag="--pick-checkpoint",
        panel=WHAT,
    )
    pick_prompts: int = setting(
        50, help="Held-out prompts (the last rows of the eval split) --pick-checkpoint scores on.",
        flag="--pick-prompts", panel=WHAT, ge=1,
    )  # fmt: skip
    verify: int = setting(
        8,
        help="Held-out prompts decoded through HF and through each artifact (0: reload only).",
        flag="--verify",
        panel=VERIFY,
        ge=0,
    )
    verify_tokens: int = setting(
        64, help="Greedy tokens per verification prompt.", flag="--verify-tokens", panel=VERIFY, ge=1
    )
    allow_zero: bool = setting(
        False,
        help="Export an adapter even if some of its tensors are all zero (untrained LoRA).",
        flag="--allow-zero",
        panel=VERIFY,
    )


@dataclass(frozen=True)
class ChatOptions:
    engine: str | None = setting(
        None,
        help="lora (base + newest adapter, default), merged (export/merged-16bit), gguf (llama.cpp) or base.",
        flag="--engine",
        panel=MODEL,
        renamed="--source",
    )
    adapter: str | None = setting(
        None, help="With --engine lora: grpo or sft (default: the newest).", flag="--adapter", panel=MODEL
    )
    quant: str | None = setting(
        None,
        help="With --engine gguf: which exported GGUF (q4_k_m, q8_0, …; default: the newest).",
        flag="--quant",
        panel=MODEL,
    )
    prompt: str | None = setting(
        None, help="One question, print the answer and exit (for scripts).", flag="--prompt", short="-p"
    )
    answer_only: bool = setting(
        False, help="With --prompt: print only the text between the solution tags.", flag="--answer-only"
    )
    max_new_tokens: int = setting(512, help="Completion budget per answer.", flag="--max-new-tokens", ge=1)


@dataclass(frozen=True)
class ServeOptions:
    host: str = setting("0.0.0.0", help="Address to listen on.", flag="--host", panel=SERVER)  # noqa: S104 - a server for trainers on other hosts
    port: int = setting(8000, help="HTTP port.", flag="--port", panel=SERVER, ge=1, le=65535)
    tensor_parallel: int = setting(
        1, help="GPUs per model replica.", flag="--tensor-parallel", panel=SERVER, ge=1
    )
    data_parallel: int = setting(1, help="Model replicas.", flag="--data-parallel", panel=SERVER, ge=1)
    gpu_memory_utilization: float = setting(
        0.9, help="Share of each GPU vLLM may take.", flag="--gpu-memory-utilization", panel=SERVER,
        ge=0.05, le=0.99,
    )  # fmt: skip


@dataclass(frozen=True)
class LaunchOptions:
    """`grpo grpo`'s launcher flags; :class:`cli.train.distributed.Plan` adds what they mean."""

    gpus: int = setting(
        1,
        help="Processes on this node, one per GPU: >1 relaunches under `accelerate launch` (hf backend).",
        flag="--gpus",
        panel=SCALE,
        ge=1,
    )  # with --cpu: CPU processes
    num_nodes: int = setting(
        1, help="Machines taking part (run the command on each).", flag="--num-nodes", panel=SCALE, ge=1
    )
    node_rank: int = setting(
        0, help="This machine's index, 0..num-nodes-1.", flag="--node-rank", panel=SCALE, ge=0
    )
    main_address: str | None = setting(
        None, help="HOST:PORT of node 0 (with --num-nodes > 1).", flag="--main-address", panel=SCALE
    )
    deepspeed: str | None = setting(
        None, help="Shard with DeepSpeed: zero2 or zero3 (needs deepspeed).", flag="--deepspeed", panel=SCALE
    )  # checked by cli.train.distributed.check_plan, with its own message
    fsdp: bool = setting(
        False, help="Shard with PyTorch FSDP2 instead of plain data parallel.", flag="--fsdp", panel=SCALE
    )
    cpu: bool = setting(
        False, help="Run the --gpus N processes on the CPU over gloo (tests the path).", flag="--cpu",
        panel=SCALE,
    )  # fmt: skip

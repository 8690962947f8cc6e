"""`grpo eval`'s work: the held-out rows, greedy completions of every checkpoint, their scores.

The command (cli/commands/eval.py) parses and reports; the report files and table are
:mod:`cli.eval.report`. One base model is loaded; each adapter is attached to it in turn (HF), or
vLLM decodes every checkpoint's prompts at once (``--engine vllm``).

Long because: one job's rows, engines and scoring stay together; the tool loop (cli/eval/tools.py), pass@k
(cli/eval/passk.py) and GGUF rows (cli/eval/quantized.py) are their own modules and hook in here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, err_console
from cli.config.schema import Config
from cli.eval import scoring
from cli.infer import generation, prompting
from cli.models import loading
from cli.run import signals
from cli.run.data import eval_rows
from cli.run.rundir import RunDir

if TYPE_CHECKING:
    from cli.eval.tools import ToolEval
    from py_rewards.spec import FormatSpec

BUNDLED = {"gsm8k": "gsm8k_test.jsonl", "math": "math500.jsonl", "math500": "math500.jsonl"}


def _with_prep(name: str | None, source: Path | None, limit: int | None) -> tuple[list[dict[str, str]], str]:
    """Rows through prep's loader and schema detection (cli/prep/load.py).

    A hub name loads its *test* split; offline, the bundled test sample stands in.
    """
    from cli.prep import load as dp

    if source is not None:
        loaded = dp.read_file(source)
        label = str(source)
    else:
        assert name is not None
        ds = dp.DATASETS.get(name)
        if ds is None:
            raise GrpoError(f"unknown --data {name!r}: choose gsm8k or math, or pass --source FILE")
        try:
            loaded = dp.load_hub(ds, split="test")
            label = loaded.source
        except GrpoError:  # hub unreachable, not cached, or no `datasets` package
            if name not in BUNDLED:
                raise
            from cli.run.data import SAMPLES

            loaded = dp.read_file(SAMPLES / BUNDLED[name])
            label = f"{name} (bundled test sample {BUNDLED[name]}; hub not available)"
    schema = dp.detect_schema(loaded.records, label)
    parsed = dp.parse_records(loaded.records, schema)
    rows = [{"question": q, "answer": a} for q, a in zip(parsed.questions, parsed.answers, strict=False)]
    if not rows:
        raise GrpoError(f"{label} has no usable rows (need a question/problem and an answer)")
    return (rows[:limit] if limit is not None else rows), label


def load_rows(
    run: RunDir, data: str | None, source: Path | None, limit: int | None
) -> tuple[list[dict[str, str]], str]:
    """The eval rows and a label saying where they came from."""

    if source is not None or data is not None:
        return _with_prep(data.lower() if data else None, source, limit)
    rows = eval_rows(run, limit)
    if not rows:
        raise GrpoError(
            f"no held-out split in {run.path} (data/eval.parquet): "
            f"run `grpo prep NAME --run {run.path}` first, "
            "or pass --data gsm8k|math or --source FILE"
        )
    return rows, "data/eval.parquet"


LABELS = {"base": "Base (pretrained)", "sft": "After SFT (format warm-up)", "grpo": "After GRPO",
          "control": "Control (placebo GRPO)"}  # fmt: skip
# The base model asked the question alone in its own chat template: what it can do before our format.
NATIVE = "base-chat"
NATIVE_LABEL = "Base, own chat template"
# What the base-chat row leaves empty: the columns that need our format, and the rewards built on it.
STRICT_ONLY = ("format_compliance", "accuracy", "mean_match_format_exactly", "mean_check_answer_accuracy",
               "format_compliance_ci95", "accuracy_ci95", "mean_reward", "mean_reward_ci95")  # fmt: skip


def intervals(
    format_ok: list[bool], correct: list[bool], rewards: list[float], lenient: list[bool]
) -> dict[str, Any]:
    """95 % intervals: Wilson for the rates, normal for the mean reward (format + answer rewards)."""
    from cli.eval.stats import mean_ci, wilson

    n = len(rewards)
    mean, lo, hi = mean_ci(rewards)
    return {
        "format_compliance_ci95": [round(x, 4) for x in wilson(sum(format_ok), n)],
        "accuracy_ci95": [round(x, 4) for x in wilson(sum(correct), n)],
        "accuracy_lenient_ci95": [round(x, 4) for x in wilson(sum(lenient), len(lenient))],
        "mean_reward": round(mean, 4),
        "mean_reward_ci95": [round(lo, 4), round(hi, 4)],
    }


def paired_differences(per_prompt: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Later checkpoint minus earlier, on the same prompts (sft − base, grpo − sft)."""
    from cli.eval.stats import paired_bootstrap
    from cli.eval.tools import pairs

    out = []
    for a, b in (("base", "sft"), ("sft", "grpo"), *pairs(per_prompt)):
        if a in per_prompt and b in per_prompt:
            diff, lo, hi = paired_bootstrap(per_prompt[a], per_prompt[b])
            out.append(
                {"a": a, "b": b, "mean_reward_diff": round(diff, 4), "ci95": [round(lo, 4), round(hi, 4)]}
            )
    return out


@dataclass
class EvalJob:
    """What one `grpo eval` scores: the rows, the checkpoints present, how to decode."""

    rd: RunDir
    cfg: Config
    spec: FormatSpec
    rows: list[dict[str, str]]
    checkpoints: list[str]  # base, sft, grpo: those asked for and present
    adapters: dict[str, Path]
    max_new_tokens: int
    batch_size: int
    engine: str  # hf | vllm
    prompts: list[str] = field(default_factory=list)
    engine_info: dict[str, Any] = field(default_factory=dict)
    # The base row in the model's own chat template: its prompts and the token that ends its turns.
    native_prompts: list[str] = field(default_factory=list)
    native_stops: list[int] = field(default_factory=list)
    native: bool | None = None  # the base-chat row: asked (True), not (False), with base on a GPU (None)
    sampling: generation.Sampling | None = None  # --samples N: N sampled completions too (cli/eval/passk.py)
    # `--models grpo@q4_k_m`: GGUF rows (cli/eval/quantized.py), decoded by ``gguf_runner`` (the command's
    # cli.export.gguf.generate: llama.cpp in a child process).
    ggufs: dict[str, Path] = field(default_factory=dict)
    gguf_runner: Callable[..., dict[str, Any]] | None = None
    tools: ToolEval | None = None  # a tool run's rows: the tool loop and/or tool-free (cli/eval/tools.py)

    def stages(self) -> list[str]:
        """The rows to decode, in table order: the base-chat row follows the base one (first without it)."""
        rows = self.tools.stages(self.checkpoints) if self.tools else list(self.checkpoints)
        if self.native_prompts:
            rows.insert(rows.index("base") + 1 if "base" in rows else 0, NATIVE)
        return rows


@dataclass
class Scored:
    """Per-checkpoint results (report rows), per-completion samples, per-prompt rewards."""

    results: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    per_prompt: dict[str, list[float]] = field(default_factory=dict)
    rewards_source: str = ""
    sampled: dict[str, Any] = field(default_factory=dict)  # checkpoint -> passk.SampledStage (--samples N)


def run(job: EvalJob) -> Scored:
    """Decode every checkpoint greedily on the job's prompts and score the completions."""
    from cli.eval import tools
    from cli.models.resolve import resolve_model
    from cli.run import heartbeat

    err_console.print(
        f"eval: loading {job.cfg.model} ({job.engine}) for {', '.join(job.checkpoints)}: {len(job.rows)} "
        f"prompts, greedy, ≤ {job.max_new_tokens} new tokens",
        soft_wrap=True,
    )
    with heartbeat.working(f"eval: loading {job.cfg.model}"):
        signals.held_import("torch")  # after the first line: the command says what it does first
        base_path = resolve_model(job.cfg, job.rd)
        tokenizer = loading.load_tokenizer(base_path, job.spec, job.cfg.pad_token)
        job.prompts = [prompting.prompt_text(tokenizer, job.spec, r["question"]) for r in job.rows]
        if job.native or (job.native is None and "base" in job.checkpoints):
            _native_prompts(job, base_path)
            if job.native and not job.native_prompts:
                err_console.print(
                    "[yellow]note:[/] the base model has no chat template of its own: no base-chat row"
                )
                if not job.checkpoints:
                    raise GrpoError("nothing to score: add base, sft or grpo to --models")
        job.engine_info = {"engine": "hf", "batch_size": job.batch_size}
        with tools.session(job.tools, tokenizer, job.rows):  # the tool-free prompts; the sandbox, then closed
            pregenerated = _vllm_generate(job, str(base_path), tokenizer) if job.engine == "vllm" else {}
            if job.ggufs:
                from cli.eval.quantized import decode_all

                pregenerated.update(decode_all(job, tokenizer))
            decoder = _HFDecoder(job, base_path, tokenizer) if job.engine == "hf" else None
            return _decode_and_score(job, pregenerated, decoder)


def _decode_and_score(job: EvalJob, pregenerated: dict[str, list[Any]], decoder: _HFDecoder | None) -> Scored:
    """Each checkpoint in turn, with a bar that moves with every decoded token (a batch of long completions
    on the CPU takes minutes) and the same figures in the heartbeat line when the bar cannot redraw."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cli.run import heartbeat

    scored = Scored()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[tokens]:,} tokens"), TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=err_console, transient=False) as progress:
        for stage in job.stages():
            task = progress.add_task(f"{stage:>4}", total=len(job.prompts), tokens=0)
            tally = _Tally(progress, task, stage, len(job.prompts))
            heartbeat.doing(tally.status)
            start = time.time()
            if stage in pregenerated:
                gens = pregenerated[stage]
                progress.advance(task, len(gens))
            else:
                assert decoder is not None
                gens = decoder.generate(stage, tally.batch, tally.step)
            seconds = job.engine_info.get("stage_seconds", {}).get(stage, time.time() - start)
            _score_stage(job, stage, gens, seconds, scored)
            if job.sampling is not None and stage != NATIVE and stage not in job.ggufs:
                from cli.eval.passk import sample_stage

                sample_stage(job, stage, pregenerated, decoder, progress, scored)
    return scored


def _native_prompts(job: EvalJob, base_path: str) -> None:
    """The questions in the model's own chat template, when it has one other than the contract's."""
    native = loading.native_tokenizer(base_path, job.cfg.pad_token)
    if native is None or native.chat_template == job.spec.chat_template():
        return
    job.native_prompts = [prompting.native_prompt(native, r["question"]) for r in job.rows]
    job.native_stops = prompting.turn_end_ids(native)


class _Tally:
    """Sequences and tokens decoded so far for one checkpoint: finished batches + the batch under way."""

    def __init__(self, progress: Any, task: Any, stage: str, total: int) -> None:
        self.progress, self.task, self.stage, self.total = progress, task, stage, total
        self.done = self.tokens = 0  # in finished batches
        self.batch_done = self.batch_tokens = 0  # in the batch under way

    def step(self, tokens: int, finished: int) -> None:
        self.batch_tokens, self.batch_done = tokens, finished
        self.show()

    def batch(self, n: int) -> None:
        self.done += n
        self.tokens += self.batch_tokens
        self.batch_done = self.batch_tokens = 0
        self.show()

    def show(self) -> None:
        self.progress.update(
            self.task, completed=self.done + self.batch_done, tokens=self.tokens + self.batch_tokens
        )

    def status(self) -> str:
        done, tokens = self.done + self.batch_done, self.tokens + self.batch_tokens
        return f"eval {self.stage}: {done}/{self.total} completions done, {tokens:,} tokens decoded"


def _vllm_generate(job: EvalJob, base_path: str, tokenizer: Any) -> dict[str, list[Any]]:
    """All prompts of every checkpoint through one vLLM engine (base + each adapter)."""
    from cli.eval import tools
    from cli.infer.vllm_engine import Extra, generate_all

    if job.tools:
        return tools.vllm_generate(job, base_path, tokenizer)  # every row through the tool loop
    t_gen = time.time()
    pregenerated, job.engine_info = generate_all(
        base_path,
        tokenizer,
        job.prompts,
        [c for c in job.checkpoints if c not in job.ggufs],
        job.adapters,
        max_new_tokens=job.max_new_tokens,
        progress=lambda stage, n: err_console.print(f"{stage:>4}: {n} completions (vLLM)"),
        extra=Extra(
            base={NATIVE: (job.native_prompts, job.native_stops)} if NATIVE in job.stages() else {},
            sampling=job.sampling,
        ),
    )
    job.engine_info["generation_seconds"] = round(time.time() - t_gen, 2)
    return pregenerated


class _HFDecoder:
    """One base model; each adapter attached in turn (peft), switched off for the base checkpoint."""

    def __init__(self, job: EvalJob, base_path: Any, tokenizer: Any) -> None:
        self.job, self.tokenizer = job, tokenizer
        self.base = loading.load_hf(base_path, dtype=generation.decode_dtype())
        self.peft_model: Any = None

    def generate(
        self, stage: str, progress: Callable[[int], None], tokens: generation.TokenReport | None = None
    ) -> list[generation.Generation]:
        from cli.eval import tools

        job, row = self.job, stage
        stage = tools.checkpoint(stage)  # a tool-free row decodes its checkpoint
        model, ctx = self.base, None
        prompts, stops = (job.native_prompts, job.native_stops) if stage == NATIVE else (job.prompts, [])
        if stage in ("base", NATIVE):
            if self.peft_model is not None:
                ctx = self.peft_model.disable_adapter()
        else:
            if self.peft_model is None:
                self.peft_model = loading.attach_adapter(self.base, job.adapters[stage])
                current = "default"
            else:
                loading.load_adapter_tensors(job.adapters[stage])
                self.peft_model.load_adapter(str(job.adapters[stage]), adapter_name=stage)
                current = stage
            self.peft_model.set_adapter(current)
            model = self.peft_model

        def decode() -> list[Any]:
            if job.tools and row != NATIVE:
                return tools.hf_decode(job, row, model, self.tokenizer, prompts, progress, tokens)
            return generation.hf_generate(
                model,
                self.tokenizer,
                prompts,
                max_new_tokens=job.max_new_tokens,
                batch_size=job.batch_size,
                progress=progress,
                stop_ids=stops,
                tokens=tokens,
            )

        if ctx is None:
            return decode()
        with ctx:
            return decode()


def _gguf_label(stage: str) -> str:
    from cli.eval.quantized import label

    return label(stage, LABELS)


def _score_stage(job: EvalJob, stage: str, gens: list[Any], seconds: float, scored: Scored) -> None:
    from cli.eval import tools

    rows, spec, ckpt = job.rows, job.spec, tools.checkpoint(stage)
    if job.tools and stage != ckpt:
        spec = job.tools.free_spec
    sc = scoring.score(
        spec,
        [g.text for g in gens],
        [r["answer"] for r in rows],
        prompts=[spec.messages(r["question"]) for r in rows],
    )
    lengths = [len(g.tokens) for g in gens]
    rewards = [f + a for f, a in zip(sc.format, sc.accuracy, strict=True)]
    result = {
        "checkpoint": stage,
        "label": NATIVE_LABEL if stage == NATIVE else LABELS.get(ckpt) or _gguf_label(ckpt),
        "adapter": str(job.adapters[ckpt]) if ckpt in job.adapters else None,
        **({"gguf": str(job.ggufs[stage])} if stage in job.ggufs else {}),
        "n": len(rows),
        "format_compliance": sum(sc.format_ok) / len(rows),
        "accuracy": sum(sc.correct) / len(rows),
        "accuracy_math": sum(sc.math_correct) / len(rows),
        "accuracy_lenient": sum(sc.lenient_correct) / len(rows),
        "mean_completion_tokens": sum(lengths) / len(lengths),
        "hit_max_new_tokens": sum(1 for n in lengths if n >= job.max_new_tokens) / len(lengths),
        "mean_match_format_exactly": sc.mean("format"),
        "mean_check_answer_accuracy": sc.mean("accuracy"),
        **intervals(sc.format_ok, sc.correct, rewards, sc.lenient_correct),
        "seconds": round(seconds, 2),
    }
    if stage == NATIVE:
        # Asked without our system prompt and tags, the model cannot write our format: the format-strict
        # columns and the rewards do not apply to this row; the last-number rule and math_equal (which
        # reads a \boxed{} too) do.
        result.update(dict.fromkeys(STRICT_ONLY))
        result["chat_template"] = "the model's own (the question alone, no system prompt or tags)"
    else:
        scored.per_prompt[stage] = rewards
    if job.tools and stage != NATIVE:
        result["label"] = tools.label(stage, LABELS)
        result.update(tools.columns(spec, gens, sc.correct))
    scored.results.append(result)
    native = stage == NATIVE
    for r, g, f, c, m, le, rw in zip(
        rows, gens, sc.format_ok, sc.correct, sc.math_correct, sc.lenient_correct, rewards, strict=False
    ):
        scored.samples.append(
            {
                "checkpoint": stage,
                "question": r["question"],
                "answer": r["answer"],
                "completion": g.text,
                "tokens": len(g.tokens),
                "format_ok": None if native else f,
                "correct": None if native else c,
                "correct_math": m,
                "correct_lenient": le,
                "reward": None if native else rw,
                **(tools.sample_fields(g) if job.tools and not native else {}),
            }
        )
    scored.rewards_source = sc.source

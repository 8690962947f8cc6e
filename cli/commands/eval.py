"""Score the base model and each trained checkpoint on held-out problems (format %, accuracy, length).

Greedy, batched decoding of the same prompts through the base model, the SFT adapter and the GRPO
adapter (each one present), the columns of seed 000's results table:

- [bold]format compliance[/]: share of completions where match_format_exactly > 0 (seed 000's FORMAT regex:
  reasoning-end tag, then the answer between the solution tags, then only whitespace);
- [bold]accuracy, seed rule[/]: share whose extracted answer equals the gold one exactly or after strip()
  (check_answer_accuracy's two top tiers), or numerically (thousands separators allowed: "1,000" = "1000.0");
- [bold]accuracy, math_equal[/]: share whose answer (solution tags, else the boxes, else an answer phrase such
  as "The final answer is $5$") equals the gold one under py_rewards.math_equal, which reads MATH-style LaTeX
  (\\frac{1}{2} = 0.5, 2\\sqrt3 = \\sqrt{12}, 90^\\circ = 90, intervals, sets, several boxes as one set,
  labelled answers, ...); on GSM8K/DAPO integers the two rules agree;
- [bold]accuracy, last number[/]: share whose last number, anywhere in the completion, equals the gold answer
  as a number (GSM8K's lenient grading): what the model knows, whatever its format;
- [bold]mean length[/]: completion tokens up to EOS.

With the base model, a second row, [bold]Base, own chat template[/]: the question alone in the model's own
chat template (when its tokenizer has one; no system prompt, no tags), decoded up to the token that ends its
turns and scored by the last number (and math_equal): what the model could do before our format. The
format columns do not apply to it.

On a tool run, each completion goes through the tool loop (its calls run in the sandbox, as in training) and
the report gains the tool columns: calls per completion, tool use, tool errors, accuracy with and without a
call; [bold]--tools both[/] scores each checkpoint without the tool too (docs/tools.md "Eval").

Writes <run>/eval/report.json, report.md, eval.png and samples.jsonl.

  grpo eval                       # the run's held-out split (data/eval.parquet)
  grpo eval --data gsm8k --limit 50
  grpo eval --source my_test.jsonl
  grpo eval --tools both          # a tool run: each checkpoint with the tool and without (docs/tools.md)
"""

from __future__ import annotations

from typing import Any

from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, RunOpt, err_console
from cli.config.command_options import EvalOptions
from cli.config.options import typed_options
from cli.errors import handle_errors
from cli.run.rundir import RunDir, dry_run_exit, run_config


@handle_errors
@typed_options(EvalOptions)
def eval_(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    *,
    opts: EvalOptions,
) -> None:
    from cli.eval import evaluation, passk, quantized, verdict
    from cli.eval import report as eval_report
    from cli.eval import tools as eval_tools
    from cli.eval.evaluation import EvalJob
    from cli.infer.vllm_engine import choose_engine
    from cli.run.preflight import check_run

    rd = RunDir(run)
    if dry_run:
        shown = {"data": opts.data, "source": opts.source, "limit": opts.limit, "models": opts.models,
                 "tools": opts.tools}  # fmt: skip
        dry_run_exit(rd, config, "eval", shown)
    rd.require_exists()
    wanted = [quantized.canonical(m.strip()) for m in opts.models.split(",") if m.strip()]
    bad = [m for m in wanted if m.partition("@")[0] not in evaluation.LABELS and m != evaluation.NATIVE]
    if bad or not wanted:
        raise GrpoError(
            f"unknown checkpoint(s) in --models: {', '.join(bad) or '(none)'} "
            "(choose base, base-chat, sft, grpo, control, and a GGUF export as grpo@q4_k_m)"
        )
    # The base-chat row: when named, or with base wherever the tokenizer has a chat template of its own.
    native = True if evaluation.NATIVE in wanted else (None if "base" in wanted else False)
    wanted = [m for m in wanted if m != evaluation.NATIVE]
    rd.ensure()  # fails with one line when the run directory is not writable
    rd.hold("grpo eval")  # before any work: a run in use is refused in a second
    cfg = run_config(rd, config)
    spec = cfg.format_spec()
    # Before any model loads: `--tools on` on a run without the tool is one line.
    tool_eval = eval_tools.plan(cfg, spec, opts.tools)
    adapters = {**rd.adapters(), **verdict.control_adapter(rd)}  # + grpo/control/adapter (`--control`)
    if "grpo" in wanted and "control" in adapters and "control" not in wanted:
        wanted.append("control")  # GRPO is judged against its placebo whenever there is one
    data = () if opts.data or opts.source else ("eval.parquet",)
    check_run(rd, data=data, adapters=[adapters[m] for m in wanted if m in adapters], cfg=cfg,
              consumes=[m for m in wanted if m in adapters])  # fmt: skip
    rows, data_label = evaluation.load_rows(rd, opts.data, opts.source, opts.limit)
    ggufs = {m: quantized.find(rd, m) for m in wanted if quantized.split(m)}  # one line when one is missing
    checkpoints = [m for m in wanted if m == "base" or m in adapters or m in ggufs]
    skipped = [m for m in wanted if m not in checkpoints]
    if not checkpoints and not native:
        # `--models sft` on a run without an SFT adapter once failed with UnboundLocalError after loading
        # the base model (docs/history.md "Structure"); now it says what to run, before any model loads.
        raise GrpoError(
            f"nothing to score: no {' or '.join(skipped)} adapter in {rd.path}: "
            f"run `grpo {skipped[0]} --run {rd.path}` first, or add base to --models"
        )
    for m in skipped:
        err_console.print(f"[yellow]note:[/] no {m} adapter in {rd.path}; skipping it")
    job = EvalJob(
        rd=rd,
        cfg=cfg,
        spec=spec,
        rows=rows,
        checkpoints=checkpoints,
        adapters=adapters,
        max_new_tokens=opts.max_new_tokens,  # eval's own default, never grpo's
        batch_size=opts.batch_size,
        engine=choose_engine(opts.engine),
        native=native,
        sampling=passk.sampling_of(cfg, opts.samples) if opts.samples > 1 else None,
        ggufs=ggufs,
        gguf_runner=_gguf_runner() if ggufs else None,
        tools=tool_eval,
    )
    eval_report.write(job, evaluation.run(job), data_label, skipped)


def _gguf_runner() -> Any:
    """llama.cpp greedy decoding in a child process (export's verifier), for the ``grpo@q4_k_m`` rows."""
    from cli.export import gguf

    return gguf.generate

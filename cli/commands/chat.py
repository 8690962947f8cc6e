"""Talk to the trained model: tokens stream in, reasoning dim, the solution in a bold panel.

Uses the run's system prompt and chat template (the format contract), greedy decoding.

  grpo chat                          # newest adapter (GRPO, else SFT) over the run's base model
  grpo chat --engine gguf            # the exported GGUF through llama.cpp
  grpo chat --prompt "What is 7*6?"  # one shot for scripts: prints the answer and exits

In the REPL: [bold]/compare[/] [QUESTION] puts base and tuned answers side by side (the last question when
none is given), [bold]/reset[/] forgets the conversation, [bold]/exit[/] leaves. A question longer than the
model's context is refused in a line, not decoded for minutes.

On a tool run (`grpo prep ... --tools python`) each call the model writes runs in the sandbox, its code and
result shown as they happen, and the model continues from the result (cli/commands/chat_tools.py).

Long because: the engines (HF, llama.cpp), the display and the REPL are one command's parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.commands.chat_tools import ChatTools, answer, converse, open_tools, show_call, stream_turn
from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, RunOpt, console, err_console
from cli.config.command_options import ChatOptions
from cli.config.options import typed_options
from cli.errors import handle_errors
from cli.run import quiet, signals
from cli.run.rundir import MERGED_DIRNAME, RunDir, dry_run_exit

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec

ENGINES = ("lora", "merged", "gguf", "base")


class Engine:
    """One way of producing completions: an HF model (maybe with its adapter off) or a GGUF file."""

    label = "model"
    spec: FormatSpec
    eos_text = ""  # the EOS as text: a tool turn ends with it before the results (docs/tools.md "Format")

    def prompt(self, question: str, history: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def stream(self, prompt: str, max_new_tokens: int) -> Iterator[str]:
        raise NotImplementedError

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        return "".join(self.stream(prompt, max_new_tokens))

    def context(self) -> int:
        """The tokens the model attends to: prompt + answer must fit."""
        raise NotImplementedError

    def count(self, prompt: str) -> int:
        raise NotImplementedError

    def too_long(self, prompt: str, max_new_tokens: int) -> str | None:
        """Why ``prompt`` cannot be answered within the model's context (None when it can), found in
        milliseconds: a 1 MB line was decoded for minutes. Text far longer than the context is refused by its
        length in bytes, before it is tokenized."""
        ctx = self.context()
        size = len(prompt.encode("utf-8", errors="replace"))
        n = self.count(prompt) if size <= 64 * ctx else None
        if n is not None and n + max_new_tokens <= ctx:
            return None
        what = f"{n:,} tokens" if n is not None else f"{size:,} bytes"
        return (
            f"the prompt is {what}; with {max_new_tokens} new tokens it does not fit {self.label}'s context "
            f"of {ctx:,} tokens: shorten the question (in the chat, /reset drops the earlier turns)"
        )


class HFEngine(Engine):
    def __init__(
        self, model: Any, tokenizer: Any, spec: FormatSpec, label: str, adapter_off: bool = False
    ) -> None:
        self.model, self.tokenizer, self.spec, self.label = model, tokenizer, spec, label
        self.adapter_off = adapter_off
        self.eos_text = str(tokenizer.eos_token or "")

    def prompt(self, question: str, history: list[dict[str, str]]) -> str:
        from cli.infer.prompting import prompt_text

        return prompt_text(self.tokenizer, self.spec, question, history)

    def stream(self, prompt: str, max_new_tokens: int) -> Iterator[str]:
        from cli.infer.generation import hf_stream

        if self.adapter_off:
            # The same weights with the LoRA switched off: the base model, no second copy in memory.
            yield self.complete(prompt, max_new_tokens)
            return
        yield from hf_stream(self.model, self.tokenizer, prompt, max_new_tokens=max_new_tokens)

    def context(self) -> int:
        limits = [
            getattr(self.model.config, "max_position_embeddings", None),
            self.tokenizer.model_max_length,
        ]
        known = [
            int(x) for x in limits if isinstance(x, int) and 0 < x < 10**8
        ]  # (no limit: a huge sentinel)
        return min(known) if known else 4096

    def count(self, prompt: str) -> int:
        return len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        from cli.infer.generation import hf_generate

        if self.adapter_off:
            with self.model.disable_adapter():
                gen = hf_generate(self.model, self.tokenizer, [prompt], max_new_tokens=max_new_tokens)
        else:
            gen = hf_generate(self.model, self.tokenizer, [prompt], max_new_tokens=max_new_tokens)
        return gen[0].text


class GGUFEngine(Engine):
    def __init__(self, path: Path, spec: FormatSpec) -> None:
        from cli.infer.generation import GGUFModel

        self.gguf = GGUFModel(path)
        self.spec = spec
        self.label = f"gguf {path.name}"
        self.eos_text = self.gguf.detokenize([self.gguf.eos])

    def prompt(self, question: str, history: list[dict[str, str]]) -> str:
        from cli.infer.prompting import render_prompt

        return render_prompt(self.spec, self.eos_text, question, history, bos_token=self.gguf.bos_text)

    def stream(self, prompt: str, max_new_tokens: int) -> Iterator[str]:
        yield from self.gguf.stream(prompt, max_new_tokens)

    def context(self) -> int:
        return self.gguf.n_ctx

    def count(self, prompt: str) -> int:
        return len(self.gguf.tokenize(prompt))


# ---- finding the model -------------------------------------------------------------------------
def newest_gguf(run: RunDir, quant: str | None) -> Path:
    from cli.export.gguf import VALID_TYPES

    if quant and quant.lower() not in VALID_TYPES:
        raise GrpoError(f"unknown --quant {quant!r}: valid types are {', '.join(VALID_TYPES)}")
    export = run.export_dir
    candidates = sorted(export.glob("gguf-*/*.gguf"), key=lambda p: p.stat().st_mtime, reverse=True)
    if quant:
        candidates = [p for p in candidates if p.parent.name == f"gguf-{quant.lower()}"]
    if not candidates:
        what = f"{quant.lower()} GGUF" if quant else "GGUF export"
        hint = (quant or "q4_k_m").lower()
        raise GrpoError(f"no {what} in {export}: run `grpo export --gguf {hint} --run {run.path}` first")
    return candidates[0]


def build_engines(
    run: RunDir,
    source: str | None,
    adapter: str | None,
    quant: str | None,
    config_file: Path | None = None,
) -> tuple[Engine, Any]:
    """The tuned engine and a factory for the base engine (for /compare)."""
    from cli.infer.generation import decode_dtype
    from cli.models import loading
    from cli.models.resolve import resolve_model
    from cli.run import rundir, validate
    from cli.run.preflight import check_run, redo

    run.require_exists()
    check_run(run)  # the run path, manifest.json, the base model it built
    cfg = rundir.run_config(run, config_file)
    spec = cfg.format_spec()
    source = (source or "lora").lower()
    if source not in ENGINES:
        raise GrpoError(f"unknown --engine {source!r} (choose {', '.join(ENGINES)})")

    def loading_line(what: str) -> None:  # before the load: on the CPU it takes from seconds to a minute
        err_console.print(f"[dim]chat: loading {what}…[/]", soft_wrap=True)

    def hf_base() -> Engine:
        signals.held_import("torch")  # an HF engine (a GGUF one needs no torch)
        path = resolve_model(cfg, run)
        model = loading.load_hf(path, dtype=decode_dtype())
        return HFEngine(model, loading.load_tokenizer(path, spec, cfg.pad_token), spec, f"base {cfg.model}")

    if source == "base":
        loading_line(f"the base model {cfg.model}")
        engine = hf_base()
        return engine, lambda: engine
    if source == "lora":
        stage, path = run.pick_adapter(adapter)
        validate.adapter(path, redo(run, stage))  # a damaged adapter: one line before the base model loads
        loading_line(f"{cfg.model} + the {stage} adapter")
        signals.held_import("torch")
        base_path = resolve_model(cfg, run)
        tok = loading.load_tokenizer(loading.adapter_tokenizer_path(path, base_path), spec, cfg.pad_token)
        model = loading.attach_adapter(loading.load_hf(base_path, dtype=decode_dtype()), path)
        tuned = HFEngine(model, tok, spec, f"{stage} adapter")
        return tuned, lambda: HFEngine(model, tok, spec, f"base {cfg.model}", adapter_off=True)
    if source == "merged":
        # The 16-bit merge, else the bitsandbytes 4-bit one (loads on CUDA only).
        for name, label in ((MERGED_DIRNAME, "merged 16-bit"), ("merged-4bit", "merged 4-bit")):
            path = run.export_dir / name
            if (path / "config.json").exists():
                validate.model_folder(
                    path, f"re-create it with `grpo export --merged {name[7:]} --run {run.path}`"
                )
                loading_line(f"the {label} export")
                signals.held_import("torch")
                return HFEngine(
                    loading.load_hf(path, dtype=None if name == "merged-4bit" else "auto"),
                    loading.load_tokenizer(path, spec),
                    spec,
                    label,
                ), hf_base
        raise GrpoError(
            f"no merged export in {run.export_dir}: run `grpo export --merged 16bit --run {run.path}` first"
        )
    # gguf
    gguf = newest_gguf(run, quant)
    validate.gguf(gguf, f"re-create it with `grpo export --gguf {gguf.parent.name[5:]} --run {run.path}`")
    loading_line(f"{gguf.name} (llama.cpp)")
    from cli.export.gguf import check_runs

    check_runs(gguf, "What is 2+3?")  # a file llama.cpp cannot run is one line here, not an abort
    return GGUFEngine(gguf, spec), hf_base


# ---- display -----------------------------------------------------------------------------------
def renderable(spec: FormatSpec, text: str, done: bool = False, lead: bool = True) -> Any:
    """Reasoning dim, the solution in a bold panel (partial while streaming); ``lead``: the text follows the
    reasoning-start tag (False: a later turn of a tool run, after a result)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from cli.infer.prompting import split_completion

    reasoning, solution, rest = split_completion(spec, text)
    parts: list[Any] = [Text((spec.reasoning_start if lead else "") + reasoning, style="dim")]
    if solution is not None:
        parts.append(
            Panel(
                Text(solution.strip(), style="bold"),
                title="solution",
                title_align="left",
                border_style="green",
                expand=False,
            )
        )
    elif done:
        parts.append(Text("(no solution tags in this answer)", style="yellow"))
    if rest.strip():
        parts.append(Text(rest, style="dim italic"))
    return Group(*parts)


def show_stream(engine: Engine, spec: FormatSpec, prompt: str, max_new_tokens: int) -> str:
    from rich.live import Live

    text = ""
    if not console.is_terminal:
        for piece in engine.stream(prompt, max_new_tokens):
            text += piece
        console.print(renderable(spec, text, done=True))
        return text
    with Live(renderable(spec, ""), console=console, refresh_per_second=12, transient=False) as live:
        for piece in engine.stream(prompt, max_new_tokens):
            text += piece
            live.update(renderable(spec, text))
        live.update(renderable(spec, text, done=True))
    return text


def show_compare(spec: FormatSpec, question: str, base: tuple[str, str], tuned: tuple[str, str]) -> None:
    from rich.panel import Panel
    from rich.table import Table

    table = Table(title=f"/compare: {question[:80]}", expand=True, show_lines=True)
    table.add_column(base[0], ratio=1)
    table.add_column(tuned[0], ratio=1)
    table.add_row(
        Panel(renderable(spec, base[1], done=True), border_style="dim"),
        Panel(renderable(spec, tuned[1], done=True), border_style="cyan"),
    )
    console.print(table)


HELP = "commands: /compare [QUESTION]  /reset  /exit   (anything else is a question)"


@handle_errors
@typed_options(ChatOptions)
def chat(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    *,
    opts: ChatOptions,
) -> None:
    prompt, max_new_tokens = opts.prompt, opts.max_new_tokens
    if prompt is not None and not prompt.strip():
        raise GrpoError("--prompt is empty")
    rd = RunDir(run)
    if dry_run:
        shown = {"engine": opts.engine, "adapter": opts.adapter, "quant": opts.quant, "prompt": prompt,
                 "max_new_tokens": max_new_tokens}  # fmt: skip
        dry_run_exit(rd, config, "chat", shown)
    from cli.run import heartbeat

    with heartbeat.working("chat: loading"):
        engine, base_factory = build_engines(rd, opts.engine, opts.adapter, opts.quant, config)
    tools = None
    if engine.spec.tools:
        from cli.run.rundir import run_config

        tools = open_tools(engine.spec, run_config(rd, config), engine.eos_text)
    try:
        if prompt is not None:
            with heartbeat.working("chat: answering"):
                _one_shot(engine, prompt, max_new_tokens, answer_only=opts.answer_only, tools=tools)
            return
        Repl(engine, base_factory, max_new_tokens, tools).run(rd)
    finally:
        if tools is not None:
            tools.sandbox.close()


def _one_shot(
    engine: Engine, prompt: str, max_new_tokens: int, *, answer_only: bool, tools: ChatTools | None = None
) -> None:
    """--prompt: the answer streamed (terminal), else printed whole; --answer-only: the solution only."""
    from cli.infer.prompting import split_completion

    spec = engine.spec
    text_prompt = engine.prompt(prompt, [])
    refused = engine.too_long(text_prompt, max_new_tokens)
    if refused:
        raise GrpoError(f"--prompt: {refused}")
    if not answer_only and console.is_terminal:
        if tools is not None:
            turn = stream_turn(engine, max_new_tokens, renderable)
            converse(spec, text_prompt, tools, turn, show_call)
            return
        show_stream(engine, spec, text_prompt, max_new_tokens)
        return
    text = answer(engine, text_prompt, max_new_tokens, tools)
    _, solution, _ = split_completion(spec, text)
    if answer_only:
        if solution is None:
            err_console.print("[yellow]note:[/] the answer has no solution tags; printing it whole")
        typer.echo(solution.strip() if solution is not None else text, file=quiet.stdout())
    else:
        typer.echo(spec.reasoning_start + text, file=quiet.stdout())


class Repl:
    """The chat loop: questions keep the conversation; /compare, /reset, /help and /exit."""

    def __init__(
        self,
        engine: Engine,
        base_factory: Callable[[], Engine],
        max_new_tokens: int,
        tools: ChatTools | None = None,
    ) -> None:
        self.engine, self.spec, self.base_factory = engine, engine.spec, base_factory
        self.max_new_tokens, self.tools = max_new_tokens, tools
        self.history: list[dict[str, str]] = []
        self.last_question: str | None = None
        self.base_engine: Engine | None = None

    def run(self, rd: RunDir) -> None:
        budget = f"greedy, ≤{self.max_new_tokens} tokens"
        if self.tools is not None:
            budget += f" a turn · python tool, ≤{self.tools.max_calls} rounds of calls"
        console.print(f"[bold]grpo chat[/] — {self.engine.label} · run {rd.path} · {budget}")
        console.print(f"[dim]system: {self.spec.system_prompt}[/]")
        console.print(f"[dim]{HELP}[/]")
        while True:
            try:
                with quiet.terminal():  # readline's line editing needs the real stdout
                    line = console.input("[bold cyan]you>[/] ")
            except EOFError:
                console.print()
                break
            except UnicodeDecodeError:
                console.print(
                    "[yellow]that input is not UTF-8 text (check the terminal's encoding); ignored[/]"
                )
                continue
            except (RuntimeError, OSError, ValueError):  # "input(): lost sys.stdin": stdin was closed
                err_console.print("[yellow]note:[/] no input to read (stdin is closed): chat ends")
                break
            if not self.handle(line.strip()):
                break
        quiet.stdout().flush()

    def handle(self, line: str) -> bool:
        """Act on one input line; False when the user leaves."""
        if not line:
            return True
        if line in ("/exit", "/quit", "/q"):
            return False
        if line == "/help":
            console.print(HELP)
        elif line == "/reset":
            self.history.clear()
            console.print("[dim]conversation cleared[/]")
        elif line.startswith("/compare"):
            self.compare(line[len("/compare") :].strip() or self.last_question)
        elif line.startswith("/"):
            console.print(f"[yellow]unknown command {line.split()[0]}[/] — {HELP}")
        else:
            self.ask(line)
        return True

    def ask(self, line: str) -> None:
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8 arrive as lone surrogates
            console.print("[yellow]that input is not UTF-8 text (check the terminal's encoding); ignored[/]")
            return
        prompt = self.engine.prompt(line, self.history)
        refused = self.engine.too_long(prompt, self.max_new_tokens)
        if refused:
            console.print(f"[yellow]{refused}[/]")
            return
        if self.tools is None:
            text = show_stream(self.engine, self.spec, prompt, self.max_new_tokens)
        else:  # the turns, their EOS and results: the flat text the run was trained on
            turn = stream_turn(self.engine, self.max_new_tokens, renderable)
            text = converse(self.spec, prompt, self.tools, turn, show_call)
        self.history += [
            {"role": "user", "content": line},
            {"role": "assistant", "content": self.spec.reasoning_start + text},
        ]
        self.last_question = line

    def compare(self, question: str | None) -> None:
        if not question:
            console.print("[yellow]ask something first, or /compare QUESTION[/]")
            return
        if self.base_engine is None:
            with console.status("loading the base model…"):
                self.base_engine = self.base_factory()
        base, tuned, n = self.base_engine, self.engine, self.max_new_tokens
        with console.status("generating base and tuned answers…"):
            base_text = answer(base, base.prompt(question, []), n, self.tools)
            tuned_text = answer(tuned, tuned.prompt(question, []), n, self.tools)
        show_compare(self.spec, question, (base.label, base_text), (tuned.label, tuned_text))
        self.last_question = question

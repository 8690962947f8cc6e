"""Training data from the run directory (written by `grpo prep`).

- GRPO: ``data/train.parquet`` (question, answer, solution, prompt_tokens), or `grpo filter`'s kept rows of it
  (``data/grpo_prompts.parquet``, while they are fresh) → conversational prompts
  (system + user from the format contract; TRL applies the chat template, whose generation prompt ends
  with the reasoning-start tag) and the gold ``answer`` column the rewards read.
- SFT (seed 000 stage 1): ``data/sft.parquet`` (OpenMathReasoning-mini, when prepped) or else format
  examples built from the prepped train set's worked solutions: ``spec.render_completion(solution,
  answer)`` as the assistant turn, kept when the whole chat is ≤ max_seq_length/2 tokens (seed 000's
  length filter), rendered to text with the chat template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run.budget import sft_length_cap
from cli.run.data import FILTERED, filtered_prompts, read_table, strip_think
from cli.run.rundir import RunDir

if TYPE_CHECKING:
    from cli.config.schema import Config
    from py_rewards.spec import FormatSpec


def _count_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def grpo_dataset(cfg: Config, run: RunDir, tokenizer: Any, max_prompt: int) -> tuple[Any, dict[str, Any]]:
    """Prompts + answers for GRPO: those of at most ``max_prompt`` tokens (the plan's cut,
    :class:`cli.run.budget.RolloutBudget`: prep's p90 unless the config sets one)."""
    from datasets import Dataset

    spec = cfg.format_spec()
    df, prompts_from = _grpo_table(run)
    if "prompt_tokens" in df.columns:
        lengths = [int(x) for x in df["prompt_tokens"]]
    else:
        from cli.prep.load import prompt_lengths  # prep's own count (an older prep wrote no column)

        lengths = prompt_lengths(tokenizer, spec, [str(q) for q in df["question"]])
    # TRL >= 1 has no max_prompt_length: over-long prompts are dropped here (seed 000: p90 filter).
    keep = [i for i, n in enumerate(lengths) if n <= max_prompt]
    if not keep:
        raise GrpoError(f"no prompt fits max_prompt_length={max_prompt}: raise grpo.max_prompt_length")
    rows = [
        {"prompt": spec.messages(str(df["question"].iloc[i])), "answer": str(df["answer"].iloc[i]).strip()}
        for i in keep
    ]
    info = {
        "prompts": len(rows),
        "dropped_long_prompts": len(df) - len(rows),
        "max_prompt_length": max_prompt,
        "prompts_from": prompts_from,
    }
    return Dataset.from_list(rows), info


def _grpo_table(run: RunDir) -> tuple[Any, str]:
    """`grpo filter`'s kept prompts (data/grpo_prompts.parquet) while they are fresh, else train.parquet;
    and which one, in words."""
    from cli.run.console import console, err_console

    passrate, note = filtered_prompts(run)
    if note:
        err_console.print(f"[yellow]note:[/] {note}")
    if passrate is None:
        return read_table(run, "train.parquet", ("question", "answer")), "train.parquet"
    kept, total = passrate.get("kept", "?"), passrate.get("prompts", "?")
    console.print(
        f"[dim]grpo: on the {kept} prompts `grpo filter` kept of {total} (data/{FILTERED}); "
        f"`grpo filter --clear --run {run.path}` trains on all of train.parquet again[/]"
    )
    return read_table(run, FILTERED, ("question", "answer")), f"grpo filter ({kept} of {total})"


def _sft_messages(df: Any, spec: FormatSpec) -> tuple[list[list[dict[str, str]]], str]:
    """Chat messages for SFT from whichever columns the prepped file has."""
    cols = set(df.columns)
    if "messages" in cols:
        return [list(m) for m in df["messages"]], "messages"
    for q, s, a in (("question", "solution", "answer"), ("problem", "generated_solution", "expected_answer")):
        if {q, s, a} <= cols:
            out = []
            for question, solution, answer in zip(df[q], df[s], df[a], strict=True):
                if not isinstance(solution, str) or not solution.strip() or answer is None:
                    continue
                # Seed 000 format_row: strip <think> tags, tag the working out and the answer.
                thoughts = strip_think(solution)
                out.append(
                    spec.messages(str(question))
                    + [
                        {
                            "role": "assistant",
                            "content": spec.render_completion(thoughts, str(answer).strip()),
                        }
                    ]
                )
            return out, f"{q}/{s}/{a}"
    raise GrpoError("SFT data needs columns messages, or question/solution/answer: re-run `grpo prep`")


def sft_dataset(cfg: Config, run: RunDir, tokenizer: Any) -> tuple[Any, dict[str, Any]]:
    """Seed 000 stage-1 format examples as chat-templated text (a tool run: :func:`tool_sft_dataset`)."""
    from datasets import Dataset

    if cfg.tools:
        return tool_sft_dataset(cfg, run, tokenizer)
    spec = cfg.format_spec()
    if (run.data_dir / "sft.parquet").exists():
        source = "sft.parquet"
        df = read_table(run, "sft.parquet")
    else:
        source = "train.parquet"
        df = read_table(run, "train.parquet", ("question", "answer"))
        if "solution" not in df.columns:
            raise GrpoError(
                f"{run.data_dir / 'train.parquet'} has no 'solution' column to build format examples from: "
                "re-run `grpo prep` (or prep a dataset with worked solutions)"
            )
    conversations, columns = _sft_messages(df, spec)
    if not conversations:
        # The real cause, not "too long": DAPO's rows carry no worked solutions (all None), so there is
        # nothing to warm up on (docs/history.md "First runs").
        raise GrpoError(
            f"no worked solutions in {run.data_dir / source} ({len(df)} rows, none with a solution to learn "
            "the "
            "format from): re-run `grpo prep` (it adds the stage-1 warm-up set, data/sft.parquet, for a set "
            "without solutions such as dapo) or `grpo prep openmath-mini`"
        )
    limit = sft_length_cap(cfg.max_seq_length, cfg.sft.max_example_tokens)
    # The template writes BOS as text; TRL tokenizes this plain text with special tokens, which
    # adds BOS again where the tokenizer does (Gemma): drop the template's copy there.
    bos = getattr(tokenizer, "bos_token", None)
    strip_bos = bool(bos) and tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id]

    def render(messages: list[dict[str, str]], **kw: Any) -> str:
        text = tokenizer.apply_chat_template(messages, tokenize=False, **kw)
        return text[len(bos) :] if strip_bos and bos and text.startswith(bos) else text

    texts: list[str] = []
    prompts: list[str] = []  # completion_only_loss: each text's context (system, question, generation prompt)
    too_long = 0
    for messages in conversations:
        text = render(messages)
        if _count_tokens(tokenizer, text) <= limit:
            texts.append(text)
            if cfg.sft.completion_only_loss:
                prompts.append(render(messages[:-1], add_generation_prompt=True))
            if cfg.sft.num_examples and len(texts) >= cfg.sft.num_examples:
                break
        else:
            too_long += 1
    if not texts:
        capped = cfg.sft.max_example_tokens and limit == cfg.sft.max_example_tokens
        what = "sft.max_example_tokens" if capped else "max_seq_length/2"
        raise GrpoError(
            f"none of the {len(conversations)} worked solutions in {source} fits {limit} tokens ({what}; "
            "sft.max_example_tokens, max_seq_length/2): raise max_seq_length or sft.max_example_tokens"
        )
    info = {"source": source, "columns": columns, "examples": len(texts), "dropped_long": too_long}
    if not cfg.sft.completion_only_loss:
        return Dataset.from_list([{"text": t} for t in texts]), info
    # TRL's prompt-completion form: the same tokens as the text, labels only on the completion's.
    if not all(t.startswith(p) and len(t) > len(p) for t, p in zip(texts, prompts, strict=True)):
        raise GrpoError(
            "sft.completion_only_loss: this chat template renders the prompt differently on its own than "
            "inside the whole chat, so the answer's tokens cannot be told apart: set it to false"
        )
    info["loss_on"] = "completion"
    rows = [{"prompt": p, "completion": t[len(p) :]} for t, p in zip(texts, prompts, strict=True)]
    return Dataset.from_list(rows), info


def tool_sft_dataset(cfg: Config, run: RunDir, tokenizer: Any) -> tuple[Any, dict[str, Any]]:
    """A tool run's warm-up: prep's tool conversations (data/sft_tools.parquet), tokenized with the chat
    template, the loss on the assistant's tokens only (its ``{% generation %}`` parts: the working out, the
    calls, EOS and the answer; not the prompt, not the tool results). Pre-tokenized rows with
    ``assistant_masks``: TRL turns the mask into labels, on either backend."""
    from datasets import Dataset

    from cli.prep import tool_warmup

    path = run.data_dir / tool_warmup.FILE
    if not path.exists():
        raise GrpoError(
            f"this is a tool run (config tools: {', '.join(cfg.tools)}) but {path} is missing: re-run "
            f"`grpo prep gsm8k --tools {','.join(cfg.tools)} --run {run.path}`"
        )
    table = read_table(run, tool_warmup.FILE, (tool_warmup.COLUMN,))
    limit = sft_length_cap(cfg.max_seq_length, cfg.sft.max_example_tokens)
    rows: list[dict[str, list[int]]] = []
    too_long = 0
    for text in table[tool_warmup.COLUMN]:
        out = tokenizer.apply_chat_template(
            tool_warmup.messages_of(str(text)),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if len(ids) > limit:
            too_long += 1
            continue
        rows.append({"input_ids": ids, "assistant_masks": mask})
        if cfg.sft.num_examples and len(rows) >= cfg.sft.num_examples:
            break
    if not rows:
        raise GrpoError(
            f"none of the {len(table)} tool conversations in {tool_warmup.FILE} fits {limit} tokens "
            "(sft.max_example_tokens, max_seq_length/2): raise max_seq_length or sft.max_example_tokens"
        )
    info = {
        "source": tool_warmup.FILE,
        "columns": tool_warmup.COLUMN,
        "examples": len(rows),
        "dropped_long": too_long,
        "loss_on": "assistant (not the tool results)",
    }
    return Dataset.from_list(rows), info

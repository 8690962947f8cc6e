"""python bench/tool_format_cpu.py RUN [--n 50] [--max-new-tokens 320] [--batch 10]

Item 7's CPU learning check: after `grpo sft` on a tool run, does the model make a well-formed python call
and put the answer between the solution tags on held-out prompts (RUN/data/eval.parquet)? Greedy, HF
generate, the run's SFT adapter; the calls run in the real sandbox (the run's `sandbox.*` limits) and the
results are appended as the chat template writes them, at most `grpo.max_tool_calls` rounds, every token
counted against --max-new-tokens (TRL's rules). Prints one JSON line: the share of completions with a
well-formed call, with the answer in the tags, with both (the figure docs/tools.md reports), and correct.

The run this was measured on (docs/tools.md "Training"):

    grpo prep gsm8k --source /work/shared/data/gsm8k/train.jsonl --run R --model gemma3-270m --preset cpu \
        --tools python
    grpo sft --run R --config C.yaml      # C.yaml: max_seq_length: 1024, sft: {max_example_tokens: 400}
    python bench/tool_format_cpu.py R
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--max-new-tokens", type=int, default=320)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--adapter", default="sft")
    a = ap.parse_args()

    import pandas as pd
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from cli.config import resolve
    from cli.models import load_tokenizer, resolve_model
    from cli.run import RunDir
    from cli.tools import PythonSandbox

    run = RunDir(a.run)
    cfg = resolve(saved=run.saved_config())
    spec = cfg.format_spec()
    base = resolve_model(cfg, run)
    tok = load_tokenizer(base, spec, cfg.pad_token)
    model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(run.path / a.adapter / "adapter")).eval()
    rows = pd.read_parquet(run.data_dir / "eval.parquet").head(a.n)
    t0 = time.perf_counter()
    results = []
    (run.path / "eval").mkdir(exist_ok=True)
    out = run.path / "eval" / "tool_format_cpu.jsonl"  # batch by batch: a stopped check keeps its rows
    out.write_text("")
    with PythonSandbox(cfg.sandbox.limits()) as sandbox:
        for start in range(0, len(rows), a.batch):
            part = rows.iloc[start : start + a.batch]
            texts = complete(model, tok, spec, list(part["question"]), sandbox, a.max_new_tokens, cfg)
            judged = [judge(spec, t, str(g)) for t, g in zip(texts, part["answer"], strict=True)]
            results += judged
            with open(out, "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in judged)
            print(f"{len(results)}/{len(rows)} done, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    n = len(results)
    share = {k: round(sum(r[k] for r in results) / n, 4) for k in ("call", "tags", "both", "correct")}
    print(json.dumps({"run": str(a.run), "adapter": a.adapter, "prompts": n, **share,
                      "calls_per_completion": round(sum(r["calls"] for r in results) / n, 3),
                      "seconds": round(time.perf_counter() - t0, 1)}))  # fmt: skip


def complete(model, tok, spec, questions, sandbox, budget, cfg) -> list[str]:  # noqa: ANN001
    """Greedy tool-loop completions (the model's text with the results, as it saw them) of ``questions``."""
    import torch

    eos = tok.eos_token_id
    prompts = [
        tok.apply_chat_template(spec.messages(q), add_generation_prompt=True, tokenize=False)
        for q in questions
    ]
    seqs = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    start = [len(s) for s in seqs]
    texts = [""] * len(seqs)
    active = list(range(len(seqs)))
    for _round in range(cfg.grpo.max_tool_calls + 1):
        left = [budget - (len(seqs[i]) - start[i]) for i in active]
        active = [i for i, r in zip(active, left, strict=True) if r > 0]
        if not active:
            break
        width = max(len(seqs[i]) for i in active)
        ids = torch.tensor([[tok.pad_token_id] * (width - len(seqs[i])) + seqs[i] for i in active])
        mask = torch.tensor([[0] * (width - len(seqs[i])) + [1] * len(seqs[i]) for i in active])
        room = max(budget - (len(seqs[i]) - start[i]) for i in active)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=room, do_sample=False,
                                 eos_token_id=eos, pad_token_id=tok.pad_token_id)  # fmt: skip
        nxt = []
        for row, i in enumerate(active):
            new = out[row, width:].tolist()
            new = new[: new.index(eos) + 1] if eos in new else [t for t in new if t != tok.pad_token_id]
            new = new[: budget - (len(seqs[i]) - start[i])]
            seqs[i] += new
            turn = tok.decode([t for t in new if t != eos])
            texts[i] += turn
            calls = spec.find_tool_calls(turn)
            if calls and new and new[-1] == eos:
                results = "".join(spec.render_tool_result(sandbox.run(c).text) for c in calls)
                texts[i] += results
                seqs[i] += tok(results, add_special_tokens=False).input_ids
                nxt.append(i)
        active = nxt
    return texts


def judge(spec, text: str, gold: str) -> dict:  # noqa: ANN001
    """A well-formed call (≥ 1), the answer in the last turn's tags, and whether it is the gold one."""
    calls = spec.find_tool_calls(text)
    last = text.rsplit(spec.tool_result_end, 1)[-1]
    m = re.search(re.escape(spec.solution_start) + r"(.*?)" + re.escape(spec.solution_end), last, re.DOTALL)
    answer = m.group(1).strip() if m else None
    try:
        correct = answer is not None and abs(float(answer.replace(",", "")) - float(gold)) < 1e-6
    except ValueError:
        correct = False
    tags = m is not None
    return {"call": bool(calls), "tags": tags, "both": bool(calls) and tags, "correct": correct,
            "calls": len(calls), "answer": answer, "gold": gold, "text": text}  # fmt: skip


if __name__ == "__main__":
    main()

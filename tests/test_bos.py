"""BOS across modules (prompting, training/data, models, py_rewards/spec): one BOS on every path.

Spans several modules on purpose, so it is not one module's file; the template alone is in
tests/test_spec.py.

Gemma (and Llama) need BOS first. TRL's GRPO and our eval/export tokenize the rendered prompt without
special tokens, so the template writes BOS itself; TRL's SFT tokenizes plain text *with* special
tokens, so the SFT dataset drops the template's copy. Qwen-style tokenizers have no BOS: the
template then renders seed 000's text byte for byte.
"""

from __future__ import annotations

import pandas as pd

from cli.config.schema import Config
from cli.models.resolve import build_tiny_tokenizer
from cli.run.rundir import RunDir
from py_rewards.spec import get_spec


def _bos_tokenizer(spec):
    """The tiny tokenizer plus a BOS that the tokenizer adds itself (as Gemma's does)."""
    from tokenizers import AddedToken, processors
    from transformers import PreTrainedTokenizerFast

    backend = build_tiny_tokenizer(spec).backend_tokenizer
    backend.add_special_tokens([AddedToken("<bos>", special=True, normalized=False)])
    bos_id = backend.token_to_id("<bos>")
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos_id)]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    tok.chat_template = spec.chat_template()
    return tok, bos_id


def test_one_bos_on_every_path(tmp_path) -> None:
    from cli.infer import prompting
    from cli.train.data import sft_dataset

    spec = get_spec("seed000")
    tok, bos = _bos_tokenizer(spec)
    msgs = spec.messages("What is 2+3?")
    # GRPO (TRL tokenizes conversational prompts through the template, no special tokens added)
    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)
    ids = enc["input_ids"]
    assert ids[0] == bos and ids.count(bos) == 1
    # eval / chat / export verification: rendered text, tokenized without special tokens
    prompt = prompting.prompt_text(tok, spec, "What is 2+3?")
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert ids[0] == bos and ids.count(bos) == 1
    # SFT: TRL tokenizes the plain text with special tokens
    run = RunDir(tmp_path)
    run.data_dir.mkdir(parents=True)
    pd.DataFrame(
        {"question": ["What is 2+3?", "What is 4+4?"], "answer": ["5", "8"], "solution": ["2+3=5", "4+4=8"]}
    ).to_parquet(run.data_dir / "train.parquet")
    dataset, _ = sft_dataset(Config(), run, tok)
    for text in dataset["text"]:
        ids = tok(text=text)["input_ids"]
        assert ids[0] == bos and ids.count(bos) == 1
    # a tokenizer without BOS: SFT text keeps seed 000's rendering
    tiny = build_tiny_tokenizer(spec)
    dataset, _ = sft_dataset(Config(), run, tiny)
    assert all(t.startswith(spec.system_prompt) for t in dataset["text"])

"""Every tokenizer family a GGUF carries imports and exports (cli/models/gguf_tokenizer.py, cli/export/).

The matrix (tests/gguf_families.py): llama + gpt2 BPE (SmolLM2-like ``smollm``, Llama-3-like ``llama-bpe``),
llama + SentencePiece, qwen2, qwen3, gemma3 — tiny models written by the real converter. For each, the
product imports the GGUF, the imported folder is exported to q8_0 the way `grpo export` does it
(``save_tokenizer`` + ``carry_vocab`` + the converter child), and llama.cpp must load both files and
tokenize the probes (digits, contractions, whitespace runs, non-ASCII, the format tags, the chat prompt)
exactly as the imported HF tokenizer does, with and without BOS; the exported file keeps the family and
the pre-tokenizer. A llama GGUF with a gpt2 vocabulary used to export as SentencePiece without merges, and
llama.cpp aborted on the first tokenize (``std::out_of_range``).

The `slow` test runs the chain as a user does, per family: `grpo prep --model X.gguf` → `grpo sft` one step
→ `grpo export --gguf q8_0` verified in llama.cpp.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gguf_families import FAMILIES, PROBES, convert, llama_ids, write_ggufs
from helpers import SAMPLES, cli_env, grpo_cli, needs_gguf, ok

pytestmark = needs_gguf


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Path]:
    return write_ggufs(tmp_path_factory.mktemp("families"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("cache")
        mp.setenv("GRPO_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def matrix(originals, cache, tmp_path_factory) -> dict[str, dict]:
    """Per family: the imported folder, its tokenizer, the q8_0 export, and llama.cpp's ids on both files."""
    from cli.export.builders import carry_vocab, save_tokenizer
    from cli.models.gguf_file import read_header
    from cli.models.gguf_import import import_gguf
    from cli.models.loading import load_tokenizer
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    root = tmp_path_factory.mktemp("exports")
    rows, jobs = {}, {}
    for kind, path in originals.items():
        folder = import_gguf(path)
        tok = load_tokenizer(folder, spec)
        src = root / kind
        shutil.copytree(folder, src, ignore=shutil.ignore_patterns("tokenizer*", "chat_template.jinja"))
        save_tokenizer(tok, src)  # as export writes the merged folder
        pre = carry_vocab(str(folder), src, tok)
        jobs[kind] = (src, pre, root / f"{kind}-q8_0.gguf")
        prompt = tok.apply_chat_template(
            spec.messages("What is 2+3?"), add_generation_prompt=True, tokenize=False
        )
        rows[kind] = {"folder": folder, "tok": tok, "texts": [*PROBES, prompt], "header": read_header(path)}
    convert(jobs, "q8_0")
    paths = {
        **{f"{k}:original": p for k, p in originals.items()},
        **{f"{k}:q8_0": j[2] for k, j in jobs.items()},
    }
    ids = llama_ids(paths, {name: rows[name.split(":")[0]]["texts"] for name in paths})
    for kind, row in rows.items():
        row.update(
            original=ids[f"{kind}:original"], exported=ids[f"{kind}:q8_0"], q8_0=read_header(jobs[kind][2])
        )
    return rows


@pytest.mark.parametrize("kind", FAMILIES)
def test_family_imports_and_exports_as_llamacpp_tokenizes(kind, matrix) -> None:
    row = matrix[kind]
    tok, texts = row["tok"], row["texts"]
    plain = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    added = [tok(t)["input_ids"] for t in texts]
    # The imported HF tokenizer splits as llama.cpp does on the user's file ...
    assert row["original"] == {"plain": plain, "added": added}
    # ... and llama.cpp loads the export and splits the same way: the family and pre-tokenizer are kept.
    assert row["exported"] == {"plain": plain, "added": added}
    before, after = row["header"], row["q8_0"]
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.add_bos_token"):
        assert after.get(key) == before.get(key), key
    assert after.tokens == before.tokens
    record = json.loads((row["folder"] / "grpo-import.json").read_text())
    assert record["vocab"]["model"] == before.get("tokenizer.ggml.model")


def test_gpt2_vocabulary_in_a_llama_file_is_not_sentencepiece(matrix) -> None:
    """The issue's SmolLM2 case, field by field: no byte fallback, a byte-level decoder, merges exported."""
    data = json.loads(matrix["llama-smollm"]["tok"].backend_tokenizer.to_str())
    assert data["model"]["type"] == "BPE" and not data["model"].get("byte_fallback")
    assert data["decoder"]["type"] == "ByteLevel"
    assert matrix["llama-smollm"]["q8_0"].get("tokenizer.ggml.model") == "gpt2"
    assert matrix["llama-smollm"]["q8_0"].get("tokenizer.ggml.merges")  # (read_header counts them)


@pytest.mark.slow
@pytest.mark.parametrize("kind", FAMILIES)
def test_family_chain_import_sft_export(kind, originals, tmp_path) -> None:
    """As a user runs it: prep imports the GGUF, SFT one step, export q8_0 verified in llama.cpp."""
    run, env = tmp_path / "run", {**cli_env(), "GRPO_CACHE": str(tmp_path / "cache")}
    src = SAMPLES / "gsm8k_train.jsonl"
    ok(grpo_cli("prep", "gsm8k", "--source", str(src), "--limit", "16", "--eval-size", "2",
                "--model", str(originals[kind]), "--run", str(run), env=env))  # fmt: skip
    ok(grpo_cli("sft", "--run", str(run), "--max-steps", "1", env=env))
    out = ok(
        grpo_cli(
            "export",
            "--run",
            str(run),
            "--gguf",
            "q8_0",
            "--verify",
            "2",
            "--verify-tokens",
            "8",
            "--allow-zero",
            env=env,
        )
    )  # fmt: skip (one step at warm-up's lr 0 leaves lora_B zero)
    report = json.loads((run / "export" / "verify.json").read_text())
    (art,) = [a for a in report["artifacts"] if a["name"] == "gguf-q8_0"]
    assert art["reloaded"] and art["prompt_tokenization_match"] == 1.0, out
    assert art["chat_template"], out


# ---- llama.cpp failures say why (a file it cannot run is one line, never an abort) ------------------------
@pytest.fixture(scope="module")
def broken(originals, tmp_path_factory) -> Path:
    """The issue's bad export: a gpt2 vocabulary written as SentencePiece without merges. llama.cpp loads it,
    then aborts on the first tokenize (std::out_of_range)."""
    from gguf_families import rewrite

    from cli.models.gguf_file import read_header

    n = len(read_header(originals["llama-smollm"]).tokens)
    changes = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.scores": [0.0] * n}
    dest = tmp_path_factory.mktemp("broken") / "s-grpo-q8_0.gguf"
    return rewrite(originals["llama-smollm"], dest, changes, drop=("tokenizer.ggml.merges",))


def test_llamacpp_failure_names_the_part_and_the_cause(broken) -> None:
    from cli.common import GrpoError
    from cli.export.gguf import check_runs

    with pytest.raises(GrpoError) as err:
        check_runs(broken, "What is 2+3?")
    assert str(err.value).startswith(
        "llama.cpp cannot read the vocabulary of s-grpo-q8_0.gguf (std::out_of_range in the tokenizer)"
    ), str(err.value)


def test_chat_on_a_gguf_llamacpp_cannot_run_is_one_line(broken, run_dir, tmp_path) -> None:
    from helpers import copy_run, invoke, one_error_line

    run = copy_run(run_dir, tmp_path / "run")
    (run / "export" / "gguf-q8_0").mkdir(parents=True)
    shutil.copyfile(broken, run / "export" / "gguf-q8_0" / broken.name)
    result = invoke("chat", "--run", run, "--engine", "gguf", "--prompt", "What is 2+3?")
    line = one_error_line(result)
    assert result.exit_code == 2 and "cannot read the vocabulary of s-grpo-q8_0.gguf" in line


def test_verify_0_still_runs_each_gguf(run_dir, tmp_path) -> None:
    """--verify 0 decodes nothing, but llama.cpp still loads the file and tokenizes a prompt."""
    from helpers import copy_run, invoke

    run = copy_run(run_dir, tmp_path / "run")
    result = invoke("export", "--run", run, "--gguf", "q8_0", "--verify", "0")
    assert result.exit_code == 0, result.output
    (art,) = json.loads((run / "export" / "verify.json").read_text())["artifacts"]
    assert art["reloaded"] is True and art["prompt_tokenization_match"] == 1.0

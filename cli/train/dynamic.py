"""Dynamic sampling (DAPO, arXiv:2503.14476 §3.2), online: groups with no reward spread are refilled.

A group whose G completions all score the same has zero advantage: it costs a rollout and teaches
nothing, and as the model gets better (or worse) at a prompt more of each batch is such groups. DAPO
keeps sampling until the batch is full of groups with a spread. Here, after the rollout of a step,
every group whose advantages are all zero is replaced by a group of a fresh prompt (drawn from the
training set, seeded, without repeats until the set is used up), up to ``max_retries`` more rollouts in
the step; groups still without spread after that stay (their advantage is zero, so they change nothing).
`grpo filter` is the offline form of the same idea; the two combine.

TRL leaves this open (huggingface/trl#3708). This works on the rollout's output: each group's rows of
every per-completion tensor are swapped for the new group's, prompt tensors re-padded on the left and
completion tensors on the right, and the token count of the loss recounted. One process only: under
``--gpus N`` the ranks would have to retry together.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

# An advantage this small is a group with no reward spread (TRL divides r - mean by std + 1e-4).
DEAD = 1e-3


class DynamicSampling:
    def __init__(self, dataset: Any, gens: int, *, max_retries: int, seed: int) -> None:
        self.dataset, self.gens, self.max_retries = dataset, gens, max_retries
        self.rng = random.Random(seed)
        self.order: list[int] = []
        self.stats = {"refilled": 0, "retries": 0, "left": 0, "groups": 0}

    def _prompts(self, n: int) -> list[dict[str, Any]]:
        rows = []
        for _ in range(n):
            if not self.order:
                self.order = list(range(len(self.dataset)))
                self.rng.shuffle(self.order)
            rows.append(self.dataset[self.order.pop()])
        return [row for row in rows for _ in range(self.gens)]

    def dead_groups(self, out: dict[str, Any]) -> list[int]:
        adv = out["advantages"].reshape(-1, self.gens)
        return [int(i) for i in (adv.abs().amax(dim=1) < DEAD).nonzero().flatten().tolist()]

    def refill(
        self, trainer: Any, inputs: list[dict[str, Any]], out: dict[str, Any], rollout: Callable
    ) -> dict:
        """``out`` with its dead groups replaced by live ones from up to ``max_retries`` more rollouts."""
        dead = self.dead_groups(out)
        self.stats["groups"] += len(inputs) // self.gens
        retries = 0
        while dead and retries < self.max_retries:
            retries += 1
            extra = rollout(self._prompts(len(dead)))
            live = [g for g in range(len(dead)) if g not in set(self.dead_groups(extra))]
            for slot, group in zip(dead, live, strict=False):
                out = splice(out, extra, slot, group, self.gens, trainer)
                self.stats["refilled"] += 1
            dead = dead[min(len(dead), len(live)) :]
        self.stats["retries"] += retries
        self.stats["left"] += len(dead)
        return out

    def take_row(self) -> dict[str, Any]:
        s, groups = self.stats, max(self.stats["groups"], 1)
        row = {
            "dynamic/refilled_groups": s["refilled"],
            "dynamic/retries": s["retries"],
            "dynamic/frac_zero_std_after": round(s["left"] / groups, 4),
        }
        self.stats = {"refilled": 0, "retries": 0, "left": 0, "groups": 0}
        return row


def _pad(t: Any, width: int, left: bool, value: float) -> Any:
    import torch

    extra = width - t.shape[1]
    if extra <= 0:
        return t
    pad = torch.full((t.shape[0], extra, *t.shape[2:]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def splice(
    out: dict[str, Any], extra: dict[str, Any], slot: int, group: int, gens: int, trainer: Any
) -> dict:
    """``out`` with the rows of group ``slot`` replaced by those of group ``group`` of ``extra``."""
    import torch

    rows = len(out["advantages"])
    a, b = slice(slot * gens, (slot + 1) * gens), slice(group * gens, (group + 1) * gens)
    pad_id = trainer.processing_class.pad_token_id if hasattr(trainer, "processing_class") else 0
    new = dict(out)
    for key, value in out.items():
        other: Any = extra.get(key)
        if not (torch.is_tensor(value) and value.ndim >= 1 and len(value) == rows and torch.is_tensor(other)):
            continue
        left = key.startswith("prompt")
        fill = pad_id if key == "prompt_ids" or key == "completion_ids" else 0
        if value.ndim >= 2 and value.shape[1] != other.shape[1]:
            width = max(value.shape[1], other.shape[1])
            value, other = _pad(value, width, left, fill), _pad(other, width, left, fill)
        value = value.clone()
        value[a] = other[b].to(value.device)
        new[key] = value
    mask = (
        new["completion_mask"] if new.get("tool_mask") is None else new["completion_mask"] * new["tool_mask"]
    )
    if "num_items_in_batch" in new:
        new["num_items_in_batch"] = mask.sum()
    return new

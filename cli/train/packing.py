"""Padding-free (packed) log-prob and loss passes for the hf backend (``grpo.padding_free``).

TRL's GRPO trainer scores a step's completions as one padded batch: prompts left-padded, completions
right-padded, ``(rows, prompt + completion)`` tokens through every layer. On the 1.5B H200 step (128
completions of ≤ 384 tokens) that is ~51 k token slots for ~26 k real tokens (bench/h200.md, round 11's
profile): half the GEMM, LoRA and norm work of the log-prob passes, the loss and the backward is padding.

Packed, the same sequences lie end to end with no padding, each with its own position ids restarting at
0 (what the rollout engine gives them), and transformers keeps them apart by those position ids
(``masking_utils.find_packed_sequence_indices``: with no 2-D attention mask, a block-diagonal causal mask
on sdpa/eager/flex; the varlen kernels under flash attention, which take a single row). So:

- under a flash-attention implementation, one row of all the real tokens (varlen attention: no token
  attends across a boundary, no quadratic cost);
- otherwise (sdpa, eager), rows no longer than the longest sequence, filled first-fit by decreasing
  length: the GEMMs see ~the real tokens, the attention's masked cost stays that of one padded row each.

The final hidden states go back to the padded layout (zeros at padding, never scored), so everything after
the model (our LM head, TRL's loss) is unchanged. The math is the padded pass's: RoPE depends only on the
relative positions within a sequence, and the mask the same tokens. tests/test_packing.py checks the
per-token log-probs, the loss and its gradients against the padded pass on a tiny model, on sdpa and eager.

A batch that is not TRL's layout (a row whose attended tokens are not one run, extra model inputs such as
images) goes through the padded pass, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Model inputs the packed pass knows what to do with (others given as None are ignored); any other (images,
# token types, router logits, embeddings) keeps the padded pass.
PACKABLE_INPUTS = frozenset({"input_ids", "attention_mask", "use_cache", "position_ids"})


def first_fit_rows(lengths: list[int], capacity: int) -> list[list[int]]:
    """Sequence indices per row, first-fit by decreasing length into rows of ``capacity`` tokens (each
    sequence whole; none is longer than ``capacity``). Deterministic: ties keep the input order."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(capacity - lengths[i])
    return rows


@dataclass(frozen=True)
class Packing:
    """Where each packed slot's token comes from in the padded ``(batch, length)`` layout."""

    input_ids: Any  # (rows, width) token ids; filler slots hold a real token id, their output is dropped
    position_ids: Any  # (rows, width) restarting at 0 for each sequence (and for each row's filler)
    source: Any  # (rows * width,) flat index into batch * length; -1 for filler slots
    shape: tuple[int, int]  # the padded (batch, length)

    @property
    def real_tokens(self) -> int:
        return int((self.source >= 0).sum())


def plan_packing(input_ids: Any, attention_mask: Any, *, single_row: bool) -> Packing | None:
    """The packed layout of a padded batch, or None when a row's attended tokens are not one contiguous run
    (then the padded pass is the only faithful one)."""
    import torch

    if attention_mask is None or input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        return None
    batch, length = input_ids.shape
    mask = attention_mask.to(torch.bool).cpu()
    counts = mask.sum(dim=1)
    starts = mask.to(torch.int8).argmax(dim=1)
    span = torch.arange(length)[None, :]
    one_run = (span >= starts[:, None]) & (span < (starts + counts)[:, None])
    if not torch.equal(one_run, mask) or int(counts.min()) == 0:
        return None
    lengths = counts.tolist()
    rows = [list(range(batch))] if single_row else first_fit_rows(lengths, max(lengths))
    width = max(sum(lengths[i] for i in row) for row in rows)
    source = torch.full((len(rows), width), -1, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        at = 0
        for i in row:
            n = lengths[i]
            source[r, at : at + n] = i * length + int(starts[i]) + torch.arange(n)
            positions[r, at : at + n] = torch.arange(n)
            at += n
        positions[r, at:] = torch.arange(width - at)  # the filler: a sequence of its own
    device = input_ids.device
    source = source.reshape(-1).to(device)
    flat = input_ids.reshape(-1)
    ids = torch.where(source >= 0, flat[source.clamp(min=0)], flat[0]).reshape(len(rows), width)
    return Packing(ids, positions.to(device), source, (batch, length))


def unpack(hidden: Any, packing: Packing) -> Any:
    """The packed hidden states ``(rows, width, H)`` back in the padded layout ``(batch, length, H)``, zeros
    at padding (differentiable: the gradient flows to the packed slots)."""
    batch, length = packing.shape
    flat = hidden.reshape(-1, hidden.shape[-1])
    real = packing.source >= 0
    out = flat.new_zeros(batch * length, flat.shape[-1])
    out = out.index_copy(0, packing.source[real], flat[real])
    return out.reshape(batch, length, -1)


def single_row(config: Any) -> bool:
    """One row of all tokens under flash attention (its varlen kernels take a single row); rows no longer
    than the longest sequence otherwise (sdpa/eager build a dense block-diagonal mask per row)."""
    impl = str(getattr(config, "_attn_implementation", "") or "")
    return "flash" in impl


def packed_hidden(base_model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any | None:
    """The base model's last hidden states for a padded batch, computed packed; None when the batch cannot
    be packed (the caller runs the padded pass)."""
    given = {k for k, v in kwargs.items() if v is not None}  # PEFT passes inputs_embeds=None and the like
    if args or not given <= PACKABLE_INPUTS or "position_ids" in given:
        return None
    packing = plan_packing(
        kwargs.get("input_ids"), kwargs.get("attention_mask"), single_row=single_row(base_model.config)
    )
    if packing is None:
        return None
    _tell_once(packing)
    out = base_model(input_ids=packing.input_ids, position_ids=packing.position_ids, use_cache=False)
    return unpack(out.last_hidden_state, packing)


_TOLD: list[bool] = []


def _tell_once(packing: Packing) -> None:
    """One line, at the first packed pass of the process: what packing saved on that batch."""
    if _TOLD:
        return
    _TOLD.append(True)
    from cli.run.console import err_console

    rows, width = packing.input_ids.shape
    batch, length = packing.shape
    err_console.print(
        f"grpo: padding-free passes: {batch} sequences in {rows} rows of {width} tokens, "
        f"{packing.real_tokens} tokens in {rows * width} slots (padded: {batch * length})",
        soft_wrap=True,
    )

"""A rank's share of an optimizer step as the model reads it: micro-batches of rows, each
row one example padded to the widest, or with `packing` several examples end to end.

A packed row carries position ids that restart at 0 at each example and no attention
mask: transformers reads the restarts (`masking_utils.find_packed_sequence_indices`) and
masks attention block-diagonally (sdpa and eager), or hands the boundaries to flash
attention's variable-length kernels, so no example attends across its boundary. Each
example's labels already end in IGNORE (the next token is its own), so its loss is what it
would be alone. The padding at a packed row's end is a sequence of its own, ignored."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from executor.models import fixture


@dataclasses.dataclass(frozen=True)
class Rows:
    """One micro-batch as tensors."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor | None = None
    position_ids: torch.Tensor | None = None

    def inputs(self, device: Any) -> dict[str, torch.Tensor]:
        """The model's keyword arguments, on `device`."""
        named = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "position_ids": self.position_ids,
        }
        return {k: t.to(device) for k, t in named.items() if t is not None}


def padded(examples: Sequence[fixture.Encoded], pad: int) -> Rows:
    """One example a row, padded on the right and masked."""
    ids, labels, mask = fixture.collate(examples, pad)
    return Rows(ids, labels, attention_mask=mask)


def pack(examples: Sequence[fixture.Encoded], width: int) -> list[list[fixture.Encoded]]:
    """The examples in order, end to end in rows of at most `width` tokens: each goes to the
    first row it fits in (first-fit keeps rows full without reordering much)."""
    rows: list[list[fixture.Encoded]] = []
    used: list[int] = []
    for example in examples:
        size = len(example.input_ids)
        row = next((r for r, n in enumerate(used) if n + size <= width), None)
        if row is None:
            rows.append([example])
            used.append(size)
        else:
            rows[row].append(example)
            used[row] += size
    return rows


def packed(rows: Sequence[Sequence[fixture.Encoded]], pad: int) -> Rows:
    """Rows of examples end to end, position ids restarting at each example."""
    width = max(sum(len(e.input_ids) for e in row) for row in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), fixture.IGNORE, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        at = 0
        for e in row:
            n = len(e.input_ids)
            ids[r, at : at + n] = torch.tensor(e.input_ids)
            labels[r, at : at + n] = torch.tensor(e.labels)
            positions[r, at : at + n] = torch.arange(n)
            at += n
        positions[r, at:] = torch.arange(width - at)
    return Rows(ids, labels, position_ids=positions)


def micro_batches(
    examples: Sequence[fixture.Encoded],
    *,
    per_device: int,
    accumulation: int,
    pad: int,
    pack_width: int | None = None,
) -> list[Rows | None]:
    """A rank's examples of one step as exactly `accumulation` micro-batches of at most
    `per_device` rows (None where none is left), so DeepSpeed's own count of micro-steps
    ends the step. With `pack_width` the rows are packed and the step takes fewer."""
    if pack_width is None:
        micro = [
            padded(examples[i : i + per_device], pad) for i in range(0, len(examples), per_device)
        ]
    else:
        rows = pack(examples, pack_width)
        micro = [packed(rows[i : i + per_device], pad) for i in range(0, len(rows), per_device)]
    if len(micro) > accumulation:
        raise ValueError("a rank's share of a step holds more than its micro-batches")
    return [*micro, *[None] * (accumulation - len(micro))]

"""How an engine decodes: the next token chosen under a sample's settings, and a row ended
at its first stop string."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class Row:
    """One sequence being decoded."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        self.reason = ""


def choose(logits: torch.Tensor, p: dict[str, Any], generator: torch.Generator) -> torch.Tensor:
    if p["temperature"] == 0:
        return logits.argmax(dim=-1)
    scaled = logits / p["temperature"]
    if p["top_k"] and p["top_k"] < scaled.shape[-1]:
        kth = torch.topk(scaled, p["top_k"], dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if p["top_p"] < 1:
        ordered, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(ordered, dim=-1)
        # Keep a token while the tokens likelier than it have not reached p.
        drop = probs.cumsum(dim=-1) - probs >= p["top_p"]
        ordered = ordered.masked_fill(drop, float("-inf"))
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, order, ordered)
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def check_stop(row: Row, stops: list[str], decode: Callable[[list[int]], str]) -> None:
    """End the row at the first stop string; its tokens keep the longest prefix whose
    text comes before the stop string."""
    text = decode(row.tokens)
    hits = [text.index(s) for s in stops if s in text]
    if not hits:
        return
    row.text = text[: min(hits)]
    n = len(row.tokens) - 1
    while n > 0 and not row.text.startswith(decode(row.tokens[:n])):
        n -= 1
    del row.tokens[n:], row.logprobs[n:]
    row.reason = "stop"

"""The losses of a forward_backward, as pure functions over right-padded tensors: each
answers the per-token (elementwise) loss, zero at padded positions, and the loss is its
sum (cross_entropy's divided by the total weight)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def columns(
    rows: Sequence[tuple[list[int], list[int], list[float], list[float]]], width: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows' targets and their two columns of numbers, right-padded with zeros to
    `width`: the weights and nothing, or the sampling logprobs and the advantages."""
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    first = torch.zeros((len(rows), width), dtype=torch.float32)
    second = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, (_, t, a, b) in enumerate(rows):
        targets[i, : len(t)] = torch.tensor(t)
        first[i, : len(a)] = torch.tensor(a, dtype=torch.float32)
        if b:
            second[i, : len(b)] = torch.tensor(b, dtype=torch.float32)
    return targets, first, second


def target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each position's log-probability of its target."""
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def cross_entropy(
    logprobs: torch.Tensor, weights: torch.Tensor, real: torch.Tensor
) -> torch.Tensor:
    """The weighted negative log-probability of each target."""
    return -(weights * logprobs * real)


def _ratio(logprobs: torch.Tensor, sampled: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    return torch.exp((logprobs - sampled) * real)


def importance_sampling(
    logprobs: torch.Tensor, sampled: torch.Tensor, advantages: torch.Tensor, real: torch.Tensor
) -> torch.Tensor:
    """`-exp(logp - sampling logp) * advantage`."""
    return -(_ratio(logprobs, sampled, real) * advantages) * real


def ppo(
    logprobs: torch.Tensor,
    sampled: torch.Tensor,
    advantages: torch.Tensor,
    real: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> torch.Tensor:
    """Importance sampling with the ratio clipped to `[clip_low, clip_high]`, the
    pessimistic of the two terms."""
    ratio = _ratio(logprobs, sampled, real)
    clipped = torch.clamp(ratio, clip_low, clip_high)
    return -torch.minimum(ratio * advantages, clipped * advantages) * real


def elementwise(
    loss_fn: str,
    logprobs: torch.Tensor,
    real: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor,
    config: dict[str, float],
) -> torch.Tensor:
    """The per-token loss of `loss_fn` (empty: cross_entropy) over the columns `columns`
    answers."""
    if loss_fn == "importance_sampling":
        return importance_sampling(logprobs, first, second, real)
    if loss_fn == "ppo":
        return ppo(
            logprobs,
            first,
            second,
            real,
            config["clip_low_threshold"],
            config["clip_high_threshold"],
        )
    return cross_entropy(logprobs, first, real)

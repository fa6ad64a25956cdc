"""The terms a decision objective adds to cross-entropy (HIP-1333 §3), and the KL that
holds a trained model to its base's answers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch.nn import functional as F

from executor.models.decider import cross_entropy
from executor.wire.plan import Term
from trainyard.training.decisions import Decision


def hard_margin(logits: torch.Tensor, gold: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    """Mean hinge between each row's gold logit and its hardest negative's."""
    picked = logits.gather(1, gold[:, None])[:, 0]
    negatives = logits.masked_fill(F.one_hot(gold, logits.size(1)).bool(), float("-inf"))
    return F.relu(margin - (picked - negatives.max(dim=1).values)).mean()


def pairs(groups: Sequence[str], gold: Sequence[int], same: bool) -> list[tuple[int, int]]:
    """Ordered pairs (a, b), a ≠ b, of rows sharing a non-empty group whose gold labels are
    the same (`same`) or differ."""
    return [
        (a, b)
        for a in range(len(groups))
        for b in range(len(groups))
        if a != b and groups[a] and groups[a] == groups[b] and (gold[a] == gold[b]) == same
    ]


def pairwise_margin(
    logits: torch.Tensor, gold: Sequence[int], groups: Sequence[str], margin: float = 0.5
) -> torch.Tensor:
    """For rows a, b of one group with different gold labels: a must give its gold option
    a log-probability above what b gives it by `margin` (a mean hinge over such pairs).
    Log-probabilities, not logits, so a noul's fixed 0 logit is compared fairly."""
    found = pairs(groups, gold, same=False)
    if not found:
        return logits.sum() * 0.0
    logp = F.log_softmax(logits, dim=1)
    a, b = (torch.tensor(x) for x in zip(*found, strict=True))
    g = torch.tensor(gold)[a]
    return F.relu(margin - (logp[a, g] - logp[b, g])).mean()


def consistency(logits: torch.Tensor, gold: Sequence[int], groups: Sequence[str]) -> torch.Tensor:
    """Symmetric KL between the answers of rows of one group with the same gold label (the
    mean over unordered pairs of KL(a‖b) + KL(b‖a))."""
    found = [(a, b) for a, b in pairs(groups, gold, same=True) if a < b]
    if not found:
        return logits.sum() * 0.0
    logp = F.log_softmax(logits, dim=1)
    a, b = (torch.tensor(x) for x in zip(*found, strict=True))
    diff = logp[a] - logp[b]
    return ((logp[a].exp() - logp[b].exp()) * diff).sum(dim=1).mean()


def kl(reference: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Mean KL(reference ‖ answers), the reference given as probabilities."""
    logp = F.log_softmax(logits, dim=1)
    ref = reference.clamp_min(1e-12)
    return (reference * (ref.log() - logp)).sum(dim=1).mean()


def objective(
    logits: torch.Tensor, rows: Sequence[Decision], terms: Iterable[Term]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Cross-entropy against the targets plus each weighted term, for rows of one question."""
    target = torch.tensor([r.target for r in rows], dtype=logits.dtype)
    gold_list = [r.gold for r in rows]
    gold = torch.tensor(gold_list)
    groups = [r.group for r in rows]
    total = cross_entropy(logits, target)
    parts = {"cross_entropy": float(total.detach())}
    for term in terms:
        kind, weight, margin = term.kind, term.weight, term.margin
        if kind == "hard_margin":
            value = hard_margin(logits, gold, margin)
        elif kind == "pairwise_margin":
            value = pairwise_margin(logits, gold_list, groups, margin)
        elif kind == "consistency":
            value = consistency(logits, gold_list, groups)
        else:
            raise ValueError(f"unknown objective term {kind}")
        parts[kind] = float(value.detach())
        total = total + weight * value
    return total, parts

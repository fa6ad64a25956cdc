"""Keeping an update off the protected suites' directions (HIP-1333 §8): the directions
the base's answers on them move along, per layer, and a projector that removes a share
of each gradient's component along them."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from executor.models.decider import Decider, by_question, logits_of
from trainyard.training.decisions import Decision


def jacobian_rows(
    model: Decider,
    rows: Sequence[Decision],
    params: Mapping[str, nn.Parameter],
    limit: int,
    seed: int = 0,
) -> dict[str, list[torch.Tensor]]:
    """Per parameter, per-example Jacobian rows of the answers on up to `limit` rows (a
    seeded sample spread over the rows' questions). The options' log-probability
    gradients of an example span what its logit differences' gradients span (wherever
    every option has some probability), k − 1 directions for k options; the differences
    are used because a confident answer's log-probability gradient all but vanishes."""
    by_q = by_question(rows)
    rng = random.Random(f"trainyard-projection-{seed}")
    queues = [rng.sample(idx, len(idx)) for idx in by_q.values()]
    picked: list[int] = []
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop())
    names = list(params)
    out: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    model.eval()
    for i in picked:
        row = rows[i]
        logits = logits_of(model, [row.state], row.question)[0]
        last = len(row.question.labels) - 1
        for option in range(last):
            grads = torch.autograd.grad(
                logits[last] - logits[option],
                [params[n] for n in names],
                retain_graph=True,
                allow_unused=True,
            )
            for name, g in zip(names, grads, strict=True):
                if g is not None:
                    out[name].append(g.detach().reshape(-1).double())
    return out


def orthonormal(vectors: Sequence[torch.Tensor], rtol: float = 1e-4) -> torch.Tensor:
    """An orthonormal basis (columns, float32) of the vectors' span, dropping directions
    whose singular value is below rtol of the largest."""
    kept = [v / v.norm() for v in vectors if float(v.norm()) > 0]
    if not kept:
        return torch.zeros(0, 0)
    matrix = torch.stack(kept, dim=1)  # (numel, n)
    u, s, _ = torch.linalg.svd(matrix, full_matrices=False)
    rank = int((s > rtol * s[0]).sum())
    return u[:, :rank].float().contiguous()


class Projector:
    """Removes λ of each gradient's component in the protected subspace, per layer:
    g' = g − λ·P g with P = Q Qᵀ for Q an orthonormal basis of the layer's protected
    directions."""

    def __init__(self, bases: Mapping[str, torch.Tensor], strength: float) -> None:
        self.bases = {k: v for k, v in bases.items() if v.numel()}
        self.strength = float(strength)

    @property
    def nbytes(self) -> int:
        return sum(q.numel() * q.element_size() for q in self.bases.values())

    def directions(self) -> dict[str, int]:
        return {k: int(q.shape[1]) for k, q in self.bases.items()}

    def project(self, name: str, grad: torch.Tensor) -> float:
        """Projects `grad` in place; the share of it removed, ‖λ P g‖ / ‖g‖."""
        q = self.bases.get(name)
        flat = grad.view(-1)
        norm = float(flat.norm())
        if q is None or norm == 0.0 or self.strength == 0.0:
            return 0.0
        removed = q @ (q.T @ flat) * self.strength
        flat.sub_(removed)
        return float(removed.norm()) / norm

    def apply(self, params: Mapping[str, nn.Parameter]) -> dict[str, float]:
        """Projects every listed parameter's gradient; the share removed, per layer."""
        return {
            name: self.project(name, p.grad)
            for name, p in params.items()
            if p.grad is not None and name in self.bases
        }


def protected_subspace(
    model: Decider,
    rows: Sequence[Decision],
    params: Mapping[str, nn.Parameter],
    strength: float,
    examples: int = 384,
    layer_bytes: int = 48 << 20,
) -> Projector:
    """The projector for the protected rows' gradients at `model` (the base). A layer
    keeps at most `layer_bytes` of directions: a large layer (the embedding) is spanned
    by the first of the sampled examples' gradients only."""
    found = jacobian_rows(model, rows, params, examples)
    bases: dict[str, torch.Tensor] = {}
    for name, vectors in found.items():
        cap = max(1, layer_bytes // (4 * params[name].numel()))
        bases[name] = orthonormal(vectors[:cap])
    return Projector(bases, strength)

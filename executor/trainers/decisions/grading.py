"""How a decision model is graded: accuracy, log loss and calibration error against the
rows' targets, and a protected suite's budget."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from executor.models.decider import answers
from trainyard.training.decisions import Decision

ECE_BINS = 15


@dataclasses.dataclass(frozen=True)
class Grades:
    accuracy: float
    log_loss: float
    ece: float

    def to_json(self) -> dict[str, float]:
        return {"accuracy": self.accuracy, "log_loss": self.log_loss, "ece": self.ece}


def ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """Expected calibration error: equal-width bins on the top answer's confidence (a
    confidence c falls in bin min(⌊c·bins⌋, bins − 1)), Σ |B|/n · |acc_B − conf_B|."""
    n = len(confidence)
    if n == 0:
        return 0.0
    count = [0] * bins
    conf = [0.0] * bins
    hits = [0.0] * bins
    for c, ok in zip(confidence, correct, strict=True):
        i = min(int(c * bins), bins - 1)
        count[i] += 1
        conf[i] += c
        hits[i] += 1.0 if ok else 0.0
    return sum(abs(hits[i] - conf[i]) / n for i in range(bins) if count[i])


def argmax(values: Sequence[float]) -> int:
    """The index of the largest value, the first of a tie."""
    return max(range(len(values)), key=values.__getitem__)


def grade(probabilities: Sequence[Sequence[float]], targets: Sequence[Sequence[float]]) -> Grades:
    """Accuracy (argmax of the answer against the target's, first of a tie), log loss
    (mean −Σ t·log p) and 15-bin ECE of answers against target distributions."""
    n = len(probabilities)
    if n == 0:
        return Grades(0.0, 0.0, 0.0)
    top = [argmax(p) for p in probabilities]
    gold = [argmax(t) for t in targets]
    correct = [a == b for a, b in zip(top, gold, strict=True)]
    loss = sum(
        -sum(t * math.log(max(p, 1e-12)) for p, t in zip(ps, ts, strict=True) if t > 0)
        for ps, ts in zip(probabilities, targets, strict=True)
    )
    return Grades(
        accuracy=sum(correct) / n,
        log_loss=loss / n,
        ece=ece([p[i] for p, i in zip(probabilities, top, strict=True)], correct),
    )


def grade_model(model: nn.Module, rows: Sequence[Decision]) -> Grades:
    return grade(answers(model, rows), [r.target for r in rows])


def within_budget(base: Grades, trained: Grades, budget: Mapping[str, float]) -> bool:
    """Accuracy down at most `accuracy`, calibration error up at most `ece`; an absent
    bound does not bind."""
    ok = True
    if budget.get("accuracy") is not None:
        ok = ok and trained.accuracy >= base.accuracy - float(budget["accuracy"]) - 1e-12
    if budget.get("ece") is not None:
        ok = ok and trained.ece <= base.ece + float(budget["ece"]) + 1e-12
    return ok


def verdict(grades: Sequence[Mapping[str, Any]]) -> str:
    """`accepted` when every protected suite stayed within the budget (none: accepted)."""
    protected = [g["within_budget"] for g in grades if g["role"] == "protected"]
    return "accepted" if all(protected) else "rejected"


# A metric series name; a suite key outside this alphabet is spelled inside it.
_SAFE = "abcdefghijklmnopqrstuvwxyz0123456789_.-"


def series_part(name: str) -> str:
    cleaned = "".join(c if c in _SAFE else "_" for c in name.lower())
    return cleaned[:40] or "_"

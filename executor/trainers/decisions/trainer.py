"""The decision trainer (HIP-1333 §3, §4, §8): the built-in decider trained on a job's
decision rows with the objective's terms, kept off its protected suites' directions, and
graded against their budget. torch is imported as it runs, not as the registry lists it."""

from __future__ import annotations

from typing import ClassVar

from executor.trainers.base import Emit, Supports
from executor.wire.plan import Plan
from trainyard.training.catalog import DECIDER_BASE


class DecisionTrainer:
    name: ClassVar[str] = "decisions"
    supports: ClassVar[Supports] = Supports(
        bases=(DECIDER_BASE,),
        rows=("decision",),
        adaptations=("full", "readout"),
        outputs=("checkpoint", "capability"),
        terms=("pairwise_margin", "hard_margin", "consistency"),
        protect=("suites", "projection", "distillation"),
    )

    def run(self, plan: Plan, emit: Emit) -> int:
        from executor.trainers.decisions import run

        return run.run(plan, emit)

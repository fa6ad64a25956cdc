"""The language trainer: a causal LM (the built-in fixture, or a Hugging Face base on
local disk) trained fully or with LoRA on a job's chats, on one process or a world of
them. torch and its kin are imported as it runs, not as the registry lists it."""

from __future__ import annotations

from typing import ClassVar

from executor.trainers.base import Emit, Supports
from executor.wire.plan import Plan


class LanguageTrainer:
    name: ClassVar[str] = "language"
    supports: ClassVar[Supports] = Supports(
        rows=("chat",),
        adaptations=("full", "lora"),
        outputs=("checkpoint", "lora", "capability"),
    )

    def run(self, plan: Plan, emit: Emit) -> int:
        from executor.trainers.language import run

        return run.run(plan, emit)

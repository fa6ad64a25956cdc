"""The trainers an executor runs: the built-in ones, and any a package declares under the
`trainyard.trainers` entry-point group (`name = "package.module:TrainerClass"`). The
built-ins are also listed here, so the registry holds them before the package's entry
points are installed."""

from __future__ import annotations

import functools
import importlib
import os
from importlib.metadata import entry_points

from executor.trainers.base import Supports, Trainer
from executor.wire.plan import Plan
from trainyard.training.catalog import Catalog

GROUP = "trainyard.trainers"
BUILT_IN = {
    "language": "executor.trainers.language.trainer:LanguageTrainer",
    "decisions": "executor.trainers.decisions.trainer:DecisionTrainer",
    "scripted": "executor.trainers.scripted:ScriptedTrainer",
}


def _load(target: str) -> Trainer:
    module, _, name = target.partition(":")
    trainer: Trainer = getattr(importlib.import_module(module), name)()
    return trainer


def trainers() -> dict[str, Trainer]:
    """Every trainer by name: the built-ins first, then the declared ones by name."""
    declared = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    targets = {**BUILT_IN, **{k: declared[k] for k in sorted(declared) if k not in BUILT_IN}}
    return {name: _load(target) for name, target in targets.items()}


@functools.cache
def supported() -> Supports:
    """What this executor's trainers support together, as its hello declares it."""
    return Supports.union(t.supports for t in trainers().values())


def for_plan(plan: Plan) -> Trainer:
    """The trainer of the plan's base: one that names it, else the first that trains its
    kind of base. A base the catalog lacks ends the run as `base_not_found`."""
    name = plan.job.base_model
    every = list(trainers().values())
    for trainer in every:
        if name in trainer.supports.bases:
            return trainer
    base = Catalog.from_env(os.environ).get(name)
    if base is None:
        raise SystemExit("base_not_found")
    for trainer in every:
        if base.rows in trainer.supports.rows:
            return trainer
    raise SystemExit("base_not_supported")

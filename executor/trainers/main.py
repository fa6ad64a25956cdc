"""A trainer process: `python -m executor.train task.json` runs the trainer the registry
finds for the plan's base; `python -m executor.scripted task.json` the scripted one.
Events go to stdout as `executor.wire.protocol` says."""

from __future__ import annotations

from executor.trainers import registry
from executor.wire import protocol
from executor.wire.plan import Plan


def main(task_file: str, trainer: str | None = None) -> int:
    """Run the plan in `task_file` with the trainer named `trainer`, or the one the
    registry finds for its base."""
    plan = Plan.load(task_file)
    chosen = registry.trainers()[trainer] if trainer else registry.for_plan(plan)
    return chosen.run(plan, protocol.emit)
